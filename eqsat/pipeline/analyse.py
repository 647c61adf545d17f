"""The analysis: the fusion encoded as terms, the e-graph filled and saturated (at most
``SATURATION_SHARE`` of the time left), dumped to Python; the input's own choice of e-nodes, a
cost model over the e-classes, and the cost model's estimate of the input as written."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from eqsat.cost.model import CostModel, Estimate, GNode
from eqsat.cost.profile import Profile
from eqsat.deadline import NEVER, Cut, Deadline
from eqsat.egraph.encode import Encoding, encode
from eqsat.egraph.recompute import copy_chains, written_copies
from eqsat.egraph.saturate import Limits, Saturation, applicable, in_session
from eqsat.cost.extract import Dump, dump
from eqsat.ir.axes import TensorType
from eqsat.ir.fusion import Fusion
from eqsat.ir.layout import alias_output_sources

from .context import Run

SATURATION_SHARE = 0.5  # of the time left when saturation begins; extraction and lowering get the rest


@dataclass
class Analysis:
    """The encoding, the dump of the saturated e-graph, each term's e-class (``cls``), the
    input's e-node of each of its classes (``original``), the output classes (``roots``), the
    cost model, the saturation (None where nothing was rewritten), the input's estimate
    (``before``: None where the model gave none) and the seconds it took; ``cut`` where the
    deadline cut a stage before extraction could begin (the rest is then empty)."""

    enc: Encoding
    dump: Dump | None
    cls: dict[int, int]
    original: dict[int, GNode]
    roots: list[int]
    model: CostModel | None
    sat: Saturation | None
    before: Estimate | None = None  # the input as written, term by term (no e-class merged)
    before_s: float = 0.0  # seconds the cost model took over it
    cut: Cut | None = None
    phases: dict[str, float] = field(default_factory=dict)  # seconds: encode, saturate, extract

    @property
    def lower_s(self) -> float:
        """Seconds lowering a candidate is expected to take: about what encoding took (less, measured)."""
        return self.phases["encode"]


def analyse_run(run: Run) -> Analysis:
    """The stage: the run's fusion analysed with its rules, limits and deadline; its notes (why
    nothing was encoded, the limit that stopped saturation, the stage the deadline cut) and
    seconds recorded in ``run``."""
    a = analyse(
        run.fusion,
        run.concrete,
        run.profile,
        rules=run.rules,
        limits=run.limits,
        deadline=run.deadline,
        recompute=run.options.recompute,
    )
    run.notes += _notes(run, a)
    run.phases.update(a.phases)
    return a


def analyse(
    fusion: Fusion,
    concrete: dict[int, int],
    profile: Profile,
    *,
    rules: tuple[str, ...] = (),
    limits: Limits | None = None,
    deadline: Deadline = NEVER,
    recompute: bool = True,
) -> Analysis:
    """Encode, fill the e-graph, saturate with ``rules`` (only the analyses where ``limits`` is
    None), dump; the input's own choice and a cost model over the ``concrete`` extents, and the
    input's estimate. Where the ``deadline`` passes before the input is estimated, ``cut``
    names the stage."""
    began = time.perf_counter()
    enc = encode(fusion, concrete)
    rewrite = limits is not None and not enc.skipped

    def work(s):
        s.eg.push()
        try:
            scope = s.fresh_scope()
            inserted = s.insert(enc, scope, deadline)
            encoded = time.perf_counter()
            sat = None
            if inserted and not deadline.passed():  # analyses always run
                sat = s.saturate(
                    applicable(rules, enc.graph) if rewrite else (),
                    limits or Limits(),
                    deadline.share(SATURATION_SHARE),
                )
            saturated = time.perf_counter()
            cut = _cut_before_extraction(sat, deadline, encoded - began)
            return scope, encoded, sat, saturated, cut, dump(s.eg) if cut is None else None
        finally:
            s.eg.pop()

    scope, encoded, sat, saturated, cut, d = in_session(work)
    phases = {"encode": encoded - began, "saturate": sat.seconds if sat else 0.0, "extract": 0.0}
    shown = sat if rewrite else None
    if cut is not None:
        return Analysis(enc, None, {}, {}, [], None, shown, cut=cut, phases=phases)
    cls = {tid: d.names[scope, tid] for tid in range(len(enc.graph.nodes))}
    a = Analysis(
        enc,
        d,
        cls,
        _original(enc, d, cls),
        sorted({cls[t] for t in enc.roots.values()}),
        _model(fusion, enc, cls, concrete, profile, recompute),
        shown,
        phases=phases,
    )
    _estimate(fusion, a, deadline)
    phases["extract"] = time.perf_counter() - saturated  # the dump, and the input's estimate
    return a


def _estimate(fusion: Fusion, a: Analysis, deadline: Deadline) -> None:
    """``a.before`` and ``a.before_s``: the input's estimate, unless the deadline cuts it."""
    if deadline.passed():
        a.cut = Cut("the estimate of the input")
        return
    estimating = time.perf_counter()
    try:
        a.before = _estimate_input(fusion, a, deadline)
    except Cut:
        a.cut = Cut("the estimate of the input")
    a.before_s = time.perf_counter() - estimating


def _cut_before_extraction(sat: Saturation | None, deadline: Deadline, encode_s: float) -> Cut | None:
    """The stage the deadline cut, where extraction cannot begin: it can not where less time
    is left than encoding took (the dump and the input's estimate alone take most of that)."""
    if sat is None:
        return Cut("encoding")
    if not sat.analysed:
        return Cut("the analyses of the input")
    if deadline.left() < encode_s:
        return Cut("the estimate of the input")
    return None


def _original(enc: Encoding, d: Dump, cls: dict[int, int]) -> dict[int, GNode]:
    """The input's own choice: class -> the e-node of its first term."""
    original: dict[int, GNode] = {}
    for tid, node in enumerate(enc.graph.nodes):
        c = cls[tid]
        original.setdefault(
            c,
            GNode(
                node.op, node.attrs, tuple(cls[k] for k in node.kids), d.labels.get(c, -1), d.dtype.get(c, -1)
            ),
        )
    return original


def _model(
    fusion: Fusion, enc: Encoding, cls: dict[int, int], concrete: dict, profile: Profile, recompute: bool
) -> CostModel:
    """The cost model over the e-classes, at the ``concrete`` extents."""
    links = {cls[leaf]: (op, tuple(cls[t] for t in ins)) for leaf, (op, ins) in enc.links.items()}
    output_terms = {enc.roots[o.value] for o in fusion.outputs if o.value in enc.roots}
    aliased = sum(1 for o in fusion.outputs if o.alias_input is not None)
    inner = {t: order[-1] for t, order in enc.order.items() if order}
    model = CostModel(
        profile,
        {enc.bit_of[l]: e for l, e in concrete.items() if l in enc.bit_of},
        links,
        outputs={cls[t] for t in output_terms},
        aliased=aliased,
        inner={cls[t]: b for t, b in inner.items()},
        alloc_inner={cls[t]: b for t, b in enc.alloc_inner.items()},
        alias_segments=len(alias_output_sources(fusion, enc.copying_reshapes)),
        output_count=len(fusion.outputs),
        shape_only={cls[t] for t in enc.shape_only},
        recompute=recompute,
    )
    return model


def _estimate_input(fusion: Fusion, a: Analysis, deadline: Deadline) -> Estimate | None:
    """The cost model's estimate of the input as written, term by term (no e-class merged).
    Values the definition computes twice (eqsat's lowering of a candidate that recomputes a
    chain, or such a copy written by hand or by Thunder), which the encoding merges into one
    term, are separate nodes again (``written_copies``): nvFuser puts each copy where its
    readers are."""
    enc, d, cls = a.enc, a.dump, a.cls
    output_terms = {enc.roots[o.value] for o in fusion.outputs if o.value in enc.roots}
    inner = {t: order[-1] for t, order in enc.order.items() if order}
    terms = {
        tid: GNode(n.op, n.attrs, n.kids, d.labels.get(cls[tid], -1), d.dtype.get(cls[tid], -1))
        for tid, n in enumerate(enc.graph.nodes)
    }
    terms, maps = copy_chains(terms, written_copies(enc))
    for copy in maps:
        inner.update((c, inner[t]) for t, c in copy.items() if t in inner)
    try:
        est = a.model.estimate(
            terms,
            sorted(set(enc.roots.values())),
            links=enc.links,
            outputs=output_terms,
            inner=inner,
            alloc_inner=enc.alloc_inner,
            recompute=False,
            shape_only=enc.shape_only,
            deadline=deadline,
        )
    except ValueError:
        return None
    _name_tensors(est, fusion, enc, maps, a.model.extents)
    return est


def _name_tensors(est: Estimate, fusion: Fusion, enc: Encoding, copies, extents: dict[int, int]) -> None:
    """``est.tensors`` (by term) named as the definition names their values (``T3``: the first
    value a term holds, before its broadcasts; a copy of a chain as what it copies) and shaped
    as the value's dims (a broadcast dim of extent 1; a square matrix, whose two dims share
    an axis that the cost model counts once, is shown with both)."""
    value_of: dict[int, int] = {}
    for v, t in sorted(enc.term_of.items()):
        value_of.setdefault(t, v)
    for copy in copies:
        value_of.update((c, value_of[t]) for t, c in copy.items() if t in value_of)
    types = fusion.types
    for n, tensor in est.tensors.items():
        v = value_of.get(n)
        if v is None:
            continue
        t, shape = types[v], tensor.shape
        if (
            isinstance(t, TensorType)
            and t.known
            and all(d.label in enc.bit_of or d.broadcast for d in t.dims)
        ):
            shape = tuple(1 if d.broadcast else extents.get(enc.bit_of[d.label], 1) for d in t.dims)
        est.tensors[n] = replace(tensor, name=f"T{v}", shape=shape)


def _notes(run: Run, a: Analysis) -> list[str]:
    """What the report says of encoding and saturation: why nothing was encoded, which limit
    stopped saturation, which stage the deadline cut."""
    notes = [f"not optimized: {a.enc.skipped}"] if a.enc is not None and a.enc.skipped else []
    sat = a.sat
    if sat and sat.stop == "deadline" and sat.analysed:
        notes.append(
            run.cut(
                Cut(f"saturation after {sat.iterations} iterations"),
                "the result is the best of the rewrites explored by then",
            )
        )
    elif sat and sat.stop not in ("saturated", "deadline"):
        notes.append(
            f"saturation stopped at the {sat.stop} ({_limit_text(run.limits, sat.stop)}): "
            f"the result is the best of the rewrites explored by then"
        )
    if a.cut is not None:
        notes.append(run.cut(a.cut, "kept the input (not estimated)"))
    return notes


def _limit_text(limits: Limits, stop: str) -> str:
    return {
        "time limit": f"{limits.seconds:g} s",
        "node limit": f"{limits.nodes} e-nodes",
        "iteration limit": f"{limits.iterations} iterations",
    }.get(stop, stop)
