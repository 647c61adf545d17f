"""Placement: where nvFuser computes a value, when the algebra is the identity.

Each docstring ends with what the rule assumes about special values (NaN, +-inf, signed zero,
integer overflow); see :mod:`eqsat.rules.rule`."""

from .rule import DType, Term, rule


@rule("placement", signed_zeros=True)
def draw_in_its_own_kernel(k, D: DType, a: Term):
    """cast(a) = cast(segment_set(a)) where ``a`` is a function of random draws and scalars
    alone (``drawn``: dropout's keep mask, drawn again from a seed and an offset in the
    backward). A segment_set passes its value on unchanged; nvFuser cuts the fusion there, so
    a pointwise kernel of its own draws ``a`` and writes it (a bool mask: one byte per
    element), and the kernel after it reads it. Pays where that kernel draws slowly: an outer
    reduction draws its rows one after another (the profile's ``draw_row_ns``: OPT's 4096 rows
    of 1024 take about 5x a pointwise kernel's time per element, ``draw_ps``). The cut is at the cast's
    operand, so the cheapest dtype of the drawn chain (the bool before it is widened) is what crosses it.

    Special values: exact. Both sides are the same value element for element, NaN, +-inf and
    signed zeros included, in the same dtype (no integer overflow: nothing is computed); the
    draw is made once either way (from the same seed and offset), so the numbers are nvFuser's
    own."""
    return k.Cast(D, a), k.Cast(D, k.SegmentSet(a)), [k.drawn(a)]
