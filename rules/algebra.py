"""Local algebra: commutativity, negation and absolute value, casts that round-trip."""
from .rule import rule


@rule("algebra")
def add_commutes(k, a, b):
    """a+b = b+a (bounded: each sum has two orders)."""
    return k.Add(a, b), k.Add(b, a), []


@rule("algebra")
def mul_commutes(k, a, b):
    """a*b = b*a (bounded: each product has two orders)."""
    return k.Mul(a, b), k.Mul(b, a), []


@rule("algebra")
def double_negation(k, a):
    """-(-a) = a (in a's compute dtype: negating bf16 gives Float)."""
    return k.Neg(k.Neg(a)), k.acc(a), []


@rule("algebra")
def abs_of_negation(k, a):
    """|-a| = |a| (in a's compute dtype)."""
    return k.Abs(k.Neg(a)), k.Abs(k.acc(a)), []


@rule("algebra")
def abs_of_abs(k, a):
    """||a|| = |a|."""
    return k.Abs(k.Abs(a)), k.Abs(a), []


@rule("algebra")
def abs_of_nonnegative(k, a):
    """|a| = a when a >= 0 (an exp, a square, an earlier abs...)."""
    return k.Abs(a), a, [k.nonneg(a)]


@rule("algebra")
def cast_to_own_dtype(k, x, D):
    """cast(x, dtype(x)) = x."""
    return k.Cast(D, x), x, [k.same(k.dtype(x), D)]


@rule("algebra")
def cast_round_trip(k, x, D, E):
    """cast(cast(x, E), D) = x when D is x's dtype and E holds every value of it exactly
    (bf16 -> fp32 -> bf16). Pays: no conversion kernels, and half-size intermediates."""
    return k.Cast(D, k.Cast(E, x)), x, [k.same(k.dtype(x), D), k.widens(D, E)]


@rule("algebra")
def negation_out_of_product(k, a, b):
    """(-a)*b = -(a*b): lets a negation reach a reduction it can cross."""
    return k.Mul(k.Neg(a), b), k.Neg(k.Mul(a, b)), []
