"""Under verify="gpu": the best few candidates lowered, and the GPU at hand decides between them
and the input (``eqsat.verification.verify``: outputs checked, steady-state times, a cache)."""

from __future__ import annotations

from dataclasses import dataclass

from eqsat.cost.model import Estimate
from eqsat.deadline import Cut
from eqsat.cost.extract import Extraction
from eqsat.ir.fusion import Fusion
from eqsat.verification.cache import VerificationCache
from eqsat.verification.verify import Verification
from eqsat.verification.verify import verify as verify_on_gpu

from .analyse import Analysis
from .context import Pick, Run
from .lower import lower_candidate, saving
from .report import Rejection

# Candidates predicted dearer than the input by less than this are timed too: the cost model
# cannot tell them from the input (the measurements: docs/verification.md).
VERIFY_WINDOW = 0.10
# The candidates timed at most (extraction keeps this many; why 4: docs/verification.md).
VERIFY_CANDIDATES = 4


@dataclass
class Lowered:
    """A candidate lowered for the GPU to time: the fusion, its estimate, the rules credited."""

    fusion: Fusion
    estimate: Estimate
    credited: list[str]


def lowered_candidates(run: Run, a: Analysis, ex: Extraction, pick: Pick) -> list[Lowered]:
    """The best few distinct candidates predicted cheaper than the input, or dearer by less than
    ``VERIFY_WINDOW`` (the GPU decides what the model cannot tell apart), lowered (each that
    lowers, a creditable rewrite shaped or ``relower``, and the deadline leaves time to lower),
    distinct as lowered, cheapest first."""
    if ex.cut:
        pick.notes.append(run.cut(ex.cut, "the candidates scored by then are verified"))
    out: list[Lowered] = []
    for choice in ex.top:
        if choice.estimate is None or saving(pick.before, choice.estimate) <= -VERIFY_WINDOW:
            continue
        if run.deadline.left() < a.lower_s:
            pick.notes.append(run.cut(Cut("lowering"), f"{len(out)} candidates lowered"))
            break
        lowered, _, credited = lower_candidate(run, a, pick, choice, None)
        if lowered is not None and all(lowered != c.fusion for c in out):
            out.append(Lowered(lowered, choice.estimate, credited))
    return out


def decide(run: Run, pick: Pick) -> Verification | None:
    """Under verify="gpu", the GPU's decision between the input and ``pick.lowered``, kept in
    ``pick`` (the candidates it rejected added to ``pick.rejected``); None where nothing was
    timed."""
    if not run.options.verify:
        return None
    if not pick.lowered:
        if pick.estimated:
            run.notes.append(
                "verify='gpu': no candidate was predicted cheaper than the input, or dearer by "
                f"less than {VERIFY_WINDOW:.0%}; nothing to time"
            )
        return None
    v = verify_on_gpu(
        run.fusion,
        [c.fusion for c in pick.lowered],
        [pick.before.time_us] + [c.estimate.time_us for c in pick.lowered],
        run.inputs,
        run.options.runner,
        VerificationCache(run.options.cache_dir),
    )
    run.phases["verify"] = v.seconds
    for c, m in zip(pick.lowered, v.measurements[1:], strict=True):
        if m.problem is not None:
            pick.rejected.append(
                Rejection(
                    c.estimate.time_us,
                    saving(pick.before, c.estimate),
                    None,
                    f"on the GPU: {m.problem}",
                    m.measured_us,
                )
            )
    if v.kept < 0:
        pick.keep_input(run.fusion)
    else:
        kept = pick.lowered[v.kept]
        pick.keep(kept.fusion, kept.estimate, kept.credited)
    return v
