"""The graph of kernels the cost model forms while it merges groups of nodes.

Each group is a kernel in the making; an edge runs from a group to one that reads a value it
computes. Two groups may merge only if no path leads from one to the other through a third
(the merged kernel would then wait on a kernel that waits on it). The graph keeps a
topological index per group and restores it after each merge (Pearce and Kelly's dynamic
topological order), so a search only visits the groups whose index lies between the two.

Both searches run from the two ends at once and stop when either end runs out: the cost is
that of the smaller side. A merge where one side is empty (a long sum chain taking one more
block, a fan-out taking one more reader) moves no other group: the merged group takes the
slot of the end whose side is empty, and the other slot stays vacant (indices need only
keep their order, not be contiguous).
"""

from __future__ import annotations

from typing import Iterable


class KernelGraph:
    def __init__(self, order: list[int], edges: Iterable[tuple[int, int]]):
        """``order``: the nodes in a topological order; ``edges``: (producer, consumer) pairs."""
        self._parent = {n: n for n in order}
        self.index = {n: i for i, n in enumerate(order)}
        self.succ: dict[int, set[int]] = {n: set() for n in order}
        self.pred: dict[int, set[int]] = {n: set() for n in order}
        for a, b in edges:
            if a != b:
                self.succ[a].add(b)
                self.pred[b].add(a)

    def find(self, x: int) -> int:
        parent = self._parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def _ordered(self, a: int, b: int) -> tuple[int, int]:
        a, b = self.find(a), self.find(b)
        return (a, b) if self.index[a] <= self.index[b] else (b, a)

    def _sides(self, a: int, b: int, stop_at_meeting: bool):
        """Search forward from ``a`` and backward from ``b`` (``a`` before ``b``) through the
        groups between them, one edge each in turn. Returns ``(down, up, met)``: the groups
        reached from ``a`` and those reaching ``b``, either of them None where the other ran
        out first (only the side that ran out is complete), and whether a path a -> x -> b
        was seen (the search stops there if ``stop_at_meeting``)."""
        index, lo, hi = self.index, self.index[a], self.index[b]
        sides = [
            (set(), [iter(self.succ[a])], self.succ, b, lambda i: i < hi),
            (set(), [iter(self.pred[b])], self.pred, a, lambda i: i > lo),
        ]
        met = False
        while True:
            for side, (seen, stack, step, goal, inside) in enumerate(sides):
                while stack:
                    y = next(stack[-1], None)
                    if y is not None:
                        break
                    stack.pop()
                else:
                    done = [sides[0][0], sides[1][0]]
                    done[1 - side] = None
                    return done[0], done[1], met
                if y == goal:
                    if len(stack) > 1:  # through another group, not the edge a -> b
                        met = True
                        if stop_at_meeting:
                            return None, None, True
                elif y not in seen and inside(index[y]):
                    seen.add(y)
                    stack.append(iter(step[y]))

    def would_cycle(self, a: int, b: int) -> bool:
        """Would merging the groups of ``a`` and ``b`` close a cycle (a path between them
        through another group)?"""
        a, b = self._ordered(a, b)
        if a == b:
            return False
        return self._sides(a, b, stop_at_meeting=True)[2]

    def _reach(self, start: int, step: dict, inside) -> set[int]:
        """Groups reached from ``start`` along ``step`` while ``inside(index)`` holds."""
        seen, stack = set(), [x for x in step[start] if inside(self.index[x])]
        while stack:
            x = stack.pop()
            if x in seen:
                continue
            seen.add(x)
            stack.extend(y for y in step[x] if y not in seen and inside(self.index[y]))
        return seen

    def merge(self, a: int, b: int) -> tuple[int, int]:
        """Merge the groups of ``a`` and ``b`` (``would_cycle`` must be False); returns
        (the group that remains, the group merged into it): the one with more edges remains,
        so that a group many others merge into is not copied each time."""
        a, b = self._ordered(a, b)
        lo, hi = self.index[a], self.index[b]
        down, up, _ = self._sides(a, b, stop_at_meeting=False)
        if down is not None and not down:  # nothing after a needs to stay after it
            slot = hi
        elif up is not None and not up:  # nothing before b needs to stay before it
            slot = lo
        else:  # Pearce-Kelly: up, the merged group, down
            if down is None:
                down = self._reach(a, self.succ, lambda i: i < hi)
            if up is None:
                up = self._reach(b, self.pred, lambda i: i > lo)
            moved = sorted(up, key=self.index.get) + [a] + sorted(down, key=self.index.get)
            slots = sorted(self.index[g] for g in moved)
            for g, s in zip(moved, slots):
                self.index[g] = s
            slot = self.index[a]
        keep, gone = (
            (a, b)
            if len(self.succ[a]) + len(self.pred[a]) >= len(self.succ[b]) + len(self.pred[b])
            else (b, a)
        )
        del self.index[gone]
        self.index[keep] = slot
        self._parent[gone] = keep
        for x in self.succ.pop(gone):
            self.pred[x].discard(gone)
            if x != keep:
                self.pred[x].add(keep)
                self.succ[keep].add(x)
        for x in self.pred.pop(gone):
            self.succ[x].discard(gone)
            if x != keep:
                self.succ[x].add(keep)
                self.pred[keep].add(x)
        self.succ[keep].discard(gone)
        self.pred[keep].discard(gone)
        return keep, gone
