"""The public API of the pipeline (``eqsat.pipeline``): ``optimize_fusion`` and
``estimate_fusion``, and the names callers import from here."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from eqsat.cost.model import Estimate
from eqsat.deadline import Cut, Deadline
from eqsat.egraph.saturate import Limits
from eqsat.verification.runner import Runner

from .defaults import DEADLINE_S, DEFAULT_EXTENT, MIN_GAIN, SEARCH_BUDGET
from .pipeline.analyse import SATURATION_SHARE
from .pipeline.context import concrete_extents
from .pipeline.driver import OptimizedFusion, estimate, optimize
from .pipeline.lower import RECOMPUTE, UNCREDITED
from .pipeline.options import VERIFY, Options
from .pipeline.report import Rejection, Report, SaturationSummary
from .pipeline.verify import VERIFY_CANDIDATES, VERIFY_WINDOW

__all__ = [
    "DEADLINE_S",
    "DEFAULT_EXTENT",
    "MIN_GAIN",
    "RECOMPUTE",
    "SATURATION_SHARE",
    "SEARCH_BUDGET",
    "UNCREDITED",
    "VERIFY",
    "VERIFY_CANDIDATES",
    "VERIFY_WINDOW",
    "Cut",
    "Deadline",
    "OptimizedFusion",
    "Options",
    "Rejection",
    "Report",
    "SaturationSummary",
    "concrete_extents",
    "estimate_fusion",
    "optimize_fusion",
]


def optimize_fusion(
    definition: Any,
    inputs: Sequence[Any] | None = None,
    *,
    profile=None,
    rules: Iterable[str] | None = None,
    reassociate: bool = True,
    limits: Limits | None = None,
    extents: dict[int, int] | None = None,
    default_extent: int = DEFAULT_EXTENT,
    search_budget: int = SEARCH_BUDGET,
    search_seconds: float | None = None,
    min_gain: float | None = None,
    deadline_s: float | None = DEADLINE_S,
    relower: bool = False,
    verify: str | None = None,
    cache_dir=None,
    runner: Runner | None = None,
    recompute: bool = True,
) -> OptimizedFusion:
    """Optimize an nvFuser fusion.

    ``definition``: a function of ``fd``, repro text or a path to a repro file, a live
    ``nvfuser``/``nvfuser_direct`` FusionDefinition, eqsat's FusionDefinition or a Fusion.
    ``inputs`` give the extents the cost model uses (None: a repro file's or text's own
    ``inputs`` list, read on the meta device, else static extents and ``default_extent``);
    under ``verify="gpu"`` they must hold values (no meta tensors). The keywords are the fields
    of :class:`eqsat.Options`, which says what each does.

    Returns an :class:`OptimizedFusion`: the optimized ``fusion`` (the input where no candidate
    was kept: one is kept only where its predicted saving exceeds the margin, or under
    verify="gpu" where the GPU runs it faster) and its ``report`` (the estimates before and
    after, the rules credited, where each stage stopped, the candidates rejected and why, the
    stage the deadline cut). The same definition, inputs and options give the same result on
    any machine, unless a backstop (``deadline_s``, ``limits.seconds``, ``search_seconds``) cuts
    a stage (docs/limits-and-deadline.md).

    Raises ValueError for an option out of range, FusionError for a definition or inputs eqsat
    cannot read, or for verify="gpu" without a CUDA device, nvFuser or inputs with values."""
    options = Options(
        profile=profile,
        rules=rules,
        reassociate=reassociate,
        limits=limits,
        extents=extents,
        default_extent=default_extent,
        search_budget=search_budget,
        search_seconds=search_seconds,
        min_gain=min_gain,
        deadline_s=deadline_s,
        relower=relower,
        verify=verify,
        cache_dir=cache_dir,
        runner=runner,
        recompute=recompute,
    )
    return optimize(definition, inputs, options)


def estimate_fusion(
    definition: Any,
    inputs: Sequence[Any] | None = None,
    *,
    profile=None,
    extents: dict[int, int] | None = None,
    default_extent: int = DEFAULT_EXTENT,
) -> Estimate:
    """The cost model's estimate of a fusion as given (kernels, bytes, time), without rewriting;
    at ``inputs``' shapes, else at those of a repro file's or text's own inputs, else at static
    extents and ``default_extent``. FusionError where the cost model has no reading of it."""
    options = Options(profile=profile, extents=extents, default_extent=default_extent)
    return estimate(definition, inputs, options)
