"""Terms: the vocabulary of the e-graph, as plain Python data.

A :class:`TermGraph` is a hash-consed DAG of :class:`TNode`; each node is one constructor
applied to attributes (numbers) and children (node ids). The same constructor names are the
egglog functions of :mod:`eqsat.egraph`, so a term moves between Python and egglog by name.

Values are named-axis tensors (or scalars): a term varies along a set of axis labels, held
as a bit mask; it is constant along every other label. Broadcasts, squeezes and permutes
change only positions, so they are not terms at all.

=========================  =====================================================
``Leaf(v)``                value ``v`` of the original fusion (an input, or the output of
                           an op that is not modelled: reshape, slice, opaque ops...)
``Num(f)`` / ``Int(i)``    a Double / Int scalar constant
``Extent(R)``              the product of the extents of the labels in ``R`` (an Int scalar)
``Neg(a)`` ... ``Un(op, a)``   unary ops (``Un`` for the ones without a constructor)
``Add(a, b)`` ... ``Bin(op, a, b)``   binary ops
``Tern(op, a, b, c)``      where, clamp, lerp
``Cast(d, a)``             a cast to dtype code ``d``
``Sum(R, a)`` ...          a reduction over the labels ``R``; over a label that ``a`` lacks,
                           ``Sum`` multiplies by its extent and ``Max``/``Min`` are identity
``Mean(R, a)``, ``Var(R, c, a)``   the two outputs of ``var_mean`` (correction ``c``)
=========================  =====================================================
"""
from __future__ import annotations

from dataclasses import dataclass, field

from eqsat.ir import dtypes as dt
from eqsat.ir.dtypes import DataType

UNARY_TERMS = {"neg": "Neg", "abs": "Abs", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
               "rsqrt": "Rsqrt", "reciprocal": "Recip", "tanh": "Tanh", "sigmoid": "Sigmoid",
               "relu": "Relu"}
BINARY_TERMS = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "maximum": "Maximum",
                "minimum": "Minimum", "pow": "Pow"}
REDUCTION_TERMS = {"sum": "Sum", "max": "Max", "min": "Min", "prod": "Prod"}
IR_OP = {v: k for d in (UNARY_TERMS, BINARY_TERMS, REDUCTION_TERMS) for k, v in d.items()}

# constructor -> (attribute kinds, number of children)
SIGNATURES: dict[str, tuple[tuple[str, ...], int]] = {
    "Leaf": (("i64",), 0), "Num": (("f64",), 0), "Int": (("i64",), 0), "Extent": (("i64",), 0),
    **{name: ((), 1) for name in UNARY_TERMS.values()}, "Un": (("String",), 1),
    **{name: ((), 2) for name in BINARY_TERMS.values()}, "Bin": (("String",), 2),
    "Tern": (("String",), 3), "Cast": (("i64",), 1),
    **{name: (("i64",), 1) for name in REDUCTION_TERMS.values()},
    "Mean": (("i64",), 1), "Var": (("i64", "i64"), 1),
}
REDUCTIONS = frozenset(REDUCTION_TERMS.values()) | {"Mean", "Var"}

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
