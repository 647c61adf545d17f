"""Reductions distributed over factors and terms that are constant along the reduced axes.

A sum a rule makes over a new operand reduces ``k.acc(operand)``: bf16/fp16 operands cast to
Float, so that it accumulates in fp32 as the left side's sum did (nvFuser's arithmetic on
half types is in Float) and never becomes a half-type sum.

The first motivating pattern: ``sum_k(x[i,k] * b[i,j])`` with ``b`` constant along ``k``
becomes ``sum_k(x)[i] * b[i,j]``: N*K + N*J work instead of N*K*J.

Each docstring ends with what the rule assumes about special values (NaN, +-inf, signed zero,
integer overflow); see :mod:`eqsat.rules.rule`. The definition eqsat emits keeps symbolic
extents symbolic, so each rule holds at every extent, 0 included, or says where it does not:
over an empty axis a sum is 0, a product 1, a max -inf (an integer dtype's least value) and a
min +inf (its greatest), whatever the operand holds, where the right side's factor or term
outside the reduction is still read (0 * NaN is NaN).
"""

from .rule import Axes, Term, rule


@rule(
    "distributive",
    reassociates=True,
    special_values="b = +-inf where a has a 0 (0*inf = NaN on the left only), b = NaN or +-inf "
    "over an empty R (0 on the left, 0*b = NaN on the right), or a product "
    "overflows on one side only",
)
def sum_of_product_factor_right(k, a: Term, b: Term, R: Axes):
    """Sum_R(a*b) = Sum_R(a)*b when b lacks R: b is constant along R and factors out.
    Pays when b adds labels to a: the product over all of them is never formed.

    Special values: NaN in a or b: NaN on both sides where R is not empty; over an empty R
    the left side is 0 and the right 0*b, NaN where b is NaN or +-inf (flagged). inf: b =
    +-inf where a has a 0 gives NaN on the left (0*inf) and +-inf on the right (flagged).
    Signed zero: not kept (a sum of -0.0 products starts at +0.0). Overflow: a product or
    partial sum may overflow on one side only (reassociates). Integers are left alone: an
    Int32 product wraps where the right side's Int64 sum does not."""
    return (
        k.Sum(R, k.Mul(a, b)),
        k.Mul(k.Sum(R, k.acc(a)), b),
        [k.constant_along(b, R), k.floating(a), k.floating(b)],
    )


@rule(
    "distributive",
    reassociates=True,
    special_values="a = +-inf where b has a 0 (0*inf = NaN on the left only), a = NaN or +-inf "
    "over an empty R (0 on the left, a*0 = NaN on the right), or a product "
    "overflows on one side only",
)
def sum_of_product_factor_left(k, a: Term, b: Term, R: Axes):
    """Sum_R(a*b) = a*Sum_R(b) when a lacks R (the mirror image).

    Special values: as the right-hand version: NaN alike where R is not empty (over an empty
    R, 0 on the left and a*0 on the right, NaN where a is NaN or +-inf: flagged); a = +-inf
    where b has a 0 gives NaN on the left only (flagged); signed zero not kept; overflow on
    one side only (reassociates); integers left alone."""
    return (
        k.Sum(R, k.Mul(a, b)),
        k.Mul(a, k.Sum(R, k.acc(b))),
        [k.constant_along(a, R), k.floating(a), k.floating(b)],
    )


@rule(
    "distributive",
    reassociates=True,
    special_values="an inf in one factor where the other has a 0 (0*inf = NaN on the left only), "
    "an empty Ra (Rb) where b (a) has NaN or +-inf (0 on the left, 0*Sum(b) = NaN "
    "on the right), or a product overflows on one side only",
)
def sum_of_product_mixed(k, a: Term, b: Term, R: Axes):
    """Sum_R(a*b) = Sum_C(Sum_Ra(a) * Sum_Rb(b)), where Ra (Rb) are the labels of R that only a
    (only b) varies along and C the rest of R: each factor is summed over its own axes before
    the product. Pays when both factors have axes of their own in R.

    Special values: NaN alike where Ra and Rb are not empty; where Ra is empty the left side
    is 0 and the right 0*Sum_Rb(b), NaN where b has NaN or +-inf (flagged; Rb alike). inf:
    a = inf and b = [0, 1] give NaN on the left, inf on the right (flagged). Signed zero not
    kept. Overflow: on one side only (reassociates). Integers are left alone (an Int32
    product wraps, the Int64 sums do not)."""
    ra = k.varying_axes(a, k.constant_axes(b, R))  # the labels of R only a varies along
    rb = k.varying_axes(b, k.constant_axes(a, R))  # the labels of R only b varies along
    return (
        k.Sum(R, k.Mul(a, b)),
        k.Sum(k.minus(R, ra | rb), k.Mul(k.Sum(ra, k.acc(a)), k.Sum(rb, k.acc(b)))),
        [k.has_axes(ra), k.has_axes(rb), k.floating(a), k.floating(b)],
    )


@rule(
    "distributive",
    reassociates=True,
    special_values="b = 0 (a/0 is +inf, -inf or NaN per element, Sum(a)/0 one of them), "
    "b = +-inf (a/inf is 0 where Sum(a) may be inf), or b = 0 or NaN over an "
    "empty R (0 on the left, 0/b = NaN on the right)",
)
def sum_of_quotient_by_constant(k, a: Term, b: Term, R: Axes):
    """Sum_R(a/b) = Sum_R(a)/b when b lacks R (floating point only: integer division
    truncates).

    Special values: NaN alike where R is not empty (over an empty R, 0 on the left and 0/b
    on the right, NaN where b is 0 or NaN: flagged). inf: b = 0 turns a = [1, -1] into inf +
    -inf = NaN on the left and 0/0 = NaN on the right, but a = [1, 2] into +inf on both and
    a = [1, -2] into NaN vs -inf (flagged). Signed zero not kept. Overflow: a quotient or
    partial sum may overflow on one side only (reassociates). Integers: a and a/b floating
    only (an Int64 sum could wrap)."""
    return (
        k.Sum(R, k.Div(a, b)),
        k.Div(k.Sum(R, k.acc(a)), b),
        [k.constant_along(b, R), k.floating(k.Div(a, b)), k.floating(a)],
    )


@rule("distributive")
def sum_of_negation(k, a: Term, R: Axes):
    """Sum_R(-a) = -Sum_R(a): negation is exact and commutes with the sum.

    Special values: exact on NaN and +-inf: round-to-nearest is symmetric in sign, so every
    partial sum, an overflow to inf included, is the negation of the other side's. Signed
    zero: not kept (a sum starts at +0.0: Sum([-0.0]) is +0.0, -Sum([0.0]) is -0.0). Integer
    overflow: only where negating and summing wrap alike (the same dtype: Int64, or floats);
    an Int32 -INT_MIN wraps before the Int64 sum, which -Sum(a) does not. Over an empty R:
    0 on both sides (+0.0 and -0.0)."""
    return (
        k.Sum(R, k.Neg(a)),
        k.Neg(k.Sum(R, k.acc(a))),
        [k.has_dtype(k.Neg(a), k.dtype(k.Sum(R, k.Neg(a))))],
    )


@rule(
    "distributive",
    special_values="b = +inf where a has -inf: a+b is NaN there, which the max "
    "carries, where Max(a)+b is +inf; over an empty R, -inf on the "
    "left and -inf+b on the right, NaN where b is NaN or +inf",
)
def max_of_sum_with_constant(k, a: Term, b: Term, R: Axes):
    """Max_R(a+b) = Max_R(a)+b when b lacks R: adding a constant is monotone.

    Special values: NaN in a or b: NaN on both sides where R is not empty; over an empty R
    the left side is -inf and the right -inf+b, NaN where b is NaN or +inf (flagged). inf:
    a = [-inf, 1], b = +inf gives max(NaN, inf) = NaN on the left and 1+inf = inf on the
    right (flagged); with b finite it is exact, overflow included (a+b rounds monotonically).
    Signed zero: not kept (the max of -0.0 and +0.0 is either). Integer overflow: floating
    point only: rounding is monotone, wrapping integer arithmetic is not (INT_MAX + 1 is
    INT_MIN); and a floating, not only a+b: an integer (or bool) a's max over an empty R is
    its dtype's least value, a finite number, where the left side's is -inf."""
    return (
        k.Max(R, k.Add(a, b)),
        k.Add(k.Max(R, a), b),
        [k.constant_along(b, R), k.floating(k.Add(a, b)), k.floating(a)],
    )


@rule(
    "distributive",
    special_values="a = +inf where b has -inf: a+b is NaN there, which the max "
    "carries, where a+Max(b) is +inf; over an empty R, -inf on the "
    "left and a-inf on the right, NaN where a is NaN or +inf",
)
def max_of_sum_with_constant_left(k, a: Term, b: Term, R: Axes):
    """Max_R(a+b) = a+Max_R(b) when a lacks R.

    Special values: as the right-hand version: NaN alike where R is not empty (over an empty
    R, -inf on the left and a+-inf on the right, NaN where a is NaN or +inf: flagged); a =
    +inf where b has -inf gives NaN on the left, inf on the right (flagged); signed zero not
    kept; floating point only (integer overflow wraps, which is not monotone), b included (an
    integer b's max over an empty R is finite)."""
    return (
        k.Max(R, k.Add(a, b)),
        k.Add(a, k.Max(R, b)),
        [k.constant_along(a, R), k.floating(k.Add(a, b)), k.floating(b)],
    )


@rule(
    "distributive",
    special_values="b = -inf where a has +inf: a+b is NaN there, which the min "
    "carries, where Min(a)+b is -inf; over an empty R, +inf on the "
    "left and inf+b on the right, NaN where b is NaN or -inf",
)
def min_of_sum_with_constant(k, a: Term, b: Term, R: Axes):
    """Min_R(a+b) = Min_R(a)+b when b lacks R.

    Special values: NaN alike where R is not empty (over an empty R, +inf on the left and
    inf+b on the right, NaN where b is NaN or -inf: flagged); a = [inf, 1], b = -inf gives
    NaN on the left, -inf on the right (flagged); exact for finite b, overflow included.
    Signed zero not kept. Floating point only (integer overflow wraps, which is not
    monotone), a included (an integer a's min over an empty R is finite)."""
    return (
        k.Min(R, k.Add(a, b)),
        k.Add(k.Min(R, a), b),
        [k.constant_along(b, R), k.floating(k.Add(a, b)), k.floating(a)],
    )


@rule(
    "distributive",
    special_values="b = -inf where a has -inf: a-b is NaN there, which the max "
    "carries, where Max(a)-b is +inf; over an empty R, -inf on the "
    "left and -inf-b on the right, NaN where b is NaN or -inf",
)
def max_of_difference_with_constant(k, a: Term, b: Term, R: Axes):
    """Max_R(a-b) = Max_R(a)-b when b lacks R (softmax's x - max(x) pattern, inverted).

    Special values: NaN alike where R is not empty (over an empty R, -inf on the left and
    -inf-b on the right, NaN where b is NaN or -inf: flagged); a = [-inf, 1], b = -inf gives
    NaN on the left, +inf on the right (flagged); exact for finite b, overflow included.
    Signed zero not kept. Floating point only (integer overflow wraps, which is not
    monotone), a included (an integer a's max over an empty R is finite)."""
    return (
        k.Max(R, k.Sub(a, b)),
        k.Sub(k.Max(R, a), b),
        [k.constant_along(b, R), k.floating(k.Sub(a, b)), k.floating(a)],
    )


@rule(
    "distributive",
    special_values="b = +inf where a has +inf: a-b is NaN there, which the min "
    "carries, where Min(a)-b is -inf; over an empty R, +inf on the "
    "left and inf-b on the right, NaN where b is NaN or +inf",
)
def min_of_difference_with_constant(k, a: Term, b: Term, R: Axes):
    """Min_R(a-b) = Min_R(a)-b when b lacks R.

    Special values: NaN alike where R is not empty (over an empty R, +inf on the left and
    inf-b on the right, NaN where b is NaN or +inf: flagged); a = [inf, 1], b = +inf gives
    NaN on the left, -inf on the right (flagged); exact for finite b, overflow included.
    Signed zero not kept. Floating point only (integer overflow wraps, which is not
    monotone), a included (an integer a's min over an empty R is finite)."""
    return (
        k.Min(R, k.Sub(a, b)),
        k.Sub(k.Min(R, a), b),
        [k.constant_along(b, R), k.floating(k.Sub(a, b)), k.floating(a)],
    )


@rule(
    "distributive",
    special_values="c = 0 where a has +-inf (0*inf = NaN on the left, Max(a)*0 "
    "= 0), c = +inf where a has a 0, or c = 0 or NaN over an empty "
    "R (-inf on the left, -inf*c = NaN on the right)",
)
def max_of_product_with_nonnegative_constant(k, a: Term, c: Term, R: Axes):
    """Max_R(a*c) = Max_R(a)*c when c >= 0 lacks R: scaling by c >= 0 is monotone, in
    floating point (an integer product may wrap around, which is not monotone).

    Special values: NaN in a or c: NaN on both sides where R is not empty (over an empty R,
    -inf on the left and -inf*c on the right, NaN where c is 0 or NaN: flagged). inf: c =
    exp(-inf) = 0 and a = [-inf, 1] give max(NaN, 0) = NaN on the left and 1*0 = 0 on the
    right; c = +inf and a = [0, 1] give NaN vs inf (flagged); exact for finite c > 0,
    overflow included (a*c rounds monotonically). Signed zero not kept. Integer overflow:
    floating point only, a included (an integer a's max over an empty R is its dtype's least
    value, finite, where the left side's is -inf). c >= 0 is the sign analysis' fact, which
    holds at every extent (a max of values >= 0 over an axis that may be empty is not)."""
    return (
        k.Max(R, k.Mul(a, c)),
        k.Mul(k.Max(R, a), c),
        [k.constant_along(c, R), k.nonneg(c), k.floating(k.Mul(a, c)), k.floating(a)],
    )


@rule(
    "distributive",
    special_values="c = 0 where a has +-inf (0*inf = NaN on the left, Min(a)*0 "
    "= 0), c = +inf where a has a 0, or c = 0 or NaN over an empty "
    "R (+inf on the left, inf*c = NaN on the right)",
)
def min_of_product_with_nonnegative_constant(k, a: Term, c: Term, R: Axes):
    """Min_R(a*c) = Min_R(a)*c when c >= 0 lacks R (floating point: see the max rule).

    Special values: as the max rule: NaN alike where R is not empty (over an empty R, +inf
    on the left and inf*c on the right, NaN where c is 0 or NaN: flagged); c = 0 with a
    +-inf, or c = +inf with a 0, give NaN on the left only (flagged); exact for finite c > 0;
    signed zero not kept; floating point only, a included (integer overflow; an integer a's
    min over an empty R is finite)."""
    return (
        k.Min(R, k.Mul(a, c)),
        k.Mul(k.Min(R, a), c),
        [k.constant_along(c, R), k.nonneg(c), k.floating(k.Mul(a, c)), k.floating(a)],
    )


@rule(
    "distributive",
    special_values="c = +-0.0 (a/0 is +-inf, or NaN for a = 0, on the left "
    "element by element; -0.0 reverses the order), c = +inf "
    "where a has +-inf, or c = +inf, -0.0 or NaN over an empty R "
    "(-inf on the left, -inf/c on the right)",
)
def max_of_quotient_by_nonnegative_constant(k, a: Term, c: Term, R: Axes):
    """Max_R(a/c) = Max_R(a)/c when c >= 0 lacks R: dividing by c > 0 is monotone, in floating
    point (rounding is monotone). Pays as the product rule does: a scale applied as y /
    scale_inv leaves an amax (with abs-of-quotient: max_R|y/c| = max_R|y| / |c|).

    Special values: NaN in a or c: NaN on both sides where R is not empty (over an empty R,
    -inf on the left and -inf/c on the right: NaN where c is NaN or +inf, +inf where c is
    -0.0: flagged). inf: c = +0.0 and a = [0, 1] give max(NaN, inf) = NaN on the left and
    1/0 = inf on the right; c = -0.0 (which c >= 0 admits) reverses the order (a = [1, -1]:
    inf vs -inf); c = +inf and a = [-inf, 1] give NaN vs 1/inf = 0 (flagged); exact for
    finite c > 0, overflow and underflow included (a/c rounds monotonically). Signed zero:
    not kept. Integer overflow: floating point only (integer division truncates, and by 0 it
    is undefined)."""
    return (
        k.Max(R, k.Div(a, c)),
        k.Div(k.Max(R, a), c),
        [k.constant_along(c, R), k.nonneg(c), k.floating(a), k.floating(c)],
    )


@rule(
    "distributive",
    special_values="c = +-0.0 (a/0 is +-inf, or NaN for a = 0, on the left "
    "element by element; -0.0 reverses the order), c = +inf "
    "where a has +-inf, or c = +inf, -0.0 or NaN over an empty R "
    "(+inf on the left, inf/c on the right)",
)
def min_of_quotient_by_nonnegative_constant(k, a: Term, c: Term, R: Axes):
    """Min_R(a/c) = Min_R(a)/c when c >= 0 lacks R (floating point: see the max rule).

    Special values: as the max rule: NaN alike where R is not empty (over an empty R, +inf
    on the left and inf/c on the right, which c = NaN, +inf or -0.0 changes: flagged); c =
    +-0.0 where a has a 0 or both signs, or c = +inf where a has +-inf, differ (flagged);
    exact for finite c > 0, overflow and underflow included; signed zero not kept; integer
    overflow and truncation: floating point only."""
    return (
        k.Min(R, k.Div(a, c)),
        k.Div(k.Min(R, a), c),
        [k.constant_along(c, R), k.nonneg(c), k.floating(a), k.floating(c)],
    )


@rule(
    "distributive",
    special_values="n additions and one multiplication by n may round to "
    "different sides of overflow (inf vs the largest float), "
    "and at n = 0 a NaN or +-inf x sums to 0 where x*0 is NaN",
)
def sum_over_axes_it_lacks(k, x: Term, R: Axes):
    """Sum_R(x) = Sum_{R&X}(x) * |R-X|: x is constant along the labels of R it lacks (an
    expanded broadcast), so summing along them multiplies by their extent. Pays: no
    broadcast is materialized and reduced.

    Special values: NaN and +-inf alike where |R-X| = n >= 1 (n copies of inf sum to inf,
    inf*n is inf); at n = 0 the left side is 0 and the right Sum(x)*0, NaN where x has NaN
    or +-inf (flagged). Signed zero: not kept (n copies of -0.0 sum to +0.0, -0.0*n is
    -0.0). Overflow: both overflow near the same n*x, but the n roundings of the sum and the
    one of the product may fall on different sides of the largest float (flagged). Floating
    point only (an integer sum changes dtype)."""
    lacked = k.constant_axes(x, R)
    return (
        k.Sum(R, x),
        k.Mul(k.Sum(k.varying_axes(x, R), x), k.Extent(lacked)),
        [k.has_axes(lacked), k.floating(x), k.full_precision(x)],
    )


@rule(
    "distributive",
    reassociates=True,
    special_values="Sum(a) and b*|R| may overflow, or cancel, where the sum of the differences "
    "does not; over an empty R, 0 on the left and 0 - b*0, NaN where b is NaN or "
    "+-inf",
)
def sum_of_difference_with_constant(k, a: Term, b: Term, R: Axes):
    """Sum_R(a - b) = Sum_R(a) - b*|R| when b lacks R: b is subtracted once per element of R.
    Pays where a reduction over R already reads a (the sum joins it) and a - b is made only
    to be summed: label smoothing's sum_V(-log_softmax(x)) = |V|*lse - sum_V(x), whose sum_V(x)
    shares the kernel of the logsumexp's max; and the one-hot's sum of cross-entropy's
    backward, sum_V(onehot - eps/V*c), leaves the one-hot alone (sum-of-one-hot).

    Special values: NaN alike where R is not empty; +-inf: b = +inf gives -inf on both sides
    (NaN where a has +inf, on both). Over an empty R the left side is 0 and the right 0 -
    b*0, NaN where b is NaN or +-inf (flagged). Overflow: Sum_R(a) or b*|R| may overflow, and
    they cancel in one subtraction, where the differences summed do not (flagged;
    reassociates). Signed zero: not kept. Floating point, full precision only (a half-type
    sum would round differently)."""
    return (
        k.Sum(R, k.Sub(a, b)),
        k.Sub(k.Sum(R, k.acc(a)), k.Mul(b, k.Extent(R))),
        [k.has_axes(R), k.constant_along(b, R), k.floating(a), k.floating(b), k.full_precision(k.Sub(a, b))],
    )


@rule("distributive", signed_zeros=True)
def max_over_axes_it_lacks(k, x: Term, R: Axes):
    """Max_R(x) = Max_{R&X}(x): the max of a constant is the constant, when the labels of R
    that x lacks have static extents (>= 1): over an empty axis the max is -inf (nvFuser's
    init), and the definition emitted keeps symbolic extents symbolic, so they may be 0.

    Special values: exact: the max of copies of one value is that value, NaN, +-inf and a
    signed zero included; no arithmetic, so no overflow, in any dtype."""
    lacked = k.constant_axes(x, R)
    return k.Max(R, x), k.Max(k.varying_axes(x, R), x), [k.has_axes(lacked), k.never_empty(lacked)]


@rule("distributive", signed_zeros=True)
def min_over_axes_it_lacks(k, x: Term, R: Axes):
    """Min_R(x) = Min_{R&X}(x), when the labels of R that x lacks have static extents (an
    empty axis gives +inf: see the max rule).

    Special values: exact, as the max rule (NaN, +-inf, a signed zero; no arithmetic, no
    overflow)."""
    lacked = k.constant_axes(x, R)
    return k.Min(R, x), k.Min(k.varying_axes(x, R), x), [k.has_axes(lacked), k.never_empty(lacked)]


@rule("distributive")
def sum_over_nothing(k, x: Term):
    """Sum over no labels is the identity (floating point: an integer sum changes dtype).

    Special values: exact on NaN and +-inf (nothing is added). Signed zero: not kept (a sum
    starts at +0.0: over a unit axis, -0.0 sums to +0.0). No overflow: no arithmetic;
    integers are left alone (their sum is Int64)."""
    return k.Sum(0, x), x, [k.floating(x)]


@rule("distributive", signed_zeros=True)
def max_over_nothing(k, x: Term):
    """Max over no labels is the identity.

    Special values: exact (NaN, +-inf and a signed zero kept; no arithmetic, no overflow)."""
    return k.Max(0, x), x, []


@rule("distributive", signed_zeros=True)
def min_over_nothing(k, x: Term):
    """Min over no labels is the identity.

    Special values: exact (NaN, +-inf and a signed zero kept; no arithmetic, no overflow)."""
    return k.Min(0, x), x, []
