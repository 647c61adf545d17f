"""The graph of kernels the cost model forms while it merges groups of nodes.

Each group is a kernel in the making; an edge runs from a group to one that reads a value it
computes. Two groups may merge only if no path leads from one to the other through a third
(the merged kernel would then wait on a kernel that waits on it). The graph keeps a
topological index per group and restores it after each merge (Pearce and Kelly's dynamic
topological order), so a check only visits the groups whose index lies between the two:
exact, and cheap for the merges along edges that nearly all merges are.
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

    def would_cycle(self, a: int, b: int) -> bool:
        """Would merging the groups of ``a`` and ``b`` close a cycle (a path between them
        through another group)?"""
        a, b = self._ordered(a, b)
        if a == b:
            return False
        hi = self.index[b]
        between = self._reach(a, self.succ, lambda i: i < hi)    # only these can lie on a path
        return any(b in self.succ[x] for x in between)

    def merge(self, a: int, b: int) -> tuple[int, int]:
        """Merge the groups of ``a`` and ``b`` (``would_cycle`` must be False); returns
        (the group that remains, the group merged into it)."""
        a, b = self._ordered(a, b)
        lo, hi = self.index[a], self.index[b]
        down = self._reach(a, self.succ, lambda i: i < hi)        # after a, not reaching b
        up = self._reach(b, self.pred, lambda i: i > lo)          # before b, not reached from a
        moved = sorted(up, key=self.index.get) + [a] + sorted(down, key=self.index.get)
        slots = sorted(self.index[g] for g in moved)
        for g, slot in zip(moved, slots):
            self.index[g] = slot
        del self.index[b]
        self._parent[b] = a
        for x in self.succ.pop(b):
            self.pred[x].discard(b)
            if x != a:
                self.pred[x].add(a)
                self.succ[a].add(x)
        for x in self.pred.pop(b):
            self.succ[x].discard(b)
            if x != a:
                self.succ[x].add(a)
                self.pred[a].add(x)
        self.succ[a].discard(b)
        self.pred[a].discard(b)
        return a, b
