"""Splitting a reduction over several axes into nested reductions, and merging them back.

The second motivating pattern: ``amax(abs(layer_norm(x)))`` over rows and hidden: the
inner ``max`` over the hidden axis shares the layer norm's reduction axes, so nvFuser fuses it
into the normalization kernel; the outer ``max`` reads one number per row.
"""
from .rule import rule

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


def _splits(op, reassociates):
    """Sums and products of bf16/fp16 are left alone: nesting them would round the inner
    result to the half type (max and min are exact in any dtype)."""
    name = op.lower()

    def exact(k, x):
        return [k.full_precision(x)] if reassociates else []

    def inner_low(k, x, R):
        return (getattr(k, op)(R, x),
                getattr(k, op)(k.minus(R, k.low(R)), getattr(k, op)(k.low(R), x)),
                [k.several(R)] + exact(k, x))

    def outer_low(k, x, R):
        return (getattr(k, op)(R, x),
                getattr(k, op)(k.low(R), getattr(k, op)(k.minus(R, k.low(R)), x)),
                [k.several(R)] + exact(k, x))

    def merge(k, x, R, S):
        return (getattr(k, op)(S, getattr(k, op)(R, x)), getattr(k, op)(R | S, x),
                [k.disjoint(R, S)] + exact(k, x))

    inner_low.__name__ = f"split_{name}_lowest_axis_first"
    inner_low.__doc__ = (f"{op}_R(x) = {op}_(R-r)({op}_r(x)), r the lowest label of R: the "
                         f"reduction over several axes as two nested ones. Every partition is "
                         f"reached by applying it again and merging. Pays when the inner one "
                         f"fuses with a producer that reduces r (a normalization).\n\n{_SPECIAL[op]}")
    outer_low.__name__ = f"split_{name}_lowest_axis_last"
    outer_low.__doc__ = f"{op}_R(x) = {op}_r({op}_(R-r)(x)): the other nesting order.\n\n{_SPECIAL[op]}"
    merge.__name__ = f"merge_nested_{name}"
    merge.__doc__ = (f"{op}_S({op}_R(x)) = {op}_(R|S)(x) for disjoint R, S: one reduction "
                     f"instead of two (one kernel instead of two when nothing fuses between)."
                     f"\n\n{_SPECIAL[op]}")
    for fn in (inner_low, outer_low, merge):
        rule("split", reassociates=reassociates)(fn)


_splits("Sum", reassociates=True)
_splits("Max", reassociates=False)
_splits("Min", reassociates=False)
_splits("Prod", reassociates=True)
