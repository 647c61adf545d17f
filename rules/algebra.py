"""Local algebra: commutativity, negation and absolute value, casts that round-trip.

Each docstring ends with what the rule assumes about special values (NaN, +-inf, signed zero,
integer overflow); see :mod:`eqsat.rules.rule`."""

from .rule import DType, Term, rule


@rule("algebra", signed_zeros=True)
def add_commutes(k, a: Term, b: Term):
    """a+b = b+a (bounded: each sum has two orders).

    Special values: exact. IEEE addition commutes for NaN, +-inf and signed zeros
    (-0.0 + 0.0 is +0.0 either way); wrapping integer addition commutes, so overflow is the
    same on both sides."""
    return k.Add(a, b), k.Add(b, a), []


@rule("algebra", signed_zeros=True)
def mul_commutes(k, a: Term, b: Term):
    """a*b = b*a (bounded: each product has two orders).

    Special values: exact. IEEE multiplication commutes for NaN, +-inf (0*inf is NaN either
    way) and signed zeros; wrapping integer multiplication commutes (overflow alike)."""
    return k.Mul(a, b), k.Mul(b, a), []


@rule("algebra", signed_zeros=True)
def double_negation(k, a: Term):
    """-(-a) = a (in a's compute dtype: negating bf16 gives Float).

    Special values: exact. Negation flips the sign bit only: NaN stays NaN, +-inf and a
    signed zero come back as they were; integer overflow: -(-INT_MIN) wraps back to INT_MIN."""
    return k.Neg(k.Neg(a)), k.acc(a), []


@rule("algebra", signed_zeros=True)
def abs_of_negation(k, a: Term):
    """|-a| = |a| (in a's compute dtype).

    Special values: exact. NaN stays NaN, +-inf gives +inf and a signed zero gives +0.0 on
    both sides; integer overflow: -INT_MIN wraps to INT_MIN, and |INT_MIN| is INT_MIN on both
    sides."""
    return k.Abs(k.Neg(a)), k.Abs(k.acc(a)), []


@rule("algebra", signed_zeros=True)
def abs_of_abs(k, a: Term):
    """||a|| = |a|.

    Special values: exact (NaN, +inf, a +0.0 zero and an integer |INT_MIN| = INT_MIN are their
    own absolute values); no overflow beyond what |a| already does."""
    return k.Abs(k.Abs(a)), k.Abs(a), []


@rule("algebra", signed_zeros=True)
def abs_of_product(k, a: Term, b: Term):
    """|a*b| = |a|*|b| for floating a and b, where b is constant along every label of a (a
    scale: a scalar, or a factor along other axes): the magnitude of an IEEE product is the
    product of the magnitudes, rounded alike (round-to-nearest is symmetric in sign). Pays: a
    scale leaves an amax, max_R|y*s| = max_R(|y|*|s|) = max_R|y|*|s|
    (max-of-product-with-nonnegative-constant: |s| >= 0 by the sign analysis; abs-of-
    nonnegative then drops the |.| where the analysis knows s >= 0), and max_k|x[i,k]*b[j]|
    never forms the product over i, k, j. Bounded to such b: where b varies along a's labels
    (a norm's weight w[h] in |x*rstd*w|), |a|*|b| is one more op over the same space, and the
    max over rows it lets w leave (max_rows|x*rstd| * |w|) only trades the norm kernel's
    inner max for an inner-outer one, by a margin within the cost model's noise.

    Special values: exact: NaN in a or b gives NaN on both sides; +-inf gives +inf, and
    0*inf NaN, on both; a zero product is +0.0 on both sides (|-0.0| and |a|*|b| of zeros
    are +0.0); overflow and underflow happen at the same magnitude on both. Integer overflow:
    floating operands only (an integer |INT_MIN| is INT_MIN, and a wrapped product's sign is
    not the product of the signs)."""
    return (
        k.Abs(k.Mul(a, b)),
        k.Mul(k.Abs(a), k.Abs(b)),
        [k.constant_along(b, k.labels(a)), k.floating(a), k.floating(b)],
    )


@rule("algebra", signed_zeros=True)
def abs_of_quotient(k, a: Term, b: Term):
    """|a/b| = |a|/|b| for floating a and b, where b is constant along every label of a (a
    scale applied as a division, y / scale_inv; bounded as abs-of-product is): IEEE division,
    like multiplication, rounds the magnitude alike whatever the signs.

    Special values: exact: NaN alike; a/0 is +-inf and 0/0 NaN on the left, |a|/+0.0 is
    +inf and 0/0 NaN on the right (|a/-0.0| = +inf too); inf/inf is NaN on both; a zero
    quotient is +0.0 on both sides; overflow and underflow at the same magnitude. Integer
    overflow: floating operands only (integer division truncates, and INT_MIN / -1 wraps)."""
    return (
        k.Abs(k.Div(a, b)),
        k.Div(k.Abs(a), k.Abs(b)),
        [k.constant_along(b, k.labels(a)), k.floating(a), k.floating(b)],
    )


@rule("algebra")
def abs_of_nonnegative(k, a: Term):
    """|a| = a when a >= 0 (an exp, a square, an earlier abs...).

    Special values: NaN: kept (the sign analysis admits NaN: |NaN| is NaN). inf: exact: the
    analysis takes rsqrt(x), 1/x, y/x and pow(x, y) for >= 0 only where x has no -0.0
    (rsqrt(-0.0) is -inf: the ``no_negative_zero`` facts). Signed zero: not kept: a >= 0
    admits -0.0 (relu(-0.0) and sqrt(-0.0) are -0.0) and |-0.0| is +0.0. Integer overflow:
    the analysis states a >= 0 for integers only where nothing wraps (|INT_MIN| < 0)."""
    return k.Abs(a), a, [k.nonneg(a)]


@rule("algebra", signed_zeros=True)
def cast_to_own_dtype(k, x: Term, D: DType):
    """cast(x, dtype(x)) = x.

    Special values: exact: a cast to the value's own dtype changes no bit (NaN, +-inf, a
    signed zero, integers near their limits: no overflow)."""
    return k.Cast(D, x), x, [k.has_dtype(x, D)]


@rule("algebra", signed_zeros=True)
def cast_round_trip(k, x: Term, D: DType, E: DType):
    """cast(cast(x, E), D) = x when D is x's dtype and E holds every value of it exactly
    (bf16 -> fp32 -> bf16). Pays: no conversion kernels, and half-size intermediates.

    Special values: exact: E holds every value of D, NaN (its payload aside), +-inf and a
    signed zero included; an integer dtype widens only to one that holds its whole range (no
    overflow)."""
    return k.Cast(D, k.Cast(E, x)), x, [k.has_dtype(x, D), k.widens(D, E)]


@rule("algebra", signed_zeros=True)
def cast_after_exact_widening(k, x: Term, E: DType, F: DType):
    """cast(cast(x, E), F) = cast(x, F) when x's dtype D widens exactly to E, E to F, and D
    to F (bf16 -> fp32 -> fp64 is bf16 -> fp64): every cast of the chain keeps x's value, so
    both sides hold the value x in F. With cast-round-trip it removes a longer round trip
    (bf16 -> fp32 -> fp64 -> bf16 is x). Only exact widenings (``k.widens``) are collapsed:
    a rounding cast in the chain (fp32 -> bf16 -> fp64), or an int32 -> fp32 step, is not.

    Special values: exact: each cast holds NaN, +-inf and a signed zero as they were; integer
    widenings hold the whole range of the narrower type (no overflow)."""
    return (
        k.Cast(F, k.Cast(E, x)),
        k.Cast(F, x),
        [k.widens(k.dtype(x), E), k.widens(E, F), k.widens(k.dtype(x), F)],
    )


@rule("algebra", signed_zeros=True)
def negation_out_of_product(k, a: Term, b: Term):
    """(-a)*b = -(a*b): lets a negation reach a reduction it can cross. For floating products
    of full-precision operands: a bf16/fp16 product rounds (and fp16 overflows past 65504)
    where (-a)*b, computed in Float, does not.

    Special values: exact: negation flips only the sign bit, and IEEE multiplication is
    symmetric in sign: NaN, +-inf (0*inf is NaN on both sides) and signed zeros agree.
    Integer overflow: a is floating (an Int32 -a wraps at INT_MIN before a wider product,
    and an integer 0 has no sign to flip: (-0)*-1.0 is -0.0, -(0*-1.0) is +0.0)."""
    return (k.Mul(k.Neg(a), b), k.Neg(k.Mul(a, b)), [k.floating(a), k.full_precision(a), k.full_precision(b)])
