"""The e-graph's vocabulary in egglog: the ``Term`` sort, its constructors, the per-class
analyses, and the dtype tables they read.

Constructors are named as in :mod:`eqsat.terms`. Analyses are egglog functions filled by the
rules of :mod:`eqsat.analysis`: ``labels`` (the i64 bit mask of axes a class varies along),
``dtype`` (a dtype code), and the relations ``floating``, ``nonneg`` and ``no_negative_zero``.
"""
from __future__ import annotations

from egglog import Expr, StringLike, f64Like, function, i64, i64Like, relation

from eqsat.ir import dtypes as dt

from .dtype_codes import WEAK, compute_code, exact_widenings, floatify_code, has_torch, promote_code, sum_code
from .terms import DTYPES, SIGNATURES, WEAK_FLOAT, scalar_code


class Term(Expr, egg_sort="Term"):
    """A named-axis tensor or scalar value."""


@function(egg_fn="Leaf")
def Leaf(value: i64Like) -> Term: ...


@function(egg_fn="Num")
def Num(value: f64Like) -> Term: ...


@function(egg_fn="Int")
def Int(value: i64Like) -> Term: ...


@function(egg_fn="Extent")
def Extent(labels: i64Like) -> Term: ...


def _unary(name):
    def f(a: Term) -> Term: ...
    f.__name__ = name
    return function(egg_fn=name)(f)


def _binary(name):
    def f(a: Term, b: Term) -> Term: ...
    f.__name__ = name
    return function(egg_fn=name)(f)


def _reduction(name):
    def f(labels: i64Like, a: Term) -> Term: ...
    f.__name__ = name
    return function(egg_fn=name)(f)


Neg, Abs, Exp, Log, Sqrt, Rsqrt, Recip, Tanh, Sigmoid, Relu = (
    _unary(n) for n in "Neg Abs Exp Log Sqrt Rsqrt Recip Tanh Sigmoid Relu".split())
Add, Sub, Mul, Div, Maximum, Minimum, Pow = (
    _binary(n) for n in "Add Sub Mul Div Maximum Minimum Pow".split())
Sum, Max, Min, Prod, Mean = (_reduction(n) for n in "Sum Max Min Prod Mean".split())


@function(egg_fn="Un")
def Un(op: StringLike, a: Term) -> Term: ...


@function(egg_fn="Bin")
def Bin(op: StringLike, a: Term, b: Term) -> Term: ...


@function(egg_fn="Tern")
def Tern(op: StringLike, a: Term, b: Term, c: Term) -> Term: ...


@function(egg_fn="Cast")
def Cast(dtype: i64Like, a: Term) -> Term: ...


@function(egg_fn="Var")
def Var(labels: i64Like, correction: i64Like, a: Term) -> Term: ...


# -- analyses -------------------------------------------------------------------------------------
@function(egg_fn="labels", merge=lambda old, new: old | new)
def labels(a: Term) -> i64: ...


@function(egg_fn="dtype", merge=lambda old, new: old)
def dtype(a: Term) -> i64: ...


@function(egg_fn="nonempty_labels", merge=lambda old, new: old & new)
def nonempty_labels() -> i64:
    """The labels whose extent the definition fixes at 1 or more (a static extent): a rule
    that holds only on non-empty axes may assume it for these alone, since the definition it
    emits keeps the other extents symbolic, so they may be 0 at run time."""


floating = relation("floating", Term, egg_fn="floating")     # the class's dtype is a floating-point one
nonneg = relation("nonneg", Term, egg_fn="nonneg")         # every element of the class is >= 0
# no element of the class is -0.0 (which is >= 0, yet 1/-0.0 and rsqrt(-0.0) are -inf)
no_negative_zero = relation("no_negative_zero", Term, egg_fn="no_negative_zero")


# dtype tables, filled per e-graph with the codes that occur
@function(egg_fn="promote", merge=lambda old, new: old)
def promote(a: i64Like, b: i64Like) -> i64: ...


@function(egg_fn="floatify", merge=lambda old, new: old)
def floatify(a: i64Like) -> i64: ...


@function(egg_fn="compute_dtype", merge=lambda old, new: old)
def compute_dtype(a: i64Like) -> i64: ...


@function(egg_fn="sum_dtype", merge=lambda old, new: old)
def sum_dtype(a: i64Like) -> i64: ...


@function(egg_fn="cast_dtype", merge=lambda old, new: old)
def cast_dtype(to: i64Like, src: i64Like) -> i64: ...


float_code = relation("float_code", i64, egg_fn="float_code")
widens = relation("widens", i64, i64, egg_fn="widens")     # cast narrow -> wide -> narrow is exact


CONSTRUCTORS = {
    "Leaf": Leaf, "Num": Num, "Int": Int, "Extent": Extent, "Neg": Neg, "Abs": Abs, "Exp": Exp,
    "Log": Log, "Sqrt": Sqrt, "Rsqrt": Rsqrt, "Recip": Recip, "Tanh": Tanh, "Sigmoid": Sigmoid,
    "Relu": Relu, "Un": Un, "Add": Add, "Sub": Sub, "Mul": Mul, "Div": Div, "Maximum": Maximum,
    "Minimum": Minimum, "Pow": Pow, "Bin": Bin, "Tern": Tern, "Cast": Cast, "Sum": Sum, "Max": Max,
    "Min": Min, "Prod": Prod, "Mean": Mean, "Var": Var,
}
assert set(CONSTRUCTORS) == set(SIGNATURES)


def dtype_tables(codes: set[int]) -> str:
    """The dtype tables (promote, floatify, ...) for the codes that occur and those they lead
    to, as egglog commands (the functions are in :mod:`eqsat.dtype_codes`)."""
    codes = {c for c in codes if c in WEAK or has_torch(c)}
    codes |= {floatify_code(c) for c in codes} | {sum_code(c) for c in codes} | set(WEAK)
    codes |= {compute_code(c) for c in codes}
    lines = []
    for a in sorted(codes):
        lines.append(f"(set (floatify {a}) {floatify_code(a)})")
        lines.append(f"(set (compute_dtype {a}) {compute_code(a)})")
        lines.append(f"(set (sum_dtype {a}) {sum_code(a)})")
        if a == WEAK_FLOAT or (a not in WEAK and dt.is_float(DTYPES[a])):
            lines.append(f"(float_code {a})")
        for b in sorted(codes):
            try:
                lines.append(f"(set (promote {a} {b}) {promote_code(a, b)})")
            except ValueError:      # a promotion nvFuser has no dtype for (complex half)
                pass
            if a not in WEAK:
                lines.append(f"(set (cast_dtype {a} {b}) {scalar_code(DTYPES[a]) if b in WEAK else a})")
    for narrow, wide in exact_widenings():
        if narrow in codes or wide in codes:
            lines.append(f"(widens {narrow} {wide})")
    return "\n".join(lines)
