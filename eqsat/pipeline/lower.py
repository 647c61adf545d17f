"""A candidate lowered: the rules credited with it (fired rules whose right side is in it), and
the chosen e-nodes turned back into a Fusion, with its outputs' types checked against the input's."""

from __future__ import annotations

from eqsat.cost.walks import reachable
from eqsat.deadline import Cut
from eqsat.lowering.from_terms import lower_terms
from eqsat.egraph.recompute import with_recomputed
from eqsat.errors import FusionError
from eqsat.cost.extract import Choice, to_term_graph
from eqsat.ir.axes import TensorType
from eqsat.ir.fusion import Fusion
from eqsat.rules import RULES

from .analyse import Analysis
from .context import Pick, Run
from .report import Rejection

# what Report.rules names a lowering that copies chains for the kernels that recompute them
RECOMPUTE = "recompute_chains"

# why a result no creditable rewrite shaped is rejected unless relower=True (the measurements:
# docs/cost-model.md, "A result that no creditable rewrite shaped")
UNCREDITED = (
    "no rewrite changed it, only identities and the re-lowering of its definition, whose "
    "predicted gain the cost model cannot yet be trusted with"
)


def saving(before, after) -> float:
    """The predicted saving of ``after`` over ``before``: a fraction of the input's time."""
    return 1 - after.time_us / before.time_us if before.time_us > 0 else 0.0


def lower_candidate(
    run: Run, a: Analysis, pick: Pick, choice: Choice, margin: float | None
) -> tuple[Fusion | None, str, list[str]]:
    """The candidate ``choice`` lowered and the rules credited with it; or None, and a note
    where the deadline cut lowering (where it was rejected, a record in ``pick.rejected``: no
    creditable rewrite shaped it and not ``relower``, or it did not lower)."""
    gain, rejected = saving(pick.before, choice.estimate), pick.rejected
    credited = credited_rules(choice.pick, a.roots, a.original, a.sat.fired if a.sat else {})
    if choice.estimate.recomputed:
        credited = sorted(credited + [RECOMPUTE])
    if not credited and not run.options.relower:
        rejected.append(Rejection(choice.score, gain, margin, UNCREDITED))
        return None, "", []
    if run.deadline.left() < a.lower_s:
        return None, run.cut(Cut("lowering"), "kept the input"), []
    try:
        return lower_choice(run.fusion, a, choice.pick, choice.estimate.recomputed), "", credited
    except FusionError as err:
        rejected.append(Rejection(choice.score, gain, margin, f"it did not lower ({err})"))
        return None, "", []


def credited_rules(pick, roots, original, fired) -> list[str]:
    """Fired rules whose right-hand side (two constructor levels or more) matches a node of the
    result that the input did not have."""
    chosen = reachable(pick, roots)
    new = [(c, n) for c, n in chosen.items() if original.get(c) != n]

    def matches(c, shape):
        if shape is None:
            return True
        node = chosen.get(c) or pick.get(c)
        if node is None or node.op != shape[0]:
            return False
        kid_shapes = shape[1:]
        return len(kid_shapes) == len(node.kids) and all(
            matches(k, ks) for k, ks in zip(node.kids, kid_shapes)
        )

    out = []
    for name in fired:
        if name not in RULES or not RULES[name].creditable:
            continue
        shape = RULES[name].rhs_shape()
        if any(matches(c, shape) for c, _ in new):
            out.append(name)
    return sorted(out)


def lower_choice(fusion: Fusion, a: Analysis, pick, recomputed=()) -> Fusion:
    """The e-nodes ``pick`` chose, from the analysis's roots, as a Fusion in place of ``fusion``'s
    terms; FusionError where it has another number of outputs or an output changes type."""
    enc, cls = a.enc, a.cls
    graph, tid_of = to_term_graph(pick, a.roots)
    graph = with_recomputed(graph, tid_of, recomputed)
    root_terms = {v: tid_of[cls[t]] for v, t in enc.roots.items()}
    hints = {}
    for t, order in enc.order.items():
        c = cls[t]
        if c in tid_of:
            hints.setdefault(tid_of[c], order)
    lowered = lower_terms(fusion, graph, root_terms, enc.boundaries, enc.label_of, hints)
    if len(lowered.outputs) != len(fusion.outputs):
        raise FusionError(f"the lowered fusion has {len(lowered.outputs)} outputs, not {len(fusion.outputs)}")
    for x, y in zip(fusion.outputs, lowered.outputs, strict=True):
        tx, ty = fusion.types[x.value], lowered.types[y.value]
        if isinstance(tx, TensorType) and tx.known:
            same = (
                ty.dtype is tx.dtype
                and ty.rank == tx.rank
                and [d.broadcast for d in ty.dims] == [d.broadcast for d in tx.dims]
            )
            if not same:
                raise FusionError(f"output %{x.value} would change type")
    return lowered
