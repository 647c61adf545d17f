"""The e-graph's vocabulary in egglog: the ``Term`` sort, its constructors, the per-class
analyses, and the dtype tables they read.

Constructors are made from the table of terms, :data:`eqsat.egraph.terms.TERMS`, under
its names. Analyses are egglog functions filled by the
rules of :mod:`eqsat.egraph.analysis`: ``labels`` (the i64 bit mask of axes a class varies along),
``dtype`` (a dtype code), and the relations ``floating``, ``nonneg`` and ``no_negative_zero``.
"""

from __future__ import annotations

from inspect import Parameter, Signature

from egglog import Expr, StringLike, f64Like, function, i64, i64Like, relation

from eqsat.ir import dtypes as dt

from .dtype_codes import (
    WEAK,
    abs_code,
    compute_code,
    exact_widenings,
    floatify_code,
    has_torch,
    promote_code,
    sum_code,
)
from .terms import DTYPES, TERMS, WEAK_FLOAT, TermSpec, scalar_code


class Term(Expr, egg_sort="Term"):
    """A named-axis tensor or scalar value."""


_ARGUMENT_TYPES = {"i64": i64Like, "f64": f64Like, "String": StringLike}


def _constructor(spec: TermSpec):
    """The egglog function of a row of :data:`~.terms.TERMS`: its attributes (named by their
    kind) and then its kids (``a``, ``b``, ``c``), giving a Term."""
    params = [
        Parameter(kind, Parameter.POSITIONAL_OR_KEYWORD, annotation=_ARGUMENT_TYPES[sort])
        for kind, sort in zip(spec.attrs, spec.sorts)
    ]
    params += [Parameter(kid, Parameter.POSITIONAL_OR_KEYWORD, annotation=Term) for kid in "abc"[: spec.kids]]

    def declaration(*args) -> Term: ...

    declaration.__name__ = declaration.__qualname__ = spec.name
    declaration.__signature__ = Signature(params, return_annotation=Term)
    declaration.__annotations__ = {**{p.name: p.annotation for p in params}, "return": Term}
    return function(egg_fn=spec.name)(declaration)


CONSTRUCTORS = {name: _constructor(spec) for name, spec in TERMS.items()}
# each constructor is also this module's attribute of its name (``from .vocabulary import Sum``),
# with no second list of names to keep in step with the table
globals().update(CONSTRUCTORS)


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


floating = relation("floating", Term, egg_fn="floating")  # the class's dtype is a floating-point one
nonneg = relation("nonneg", Term, egg_fn="nonneg")  # every element of the class is >= 0
# no element of the class is -0.0 (which is >= 0, yet 1/-0.0 and rsqrt(-0.0) are -inf)
no_negative_zero = relation("no_negative_zero", Term, egg_fn="no_negative_zero")
# the class is a function of random draws (uniform, normal) and scalars alone: no tensor the
# fusion reads goes into it, so a kernel of its own computes it from nothing but the draw
drawn = relation("drawn", Term, egg_fn="drawn")


# dtype tables, filled per e-graph with the codes that occur
@function(egg_fn="promote", merge=lambda old, new: old)
def promote(a: i64Like, b: i64Like) -> i64: ...


@function(egg_fn="floatify", merge=lambda old, new: old)
def floatify(a: i64Like) -> i64: ...


@function(egg_fn="compute_dtype", merge=lambda old, new: old)
def compute_dtype(a: i64Like) -> i64: ...


@function(egg_fn="sum_dtype", merge=lambda old, new: old)
def sum_dtype(a: i64Like) -> i64: ...


@function(egg_fn="abs_dtype", merge=lambda old, new: old)
def abs_dtype(a: i64Like) -> i64: ...


@function(egg_fn="cast_dtype", merge=lambda old, new: old)
def cast_dtype(to: i64Like, src: i64Like) -> i64: ...


float_code = relation("float_code", i64, egg_fn="float_code")
widens = relation("widens", i64, i64, egg_fn="widens")  # cast narrow -> wide -> narrow is exact


def dtype_tables(codes: set[int]) -> str:
    """The dtype tables (promote, floatify, ...) for the codes that occur and those they lead
    to, as egglog commands (the functions are in :mod:`eqsat.egraph.dtype_codes`)."""
    codes = {c for c in codes if c in WEAK or has_torch(c)}
    codes |= {floatify_code(c) for c in codes} | {sum_code(c) for c in codes} | set(WEAK)
    codes |= {compute_code(c) for c in codes} | {abs_code(c) for c in codes}
    lines = []
    for a in sorted(codes):
        lines.append(f"(set (floatify {a}) {floatify_code(a)})")
        lines.append(f"(set (compute_dtype {a}) {compute_code(a)})")
        lines.append(f"(set (sum_dtype {a}) {sum_code(a)})")
        lines.append(f"(set (abs_dtype {a}) {abs_code(a)})")
        if a == WEAK_FLOAT or (a not in WEAK and dt.is_float(DTYPES[a])):
            lines.append(f"(float_code {a})")
        for b in sorted(codes):
            try:
                lines.append(f"(set (promote {a} {b}) {promote_code(a, b)})")
            except ValueError:  # a promotion nvFuser has no dtype for (complex half)
                pass
            if a not in WEAK:
                lines.append(f"(set (cast_dtype {a} {b}) {scalar_code(DTYPES[a]) if b in WEAK else a})")
    for narrow, wide in exact_widenings():
        if narrow in codes or wide in codes:
            lines.append(f"(widens {narrow} {wide})")
    return "\n".join(lines)
