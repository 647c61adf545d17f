"""Analysis rules: fill ``labels``, ``dtype``, ``floating`` and ``nonneg`` for every class.

They run to saturation before and between rewrite iterations; leaves and generic ops
(``Un``/``Bin``/``Tern``) have theirs set when the e-graph is built.
"""
from __future__ import annotations

from egglog import String, eq, f64, i64, rule, ruleset, set_

from . import dtype_codes
from .terms import WEAK_FLOAT, WEAK_INT
from .vocabulary import (CONSTRUCTORS, Abs, Add, Bin, Cast, Div, Exp, Extent, Int, Max, Maximum, Mean, Min,
                         Minimum, Mul, Neg, Num, Pow, Prod, Recip, Relu, Rsqrt, Sigmoid, Sqrt, Sub, Sum, Term,
                         Tern, Un, Var, cast_dtype, compute_dtype, dtype, float_code, floatify, floating,
                         labels, no_negative_zero, nonneg, promote, sum_dtype)

analysis = ruleset(name="analysis")

SAME_DTYPE_UNARY = tuple(CONSTRUCTORS[n] for n in dtype_codes.SAME_DTYPE_UNARY)
FLOAT_UNARY = tuple(CONSTRUCTORS[n] for n in dtype_codes.FLOAT_UNARY)
BINARY = (Add, Sub, Mul, Div, Maximum, Minimum, Pow)
REDUCE = (Sum, Max, Min, Prod, Mean)


@analysis.register
def _labels(a: Term, b: Term, e: Term, la: i64, lb: i64, le: i64, r: i64, c: i64, d: i64, f: f64,
            s: String):
    for u in SAME_DTYPE_UNARY + FLOAT_UNARY + (Neg,):
        yield rule(eq(la).to(labels(a)), u(a)).then(set_(labels(u(a))).to(la))
    for op in BINARY:
        yield rule(op(a, b), eq(la).to(labels(a)), eq(lb).to(labels(b))).then(
            set_(labels(op(a, b))).to(la | lb))
    yield rule(Cast(d, a), eq(la).to(labels(a))).then(set_(labels(Cast(d, a))).to(la))
    # generic ops are all pointwise: they vary along what their operands vary along
    yield rule(Un(s, a), eq(la).to(labels(a))).then(set_(labels(Un(s, a))).to(la))
    yield rule(Bin(s, a, b), eq(la).to(labels(a)), eq(lb).to(labels(b))).then(
        set_(labels(Bin(s, a, b))).to(la | lb))
    yield rule(Tern(s, a, b, e), eq(la).to(labels(a)), eq(lb).to(labels(b)), eq(le).to(labels(e))).then(
        set_(labels(Tern(s, a, b, e))).to(la | lb | le))
    for red in REDUCE:
        yield rule(red(r, a), eq(la).to(labels(a))).then(set_(labels(red(r, a))).to(la ^ (la & r)))
    yield rule(Var(r, c, a), eq(la).to(labels(a))).then(set_(labels(Var(r, c, a))).to(la ^ (la & r)))
    yield rule(Extent(r)).then(set_(labels(Extent(r))).to(i64(0)))
    yield rule(Int(c)).then(set_(labels(Int(c))).to(i64(0)))
    yield rule(Num(f)).then(set_(labels(Num(f))).to(i64(0)))


@analysis.register
def _dtypes(a: Term, b: Term, da: i64, db: i64, dc: i64, r: i64, c: i64, d: i64, f: f64):
    # table lookups (promote, floatify...) are bound in the query: egglog allows no lookup
    # of a non-constructor function in an action
    for u in SAME_DTYPE_UNARY:
        yield rule(u(a), eq(da).to(dtype(a))).then(set_(dtype(u(a))).to(da))
    for u in FLOAT_UNARY:
        yield rule(u(a), eq(da).to(dtype(a)), eq(dc).to(floatify(da))).then(set_(dtype(u(a))).to(dc))
    # negation is arithmetic: bf16/fp16 come out in Float
    yield rule(Neg(a), eq(da).to(dtype(a)), eq(dc).to(compute_dtype(da))).then(set_(dtype(Neg(a))).to(dc))
    for op in BINARY:
        yield rule(op(a, b), eq(da).to(dtype(a)), eq(db).to(dtype(b)), eq(dc).to(promote(da, db))).then(
            set_(dtype(op(a, b))).to(dc))
    yield rule(Cast(d, a), eq(da).to(dtype(a)), eq(dc).to(cast_dtype(d, da))).then(
        set_(dtype(Cast(d, a))).to(dc))
    for red in (Sum, Prod):
        yield rule(red(r, a), eq(da).to(dtype(a)), eq(dc).to(sum_dtype(da))).then(
            set_(dtype(red(r, a))).to(dc))
    for red in (Max, Min):
        yield rule(red(r, a), eq(da).to(dtype(a))).then(set_(dtype(red(r, a))).to(da))
    yield rule(Mean(r, a), eq(da).to(dtype(a)), eq(dc).to(floatify(da))).then(set_(dtype(Mean(r, a))).to(dc))
    yield rule(Var(r, c, a), eq(da).to(dtype(a)), eq(dc).to(floatify(da))).then(
        set_(dtype(Var(r, c, a))).to(dc))
    yield rule(Extent(r)).then(set_(dtype(Extent(r))).to(i64(WEAK_INT)))
    yield rule(Int(c)).then(set_(dtype(Int(c))).to(i64(WEAK_INT)))
    yield rule(Num(f)).then(set_(dtype(Num(f))).to(i64(WEAK_FLOAT)))
    yield rule(eq(da).to(dtype(a)), float_code(da)).then(floating(a))


@analysis.register
def _signs(a: Term, b: Term, r: i64, c: i64, d: i64):
    """``nonneg``: every element >= 0 (or NaN, for floats). Facts that hold only where nothing
    wraps around (|INT_MIN| < 0, 46341 * 46341 < 0 in Int32, sums and products of large
    non-negative integers, casts to narrower integers) are stated for floating results only;
    the others hold for every dtype."""
    for u in (Exp, Sqrt, Sigmoid):                 # floating results whatever the operand
        yield rule(u(a)).then(nonneg(u(a)))
    # rsqrt(-0.0), 1/-0.0, x/-0.0 and pow(-0.0, -1) are -inf: >= 0 only without -0.0
    yield rule(Rsqrt(a), no_negative_zero(a)).then(nonneg(Rsqrt(a)))
    yield rule(Relu(a)).then(nonneg(Relu(a)))
    yield rule(Abs(a), floating(Abs(a))).then(nonneg(Abs(a)))
    yield rule(Mul(a, a), floating(Mul(a, a))).then(nonneg(Mul(a, a)))
    for op in (Add, Mul):
        yield rule(op(a, b), nonneg(a), nonneg(b), floating(op(a, b))).then(nonneg(op(a, b)))
    yield rule(Pow(a, b), nonneg(a), no_negative_zero(a), floating(Pow(a, b))).then(nonneg(Pow(a, b)))
    for op in (Maximum, Minimum):                  # no wrap-around
        yield rule(op(a, b), nonneg(a), nonneg(b)).then(nonneg(op(a, b)))
    yield rule(Div(a, b), nonneg(a), nonneg(b), no_negative_zero(b)).then(nonneg(Div(a, b)))
    yield rule(Maximum(a, b), nonneg(a)).then(nonneg(Maximum(a, b)))
    yield rule(Maximum(a, b), nonneg(b)).then(nonneg(Maximum(a, b)))
    yield rule(Recip(a), nonneg(a), no_negative_zero(a)).then(nonneg(Recip(a)))
    yield rule(Cast(d, a), nonneg(a), floating(Cast(d, a))).then(nonneg(Cast(d, a)))
    for red in (Max, Min, Mean):
        yield rule(red(r, a), nonneg(a)).then(nonneg(red(r, a)))
    for red in (Sum, Prod):
        yield rule(red(r, a), nonneg(a), floating(red(r, a))).then(nonneg(red(r, a)))
    yield rule(Var(r, c, a)).then(nonneg(Var(r, c, a)))
    yield rule(Extent(r)).then(nonneg(Extent(r)))


@analysis.register
def _zero_signs(a: Term, b: Term, r: i64, d: i64, f: f64, n: i64):
    """``no_negative_zero``: no element is -0.0. A literal -0.0 is ``Neg(Num(0.0))``, so no
    ``Num`` is one; a sum starts at +0.0 (and its terms, all multiples of the dtype's least
    subnormal, never cancel to a nonzero tiny value); |x|, exp, sigmoid, rsqrt and x*x never
    give -0.0; a + b is -0.0 only where both are. Where a result may round a tiny negative
    value to -0.0 (a product, quotient, mean or narrowing cast), its operands must be >= 0."""
    yield rule(Num(f)).then(no_negative_zero(Num(f)))
    yield rule(Int(n)).then(no_negative_zero(Int(n)))
    yield rule(Extent(r)).then(no_negative_zero(Extent(r)))
    for u in (Abs, Exp, Sigmoid, Rsqrt):
        yield rule(u(a)).then(no_negative_zero(u(a)))
    yield rule(Mul(a, a)).then(no_negative_zero(Mul(a, a)))
    yield rule(Sum(r, a)).then(no_negative_zero(Sum(r, a)))
    yield rule(Add(a, b), no_negative_zero(a)).then(no_negative_zero(Add(a, b)))
    yield rule(Add(a, b), no_negative_zero(b)).then(no_negative_zero(Add(a, b)))
    for op in (Mul, Div):
        yield rule(op(a, b), nonneg(a), nonneg(b), no_negative_zero(a), no_negative_zero(b)).then(
            no_negative_zero(op(a, b)))
    for op in (Maximum, Minimum):
        yield rule(op(a, b), no_negative_zero(a), no_negative_zero(b)).then(no_negative_zero(op(a, b)))
    for u in (Sqrt, Relu):
        yield rule(u(a), no_negative_zero(a)).then(no_negative_zero(u(a)))
    yield rule(Recip(a), nonneg(a), no_negative_zero(a)).then(no_negative_zero(Recip(a)))
    for red in (Max, Min):
        yield rule(red(r, a), no_negative_zero(a)).then(no_negative_zero(red(r, a)))
    for red in (Mean, Prod):
        yield rule(red(r, a), nonneg(a), no_negative_zero(a)).then(no_negative_zero(red(r, a)))
    yield rule(Cast(d, a), nonneg(a), no_negative_zero(a)).then(no_negative_zero(Cast(d, a)))
