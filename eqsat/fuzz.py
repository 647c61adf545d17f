"""One fuzzing check: a random fusion optimized for large shapes, run on small inputs through
the torch executor, against the original. Used by ``tests/test_fuzz.py`` (hypothesis) and
``bench/fuzz.py`` (thousands of seeds)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from .compare import mismatch, reduction_rtol
from .dtypes import DataType
from .ir import Fusion
from .optimize import estimate_fusion, optimize_fusion
from .random_fusion import RandomCase
from .torch_executor import run_fusion


REESTIMATE_SLACK = 0.05


@dataclass
class FuzzResult:
    changed: bool
    problem: str | None          # None: the optimized fusion agrees and costs no more


def check_case(case: RandomCase, min_gain: float = 0.0, **options) -> FuzzResult:
    """Optimize ``case`` for its planning shapes; its small inputs must give the original's
    outputs (within the dtype and reduction-size tolerance, with a small absolute floor), and neither the report's nor a
    fresh estimate of the optimized fusion may exceed the original's estimated time."""
    opt = optimize_fusion(case.fusion, case.planning_inputs, min_gain=min_gain, **options)
    want = run_fusion(case.fusion, case.inputs)
    got = run_fusion(opt.fusion, case.inputs)
    if len(got) != len(want):
        return FuzzResult(opt.report.changed, f"{len(got)} outputs, expected {len(want)}")
    for i, (g, w) in enumerate(zip(got, want)):
        rtol = reduction_rtol(w.dtype, case.reduction_size) if hasattr(w, "dtype") else None
        # the inputs are O(1) (randn): an output that cancels to ~0 (the mean of a normalized
        # tensor: rounding noise, amplified by a 1/std) is compared with an absolute floor of a
        # hundredth of the relative tolerance
        problem = mismatch(g, w, rtol, atol=1e-2 * rtol if rtol else 0.0)
        if problem and not _as_accurate(case, g, w, i):
            return FuzzResult(opt.report.changed, f"output {i}: {problem}")
    before, after = opt.report.before.time_us, opt.report.after.time_us
    if after > before * (1 + 1e-9):
        return FuzzResult(True, f"estimated time rose: {before:.3f} -> {after:.3f} us")
    if opt.report.changed:
        again = estimate_fusion(opt.fusion, case.planning_inputs, profile=options.get("profile")).time_us
        # the lowered fusion, encoded afresh, may be grouped into kernels a little differently
        # by the model's greedy segmentation than the extracted candidate was (seen: up to 4%)
        if again > before * (1 + REESTIMATE_SLACK) + 0.01:
            return FuzzResult(True, f"the optimized fusion re-estimates at {again:.4f} us, above the "
                                    f"original's {before:.4f} us")
    return FuzzResult(opt.report.changed, None)


def widened(fusion: Fusion) -> Fusion:
    """``fusion`` with every Float (fp32) value made Double: the same math in float64, an
    exact reference for it. Half types stay what they are (storage that rounds)."""
    def wide(v):
        if v is DataType.Float:
            return DataType.Double
        return tuple(wide(x) for x in v) if isinstance(v, tuple) else v

    nodes = tuple(dataclasses.replace(n, args=tuple((k, wide(v)) for k, v in n.args)) for n in fusion.nodes)
    return Fusion(nodes, fusion.outputs)


def _as_accurate(case: RandomCase, got, want, i: int) -> bool:
    """Output ``i`` of the optimized fusion (``got``) is no further from the float64 result than
    the original's (``want``) is (twice as far at most): a difference that is the original's own
    rounding error (a normalization of a sum that cancels to ~0 amplifies it) is no wrong rewrite."""
    wide_inputs = [x.double() if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x
                   for x in case.inputs]
    exact = run_fusion(widened(case.fusion), wide_inputs)[i]
    if not isinstance(exact, torch.Tensor) or not exact.dtype.is_floating_point:
        return False
    exact = exact.double()
    err_got = float((got.double() - exact).abs().nan_to_num(float("inf")).max())
    err_want = float((want.double() - exact).abs().nan_to_num(float("inf")).max())
    return err_got <= 2 * err_want
