"""One fuzzing check: a random fusion optimized for large shapes, run on small inputs through
the torch executor, against the original. Used by ``tests/test_fuzz.py`` (hypothesis) and
``bench/fuzz.py`` (thousands of seeds)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from eqsat.ir.dtypes import DataType
from eqsat.ir.fusion import Fusion
from eqsat.ir.replay import replay
from eqsat.optimize import estimate_fusion, optimize_fusion
from eqsat.reference.compare import mismatch, reduction_rtol
from eqsat.reference.torch_executor import TorchDefinition, TorchOps, run_fusion
from eqsat.rules import RULES

from .random_fusion import RandomCase

REESTIMATE_SLACK = 0.05


@dataclass
class FuzzResult:
    changed: bool
    problem: str | None  # None: the optimized fusion agrees and costs no more
    exact: bool = True  # NaN and inf were compared place by place (exact rules only)
    rules: tuple = ()  # the rules credited with the optimized fusion


def check_case(case: RandomCase, min_gain: float = 0.0, **options) -> FuzzResult:
    """Optimize ``case`` for its planning shapes; its small inputs must give the original's
    outputs (:func:`output_problem`), and neither the report's nor a fresh estimate of the
    optimized fusion may exceed the original's estimated time."""
    opt = optimize_fusion(case.fusion, case.planning_inputs, min_gain=min_gain, **options)
    want = run_fusion(case.fusion, case.inputs, strict=True)
    got = run_fusion(opt.fusion, case.inputs, strict=True)
    rules = tuple(opt.report.rules)
    if len(got) != len(want):
        return FuzzResult(opt.report.changed, f"{len(got)} outputs, expected {len(want)}", rules=rules)
    exact = exact_on_special_values(opt.report)
    floors = summand_magnitudes(case.fusion, case.inputs)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        problem = output_problem(case, g, w, i, floors[i], exact)
        if problem:
            return FuzzResult(opt.report.changed, f"output {i}: {problem}", exact, rules)
    return FuzzResult(opt.report.changed, _cost_problem(case, opt, options), exact, rules)


def exact_on_special_values(report) -> bool:
    """No rule that is inexact on NaN, +-inf or overflow (reassociates, or is flagged
    ``special_values``) shaped the result: none is among the report's credited rules (those
    whose right side is in the result), and none that fired is one the report cannot credit
    (a right side of one constructor level). The optimized fusion must then give NaN and inf
    where the original does."""
    inexact = [RULES[n] for n in report.rules_fired if n in RULES and not RULES[n].exact_on_special_values]
    return all(r.name not in report.rules and r.creditable for r in inexact)


def output_problem(case: RandomCase, got, want, i: int, summands=None, exact: bool = True) -> str | None:
    """Why output ``i`` of the optimized fusion (``got``) is not the original's (``want``), or
    None. Within the dtype and reduction-size tolerance (:func:`eqsat.reference.compare.reduction_rtol`)
    of the largest value, plus that tolerance times each element's ``summands`` (the
    magnitude of what its sums add up, :func:`summand_magnitudes`: an output that cancels to
    0 still differs by the rounding of its terms); NaN and inf in the same places where the
    rules used are ``exact``, else only the places finite in both are compared; a difference
    in value that is the original's own rounding error is no problem (:func:`_as_accurate`)."""
    if not isinstance(want, torch.Tensor):
        return mismatch(got, want)
    rtol = reduction_rtol(want.dtype, case.reduction_size)
    # the inputs are O(1) where they are finite: a hundredth of the tolerance is a floor too
    floors = rtol * (summands + 1e-2) if summands is not None else 1e-2 * rtol
    if not exact and isinstance(got, torch.Tensor) and got.shape == want.shape:
        got, want = _finite_parts(got, want)
    problem = mismatch(got, want, rtol, atol=floors)
    if problem and problem.startswith("max |difference|") and _as_accurate(case, got, want, i):
        return None
    return problem


def _finite_parts(got: torch.Tensor, want: torch.Tensor):
    """Both with 0 where either is NaN or infinite."""
    both = torch.isfinite(got) & torch.isfinite(want) if got.dtype.is_floating_point else None
    if both is None:
        return got, want
    return torch.where(both, got, torch.zeros_like(got)), torch.where(both, want, torch.zeros_like(want))


class _AbsoluteSums(TorchOps):
    """The torch executor's ops, but sums (``sum``, and the mean of ``var_mean``) add the
    absolute values of their terms."""

    def __getattr__(self, name: str):
        op = super().__getattr__(name)
        if name == "sum":
            return lambda arg, *args, **kwargs: op(_magnitude(arg), *args, **kwargs)
        if name == "var_mean":
            magnitudes = super().__getattr__(name)

            def var_and_mean_of_magnitudes(arg, *args, **kwargs):
                return op(arg, *args, **kwargs)[0], magnitudes(_magnitude(arg), *args, **kwargs)[1]

            return var_and_mean_of_magnitudes
        return op


def _magnitude(x):
    return x.abs() if isinstance(x, torch.Tensor) else x


def summand_magnitudes(fusion: Fusion, inputs) -> list:
    """Per output of ``fusion``: its value where every sum adds the magnitudes of its terms
    instead (float64; NaN read as no floor). An output that is a sum of terms that cancel
    (a mean of a normalized tensor, exactly 0) gets the size of those terms: a reordered sum
    differs from it by their rounding, not by its own. Other ops see the changed sums (a
    mean of magnitudes subtracted): the floor is a size, not a bound."""
    fd = TorchDefinition(list(inputs))
    fd.ops = _AbsoluteSums(device=fd.ops.device)
    try:
        replay(fusion, fd)
    except Exception:  # no floor where the magnitudes cannot be computed
        return [None] * len(fusion.outputs)
    return [
        o.abs().to(torch.float64).nan_to_num(nan=0.0)
        if isinstance(o, torch.Tensor) and (o.dtype.is_floating_point or o.dtype.is_complex)
        else None
        for o in fd.outputs
    ]


def _cost_problem(case: RandomCase, opt, options) -> str | None:
    """Why the optimized fusion is estimated slower than the original, or None."""
    before, after = opt.report.before.time_us, opt.report.after.time_us
    if after > before * (1 + 1e-9):
        return f"estimated time rose: {before:.3f} -> {after:.3f} us"
    if opt.report.changed:
        again = estimate_fusion(opt.fusion, case.planning_inputs, profile=options.get("profile")).time_us
        # the lowered fusion, encoded afresh, may be grouped into kernels a little differently
        # by the model's greedy segmentation than the extracted candidate was (seen: up to 4%)
        if again > before * (1 + REESTIMATE_SLACK) + 0.01:
            return (
                f"the optimized fusion re-estimates at {again:.4f} us, above the original's {before:.4f} us"
            )
    return None


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
    rounding error (a normalization of a sum that cancels to ~0 amplifies it) is no wrong rewrite.
    Only places where all three are finite count (NaN and inf are compared exactly elsewhere)."""
    wide_inputs = [
        x.double() if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x for x in case.inputs
    ]
    exact = run_fusion(widened(case.fusion), wide_inputs, strict=True)[i]
    if not isinstance(exact, torch.Tensor) or not exact.dtype.is_floating_point:
        return False
    exact, got, want = exact.double(), got.double(), want.double()
    finite = exact.isfinite() & got.isfinite() & want.isfinite()
    zero = torch.zeros((), dtype=torch.float64)
    err_got = float(torch.where(finite, (got - exact).abs(), zero).max())
    err_want = float(torch.where(finite, (want - exact).abs(), zero).max())
    return err_got <= 2 * err_want
