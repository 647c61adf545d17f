"""var_mean and mean written as plain sums, so that the rules for sums apply to them.

Only for full-precision inputs: nvFuser rejects var_mean of bf16/fp16 ("upcast to float"),
and a mean of a half type would round where the sum form does not."""

from .rule import Axes, Correction, Term, rule


@rule(
    "normalization",
    special_values="the sum overflows to inf where nvFuser's welford mean of values above max/|R| does not",
)
def mean_as_sum(k, x: Term, R: Axes):
    """mean_R(x) = sum_R(x) / |R|. Pays: a sum fuses where nvFuser's welford may not, and the
    distributive rules then see through it.

    Special values: NaN and +-inf alike (a NaN, or +inf and -inf together, make both NaN).
    Signed zero: not kept. Overflow: sum_R(x) overflows once it passes the largest float,
    where the mean of the same values need not (flagged). Floating point only."""
    return k.Mean(R, x), k.Div(k.Sum(R, x), k.Extent(R)), [k.floating(x), k.full_precision(x)]


def _two_pass(k, x, R, C):
    d = k.Sub(x, k.Mean(R, x))
    return k.Div(k.Sum(R, k.Mul(d, d)), k.Sub(k.Extent(R), k.Int(C)))


@rule("normalization", reassociates=True)
def variance_as_sums(k, x: Term, R: Axes, C: Correction):
    """var_R(x; correction 0) = sum_R((x - mean_R(x))^2) / |R|, the two-pass form, at any
    extent (nvFuser divides by max(0, |R| - c): over an empty axis both sides are 0/0, NaN).

    Special values: NaN and +-inf alike: an inf makes x - mean NaN, as it makes the variance
    NaN. Signed zero: a variance is +0.0 on both sides. Overflow: a square (x - mean)^2 may
    overflow where the variance does not (reassociates). Floating point only."""
    return k.Var(R, C, x), _two_pass(k, x, R, C), [k.floating(x), k.full_precision(x), k.disjoint(C, -1)]


@rule("normalization", reassociates=True)
def corrected_variance_as_sums(k, x: Term, R: Axes, C: Correction):
    """var_R(x; correction 1) = sum_R((x - mean_R(x))^2) / (|R| - 1), where no axis of R can
    be empty: nvFuser divides by max(0, |R| - 1), so over an empty axis the variance is 0 * inf,
    NaN, where the two-pass form is 0 / -1, -0.0 (at |R| = 1 both are NaN).

    Special values: NaN and +-inf alike, as for variance-as-sums (an inf makes x - mean NaN, as
    it makes the variance NaN). Signed zero: +0.0 on both sides. Overflow: a square may overflow
    where the variance does not (reassociates). Floating point only."""
    return (
        k.Var(R, C, x),
        _two_pass(k, x, R, C),
        [k.floating(x), k.full_precision(x), k.zero_or_one(C), k.never_empty(R)],
    )
