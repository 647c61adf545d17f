"""``optimize_pair``: a forward and a backward fusion optimized together, where the backward
recomputes from a shared input what the forward already computed.

Thunder (and autograd generally) splits a training step into a forward fusion and a backward
one, and, to save memory, has the backward recompute what it needs from the forward's inputs
rather than save it: a cross-entropy's backward recomputes the logsumexp of the logits, one
more pass over an [N, V] tensor, where the forward could have written the [N] result as an
extra output. Which values to pass is a choice across the two fusions, outside what
``optimize_fusion`` sees of either one. Here:

1. ``matching.common_values`` finds the backward values made by the same calls from the same
   inputs as forward values (inputs linked by ``links``);
2. the candidates are those of them that are small (fewer elements than the largest input
   they are computed from: reductions and what follows them), not outputs of the backward,
   and needed by something the forward does not compute or by an output, taken before any
   broadcast;
3. each set of candidates is scored by the cost model on the definitions as given (the forward
   writing them as extra outputs, the backward reading them as extra inputs, the work that fed
   only them dropped), the cheapest set is optimized with ``optimize_fusion``, and it is kept
   where the pair's predicted time beats the two optimized apart by more than the margin.

The values passed are the forward's own: the backward reads what the forward computed by the
same calls, so the step computes the same function; the backward's floating-point results can
differ in the last bits only where nvFuser reduces in another order, as in any rescheduling.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import torch

from eqsat.errors import FusionError
from eqsat.frontend.ingest import ingest
from eqsat.ir.axes import TensorType
from eqsat.ir.dtypes import to_torch
from eqsat.ir.fusion import Fusion
from eqsat.defaults import MIN_GAIN
from eqsat.pipeline.context import concrete_extents
from eqsat.pipeline.driver import OptimizedFusion, estimate, optimize
from eqsat.pipeline.options import Options

from .matching import common_values
from .surgery import input_definition, with_inputs, with_outputs

_BROADCASTS = ("broadcast", "broadcast_in_dim", "expand")
EXHAUSTIVE = 4  # candidate sets scored one by one up to this many candidates; greedily above
# the least predicted saving of the pair over the two fusions optimized apart worth passing
# values, where min_gain is not given: a fixed margin, since the profile's error table measures
# the error on one fusion's saving, not on a pair's
PAIR_MIN_GAIN = MIN_GAIN


class LinkError(FusionError):
    """A ``links`` entry that does not fit the two definitions; its ``line``, where given, is
    the backward's ``define_tensor``."""


@dataclass(frozen=True)
class SavedValue:
    """A value the forward writes as an extra output and the backward reads as an extra input:
    ``forward_output`` indexes the optimized forward's outputs, ``backward_input`` the optimized
    backward's inputs; ``op``, ``dtype`` and ``shape`` (symbolic extents -1, broadcast 1)
    describe it, and ``forward_value``/``backward_value`` are its ids in the definitions as given."""

    forward_value: int
    backward_value: int
    op: str
    dtype: str
    shape: tuple[int, ...]
    forward_output: int
    backward_input: int

    def __str__(self) -> str:
        return (
            f"{self.op} -> {self.dtype}{list(self.shape)}: forward output {self.forward_output}, "
            f"backward input {self.backward_input}"
        )


@dataclass(frozen=True)
class Variant:
    """One set of saved values and the pair's predicted time with it, as given (us)."""

    saved: tuple[int, ...]  # backward value ids
    time_us: float

    def summary(self) -> dict:
        return {"saved": list(self.saved), "time_us": round(self.time_us, 3)}


@dataclass
class PairReport:
    """What ``optimize_pair`` did: the pair's predicted time (us, steady state, forward plus
    backward) as given, with each fusion optimized apart, and as kept; the values saved; the
    candidate sets scored; notes."""

    before_us: float
    apart_us: float
    after_us: float
    saved: list[SavedValue] = field(default_factory=list)
    variants: list[Variant] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        return {
            "before_us": round(self.before_us, 3),
            "apart_us": round(self.apart_us, 3),
            "after_us": round(self.after_us, 3),
            "saved": [str(s) for s in self.saved],
            "variants": [v.summary() for v in self.variants],
            "notes": self.notes,
        }

    def __str__(self) -> str:
        lines = [
            f"pair predicted: {self.before_us:.1f} us as given, {self.apart_us:.1f} us optimized apart, "
            f"{self.after_us:.1f} us kept"
        ]
        lines += [f"saved: {s}" for s in self.saved] or ["saved: nothing"]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


@dataclass
class OptimizedPair:
    """``forward`` and ``backward`` (OptimizedFusions); where values are saved, the forward's
    outputs end with them and the backward's inputs end with them (``saved``, in order;
    a saved value the forward outputs already is read from that output): run the forward,
    then the backward on its own inputs followed by the saved outputs (:meth:`backward_inputs`)."""

    forward: OptimizedFusion
    backward: OptimizedFusion
    saved: list[SavedValue]
    report: PairReport
    forward_outputs: int  # the forward definition's own outputs (those added for saving follow)

    def backward_inputs(self, backward_inputs: Sequence[Any], forward_outputs: Sequence[Any]) -> list:
        """The optimized backward's inputs: the definition's own, then the saved values taken
        from the optimized forward's outputs."""
        return [*backward_inputs, *(forward_outputs[s.forward_output] for s in self.saved)]


def optimize_pair(
    forward: Any,
    backward: Any,
    links: Mapping[int, int],
    forward_inputs: Sequence[Any] | None = None,
    backward_inputs: Sequence[Any] | None = None,
    *,
    options: Options | None = None,
    **keywords,
) -> OptimizedPair:
    """Optimize a forward and a backward fusion together (the module's docstring).

    ``links`` maps a backward input position to the forward input position it is the same
    tensor as (``{0: 0, 1: 1}``: the backward's first two inputs are the forward's). The inputs
    give the extents, as in :func:`eqsat.optimize_fusion`. ``options`` (an :class:`eqsat.Options`,
    or its fields as keywords) are each fusion's; saved values are kept where the pair's
    predicted saving over the two fusions optimized apart exceeds ``options.min_gain``
    (a fraction; where None, ``PAIR_MIN_GAIN``, 5%, and each fusion's own margin is the cost
    model's measured error). ``verify`` is not supported here: the two fusions are timed apart,
    not as a pair."""
    options = _pair_options(options, keywords)
    fwd, bwd = ingest(forward), ingest(backward)
    _check_links(fwd, bwd, links)
    own = len(fwd.outputs)
    common = common_values(fwd, bwd, links)
    apart = optimize(fwd, forward_inputs, options), optimize(bwd, backward_inputs, options)
    apart_us = sum(o.report.after.time_us for o in apart)
    before_us = sum(o.report.before.time_us for o in apart)
    report = PairReport(before_us, apart_us, apart_us)
    unestimated = [
        f"the {what} ({'; '.join(o.report.notes) or 'no reading'})"
        for what, o in zip(("forward", "backward"), apart)
        if not o.report.estimated
    ]
    if unestimated:
        report.notes.append(f"no cost-model estimate of {' or '.join(unestimated)}; nothing saved")
        return OptimizedPair(*apart, [], report, own)
    pair = _Pair(fwd, bwd, common, (forward_inputs, backward_inputs), options)
    candidates = _candidates(bwd, common, pair.extents)
    if not candidates:
        report.notes.append("the backward recomputes nothing small the forward computes")
        return OptimizedPair(*apart, [], report, own)
    scored = _search(candidates, pair.variant)
    report.variants = [s[0] for s in scored]
    best = min(scored, key=lambda s: s[0].time_us, default=None)
    if best is None:
        report.notes.append("no set of saved values could be scored")
        return OptimizedPair(*apart, [], report, own)
    return _best_or_apart(pair, best, apart, report, own, forward_inputs)


def _pair_options(options: Options | None, keywords: dict) -> Options:
    """optimize_pair's options: an Options or its fields as keywords, without verify."""
    if options is not None and keywords:
        raise TypeError("give optimize_pair an Options or its fields as keywords, not both")
    if keywords.get("verify") or (options is not None and options.verify):
        raise ValueError("optimize_pair does not take verify: it would time each fusion apart, not the pair")
    return options if options is not None else Options(**keywords)


def _best_or_apart(pair: "_Pair", best, apart, report: PairReport, own: int, forward_inputs) -> OptimizedPair:
    """The best variant's two fusions optimized, where the pair's predicted saving over the
    two optimized ``apart`` exceeds the margin; else the two apart."""
    v, f, where, b, b_inputs = best
    options = pair.options
    together = optimize(f, forward_inputs, options), optimize(b, b_inputs, options)
    after_us = sum(o.report.after.time_us for o in together)
    apart_us = report.apart_us
    saving = 1 - after_us / apart_us if apart_us > 0 else 0.0
    margin = PAIR_MIN_GAIN if options.min_gain is None else options.min_gain
    if saving <= margin:
        report.notes.append(
            f"saving {', '.join(_describe(pair.bwd, s) for s in v.saved)} predicted {saving:.1%}, "
            f"not above the margin {margin:.0%}; the fusions are optimized apart"
        )
        return OptimizedPair(*apart, [], report, own)
    saved = [pair.saved_value(s, o, i) for i, (s, o) in enumerate(zip(v.saved, where))]
    report.after_us, report.saved = after_us, saved
    return OptimizedPair(*together, saved, report, own)


class _Pair:
    """The two definitions as given, the backward values the forward computes by the same
    calls (backward value -> forward value), the inputs (forward, backward), the options, and
    the backward's extents."""

    def __init__(self, fwd: Fusion, bwd: Fusion, common: Mapping[int, int], inputs: tuple, options: Options):
        self.fwd, self.bwd, self.values = fwd, bwd, common
        self.forward_inputs, self.backward_inputs = inputs
        self.options = options
        self.scoring = options if options.extents is None else replace(options, extents=None)
        self.extents = concrete_extents(bwd, self.backward_inputs, None, options.default_extent)

    def variant(self, saved: tuple[int, ...]) -> tuple[Variant, Fusion, list[int], Fusion, list] | None:
        """The set ``saved`` scored, the forward writing them (and which outputs they are),
        the backward reading them and its inputs; None where a smaller set does as well."""
        bwd = self.bwd
        f, where = with_outputs(self.fwd, [self.values[v] for v in saved])
        b = with_inputs(bwd, saved)
        if any(not _used(b, i) for i in range(len(bwd.inputs), len(b.inputs))):
            return None  # a saved value the others make unneeded
        extra = _saved_inputs(bwd, saved, self.extents, self.backward_inputs)
        b_inputs = None if self.backward_inputs is None else [*self.backward_inputs, *extra]
        t = (
            estimate(f, self.forward_inputs, self.scoring).time_us
            + estimate(b, b_inputs, self.scoring).time_us
        )
        return Variant(saved, t), f, where, b, b_inputs

    def saved_value(self, value: int, output: int, i: int) -> SavedValue:
        """The backward value ``value``, saved as the forward's output ``output``, the ``i``-th saved."""
        bwd = self.bwd
        # its shape and dtype as the backward reads it
        shape, _, dtype = input_definition(bwd.types[value], _describe(bwd, value))
        return SavedValue(
            self.values[value], value, bwd.producer[value].op, str(dtype), shape, output, len(bwd.inputs) + i
        )


def _check_links(fwd: Fusion, bwd: Fusion, links: Mapping[int, int]) -> None:
    for b, f in links.items():
        if not (0 <= b < len(bwd.inputs)) or not (0 <= f < len(fwd.inputs)):
            raise LinkError(
                f"links: backward input {b} -> forward input {f} is out of range (the backward "
                f"has {len(bwd.inputs)} inputs, the forward {len(fwd.inputs)})"
            )
        tb, tf = bwd.types[bwd.inputs[b]], fwd.types[fwd.inputs[f]]
        if getattr(tb, "dtype", None) != getattr(tf, "dtype", None) or getattr(tb, "rank", None) != getattr(
            tf, "rank", None
        ):
            raise LinkError(
                f"links: backward input {b} ({_describe_type(tb)}) cannot be forward input {f} "
                f"({_describe_type(tf)}): dtype and rank must agree",
                line=bwd.producer[bwd.inputs[b]].line,
                op="fd.define_tensor",
            )


def _describe_type(t) -> str:
    return f"{getattr(t, 'dtype', None)}, rank {getattr(t, 'rank', None)}"


def _numel(t, extents: Mapping[int, int]) -> int | None:
    if not (isinstance(t, TensorType) and t.known):
        return None
    return math.prod(extents.get(d.label, 1) for d in t.dims if not d.broadcast)


def _candidates(bwd: Fusion, common: Mapping[int, int], extents: Mapping[int, int]) -> list[int]:
    """The common values worth saving (the module's docstring, step 2), in definition order."""
    biggest: dict[int, int] = {}  # value -> elements of the largest input it is computed from
    for node in bwd.nodes:
        if node.is_input:
            biggest[node.outputs[0]] = _numel(bwd.types[node.outputs[0]], extents) or 0
            continue
        below = max((biggest.get(r.id, 0) for r in node.refs()), default=0)
        for v in node.outputs:
            biggest[v] = below
    small = {v for v in common if (n := _numel(bwd.types[v], extents)) is not None and n < biggest[v]}
    consumers: dict[int, list] = {}
    for node in bwd.nodes:
        for r in node.refs():
            consumers.setdefault(r.id, []).append(node)
    outputs = {o.value for o in bwd.outputs}
    frontier = set()
    for v in small - outputs:  # a backward output the forward computes: the caller has it already
        if any(
            not small.issuperset(c.outputs) or outputs.intersection(c.outputs) for c in consumers.get(v, ())
        ):
            while bwd.producer[v].op in _BROADCASTS and (u := next(bwd.producer[v].refs()).id) in small:
                v = u  # save the value before it is broadcast; the backward broadcasts it
            frontier.add(v)
    return sorted(frontier)


def _search(candidates: list[int], variant) -> list:
    """The scored variants: every non-empty subset of up to EXHAUSTIVE candidates, else a
    greedy search adding the candidate that lowers the predicted time most."""
    if len(candidates) <= EXHAUSTIVE:
        subsets = (s for k in range(1, len(candidates) + 1) for s in itertools.combinations(candidates, k))
        return [r for s in subsets if (r := variant(s)) is not None]
    scored, chosen, best = [], (), math.inf
    while True:
        trials = [
            r
            for c in candidates
            if c not in chosen
            if (r := variant(tuple(sorted(chosen + (c,))))) is not None
        ]
        scored += trials
        top = min(trials, key=lambda r: r[0].time_us, default=None)
        if top is None or top[0].time_us >= best:
            return scored
        chosen, best = top[0].saved, top[0].time_us


def _used(fusion: Fusion, position: int) -> bool:
    vid = fusion.inputs[position]
    return any(r.id == vid for n in fusion.nodes for r in n.refs()) or any(
        o.value == vid for o in fusion.outputs
    )


def _saved_inputs(bwd: Fusion, saved, extents: Mapping[int, int], inputs: Sequence[Any] | None) -> list:
    """Tensors standing for the saved values (their shapes and dtypes, on the meta device) to
    give the backward's extents; None without inputs."""
    if inputs is None:
        return []
    return [
        torch.empty(
            [1 if d.broadcast else extents[d.label] for d in bwd.types[v].dims],
            dtype=to_torch(bwd.types[v].dtype),
            device="meta",
        )
        for v in saved
    ]


def _describe(fusion: Fusion, v: int) -> str:
    return f"%{v} ({fusion.producer[v].op})"
