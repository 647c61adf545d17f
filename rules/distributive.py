"""Reductions distributed over factors and terms that are constant along the reduced axes.

A sum a rule makes over a new operand reduces ``k.acc(operand)``: bf16/fp16 operands cast to
Float, so that it accumulates in fp32 as the left side's sum did (nvFuser's arithmetic on
half types is in Float) and never becomes a half-type sum.

The first motivating pattern: ``sum_k(x[i,k] * b[i,j])`` with ``b`` constant along ``k``
becomes ``sum_k(x)[i] * b[i,j]``: N*K + N*J work instead of N*K*J.
"""
from .rule import rule


@rule("distributive", reassociates=True)
def sum_of_product_factor_right(k, a, b, R):
    """Sum_R(a*b) = Sum_R(a)*b when b lacks R: b is constant along R and factors out.
    Pays when b adds labels to a: the product over all of them is never formed."""
    return k.Sum(R, k.Mul(a, b)), k.Mul(k.Sum(R, k.acc(a)), b), [k.disjoint(k.labels(b), R)]


@rule("distributive", reassociates=True)
def sum_of_product_factor_left(k, a, b, R):
    """Sum_R(a*b) = a*Sum_R(b) when a lacks R (the mirror image)."""
    return k.Sum(R, k.Mul(a, b)), k.Mul(a, k.Sum(R, k.acc(b))), [k.disjoint(k.labels(a), R)]


@rule("distributive", reassociates=True)
def sum_of_product_mixed(k, a, b, R):
    """Sum_R(a*b) = Sum_C(Sum_Ra(a) * Sum_Rb(b)), where Ra (Rb) are the labels of R that only a
    (only b) varies along and C the rest of R: each factor is summed over its own axes before
    the product. Pays when both factors have axes of their own in R."""
    la, lb = k.labels(a), k.labels(b)
    ra, rb = R & k.minus(la, lb), R & k.minus(lb, la)
    return (k.Sum(R, k.Mul(a, b)), k.Sum(k.minus(R, ra | rb), k.Mul(k.Sum(ra, k.acc(a)), k.Sum(rb, k.acc(b)))),
            [k.nonzero(ra), k.nonzero(rb)])


@rule("distributive", reassociates=True)
def sum_of_quotient_by_constant(k, a, b, R):
    """Sum_R(a/b) = Sum_R(a)/b when b lacks R (floating point only: integer division
    truncates)."""
    return (k.Sum(R, k.Div(a, b)), k.Div(k.Sum(R, k.acc(a)), b),
            [k.disjoint(k.labels(b), R), k.floating(k.Div(a, b))])


@rule("distributive")
def sum_of_negation(k, a, R):
    """Sum_R(-a) = -Sum_R(a): negation is exact and commutes with the sum."""
    return k.Sum(R, k.Neg(a)), k.Neg(k.Sum(R, k.acc(a))), []


@rule("distributive")
def max_of_sum_with_constant(k, a, b, R):
    """Max_R(a+b) = Max_R(a)+b when b lacks R: adding a constant is monotone (exact in floats)."""
    return k.Max(R, k.Add(a, b)), k.Add(k.Max(R, a), b), [k.disjoint(k.labels(b), R)]


@rule("distributive")
def max_of_sum_with_constant_left(k, a, b, R):
    """Max_R(a+b) = a+Max_R(b) when a lacks R."""
    return k.Max(R, k.Add(a, b)), k.Add(a, k.Max(R, b)), [k.disjoint(k.labels(a), R)]


@rule("distributive")
def min_of_sum_with_constant(k, a, b, R):
    """Min_R(a+b) = Min_R(a)+b when b lacks R."""
    return k.Min(R, k.Add(a, b)), k.Add(k.Min(R, a), b), [k.disjoint(k.labels(b), R)]


@rule("distributive")
def max_of_difference_with_constant(k, a, b, R):
    """Max_R(a-b) = Max_R(a)-b when b lacks R (softmax's x - max(x) pattern, inverted)."""
    return k.Max(R, k.Sub(a, b)), k.Sub(k.Max(R, a), b), [k.disjoint(k.labels(b), R)]


@rule("distributive")
def min_of_difference_with_constant(k, a, b, R):
    """Min_R(a-b) = Min_R(a)-b when b lacks R."""
    return k.Min(R, k.Sub(a, b)), k.Sub(k.Min(R, a), b), [k.disjoint(k.labels(b), R)]


@rule("distributive")
def max_of_product_with_nonnegative_constant(k, a, c, R):
    """Max_R(a*c) = Max_R(a)*c when c >= 0 lacks R: scaling by c >= 0 is monotone, in
    floating point (an integer product may wrap around, which is not monotone)."""
    return (k.Max(R, k.Mul(a, c)), k.Mul(k.Max(R, a), c),
            [k.disjoint(k.labels(c), R), k.nonneg(c), k.floating(k.Mul(a, c))])


@rule("distributive")
def min_of_product_with_nonnegative_constant(k, a, c, R):
    """Min_R(a*c) = Min_R(a)*c when c >= 0 lacks R (floating point: see the max rule)."""
    return (k.Min(R, k.Mul(a, c)), k.Mul(k.Min(R, a), c),
            [k.disjoint(k.labels(c), R), k.nonneg(c), k.floating(k.Mul(a, c))])


@rule("distributive")
def sum_over_axes_it_lacks(k, x, R):
    """Sum_R(x) = Sum_{R&X}(x) * |R-X|: x is constant along the labels of R it lacks (an
    expanded broadcast), so summing along them multiplies by their extent. Pays: no
    broadcast is materialized and reduced."""
    lx = k.labels(x)
    return (k.Sum(R, x), k.Mul(k.Sum(R & lx, x), k.Extent(k.minus(R, lx))),
            [k.nonzero(k.minus(R, lx)), k.floating(x), k.full_precision(x)])


@rule("distributive")
def max_over_axes_it_lacks(k, x, R):
    """Max_R(x) = Max_{R&X}(x): the max of a constant is the constant."""
    lx = k.labels(x)
    return k.Max(R, x), k.Max(R & lx, x), [k.nonzero(k.minus(R, lx))]


@rule("distributive")
def min_over_axes_it_lacks(k, x, R):
    """Min_R(x) = Min_{R&X}(x)."""
    lx = k.labels(x)
    return k.Min(R, x), k.Min(R & lx, x), [k.nonzero(k.minus(R, lx))]


@rule("distributive")
def sum_over_nothing(k, x):
    """Sum over no labels is the identity (floating point: an integer sum changes dtype)."""
    return k.Sum(0, x), x, [k.floating(x)]


@rule("distributive")
def max_over_nothing(k, x):
    """Max over no labels is the identity."""
    return k.Max(0, x), x, []


@rule("distributive")
def min_over_nothing(k, x):
    """Min over no labels is the identity."""
    return k.Min(0, x), x, []
