"""Splitting a reduction over several axes into nested reductions, and merging them back.

The second motivating pattern: ``amax(abs(layer_norm(x)))`` over rows and hidden: the
inner ``max`` over the hidden axis shares the layer norm's reduction axes, so nvFuser fuses it
into the normalization kernel; the outer ``max`` reads one number per row.
"""

import inspect

from .rule import Axes, Term, rule

# what the three rules of each reduction assume about special values: the last paragraph of
# their docstrings
_SPECIAL = {
    "Sum": "Special values: NaN and +-inf give the same result in any order (NaN, or +inf "
    "and -inf together, make NaN). Signed zero: not kept. Overflow: a partial sum may "
    "overflow in one order and not the other (reassociates). Integer sums (Int64) wrap "
    "alike in any order.",
    "Prod": "Special values: NaN, +-inf and 0 give the same result in any order (0*inf is "
    "NaN). Signed zero: not kept. Overflow and underflow: a partial product may "
    "overflow or flush to 0 in one order only (reassociates). Integer products (Int64) "
    "wrap alike in any order.",
    "Max": "Special values: exact: a NaN anywhere makes the max NaN in any nesting, +-inf "
    "are ordinary values to max. Signed zero: not kept (the max of -0.0 and +0.0 is "
    "the reduction order's). No arithmetic, so no overflow.",
    "Min": "Special values: exact: a NaN anywhere makes the min NaN in any nesting, +-inf "
    "are ordinary values to min. Signed zero: not kept (the min of -0.0 and +0.0 is "
    "the reduction order's). No arithmetic, so no overflow.",
}


def _split(op: str, *, reassociates: bool):
    """``@rule("split")`` for a rule of ``op``'s reductions, its docstring ending with their
    special-values paragraph. Sums and products of bf16/fp16 are left alone (their rules ask
    for full precision): nesting them would round the inner result to the half type (max and
    min are exact in any dtype)."""

    def register(fn):
        fn.__doc__ = f"{inspect.cleandoc(fn.__doc__)}\n\n{_SPECIAL[op]}"
        return rule("split", reassociates=reassociates)(fn)

    return register


# -- sums ------------------------------------------------------------------------------------------


@_split("Sum", reassociates=True)
def split_sum_lowest_axis_first(k, x: Term, R: Axes):
    """Sum_R(x) = Sum_(R-r)(Sum_r(x)), r the lowest label of R: the reduction over several
    axes as two nested ones. Every partition is reached by applying it again and merging. Pays
    when the inner one fuses with a producer that reduces r (a normalization)."""
    return k.Sum(R, x), k.Sum(k.minus(R, k.low(R)), k.Sum(k.low(R), x)), [k.several(R), k.full_precision(x)]


@_split("Sum", reassociates=True)
def split_sum_lowest_axis_last(k, x: Term, R: Axes):
    """Sum_R(x) = Sum_r(Sum_(R-r)(x)): the other nesting order."""
    return k.Sum(R, x), k.Sum(k.low(R), k.Sum(k.minus(R, k.low(R)), x)), [k.several(R), k.full_precision(x)]


@_split("Sum", reassociates=True)
def merge_nested_sum(k, x: Term, R: Axes, S: Axes):
    """Sum_S(Sum_R(x)) = Sum_(R|S)(x) for disjoint R, S: one reduction instead of two (one
    kernel instead of two when nothing fuses between)."""
    return k.Sum(S, k.Sum(R, x)), k.Sum(R | S, x), [k.disjoint(R, S), k.full_precision(x)]


# -- maxima ----------------------------------------------------------------------------------------


@_split("Max", reassociates=False)
def split_max_lowest_axis_first(k, x: Term, R: Axes):
    """Max_R(x) = Max_(R-r)(Max_r(x)), r the lowest label of R: the reduction over several
    axes as two nested ones. Every partition is reached by applying it again and merging. Pays
    when the inner one fuses with a producer that reduces r (a normalization)."""
    return k.Max(R, x), k.Max(k.minus(R, k.low(R)), k.Max(k.low(R), x)), [k.several(R)]


@_split("Max", reassociates=False)
def split_max_lowest_axis_last(k, x: Term, R: Axes):
    """Max_R(x) = Max_r(Max_(R-r)(x)): the other nesting order."""
    return k.Max(R, x), k.Max(k.low(R), k.Max(k.minus(R, k.low(R)), x)), [k.several(R)]


@_split("Max", reassociates=False)
def merge_nested_max(k, x: Term, R: Axes, S: Axes):
    """Max_S(Max_R(x)) = Max_(R|S)(x) for disjoint R, S: one reduction instead of two (one
    kernel instead of two when nothing fuses between)."""
    return k.Max(S, k.Max(R, x)), k.Max(R | S, x), [k.disjoint(R, S)]


# -- minima ----------------------------------------------------------------------------------------


@_split("Min", reassociates=False)
def split_min_lowest_axis_first(k, x: Term, R: Axes):
    """Min_R(x) = Min_(R-r)(Min_r(x)), r the lowest label of R: the reduction over several
    axes as two nested ones. Every partition is reached by applying it again and merging. Pays
    when the inner one fuses with a producer that reduces r (a normalization)."""
    return k.Min(R, x), k.Min(k.minus(R, k.low(R)), k.Min(k.low(R), x)), [k.several(R)]


@_split("Min", reassociates=False)
def split_min_lowest_axis_last(k, x: Term, R: Axes):
    """Min_R(x) = Min_r(Min_(R-r)(x)): the other nesting order."""
    return k.Min(R, x), k.Min(k.low(R), k.Min(k.minus(R, k.low(R)), x)), [k.several(R)]


@_split("Min", reassociates=False)
def merge_nested_min(k, x: Term, R: Axes, S: Axes):
    """Min_S(Min_R(x)) = Min_(R|S)(x) for disjoint R, S: one reduction instead of two (one
    kernel instead of two when nothing fuses between)."""
    return k.Min(S, k.Min(R, x)), k.Min(R | S, x), [k.disjoint(R, S)]


# -- products --------------------------------------------------------------------------------------


@_split("Prod", reassociates=True)
def split_prod_lowest_axis_first(k, x: Term, R: Axes):
    """Prod_R(x) = Prod_(R-r)(Prod_r(x)), r the lowest label of R: the reduction over several
    axes as two nested ones. Every partition is reached by applying it again and merging. Pays
    when the inner one fuses with a producer that reduces r (a normalization)."""
    return (
        k.Prod(R, x),
        k.Prod(k.minus(R, k.low(R)), k.Prod(k.low(R), x)),
        [k.several(R), k.full_precision(x)],
    )


@_split("Prod", reassociates=True)
def split_prod_lowest_axis_last(k, x: Term, R: Axes):
    """Prod_R(x) = Prod_r(Prod_(R-r)(x)): the other nesting order."""
    return (
        k.Prod(R, x),
        k.Prod(k.low(R), k.Prod(k.minus(R, k.low(R)), x)),
        [k.several(R), k.full_precision(x)],
    )


@_split("Prod", reassociates=True)
def merge_nested_prod(k, x: Term, R: Axes, S: Axes):
    """Prod_S(Prod_R(x)) = Prod_(R|S)(x) for disjoint R, S: one reduction instead of two (one
    kernel instead of two when nothing fuses between)."""
    return k.Prod(S, k.Prod(R, x)), k.Prod(R | S, x), [k.disjoint(R, S), k.full_precision(x)]
