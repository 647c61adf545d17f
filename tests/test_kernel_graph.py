"""The cost model's kernel graph: merging two groups is refused exactly when a path leads from
one to the other through a third group, and the topological index stays valid after every
merge. Checked against a brute-force search on random DAGs."""

from hypothesis import given, settings
from hypothesis import strategies as st

from eqsat.cost.kernel_graph import KernelGraph


def _groups(kg: KernelGraph, nodes):
    return {n: kg.find(n) for n in nodes}


def _quotient(edges, group):
    out = {}
    for a, b in edges:
        ga, gb = group[a], group[b]
        if ga != gb:
            out.setdefault(ga, set()).add(gb)
    return out


def _path_through_another(succ, a, b) -> bool:
    """A path a -> x -> ... -> b with x neither a nor b."""
    stack, seen = [x for x in succ.get(a, ()) if x != b], set()
    while stack:
        x = stack.pop()
        if x == b:
            return True
        if x in seen or x == a:
            continue
        seen.add(x)
        stack.extend(succ.get(x, ()))
    return False


@st.composite
def dags(draw):
    n = draw(st.integers(2, 14))
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n))
    edges = [(min(a, b), max(a, b)) for a, b in edges if a != b]  # i < j: acyclic
    order = draw(st.permutations(range(n)))
    # relabel so that the topological order handed over is not simply 0..n-1
    edges = [(order[a], order[b]) for a, b in edges]
    merges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n))
    return [order[i] for i in range(n)], edges, [(order[a], order[b]) for a, b in merges]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(dags())
def test_would_cycle_is_exact_and_the_order_stays_topological(case):
    order, edges, merges = case
    kg = KernelGraph(order, edges)
    for a, b in merges:
        group = _groups(kg, order)
        succ = _quotient(edges, group)
        ga, gb = group[a], group[b]
        expected = ga != gb and (_path_through_another(succ, ga, gb) or _path_through_another(succ, gb, ga))
        assert kg.would_cycle(a, b) == expected
        if ga == gb or expected:
            continue
        kept, gone = kg.merge(a, b)
        assert {kept, gone} == {ga, gb} and kg.find(gone) == kept
        group = _groups(kg, order)
        for x, ys in _quotient(edges, group).items():
            for y in ys:
                assert kg.index[x] < kg.index[y], "merged order is not topological"
        assert sorted(set(group.values()), key=kg.index.get) == sorted(kg.index, key=kg.index.get)


class _CountingSet(set):
    """A set that counts the elements iterated over (the work a search does)."""

    visits = 0

    def __iter__(self):
        for x in super().__iter__():
            _CountingSet.visits += 1
            yield x


def test_merging_many_groups_into_one_moves_no_other_group_and_walks_no_side_twice():
    """A long chain of sums: block i's sum and the sum-of-sums merge, 2000 times over. The merged
    group takes the slot of the end whose side is empty; the searches stop at the empty side, so
    the work is linear in the merges, not in merges x blocks (the old search walked every
    remaining block at each merge: some 2 million visits here)."""
    n = 2000
    hub = n
    kg = KernelGraph(list(range(n + 1)), [(i, hub) for i in range(n)])
    kg.succ = {k: _CountingSet(v) for k, v in kg.succ.items()}
    kg.pred = {k: _CountingSet(v) for k, v in kg.pred.items()}
    _CountingSet.visits = 0
    for i in range(n):
        others = {g: kg.index[g] for g in range(i + 1, n)}
        assert not kg.would_cycle(i, hub)
        kg.merge(i, hub)
        if i % 97 == 0:
            assert {g: kg.index[g] for g in others} == others
    assert len({kg.find(g) for g in range(n + 1)}) == 1
    assert _CountingSet.visits < 20 * n
