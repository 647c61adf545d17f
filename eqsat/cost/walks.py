"""Walks over a candidate: a DAG of nodes with ``kids`` (node ids), keyed by id. Shared by the
cost model's segmentation and the extractor."""

from __future__ import annotations


def downstream(start, consumers, inside) -> set[int]:
    """``start`` and what depends on it through nodes for which ``inside`` holds."""
    seen, stack = {start}, [start]
    while stack:
        x = stack.pop()
        for c in consumers.get(x, ()):
            if c not in seen and inside(c):
                seen.add(c)
                stack.append(c)
    return seen


def consumers_of(nodes, order) -> dict[int, list[int]]:
    """Node -> the nodes of ``order`` that read it, in that order."""
    consumers: dict[int, list[int]] = {}
    for n in order:
        for k in nodes[n].kids:
            consumers.setdefault(k, []).append(n)
    return consumers


def upstream_within(nodes, starts, within) -> set[int]:
    """``starts`` and the members of ``within`` they read, directly or through one another."""
    seen, stack = set(starts), list(starts)
    while stack:
        for k in nodes[stack.pop()].kids:
            if k in within and k not in seen:
                seen.add(k)
                stack.append(k)
    return seen


def live_sinks(nodes, barriers, outputs) -> set[int]:
    """The outputs, and the inputs of the barrier ops (matmul, ...) that they need."""
    sinks, stack, seen = set(outputs), list(outputs), set()
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        stack.extend(nodes[x].kids)
        if x in barriers:
            sinks.update(barriers[x])
            stack.extend(barriers[x])
    return sinks


def feeding(nodes, targets, within) -> set[int]:
    """Values from outside ``within`` that ``targets`` read through members of ``within``."""
    out, stack, seen = set(), list(targets), set()
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        for k in nodes[x].kids:
            if nodes[k].is_scalar:
                continue
            if k in within:
                stack.append(k)
            else:
                out.add(k)
    return out


def depends_on(nodes, m, targets, within) -> bool:
    """Whether ``m`` reads one of ``targets``, directly or through members of ``within``."""
    stack, seen = list(nodes[m].kids), set()
    while stack:
        x = stack.pop()
        if x in targets:
            return True
        if x in seen or x not in within:
            continue
        seen.add(x)
        stack.extend(nodes[x].kids)
    return False


def topological(nodes, roots) -> list[int]:
    """The nodes ``roots`` reach, each after its kids (a ValueError on a cycle)."""
    order, state = [], {}
    for r in roots:
        stack = [(r, False)]
        while stack:
            n, done = stack.pop()
            if done:
                if state.get(n) != 2:
                    state[n] = 2
                    order.append(n)
                continue
            if state.get(n):
                if state[n] == 1:
                    raise ValueError("the candidate has a cycle")
                continue
            state[n] = 1
            stack.append((n, True))
            for k in nodes[n].kids:
                if state.get(k) != 2:
                    if state.get(k) == 1:
                        raise ValueError("the candidate has a cycle")
                    stack.append((k, False))
    return order


def reachable(pick: dict, roots: list[int]) -> dict:
    """The nodes ``roots`` reach through ``pick`` (an error on a cycle)."""
    nodes: dict = {}
    stack = list(roots)
    while stack:
        c = stack.pop()
        if c in nodes:
            continue
        nodes[c] = pick[c]
        stack.extend(pick[c].kids)
    topological(nodes, roots)  # raises on a cycle
    return nodes


def labels_of(nodes, ids) -> int:
    """The union of the labels of the tensors among ``ids`` (scalars have none)."""
    mask = 0
    for k in ids:
        if not nodes[k].is_scalar:
            mask |= nodes[k].labels
    return mask
