"""Analysis rules: fill ``labels``, ``dtype``, ``floating`` and ``nonneg`` for every class.

They run to saturation before and between rewrite iterations. Labels and dtypes follow each
term's row of the table of terms (:data:`~.terms.TERMS`: its kind and its dtype rule); a
leaf's labels and dtype, and a generic op's (``Un``/``Bin``/``Tern``) dtype, are set when the
e-graph is built.
"""

from __future__ import annotations

from egglog import String, eq, f64, i64, ne, rule, ruleset, set_, var

from eqsat.ir.dtypes import DataType

from .terms import (
    BOOLEAN_BINARY,
    DTYPE_CODE,
    ELEMENTWISE_TERMS,
    TERMS,
    WEAK_FLOAT,
    WEAK_INT,
    TermKind,
    TermSpec,
)
from .vocabulary import (
    CONSTRUCTORS,
    Abs,
    Add,
    Bin,
    Cast,
    Div,
    Exp,
    Extent,
    Int,
    Max,
    Maximum,
    Mean,
    Min,
    Minimum,
    Mul,
    Num,
    Pow,
    Prod,
    Recip,
    Relu,
    Rsqrt,
    Sigmoid,
    Sqrt,
    Sum,
    Term,
    Tern,
    Var,
    abs_dtype,
    cast_dtype,
    compute_dtype,
    drawn,
    dtype,
    float_code,
    floatify,
    floating,
    labels,
    no_negative_zero,
    nonempty_labels,
    nonneg,
    promote,
    sum_dtype,
)

analysis = ruleset(name="analysis")

_SORTS = {"i64": i64, "f64": f64, "String": String}


def _applied(spec: TermSpec):
    """``spec``'s constructor on fresh variables: (the term, its attribute variables, its kids)."""
    attrs = [
        var(f"attr_{kind}{i}", _SORTS[sort]) for i, (kind, sort) in enumerate(zip(spec.attrs, spec.sorts))
    ]
    kids = [var(f"kid{i}", Term) for i in range(spec.kids)]
    return CONSTRUCTORS[spec.name](*attrs, *kids), attrs, kids


def labels_rule(spec: TermSpec):
    """The rule that sets a term's labels from its kids' (by its kind), or None (a leaf's
    labels are given by the encoding)."""
    term, attrs, kids = _applied(spec)
    kid_labels = [var(f"kid_labels{i}", i64) for i in range(len(kids))]
    query = [term, *(eq(la).to(labels(k)) for la, k in zip(kid_labels, kids))]
    if spec.kind is TermKind.LEAF:
        return None
    if spec.kind is TermKind.SCALAR:
        value = i64(0)
    elif spec.kind is TermKind.AXIS:  # the labels it names
        value = attrs[spec.attrs.index("labels")]
    elif spec.kind is TermKind.REDUCTION:  # the kid's labels less the reduced ones
        value = kid_labels[0] ^ (kid_labels[0] & attrs[spec.attrs.index("labels")])
    elif spec.kind is TermKind.TAKE:  # the indexed kid's labels less the indexed one, the index's
        value = (kid_labels[0] ^ (kid_labels[0] & attrs[spec.attrs.index("labels")])) | kid_labels[1]
    else:  # pointwise: every label a kid varies along
        value = kid_labels[0]
        for la in kid_labels[1:]:
            value = value | la
    return rule(*query).then(set_(labels(term)).to(value))


def dtype_rule(spec: TermSpec):
    """The rule that sets a term's dtype code by its dtype rule (``DTYPE_RULES``), or None
    where the encoding gives it. Table lookups (promote, floatify...) are bound in the query:
    egglog allows no lookup of a non-constructor function in an action."""
    if spec.dtype == "given":
        return None
    term, attrs, kids = _applied(spec)
    kid_dtypes = [var(f"kid_dtype{i}", i64) for i in range(len(kids))]
    query = [term, *(eq(d).to(dtype(k)) for d, k in zip(kid_dtypes, kids))]
    result = var("result", i64)
    if spec.dtype == "weak int":
        value = i64(WEAK_INT)
    elif spec.dtype == "weak float":
        value = i64(WEAK_FLOAT)
    elif spec.dtype == "same":
        value = kid_dtypes[0]
    elif spec.dtype == "promote":
        value = kid_dtypes[0]
        for i, d in enumerate(kid_dtypes[1:]):
            promoted = var(f"promoted{i}", i64)
            query.append(eq(promoted).to(promote(value, d)))
            value = promoted
    else:
        table = {"compute": compute_dtype, "float": floatify, "sum": sum_dtype, "abs": abs_dtype}
        lookup = (
            cast_dtype(attrs[spec.attrs.index("dtype")], kid_dtypes[0])
            if spec.dtype == "cast"
            else table[spec.dtype](kid_dtypes[0])
        )
        query.append(eq(result).to(lookup))
        value = result
    return rule(*query).then(set_(dtype(term)).to(value))


@analysis.register
def _labels_and_dtypes():
    """Every term's labels and dtype, from its row of the table of terms."""
    for spec in TERMS.values():
        yield from (r for r in (labels_rule(spec), dtype_rule(spec)) if r is not None)
    a, d = var("a", Term), var("d", i64)
    yield rule(eq(d).to(dtype(a)), float_code(d)).then(floating(a))


@analysis.register
def _generic_dtypes(p: Term, a: Term, b: Term, da: i64, db: i64, r: i64):
    """The dtypes of the generic terms rules make (the encoding gives those of the input's):
    comparisons and logical ops are Bool, a where its branches' promoted dtype."""
    for op in BOOLEAN_BINARY:
        yield rule(Bin(op, a, b)).then(set_(dtype(Bin(op, a, b))).to(i64(DTYPE_CODE[DataType.Bool])))
    yield rule(
        Tern("where", p, a, b), eq(da).to(dtype(a)), eq(db).to(dtype(b)), eq(r).to(promote(da, db))
    ).then(set_(dtype(Tern("where", p, a, b))).to(r))


@analysis.register
def _signs(a: Term, b: Term, r: i64, c: i64, d: i64):
    """``nonneg``: every element >= 0 (or NaN, for floats). A fact is about the class's value:
    each derivation holds whichever member of the class it is read from, and at every extent
    the emitted (symbolic) definition may run at, 0 included. Facts that hold only where
    nothing wraps around (|INT_MIN| < 0, 46341 * 46341 < 0 in Int32, sums and products of
    large non-negative integers, casts to narrower integers) are stated for floating results
    only; a max of values >= 0 only over axes of static extent >= 1 (over an empty axis it is
    -inf, or an integer dtype's least value). The others hold for every dtype and
    extent (over an empty axis a min is +inf or the dtype's greatest value, a sum 0, a product
    1, a mean NaN)."""
    for u in (Exp, Sqrt, Sigmoid):  # floating results whatever the operand
        yield rule(u(a)).then(nonneg(u(a)))
    # rsqrt(-0.0), 1/-0.0, x/-0.0 and pow(-0.0, -1) are -inf: >= 0 only without -0.0
    yield rule(Rsqrt(a), no_negative_zero(a)).then(nonneg(Rsqrt(a)))
    yield rule(Relu(a)).then(nonneg(Relu(a)))
    yield rule(Abs(a), floating(Abs(a))).then(nonneg(Abs(a)))
    yield rule(Mul(a, a), floating(Mul(a, a))).then(nonneg(Mul(a, a)))
    for op in (Add, Mul):
        yield rule(op(a, b), nonneg(a), nonneg(b), floating(op(a, b))).then(nonneg(op(a, b)))
    yield rule(Pow(a, b), nonneg(a), no_negative_zero(a), floating(Pow(a, b))).then(nonneg(Pow(a, b)))
    for op in (Maximum, Minimum):  # no wrap-around
        yield rule(op(a, b), nonneg(a), nonneg(b)).then(nonneg(op(a, b)))
    yield rule(Div(a, b), nonneg(a), nonneg(b), no_negative_zero(b)).then(nonneg(Div(a, b)))
    yield rule(Maximum(a, b), nonneg(a)).then(nonneg(Maximum(a, b)))
    yield rule(Maximum(a, b), nonneg(b)).then(nonneg(Maximum(a, b)))
    yield rule(Recip(a), nonneg(a), no_negative_zero(a)).then(nonneg(Recip(a)))
    yield rule(Cast(d, a), nonneg(a), floating(Cast(d, a))).then(nonneg(Cast(d, a)))
    # a max over an axis that may be empty at run time may be the dtype's least value
    yield rule(Max(r, a), nonneg(a), eq(r & nonempty_labels()).to(r)).then(nonneg(Max(r, a)))
    for red in (Min, Mean):
        yield rule(red(r, a), nonneg(a)).then(nonneg(red(r, a)))
    for red in (Sum, Prod):
        yield rule(red(r, a), nonneg(a), floating(red(r, a))).then(nonneg(red(r, a)))
    # nvFuser's variance: squares times 1 / max(0, |R| - c), >= 0 (+inf where |R| <= c) or NaN
    yield rule(Var(r, c, a)).then(nonneg(Var(r, c, a)))
    yield rule(Extent(r)).then(nonneg(Extent(r)))


@analysis.register
def _zero_signs(a: Term, b: Term, r: i64, d: i64, f: f64, n: i64, la: i64):
    """``no_negative_zero``: no element is -0.0, in the class's dtype and in any dtype a weak
    scalar of the class is rounded to where it meets a tensor. Each derivation holds for the
    value, whichever member of the class it is read from (a sum over no axis is its operand,
    which may hold -0.0). A literal -0.0 is ``Neg(Num(0.0))``; a ``Num`` holds none where it
    is >= 0 or <= -1 (a tiny negative one rounds to -0.0 in Float, -0.001 in FP8). A sum
    along an axis its operand varies along starts at +0.0 (its terms, all multiples of the
    operand dtype's least subnormal, never cancel to a nonzero tiny value); one over no axis,
    over unit axes (nvFuser squeezes them) or only over axes its operand lacks (nvFuser
    multiplies by the extent: -0.0 * n) keeps -0.0. |x|, exp, sigmoid, rsqrt and x*x never
    give -0.0; a + b in Float or Double (each operand a value of that dtype once rounded) is
    -0.0 only where both are; a sum, product or quotient of values >= +0.0 holds none in any
    dtype. Where a result may round a tiny negative value to -0.0 (a product, quotient, mean
    or narrowing cast), its operands must be >= 0."""
    yield rule(Num(f), f >= f64(0.0)).then(no_negative_zero(Num(f)))
    yield rule(Num(f), f <= f64(-1.0)).then(no_negative_zero(Num(f)))
    yield rule(Int(n)).then(no_negative_zero(Int(n)))
    yield rule(Extent(r)).then(no_negative_zero(Extent(r)))
    for u in (Abs, Exp, Sigmoid, Rsqrt):
        yield rule(u(a)).then(no_negative_zero(u(a)))
    yield rule(Mul(a, a)).then(no_negative_zero(Mul(a, a)))
    yield rule(Sum(r, a), eq(la).to(labels(a)), ne(r & la).to(i64(0))).then(no_negative_zero(Sum(r, a)))
    full = [eq(d).to(dtype(Add(a, b))), eq(d).to(compute_dtype(d)), ne(d).to(i64(WEAK_FLOAT))]
    yield rule(Add(a, b), no_negative_zero(a), *full).then(no_negative_zero(Add(a, b)))
    yield rule(Add(a, b), no_negative_zero(b), *full).then(no_negative_zero(Add(a, b)))
    for op in (Add, Mul, Div):
        yield rule(op(a, b), nonneg(a), nonneg(b), no_negative_zero(a), no_negative_zero(b)).then(
            no_negative_zero(op(a, b))
        )
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


@analysis.register
def _draws():
    """``drawn``: a function of random draws and scalars alone. The encoding states it of each
    draw's leaf; it passes through every elementwise term (a cast, a comparison with a
    constant, a product of two draws), whose other operands are scalars (no labels) or drawn
    themselves. Not through a SegmentSet: the placement rule that makes one does not fire on
    it again."""
    for spec in TERMS.values():
        if spec.name not in ELEMENTWISE_TERMS:
            continue
        term, _, kids = _applied(spec)
        for i in range(len(kids)):
            others = [k for j, k in enumerate(kids) if j != i]
            yield rule(term, drawn(kids[i]), *(eq(labels(k)).to(i64(0)) for k in others)).then(drawn(term))
        if len(kids) > 1:
            yield rule(term, *(drawn(k) for k in kids)).then(drawn(term))
