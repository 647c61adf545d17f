"""Splitting a reduction over several axes into nested reductions, and merging them back.

The second motivating pattern: ``amax(abs(layer_norm(x)))`` over rows and hidden: the
inner ``max`` over the hidden axis shares the layer norm's reduction axes, so nvFuser fuses it
into the normalization kernel; the outer ``max`` reads one number per row.
"""
from .rule import rule


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
                         f"fuses with a producer that reduces r (a normalization).")
    outer_low.__name__ = f"split_{name}_lowest_axis_last"
    outer_low.__doc__ = f"{op}_R(x) = {op}_r({op}_(R-r)(x)): the other nesting order."
    merge.__name__ = f"merge_nested_{name}"
    merge.__doc__ = (f"{op}_S({op}_R(x)) = {op}_(R|S)(x) for disjoint R, S: one reduction "
                     f"instead of two (one kernel instead of two when nothing fuses between).")
    for fn in (inner_low, outer_low, merge):
        rule("split", reassociates=reassociates)(fn)


_splits("Sum", reassociates=True)
_splits("Max", reassociates=False)
_splits("Min", reassociates=False)
_splits("Prod", reassociates=True)
