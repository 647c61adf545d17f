"""var_mean and mean written as plain sums, so that the rules for sums apply to them.

Only for full-precision inputs: nvFuser rejects var_mean of bf16/fp16 ("upcast to float"),
and a mean of a half type would round where the sum form does not."""
from .rule import Axes, Correction, Term, rule


@rule("normalization", special_values="the sum overflows to inf where nvFuser's welford mean of "
                                      "values above max/|R| does not")
def mean_as_sum(k, x: Term, R: Axes):
    """mean_R(x) = sum_R(x) / |R|. Pays: a sum fuses where nvFuser's welford may not, and the
    distributive rules then see through it.

    Special values: NaN and +-inf alike (a NaN, or +inf and -inf together, make both NaN).
    Signed zero: not kept. Overflow: sum_R(x) overflows once it passes the largest float,
    where the mean of the same values need not (flagged). Floating point only."""
    return k.Mean(R, x), k.Div(k.Sum(R, x), k.Extent(R)), [k.floating(x), k.full_precision(x)]


@rule("normalization", reassociates=True)
def variance_as_sums(k, x: Term, R: Axes, C: Correction):
    """var_R(x; correction c) = sum_R((x - mean_R(x))^2) / (|R| - c), the two-pass form, for
    c in {0, 1} (where |R| - c <= 0 only as 0/0, which both sides give as NaN).

    Special values: NaN and +-inf alike: an inf makes x - mean NaN, as it makes the variance
    NaN. Signed zero: a variance is +0.0 on both sides. Overflow: a square (x - mean)^2 may
    overflow where the variance does not (reassociates). Floating point only."""
    d = k.Sub(x, k.Mean(R, x))
    return (k.Var(R, C, x), k.Div(k.Sum(R, k.Mul(d, d)), k.Sub(k.Extent(R), k.Int(C))),
            [k.floating(x), k.full_precision(x), k.zero_or_one(C)])
