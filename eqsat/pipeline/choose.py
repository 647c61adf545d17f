"""The choice: extraction from the saturated e-graph, then the best candidate kept where its
predicted saving exceeds the margin, a creditable rewrite shaped it and it lowers, and where,
lowered and estimated afresh, it is still below the input's estimate; under verify="gpu", the
best few lowered for the GPU to decide between (``verify``)."""

from __future__ import annotations

import time

from eqsat.cost.model import CostModel, Estimate
from eqsat.cost.profile import Profile
from eqsat.deadline import Cut
from eqsat.defaults import MIN_GAIN
from eqsat.cost.extract import Extraction, extract

from .analyse import Analysis, analyse
from .context import Pick, Run, concrete_extents
from .lower import RECOMPUTE, lower_candidate, saving
from .report import Rejection
from .verify import VERIFY_CANDIDATES, lowered_candidates


def choose(run: Run, a: Analysis) -> Pick:
    """The stage: the candidate chosen (the input where the deadline cut the analysis). Where it
    recomputes chains, the best candidate without copies is extracted from the same e-graph
    too, and the cheaper kept as written: extraction scored copies of chains its lowering may
    not realise in full (its estimate as written is then dearer). The pick's notes go to
    ``run.notes``; those of the second extraction are dropped, its deadline cuts recorded."""
    if a.cut is not None:
        return Pick(run.fusion)
    pick = _extract_and_choose(run, a, a.model)
    if RECOMPUTE in pick.credited and not run.options.verify and run.deadline.left() > 0:
        alone = _extract_and_choose(run, a, a.model.with_recompute(False))
        if alone.changed and alone.after.time_us < pick.after.time_us:
            alone.notes = pick.notes + [
                f"without recomputed chains: predicted {alone.after.time_us:.1f} us, "
                f"with them {pick.after.time_us:.1f} us"
            ]
            alone.rejected = pick.rejected + alone.rejected
            pick = alone
    run.notes += pick.notes
    return pick


def _extract_and_choose(run: Run, a: Analysis, model: CostModel) -> Pick:
    """One extraction scored by ``model`` and the candidate chosen from it (``_choose``), or
    under verify="gpu" the best few lowered; a change kept only where its fresh estimate is
    below the input's (``_confirm_cheaper``)."""
    options, deadline = run.options, run.deadline
    t_extract = time.perf_counter()
    ex = extract(
        a.dump,
        a.roots,
        a.original,
        model,
        budget=options.search_budget,
        budget_s=options.search_seconds,
        keep=VERIFY_CANDIDATES,
        deadline=deadline.earlier(a.lower_s),
        guess_s=a.before_s,
    )
    t_lower = time.perf_counter()
    p = Pick(
        run.fusion,
        before=a.before or ex.base.estimate or Estimate(),
        estimated=a.before is not None or ex.base.estimate is not None,
        search={"scored": ex.scored, "nodes": ex.work, "stop": ex.stop},
    )
    p.after = p.before
    if options.verify:
        p.lowered = lowered_candidates(run, a, ex, p)
    else:
        _choose(run, a, ex, p)
    if p.changed and options.extents is None:
        if deadline.left() >= a.phases["encode"] + a.before_s:  # reading it again, then its estimate
            _confirm_cheaper(run, p)
        else:
            p.keep_input(run.fusion)
            p.notes.append(run.cut(Cut("the fresh estimate of the lowered candidate"), "kept the input"))
    p.credited = p.credited if p.changed else []
    run.add_seconds("extract", t_lower - t_extract)
    run.add_seconds("lower", time.perf_counter() - t_lower)
    return p


def _choose(run: Run, a: Analysis, ex: Extraction, p: Pick) -> None:
    """The best candidate lowered and kept in ``p`` where its predicted saving exceeds the
    margin, a creditable rewrite shaped it (or ``relower``), and the deadline leaves the time
    lowering is expected to take; else the input. Notes where the deadline cut extraction, and
    records the candidate not kept and why."""
    best = ex.best
    lowered, why, credited = None, "", []
    if best.estimate is None:
        why = "kept the input: the cost model could not score it"
    elif (gain := saving(p.before, best.estimate)) > 0:
        need, what = margin(run.profile, run.options.min_gain, p.before)
        if gain <= max(need, 1e-6):
            p.rejected.append(Rejection(best.score, gain, need, f"the predicted saving is within {what}"))
        else:
            lowered, why, credited = lower_candidate(run, a, p, best, need)
    if ex.cut:
        p.notes.append(
            run.cut(ex.cut, "kept the input" if lowered is None else "kept the best candidate scored by then")
        )
    if why and not (ex.cut and best.estimate is None):
        p.notes.append(why)
    if lowered is not None:
        p.keep(lowered, best.estimate, credited)


def margin(profile: Profile, min_gain: float | None, before: Estimate) -> tuple[float, str]:
    """The saving a candidate must exceed, a fraction of the input's predicted time, and what it
    is: ``min_gain`` where given, else the cost model's measured error on a saving at the
    input's kernel count and predicted time (the profile's error table: the saving recorded
    candidates were predicted and did not deliver), else ``MIN_GAIN``."""
    if min_gain is not None:
        return min_gain, f"min_gain={min_gain:g}, as given"
    if profile.error is None:
        return MIN_GAIN, f"the default margin {MIN_GAIN:.0%} (the profile has no error table)"
    m = profile.error.margin(len(before.kernels), before.time_us)
    return m.error, f"the cost model's measured error on a saving, {m}"


def _confirm_cheaper(run: Run, p: Pick) -> None:
    """The lowered result estimated afresh, as ``estimate_fusion`` reads it, and kept only where
    that is below the input's estimate. Lowering may add work that extraction did not score (a
    copy of an output that would otherwise be the caller's input), so the optimized fusion is
    never estimated dearer."""
    lowered = p.result
    concrete = concrete_extents(lowered, run.inputs, None, run.options.default_extent)
    again = analyse(lowered, concrete, run.profile).before
    if again is None or again.time_us < p.before.time_us:
        p.after = again or p.after
        return
    p.rejected.append(
        Rejection(
            p.after.time_us,
            saving(p.before, p.after),
            None,
            f"lowered, it re-estimates at {again.time_us:.1f} us, not below the "
            f"input's {p.before.time_us:.1f} us",
        )
    )
    p.keep_input(run.fusion)
