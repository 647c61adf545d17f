"""Terms: the vocabulary of the e-graph, as plain Python data.

A :class:`TermGraph` is a hash-consed DAG of :class:`TNode`; each node is one constructor
applied to attributes (numbers) and children (node ids). The constructors are the rows of
one table, :data:`TERMS`; the egglog functions of :mod:`eqsat.egraph.vocabulary` are made
from it under the same names, so a term moves between Python and egglog by name.

Values are named-axis tensors (or scalars): a term varies along a set of axis labels, held
as a bit mask; it is constant along every other label. Broadcasts, squeezes and permutes
change only positions, so they are not terms at all.

=========================  =====================================================
``Leaf(v)``                value ``v`` of the original fusion (an input, or the output of
                           an op that is not modelled: reshape, slice, opaque ops...)
``Num(f)`` / ``Int(i)``    a Double / Int scalar constant
``Extent(R)``              the product of the extents of the labels in ``R`` (an Int scalar)
``Neg(a)`` ... ``Un(op, a)``   unary ops (``Un`` for the ones without a constructor)
``SegmentSet(a)``          ``a`` itself, behind a kernel boundary (nvFuser's ``segment_set``)
``Add(a, b)`` ... ``Bin(op, a, b)``   binary ops
``Tern(op, a, b, c)``      where, clamp, lerp
``Cast(d, a)``             a cast to dtype code ``d``
``Sum(R, a)`` ...          a reduction over the labels ``R``; over a label that ``a`` lacks,
                           ``Sum`` multiplies by its extent and ``Max``/``Min`` are identity
``Mean(R, a)``, ``Var(R, c, a)``   the two outputs of ``var_mean`` (correction ``c``)
``Take(V, a, i)``          ``take_along_axis(a, i)`` (or a ``gather`` that is one) along the
                           one label ``V``: the element of ``a`` at ``i`` along ``V``, for
                           each place of ``i`` (``i`` has extent 1 along ``V``; the result
                           lacks ``V``)
``IndexSelect(V, a, i)``   ``index_select(a, i)`` along ``V``: ``i`` is 1-D along a label of
                           its own, which the result has in the place of ``V``
``TakePad(V, a, i)``       ``take_along_axis(pad(a, one zero after the end of V), i)``: as
                           ``Take``, with the index in [0, |V|]; 0 where it is |V| (Thunder's
                           nll_loss caps an ignored target at |V| and pads so)
``Iota(V)``                ``iota`` along the one label ``V``: 0, 1, ..., |V| - 1 (Int)
=========================  =====================================================
"""
from __future__ import annotations

from dataclasses import dataclass, field

from eqsat.ir import dtypes as dt
from eqsat.ir.dtypes import DataType
from eqsat.ir.opspec import OPS


@dataclass(frozen=True)
class TermSpec:
    """One constructor of the e-graph: one row of :data:`TERMS`, from which the rest of the
    package reads what it needs (egglog's declarations, the analyses' labels and dtype rules,
    the IR ops that encode to it and that it decodes to, the verifier's evaluation)."""

    name: str                       # as egglog, TermGraph and the rules call it
    attrs: tuple[str, ...]          # its attributes, before its kids, by ATTRIBUTES kind
    kids: int                       # how many child terms it has
    kind: str                       # how its labels follow from its kids' (TERM_KINDS)
    dtype: str                      # how its dtype follows from its kids' (DTYPE_RULES)
    ir_op: str | None = None        # the IR op it is (encoding and lowering), where one op is it

    @property
    def sorts(self) -> tuple[str, ...]:
        """Its attributes' egglog sorts."""
        return tuple(ATTRIBUTES[a] for a in self.attrs)


# attribute kind -> its egglog sort
ATTRIBUTES = {
    "value": "i64",         # an IR value id (a Leaf's)
    "double": "f64",        # a Double constant
    "int": "i64",           # an Int constant
    "labels": "i64",        # a label mask: what an Extent multiplies, what a reduction reduces
    "dtype": "i64",         # a dtype code (below), what a Cast casts to
    "correction": "i64",    # a variance's correction
    "op": "String",         # the IR op of a generic constructor (Un, Bin, Tern)
}

# how a term's labels follow from its kids' (the labels analysis)
TERM_KINDS = {
    "leaf": "a value of the fusion: labels and dtype given by the encoding",
    "scalar": "a constant scalar: no labels",
    "pointwise": "varies along every label any kid varies along",
    "generic": "pointwise, the IR op named by its op attribute: dtype given by the encoding",
    "reduction": "its kid's labels less the reduced ones",
    "take": "its first kid's labels less the indexed one, and its index's (second kid's)",
    "axis": "the labels its labels attribute names",
}

# how a term's dtype code follows from its kids' (the dtype analysis, dtype_codes.result_code)
DTYPE_RULES = {
    "given": "set by the encoding",
    "weak int": "a weak Int scalar",
    "weak float": "a weak Double scalar",
    "same": "its kid's",
    "abs": "its kid's, or a complex kid's real counterpart (|z| is real)",
    "compute": "its kid's computation dtype (bf16/fp16 give Float): arithmetic",
    "float": "float math: integers give Float, bf16/fp16 are computed in Float",
    "promote": "its kids' promoted (nvFuser's arithmetic promotion)",
    "sum": "a sum or product: integers and bools give Int, floats keep their dtype",
    "cast": "the dtype its dtype attribute names (a weak scalar stays weak)",
}

_UNARY, _BINARY = ("pointwise", 1), ("pointwise", 2)

# Every constructor of the e-graph, one row each: a new term is a new row here (and its
# meaning where it lives: an IR op with a TorchOps method and a recorder op is evaluated and
# lowered by its ir_op; other facts, such as its sign, are rules of analysis.py).
TERMS: dict[str, TermSpec] = {t.name: t for t in (
    #        name       attributes                kids  kind          dtype          IR op
    TermSpec("Leaf",    ("value",),               0,    "leaf",       "given"),
    TermSpec("Num",     ("double",),              0,    "scalar",     "weak float"),
    TermSpec("Int",     ("int",),                 0,    "scalar",     "weak int"),
    TermSpec("Extent",  ("labels",),              0,    "scalar",     "weak int"),
    TermSpec("Neg",     (),                       1,    "pointwise",  "compute",     "neg"),
    TermSpec("Abs",     (),                       1,    "pointwise",  "abs",         "abs"),
    TermSpec("Exp",     (),                       1,    "pointwise",  "float",       "exp"),
    TermSpec("Log",     (),                       1,    "pointwise",  "float",       "log"),
    TermSpec("Sqrt",    (),                       1,    "pointwise",  "float",       "sqrt"),
    TermSpec("Rsqrt",   (),                       1,    "pointwise",  "float",       "rsqrt"),
    TermSpec("Recip",   (),                       1,    "pointwise",  "float",       "reciprocal"),
    TermSpec("Tanh",    (),                       1,    "pointwise",  "float",       "tanh"),
    TermSpec("Sigmoid", (),                       1,    "pointwise",  "float",       "sigmoid"),
    TermSpec("Relu",    (),                       1,    "pointwise",  "same",        "relu"),
    TermSpec("SegmentSet", (),                    1,    "pointwise",  "same",        "segment_set"),
    TermSpec("Un",      ("op",),                  1,    "generic",    "given"),
    TermSpec("Add",     (),                       2,    "pointwise",  "promote",     "add"),
    TermSpec("Sub",     (),                       2,    "pointwise",  "promote",     "sub"),
    TermSpec("Mul",     (),                       2,    "pointwise",  "promote",     "mul"),
    TermSpec("Div",     (),                       2,    "pointwise",  "promote",     "div"),
    TermSpec("Maximum", (),                       2,    "pointwise",  "promote",     "maximum"),
    TermSpec("Minimum", (),                       2,    "pointwise",  "promote",     "minimum"),
    TermSpec("Pow",     (),                       2,    "pointwise",  "promote",     "pow"),
    TermSpec("Bin",     ("op",),                  2,    "generic",    "given"),
    TermSpec("Tern",    ("op",),                  3,    "generic",    "given"),
    TermSpec("Cast",    ("dtype",),               1,    "pointwise",  "cast"),
    TermSpec("Sum",     ("labels",),              1,    "reduction",  "sum",         "sum"),
    TermSpec("Max",     ("labels",),              1,    "reduction",  "same",        "max"),
    TermSpec("Min",     ("labels",),              1,    "reduction",  "same",        "min"),
    TermSpec("Prod",    ("labels",),              1,    "reduction",  "sum",         "prod"),
    TermSpec("Mean",    ("labels",),              1,    "reduction",  "float"),
    TermSpec("Var",     ("labels", "correction"), 1,    "reduction",  "float"),
    TermSpec("Take",    ("labels",),              2,    "take",       "same"),
    TermSpec("IndexSelect", ("labels",),          2,    "take",       "same"),
    TermSpec("TakePad", ("labels",),              2,    "take",       "same"),
    TermSpec("Iota",    ("labels",),              0,    "axis",       "given"),
)}


def _check_table() -> None:
    """Each row names known kinds, and an IR op only where encoding can make the term from
    that op alone (a unary or binary op, a reduction over labels)."""
    for t in TERMS.values():
        if t.kind not in TERM_KINDS or t.dtype not in DTYPE_RULES or not set(t.attrs) <= set(ATTRIBUTES):
            raise ValueError(f"term {t.name}: unknown kind, dtype rule or attribute")
        if t.ir_op is not None and (t.kind, t.kids) not in (_UNARY, _BINARY) \
                and t.attrs != ("labels",):
            raise ValueError(f"term {t.name}: only unary, binary and reduction terms have an IR op")


_check_table()


def _ir_ops(kind: str, kids: int) -> dict[str, str]:
    """IR op -> term name, for the terms of ``kind`` with ``kids`` kids that are one IR op."""
    return {t.ir_op: t.name for t in TERMS.values() if t.ir_op and t.kind == kind and t.kids == kids}


UNARY_TERMS = _ir_ops(*_UNARY)
BINARY_TERMS = _ir_ops(*_BINARY)
REDUCTION_TERMS = _ir_ops("reduction", 1)
IR_OP = {t.name: t.ir_op for t in TERMS.values() if t.ir_op}

# constructor -> (attribute sorts, number of children)
SIGNATURES: dict[str, tuple[tuple[str, ...], int]] = {t.name: (t.sorts, t.kids) for t in TERMS.values()}
REDUCTIONS = frozenset(t.name for t in TERMS.values() if t.kind == "reduction")
GENERIC = frozenset(t.name for t in TERMS.values() if t.kind == "generic")
# the IR ops that draw random numbers, opspec's "random" ops (kept ops: leaves of the e-graph, ``drawn``)
RANDOM_OPS = frozenset(op for op, spec in OPS.items() if spec.category == "random")
# terms that are a kernel boundary: nvFuser's segmenter cuts the fusion at a segment_set (the
# value is written by one segment and read by the next), which is otherwise an identity
BARRIER_TERMS = frozenset({"SegmentSet"})
# the elementwise terms: what a kernel may compute again instead of reading it (recompute.py)
ELEMENTWISE = frozenset(t.name for t in TERMS.values()
                        if t.kind in ("pointwise", "generic") and t.name not in BARRIER_TERMS)
# IR op -> term; a gather is a Take where its index spans the input's other axes (encode.indexing)
INDEXING_TERMS = {"take_along_axis": "Take", "gather": "Take", "index_select": "IndexSelect"}
INDEXING = frozenset(INDEXING_TERMS.values()) | {"TakePad"}      # encoded from a pad and a take
# the generic binary ops (Bin) whose result is Bool: comparisons and logical ops
BOOLEAN_BINARY = ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or")

# dtype codes: one per DataType; "weak" codes for scalars, which (as in PyTorch) do not lift
# a tensor within its category.
DTYPES = list(DataType)
DTYPE_CODE = {d: i for i, d in enumerate(DTYPES)}
WEAK_BOOL, WEAK_INT, WEAK_FLOAT, WEAK_COMPLEX = 100, 101, 102, 103


def scalar_code(dtype: DataType) -> int:
    if dtype is DataType.Bool:
        return WEAK_BOOL
    if dtype in dt.INT_TYPES:
        return WEAK_INT
    if dtype in dt.COMPLEX_TYPES:
        return WEAK_COMPLEX
    return WEAK_FLOAT


def code_dtype(code: int) -> DataType:
    """The DataType of a code (weak codes: the dtype nvFuser gives such a scalar)."""
    weak = {WEAK_BOOL: DataType.Bool, WEAK_INT: DataType.Int, WEAK_FLOAT: DataType.Double,
            WEAK_COMPLEX: DataType.ComplexDouble}
    return weak[code] if code in weak else DTYPES[code]


@dataclass(frozen=True)
class TNode:
    op: str
    attrs: tuple = ()
    kids: tuple[int, ...] = ()


@dataclass
class TermGraph:
    """Hash-consed term nodes; ``add`` returns the id of an equal node if there is one."""

    nodes: list[TNode] = field(default_factory=list)
    index: dict[TNode, int] = field(default_factory=dict)

    def add(self, op: str, attrs: tuple = (), kids: tuple[int, ...] = ()) -> int:
        node = TNode(op, tuple(attrs), tuple(kids))
        found = self.index.get(node)
        if found is not None:
            return found
        self.nodes.append(node)
        self.index[node] = len(self.nodes) - 1
        return len(self.nodes) - 1

    def __getitem__(self, i: int) -> TNode:
        return self.nodes[i]

    def format(self, i: int) -> str:
        n = self.nodes[i]
        parts = [repr(a) if not isinstance(a, str) else a for a in n.attrs]
        parts += [self.format(k) for k in n.kids]
        return f"{n.op}({', '.join(parts)})"


def bits(mask: int) -> list[int]:
    if mask < 0:
        raise ValueError(f"label mask {mask} is negative (the class has no labels analysis)")
    out, b = [], 0
    while mask:
        if mask & 1:
            out.append(b)
        mask >>= 1
        b += 1
    return out
