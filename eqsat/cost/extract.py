"""Extraction: pick one e-node per e-class so that the cost model's score of the whole
candidate is lowest; never worse than the input.

The saturated e-graph is dumped to Python (:func:`dump`, from the tables
:func:`eqsat.egraph.egglog_text.frozen` reads). A fast additive estimate picks a first candidate; a local
search then switches one class's choice at a time, scoring each whole candidate with
:class:`~eqsat.cost.CostModel`, until nothing improves or its work budget is spent (the nodes
of the candidates scored, summed: the same on any machine). The input's own choice is scored
too, and wins ties. A deadline is a backstop: no score is begun that would, at the longest one
so far, end past it, and the best choice scored by then is the result.
The best few distinct candidates scored (``Extraction.top``) are remembered too, for GPU
verification to time.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field

from eqsat.deadline import NEVER, Cut, Deadline
from eqsat.defaults import SEARCH_BUDGET
from eqsat.egraph.egglog_text import NAME_TABLE, frozen
from eqsat.egraph.terms import REDUCTIONS, SIGNATURES, TermGraph

from .model import CostModel, Estimate, GNode
from .walks import reachable, topological


@dataclass
class Dump:
    """The e-graph as Python data: classes -> their e-nodes (GNode with class-id kids)."""

    classes: dict[int, list[GNode]] = field(default_factory=dict)
    labels: dict[int, int] = field(default_factory=dict)
    dtype: dict[int, int] = field(default_factory=dict)
    names: dict[tuple[int, int], int] = field(default_factory=dict)  # (scope, term id) -> class


def dump(eg) -> Dump:
    """The e-graph ``eg`` as Python data (its e-nodes that are not subsumed)."""
    tables = frozen(eg)
    fns, class_id, out = tables.functions, tables.class_id, Dump()
    for name in ("labels", "dtype"):
        table = getattr(out, name)
        for row in fns[name].rows:
            table[class_id(row.inputs[0])] = tables.i64(row.output)
    pending = []
    for name, (kinds, _) in SIGNATURES.items():
        fn = fns.get(name)
        if fn is None:
            continue
        for row in fn.rows:
            if row.subsumed:
                continue
            attrs = tuple(tables.convert[k](v) for k, v in zip(kinds, row.inputs[: len(kinds)]))
            kids = tuple(class_id(v) for v in row.inputs[len(kinds) :])
            pending.append((class_id(row.output), name, attrs, kids))
    for cls, name, attrs, kids in pending:
        node = GNode(name, attrs, kids, out.labels.get(cls, -1), out.dtype.get(cls, -1))
        out.classes.setdefault(cls, []).append(node)
    for row in fns[NAME_TABLE].rows:
        scope, tid = (tables.i64(v) for v in row.inputs)
        out.names[scope, tid] = class_id(row.output)
    return out


@dataclass
class Choice:
    """One e-node per class, the candidate it makes from ``roots``, and its score."""

    pick: dict[int, GNode]
    estimate: Estimate | None

    @property
    def score(self) -> float:
        return float("inf") if self.estimate is None else self.estimate.time_us


def _valid(node: GNode) -> bool:
    """Typed (labels and dtype known), or a leaf: a leaf is a boundary, read as it is (the
    output of an op eqsat does not model has no type the analysis knows)."""
    return node.op == "Leaf" or (node.labels >= 0 and node.dtype >= 0)


def _additive(d: Dump, model: CostModel) -> dict[int, GNode]:
    """Bottom-up best e-node per class by a tree cost: the work of each node plus a kernel's
    worth for each reduction (a seed for the search, not the score)."""
    INF = float("inf")
    best = {c: INF for c in d.classes}
    pick: dict[int, GNode] = {}
    launch = model.profile.kinds["reduction"].launch_us * 1e3

    def local(node: GNode) -> float:
        if node.op == "Leaf" or node.is_scalar:
            return 0.0
        space = d.labels.get(node.kids[0], 0) if node.op in REDUCTIONS else node.labels
        return model.numel(space) * (1.0 if node.op not in REDUCTIONS else 2.0) + (
            launch if node.op in REDUCTIONS else 0.0
        )

    # Knuth's generalization of Dijkstra: a tree cost never falls below a child's, so the
    # cheapest e-node whose children are all settled settles its class. Each e-node is looked
    # at once its last child settles: O(e-nodes log e-nodes), however much the classes share.
    nodes = [(c, n, cost) for c, ns in d.classes.items() for n in ns if _valid(n) for cost in (local(n),)]
    waiting = [len(set(n.kids)) for _, n, _ in nodes]
    users: dict[int, list[int]] = {}
    heap: list[tuple[float, int]] = []
    for i, (c, n, cost) in enumerate(nodes):
        for k in set(n.kids):
            users.setdefault(k, []).append(i)
        if not waiting[i]:
            heap.append((cost, i))
    heapq.heapify(heap)
    while heap:
        total, i = heapq.heappop(heap)
        c, node, _ = nodes[i]
        if c in pick:
            continue
        best[c], pick[c] = total, node
        for j in users.get(c, ()):
            waiting[j] -= 1
            if not waiting[j]:
                cj, nj, cost = nodes[j]
                if cj not in pick:
                    heapq.heappush(heap, (cost + sum(best[k] for k in nj.kids), j))
    return pick


@dataclass
class Extraction:
    """What :func:`extract` found: the best choice, the input's own, the deadline's ``Cut``
    where it cut the search (before it scored the input: ``base.estimate`` is None), the best few
    distinct candidates scored other than the input's, cheapest first (``best`` is the first
    where it is not the input's)."""

    best: Choice
    base: Choice
    cut: Cut | None = None
    top: list[Choice] = field(default_factory=list)
    scored: int = 0  # whole candidates scored
    work: int = 0  # their nodes, summed (what the search budget counts)
    stop: str = "converged"  # or "budget", "time limit", "deadline"


def signature(estimate: Estimate) -> tuple:
    """What a candidate costs, kernel by kernel (kind, ops, bytes, arithmetic) and on the host:
    candidates alike in it (operands commuted, say) run alike, so only one of them is worth
    timing."""
    kernels = sorted(
        (k.kind, tuple(sorted(k.ops)), k.bytes_read, k.bytes_written, round(k.flops))
        for k in estimate.kernels
    )
    return tuple(kernels), round(estimate.host_us, 6)


class _Best:
    """The ``keep`` lowest-scored distinct candidates offered (distinct: their estimates differ
    in :func:`signature`), by score, the first offered winning ties."""

    def __init__(self, keep: int):
        self.keep = keep
        self.entries: list[tuple[float, int, tuple, Choice]] = []
        self.offered = 0

    def offer(self, choice: Choice) -> None:
        self.offered += 1
        if len(self.entries) >= self.keep and choice.score >= self.entries[-1][0]:
            return
        key = signature(choice.estimate)
        if any(k == key for _, _, k, _ in self.entries):
            return
        self.entries.append((choice.score, self.offered, key, choice))
        self.entries.sort(key=lambda e: (e[0], e[1]))
        del self.entries[self.keep :]

    def without(self, estimate: Estimate | None) -> list[Choice]:
        """The candidates, less one that costs as ``estimate`` does."""
        key = None if estimate is None else signature(estimate)
        return [c for _, _, k, c in self.entries if k != key]


class _Scorer:
    """Whole-candidate scores, counted and timed: ``work`` is the nodes of the candidates
    scored, summed. A score is begun only if, at the longest one's duration so far
    (``guess_s`` before the first), it would end before the ``deadline``, which also stops a
    score that runs past it; ``cut`` is then the deadline's ``Cut``."""

    def __init__(self, roots: list[int], model: CostModel, deadline: Deadline, guess_s: float, best: _Best):
        self.roots, self.model, self.deadline, self.longest = roots, model, deadline, guess_s
        self.cut: Cut | None = None
        self.best = best
        self.work = 0
        self.scored = 0

    def affordable(self) -> bool:
        if not self.deadline.passed(self.longest):
            return True
        self.cut = Cut("extraction")
        return False

    def __call__(self, pick: dict[int, GNode]) -> Estimate | None:
        began = time.perf_counter()
        try:
            estimate = _evaluate(pick, self.roots, self.model, self)
        except Cut:
            self.cut = Cut("extraction")
            return None
        finally:
            self.longest = max(self.longest, time.perf_counter() - began)
        if estimate is not None:
            self.best.offer(Choice(pick, estimate))
        return estimate


def _evaluate(pick: dict[int, GNode], roots: list[int], model: CostModel, scorer: _Scorer) -> Estimate | None:
    """The cost model's estimate of the candidate ``pick`` makes from ``roots``; None where it
    has a cycle, an untyped node, or no reading. Counts the score and its nodes in ``scorer``."""
    scorer.scored += 1
    try:
        nodes = reachable(pick, roots)
    except (KeyError, ValueError):
        return None
    scorer.work += len(nodes)
    if any(not _valid(n) for n in nodes.values()):
        return None
    try:
        return model.estimate(nodes, roots, deadline=scorer.deadline)
    except ValueError:
        return None


def extract(
    d: Dump,
    roots: list[int],
    original: dict[int, GNode],
    model: CostModel,
    *,
    budget: int = SEARCH_BUDGET,
    budget_s: float | None = None,
    deadline: Deadline = NEVER,
    guess_s: float = 0.0,
    keep: int = 3,
) -> Extraction:
    """The best choice found, the original's choice, and the ``keep`` best distinct candidates
    scored other than the original. ``original`` is the input's e-node for each of its
    classes. The local search stops where nothing improves, or once the candidates it scored
    hold ``budget`` nodes together (what decides a normal result, the same on any machine);
    ``budget_s`` (seconds, None: none: the search's own time limit) and the ``deadline`` (over
    the whole) are backstops, and ``guess_s`` how long one whole-candidate score is expected
    to take (see :class:`_Scorer`)."""
    best = _Best(keep + 1)  # one more: the input's own may be among them
    score = _Scorer(roots, model, deadline, guess_s, best)
    if not score.affordable():
        base = Choice(dict(original), None)
        return Extraction(base, base, cut=score.cut, stop="deadline")
    base = Choice(dict(original), score(original))
    greedy = _additive(d, model)
    start_pick = {**greedy, **{c: n for c, n in original.items() if c not in greedy}}
    current = Choice({**start_pick, **original}, base.estimate)  # the input, where greedy agrees
    if not _same_candidate(start_pick, original, roots) and score.affordable():
        start = Choice(start_pick, score(start_pick))
        if start.score < base.score:
            current = start
    current, stop = _search(current, d, roots, score, _Budget(score, budget, Deadline(budget_s)))
    # the input's own terms, recomputing chains, are a candidate of their own
    same = None if base.estimate is None or base.estimate.recomputed else base.estimate
    return Extraction(
        current,
        base,
        score.cut,
        best.without(same)[:keep],
        score.scored,
        score.work,
        "deadline" if score.cut else stop,
    )


@dataclass
class _Budget:
    """When the local search stops: at ``work`` nodes scored, or at its time ``limit``."""

    scorer: _Scorer
    work: int
    limit: Deadline

    def spent(self) -> str:
        """Why the search must stop now ("budget", "time limit"), or ""."""
        if self.scorer.work >= self.work:
            return "budget"
        if self.limit.passed():
            return "time limit"
        return ""


def _same_candidate(a: dict[int, GNode], b: dict[int, GNode], roots: list[int]) -> bool:
    """Do the two choices make the same candidate from ``roots`` (so score the same)?"""
    try:
        return reachable(a, roots) == reachable(b, roots)
    except (KeyError, ValueError):
        return False


def _search(
    current: Choice, d: Dump, roots: list[int], score: _Scorer, budget: _Budget
) -> tuple[Choice, str]:
    """Local search: switch one class's choice at a time, keep the first switch that lowers
    the score, and start again; until none does ("converged"), the budget is spent, or the
    deadline would pass. Returns the best choice and why it stopped."""
    while not (stop := budget.spent()):
        better = _first_improvement(current, d, roots, score, budget)
        if better is None:
            return current, budget.spent() or "converged"
        current = better
    return current, stop


def _first_improvement(
    current: Choice, d: Dump, roots: list[int], score: _Scorer, budget: _Budget
) -> Choice | None:
    try:
        reach = reachable(current.pick, roots)
    except (KeyError, ValueError):
        return None
    for c in reach:
        for alt in d.classes.get(c, ()):
            if alt == current.pick.get(c) or not _valid(alt):
                continue
            if budget.spent() or not score.affordable():
                return None
            trial = dict(current.pick)
            trial[c] = alt
            est = score(trial)
            if est is not None and est.time_us < current.score - 1e-6:
                return Choice(trial, est)
    return None


def to_term_graph(pick: dict[int, GNode], roots: list[int]) -> tuple[TermGraph, dict[int, int]]:
    """The chosen candidate as a TermGraph; returns it and class -> term id."""
    nodes = reachable(pick, roots)
    graph, tid = TermGraph(), {}
    for c in topological(nodes, roots):
        n = nodes[c]
        tid[c] = graph.add(n.op, n.attrs, tuple(tid[k] for k in n.kids))
    return graph, tid
