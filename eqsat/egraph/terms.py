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

import enum
from dataclasses import dataclass, field

from eqsat.ir import dtypes as dt
from eqsat.ir.dtypes import DataType
from eqsat.ir.opspec import BINARY_BOOL, OPS


class TermKind(enum.StrEnum):
    """How a term's labels follow from its kids' (the labels analysis)."""

    LEAF = "leaf"  # a value of the fusion: labels and dtype given by the encoding
    SCALAR = "scalar"  # a constant scalar: no labels
    POINTWISE = "pointwise"  # varies along every label any kid varies along
    GENERIC = "generic"  # pointwise, the IR op named by its op attribute: dtype given by the encoding
    REDUCTION = "reduction"  # its kid's labels less the reduced ones
    TAKE = "take"  # its first kid's labels less the indexed one, and its index's (second kid's)
    AXIS = "axis"  # the labels its labels attribute names


@dataclass(frozen=True)
class TermSpec:
    """One constructor of the e-graph: one row of :data:`TERMS`, from which the rest of the
    package reads what it needs (egglog's declarations, the analyses' labels and dtype rules,
    the IR ops that encode to it and that it decodes to, the verifier's evaluation, the cost
    model's weights, the indexing rules' reach: its ``facts``, :data:`FACTS`)."""

    name: str  # as egglog, TermGraph and the rules call it
    attrs: tuple[str, ...]  # its attributes, before its kids, by ATTRIBUTES kind
    kids: int  # how many child terms it has
    kind: TermKind  # how its labels follow from its kids' (a row gives its value)
    dtype: str  # how its dtype follows from its kids' (DTYPE_RULES)
    ir_op: str | None = None  # the IR op it is (encoding and lowering), where one op is it
    facts: frozenset[str] = frozenset()  # FACTS (a row gives them as one string)
    encoded_from: tuple[str, ...] = ()  # an indexing term: the IR indexing ops encoded as it

    def __post_init__(self):
        object.__setattr__(self, "kind", TermKind(self.kind))
        if isinstance(self.facts, str):
            object.__setattr__(self, "facts", frozenset(self.facts.split()))

    @property
    def sorts(self) -> tuple[str, ...]:
        """Its attributes' egglog sorts."""
        return tuple(ATTRIBUTES[a] for a in self.attrs)


# attribute kind -> its egglog sort
# fmt: off
ATTRIBUTES = {
    "value": "i64",         # an IR value id (a Leaf's)
    "double": "f64",        # a Double constant
    "int": "i64",           # an Int constant
    "labels": "i64",        # a label mask: what an Extent multiplies, what a reduction reduces
    "dtype": "i64",         # a dtype code (below), what a Cast casts to
    "correction": "i64",    # a variance's correction
    "op": "String",         # the IR op of a generic constructor (Un, Bin, Tern)
}
# fmt: on

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

# what else the pipeline knows of a term (its row's facts)
FACTS = {
    "special": "the cost model weighs each element at the profile's special_function_weight",
    "free": "the cost model counts no arithmetic for it: a conversion on load or store",
    "barrier": "a kernel boundary, otherwise an identity: nvFuser's segmenter cuts the fusion "
    "there (one segment writes the value, the next reads it)",
    "moved": "the indexing rules (rules/indexing.py) move it through the terms marked through",
    "through": "an indexing term passes through it: picking elements commutes with it",
}

_UNARY_SHAPE, _BINARY_SHAPE = (TermKind.POINTWISE, 1), (TermKind.POINTWISE, 2)
_SPECIAL, _THROUGH = "special through", "through"

# Every constructor of the e-graph, one row each: a new term is a new row here (and its
# meaning where it lives: an IR op with a TorchOps method and a recorder op is evaluated and
# lowered by its ir_op; other facts, such as its sign, are rules of analysis.py).
# fmt: off
TERMS: dict[str, TermSpec] = {t.name: t for t in (
    #        name       attributes                kids kind         dtype         IR op          facts
    TermSpec("Leaf",    ("value",),               0,   "leaf",      "given"),
    TermSpec("Num",     ("double",),              0,   "scalar",    "weak float"),
    TermSpec("Int",     ("int",),                 0,   "scalar",    "weak int"),
    TermSpec("Extent",  ("labels",),              0,   "scalar",    "weak int"),
    TermSpec("Neg",     (),                       1,   "pointwise", "compute",    "neg",         _THROUGH),
    TermSpec("Abs",     (),                       1,   "pointwise", "abs",        "abs",         _THROUGH),
    TermSpec("Exp",     (),                       1,   "pointwise", "float",      "exp",         _SPECIAL),
    TermSpec("Log",     (),                       1,   "pointwise", "float",      "log",         _SPECIAL),
    TermSpec("Sqrt",    (),                       1,   "pointwise", "float",      "sqrt",        _SPECIAL),
    TermSpec("Rsqrt",   (),                       1,   "pointwise", "float",      "rsqrt",       _SPECIAL),
    TermSpec("Recip",   (),                       1,   "pointwise", "float",      "reciprocal",  _SPECIAL),
    TermSpec("Tanh",    (),                       1,   "pointwise", "float",      "tanh",        _SPECIAL),
    TermSpec("Sigmoid", (),                       1,   "pointwise", "float",      "sigmoid",     _SPECIAL),
    TermSpec("Relu",    (),                       1,   "pointwise", "same",       "relu",        _THROUGH),
    TermSpec("SegmentSet", (),                    1,   "pointwise", "same",       "segment_set", "barrier"),
    TermSpec("Un",      ("op",),                  1,   "generic",   "given",      None,          "special"),
    TermSpec("Add",     (),                       2,   "pointwise", "promote",    "add",         _THROUGH),
    TermSpec("Sub",     (),                       2,   "pointwise", "promote",    "sub",         _THROUGH),
    TermSpec("Mul",     (),                       2,   "pointwise", "promote",    "mul",         _THROUGH),
    TermSpec("Div",     (),                       2,   "pointwise", "promote",    "div",         _THROUGH),
    TermSpec("Maximum", (),                       2,   "pointwise", "promote",    "maximum",     _THROUGH),
    TermSpec("Minimum", (),                       2,   "pointwise", "promote",    "minimum",     _THROUGH),
    TermSpec("Pow",     (),                       2,   "pointwise", "promote",    "pow",         _SPECIAL),
    TermSpec("Bin",     ("op",),                  2,   "generic",   "given"),
    TermSpec("Tern",    ("op",),                  3,   "generic",   "given",      None,          "special"),
    TermSpec("Cast",    ("dtype",),               1,   "pointwise", "cast",       None,          "free"),
    TermSpec("Sum",     ("labels",),              1,   "reduction", "sum",        "sum",         _THROUGH),
    TermSpec("Max",     ("labels",),              1,   "reduction", "same",       "max",         _THROUGH),
    TermSpec("Min",     ("labels",),              1,   "reduction", "same",       "min",         _THROUGH),
    TermSpec("Prod",    ("labels",),              1,   "reduction", "sum",        "prod"),
    TermSpec("Mean",    ("labels",),              1,   "reduction", "float"),
    TermSpec("Var",     ("labels", "correction"), 1,   "reduction", "float"),
    TermSpec("Take",    ("labels",),              2,   "take",      "same",       None,          "moved",
             encoded_from=("take_along_axis", "gather")),
    TermSpec("IndexSelect", ("labels",),          2,   "take",      "same",       None,          "moved",
             encoded_from=("index_select",)),
    # TakePad: encoded from a pad and a take (encode.take_padded)
    TermSpec("TakePad", ("labels",),              2,   "take",      "same"),
    TermSpec("Iota",    ("labels",),              0,   "axis",      "given"),
)}
# fmt: on


def _check_table() -> None:
    """Each row names a known dtype rule, attributes and facts, and an IR op only where
    encoding can make the term from that op alone (a unary or binary op, a reduction over
    labels); only an indexing term is encoded from indexing ops."""
    for t in TERMS.values():
        if t.dtype not in DTYPE_RULES or not set(t.attrs) <= set(ATTRIBUTES) or not t.facts <= set(FACTS):
            raise ValueError(f"term {t.name}: unknown dtype rule, attribute or fact")
        if (
            t.ir_op is not None
            and (t.kind, t.kids) not in (_UNARY_SHAPE, _BINARY_SHAPE)
            and t.attrs != ("labels",)
        ):
            raise ValueError(f"term {t.name}: only unary, binary and reduction terms have an IR op")
        if t.encoded_from and (t.kind is not TermKind.TAKE or any(op not in OPS for op in t.encoded_from)):
            raise ValueError(f"term {t.name}: only an indexing term is encoded from IR indexing ops")


_check_table()


def _ir_ops(kind: TermKind, kids: int) -> dict[str, str]:
    """IR op -> term name, for the terms of ``kind`` with ``kids`` kids that are one IR op."""
    return {t.ir_op: t.name for t in TERMS.values() if t.ir_op and t.kind == kind and t.kids == kids}


def _named(test) -> frozenset[str]:
    """The names of the terms whose rows pass ``test``."""
    return frozenset(t.name for t in TERMS.values() if test(t))


UNARY_TERMS = _ir_ops(*_UNARY_SHAPE)
BINARY_TERMS = _ir_ops(*_BINARY_SHAPE)
REDUCTION_TERMS = _ir_ops(TermKind.REDUCTION, 1)
IR_OP = {t.name: t.ir_op for t in TERMS.values() if t.ir_op}
# IR op -> the indexing term it is encoded as (a gather where its index spans the input's other
# axes: encode.indexing)
TERM_OF_INDEXING_OP = {op: t.name for t in TERMS.values() for op in t.encoded_from}

# constructor -> (attribute sorts, number of children)
SIGNATURES: dict[str, tuple[tuple[str, ...], int]] = {t.name: (t.sorts, t.kids) for t in TERMS.values()}
REDUCTIONS = _named(lambda t: t.kind is TermKind.REDUCTION)
GENERIC = _named(lambda t: t.kind is TermKind.GENERIC)
SCALAR_TERMS = _named(lambda t: t.kind is TermKind.SCALAR)
INDEXING_TERMS = _named(lambda t: t.kind is TermKind.TAKE)  # Take, IndexSelect, TakePad
BARRIER_TERMS = _named(lambda t: "barrier" in t.facts)
SPECIAL_TERMS = _named(lambda t: "special" in t.facts)
FREE_TERMS = _named(lambda t: "free" in t.facts)
# the elementwise terms: what a kernel may compute again instead of reading it (recompute.py)
ELEMENTWISE_TERMS = _named(
    lambda t: t.kind in (TermKind.POINTWISE, TermKind.GENERIC) and t.name not in BARRIER_TERMS
)
# the generic binary ops (Bin) whose result is Bool: comparisons and logical ops, in the IR table's order
BOOLEAN_BINARY = tuple(op for op in OPS if op in BINARY_BOOL)

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
    weak = {
        WEAK_BOOL: DataType.Bool,
        WEAK_INT: DataType.Int,
        WEAK_FLOAT: DataType.Double,
        WEAK_COMPLEX: DataType.ComplexDouble,
    }
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
