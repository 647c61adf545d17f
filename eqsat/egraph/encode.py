"""Fusion IR -> terms (:mod:`eqsat.egraph.terms`): what the e-graph is built from.

Modelled ops become term nodes; broadcasts, squeezes and permutes that keep a value's labels
vanish (the value *is* its input, as a named-axis tensor); every other node is a *boundary*:
lowering emits it verbatim, its outputs are ``Leaf`` terms, and its inputs are *roots* (as
are the fusion's outputs), which lowering rebuilds in their original layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from eqsat.ir.axes import ScalarType, TensorType, Types
from eqsat.ir.dtypes import DataType
from eqsat.ir import layout
from eqsat.ir.fusion import Fusion, Node, Ref
from eqsat.ir.opspec import COPY, OPAQUE, OPS, REPOSITIONING, SHAPE_QUERIES

from .terms import (
    BINARY_TERMS,
    DTYPE_CODE,
    REDUCTION_TERMS,
    TERM_OF_INDEXING_OP,
    UNARY_TERMS,
    TermGraph,
    scalar_code,
)

MAX_LABELS = 62
PADDED_FLOATS = frozenset({DataType.Double, DataType.Float, DataType.Half, DataType.BFloat16})  # TakePad's
INDEX_DTYPES = (DataType.Int, DataType.Int32)  # an indexing term's index


class NotEncodable(Exception):
    """The fusion (or a node) cannot be encoded; the reason is the message."""


@dataclass
class Encoding:
    fusion: Fusion
    graph: TermGraph = field(default_factory=TermGraph)
    term_of: dict[int, int] = field(default_factory=dict)  # IR value -> term
    roots: dict[int, int] = field(default_factory=dict)  # IR value -> term, rebuilt by lowering
    boundaries: list[Node] = field(default_factory=list)
    bit_of: dict[int, int] = field(default_factory=dict)  # IR label -> bit
    labels: dict[int, int] = field(default_factory=dict)  # term -> label mask (leaves, generic ops)
    dtype: dict[int, int] = field(default_factory=dict)  # term -> dtype code (leaves, generic ops)
    order: dict[int, tuple[int, ...]] = field(default_factory=dict)  # term -> original label order (bits)
    # input leaf -> the bit of its innermost allocated dim, where its stride order makes that
    # another dim than its last logical one (``order[-1]``)
    alloc_inner: dict[int, int] = field(default_factory=dict)
    # boundary output leaf -> (op, terms of its tensor inputs): how the cost model sees a kept op
    links: dict[int, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    # root terms whose data nothing reads: only a shape query (``fd.ops.shape``) kept as a
    # boundary reads them (their extents, not their elements), so no kernel writes them
    shape_only: set[int] = field(default_factory=set)
    # the results of the reshapes that copy (``layout.copying_reshapes``, at the encoding's
    # extents): kept ops linked as "copy", and no alias segment of an output's views
    copying_reshapes: set[int] = field(default_factory=set)
    skipped: str | None = None  # why nothing was encoded

    @property
    def nonempty(self) -> int:
        """The mask of the labels whose static extent is 1 or more (``nonempty_labels``)."""
        extents = self.fusion.types.extents
        return self.mask(l for l in self.bit_of if (extents.get(l) or 0) >= 1)

    @property
    def label_of(self) -> dict[int, int]:
        return {b: l for l, b in self.bit_of.items()}

    def bit(self, label: int) -> int:
        if label not in self.bit_of:
            if len(self.bit_of) >= MAX_LABELS:
                raise NotEncodable(f"more than {MAX_LABELS} axis labels")
            self.bit_of[label] = len(self.bit_of)
        return self.bit_of[label]

    def mask(self, labels) -> int:
        m = 0
        for label in labels:
            m |= 1 << self.bit(label)
        return m


FACT_STRIDE = 32


def _code(t) -> int | None:
    if isinstance(t, TensorType):
        return DTYPE_CODE[t.dtype] if t.dtype is not None else None
    if isinstance(t, ScalarType):
        return scalar_code(t.dtype) if t.dtype is not None else None
    return None


class _Encoder:
    def __init__(self, fusion: Fusion, extents: dict[int, int] | None = None):
        self.f = fusion
        self.types: Types = fusion.types
        self.extents = {**{k: v for k, v in self.types.extents.items() if v is not None}, **(extents or {})}
        self.enc = Encoding(fusion, copying_reshapes=layout.copying_reshapes(fusion, self.extents))
        self.g = self.enc.graph
        self.depths: list[int] = []  # term id -> longest path from a leaf (known_facts)
        self.deferred: dict[int, Node] = {}  # zero pads read by takes alone so far: output -> pad
        self.shape_refs: set[int] = set()  # values kept boundaries read: by a shape query only,
        self.data_refs: set[int] = set()  # or by an op that reads their elements

    # -- helpers -----------------------------------------------------------------------------
    def unit(self, dim) -> bool:
        return dim.broadcast and self.types.extents.get(dim.label) == 1

    def leaf(self, vid: int) -> int:
        t = self.types[vid]
        tid = self.g.add("Leaf", (vid,))
        if isinstance(t, TensorType) and t.known:
            self.enc.labels[tid] = self.enc.mask(t.labels)
            self.note_order(tid, t)
        elif isinstance(t, ScalarType) and t.dtype is not None:
            self.enc.labels[tid] = 0
        code = _code(t)
        if code is not None:
            self.enc.dtype[tid] = code
        return tid

    def note_allocation(self, tid: int, node: Node, t: TensorType) -> None:
        """An input's innermost allocated dim (``Encoding.alloc_inner``), where its stride order
        puts another dim than its last logical one innermost."""
        order = layout.allocation_order(node.arg("stride_order"), len(t.dims))
        dims = [t.dims[j] for j in order if not t.dims[j].broadcast]
        logical = [d for d in t.dims if not d.broadcast]
        if dims and dims[-1].label != logical[-1].label:
            self.enc.alloc_inner[tid] = self.enc.bit(dims[-1].label)

    def note_order(self, tid: int, t: TensorType) -> None:
        if tid not in self.enc.order:
            self.enc.order[tid] = tuple(self.enc.bit(d.label) for d in t.dims if not d.broadcast)

    def operand(self, value) -> int:
        """The term of an argument: a value with a term, or a python constant."""
        if isinstance(value, Ref):
            if value.id in self.deferred:  # a zero pad read otherwise than by a take
                self.keep(self.deferred.pop(value.id))
            if value.id not in self.enc.term_of:
                raise NotEncodable("argument has no term")
            return self.enc.term_of[value.id]
        if isinstance(value, bool):
            raise NotEncodable("boolean literal")
        if isinstance(value, int):
            return self.g.add("Int", (value,))
        if isinstance(value, float):
            return self.num(value)
        raise NotEncodable(f"literal {value!r}")

    def num(self, value: float) -> int:
        """A Double constant. -0.0 is ``Neg(Num(0.0))``: the e-graph (and Python) would take
        the constants -0.0 and 0.0 for one, and 1/(x*-0.0) is not 1/(x*0.0)."""
        if value == 0 and math.copysign(1.0, value) < 0:
            return self.g.add("Neg", (), (self.g.add("Num", (0.0,)),))
        return self.g.add("Num", (value,))

    def reduce_mask(self, t: TensorType, dims) -> int:
        return self.enc.mask(t.dims[i].label for i in dims if not self.unit(t.dims[i]))

    # -- nodes -------------------------------------------------------------------------------
    def node(self, node: Node) -> list[int] | None:
        """Terms for the node's outputs, or None (a boundary)."""
        if not self.may_encode(node):
            return None
        op, kw = node.op, node.kwargs
        g = self.g
        if op == "define_scalar":
            value, dtype = kw["value"], kw["dtype"]
            if dtype is DataType.Double and isinstance(value, float):
                return [self.num(value)]
            if dtype is DataType.Int and isinstance(value, int) and not isinstance(value, bool):
                return [g.add("Int", (value,))]
            return None
        if op == "pad" and self.zero_pad_dim(node) is not None:
            self.deferred[node.outputs[0]] = node  # a term where a take reads it (TakePad)
            return []
        spec = OPS.get(op)
        if spec is None:
            return None
        if op in REPOSITIONING:  # the value is its input, where it keeps its labels
            src = self.types[kw["arg"].id]
            if isinstance(src, TensorType) and src.labels == self.types[node.outputs[0]].labels:
                return [self.operand(kw["arg"])]
            return None
        if op == "size":
            t = self.types[kw["arg"].id]
            d = t.dims[kw["dim"]]
            if self.unit(d):
                return [g.add("Int", (1,))]
            return [g.add("Extent", (self.enc.mask([d.label]),))]
        if spec.elementwise:
            return [self.elementwise(node, spec)]
        if op in TERM_OF_INDEXING_OP:
            return self.indexing(node)
        if op == "iota":
            return self.iota(node)
        if spec.category in ("reduction", "var_mean", "var"):
            return self.reduction(node, spec.category)
        return None

    def may_encode(self, node: Node) -> bool:
        """Whether a node may be terms: not an input, not opaque, its outputs of known types
        and each along its own axes, and no tensor it touches empty (no rule may assume an
        extent there)."""
        if node.opaque or node.is_input:
            return False
        outs = [self.types[v] for v in node.outputs]
        if any(isinstance(t, TensorType) and not t.known for t in outs):
            return False
        if any(v in self.types.relabeled for v in node.outputs):
            return False  # a value used along two axes at once
        touched = outs + [self.types[r.id] for r in node.refs()]
        return not any(
            isinstance(t, TensorType) and t.known and any(self.extents.get(d.label) == 0 for d in t.dims)
            for t in touched
        )

    def elementwise(self, node: Node, spec) -> int:
        """The term of an elementwise op (unary, binary, where/clamp/lerp, cast): the table's
        own constructor where the op has one, else a generic one (Un, Bin, Tern)."""
        op, kw, g = node.op, node.kwargs, self.g
        cat = spec.category
        if cat == "unary":
            a = self.operand(kw["arg"])
            if op in UNARY_TERMS:
                return g.add(UNARY_TERMS[op], (), (a,))
            return self.generic(g.add("Un", (op,), (a,)), node)
        if cat == "binary":
            a, b = self.operand(kw["arg1"]), self.operand(kw["arg2"])
            if op in BINARY_TERMS:
                return g.add(BINARY_TERMS[op], (), (a, b))
            return self.generic(g.add("Bin", (op,), (a, b)), node)
        if cat == "cast":
            return g.add("Cast", (DTYPE_CODE[kw["dtype"]],), (self.operand(kw["arg"]),))
        kids = tuple(self.operand(kw[p]) for p in spec.params)  # where, clamp, lerp
        return self.generic(g.add("Tern", (op,), kids), node)

    def reduction(self, node: Node, cat: str) -> list[int] | None:
        """The terms of a reduction (``sum``, ``max``...: its term of the table, of the input
        cast to its ``dtype`` where given) or of ``var``/``var_mean`` (Var, and Mean; None
        over a broadcast dim, where the count matters)."""
        kw, g = node.kwargs, self.g
        t = self.types[kw["arg"].id]
        if cat == "reduction":
            x = self.operand(kw["arg"])
            if kw["dtype"] is not DataType.Null:
                x = g.add("Cast", (DTYPE_CODE[kw["dtype"]],), (x,))
            return [g.add(REDUCTION_TERMS[node.op], (self.reduce_mask(t, kw["dims"]),), (x,))]
        mask = self.reduce_mask(t, kw["dims"])
        if mask & ~self.enc.mask(t.labels) or any(self.unit(t.dims[i]) for i in kw["dims"]):
            return None  # over a broadcast dim: the count matters
        x = self.operand(kw["arg"])
        var = g.add("Var", (mask, int(kw["correction"])), (x,))
        return [var, g.add("Mean", (mask,), (x,))] if cat == "var_mean" else [var]

    def indexing(self, node: Node) -> list[int] | None:
        """``take_along_axis`` of an index with extent 1 along the indexed dim (one element
        per row: cross-entropy's target; a ``gather`` whose index spans the input's other axes
        is one), or ``index_select`` of a 1-D index, as a term: the
        labels are the input's less the indexed one, and the index's. Other forms (an index
        varying along the indexed dim, an input or index broadcast along another's axis) stay
        boundaries."""
        kw = node.kwargs
        if node.op == "take_along_axis" and kw["arg"].id in self.deferred:
            return self.take_padded(node, self.deferred[kw["arg"].id])
        t, idx = self.types[kw["arg"].id], self.types[kw["index"].id]
        out = self.types[node.outputs[0]]
        if not (isinstance(t, TensorType) and isinstance(idx, TensorType) and t.known and idx.known):
            return None
        d = t.dims[kw["dim"]]
        if d.broadcast or idx.dtype not in INDEX_DTYPES:
            return None
        rest = set(t.labels) - {d.label}
        if node.op in ("take_along_axis", "gather"):  # a gather: where it is a take (axes.py)
            if not self.one_per_row(idx, out, kw["dim"], rest):
                return None
        elif (
            len(idx.labels) != 1
            or set(idx.labels) & set(t.labels)
            or set(out.labels) != rest | set(idx.labels)
        ):
            return None
        term = TERM_OF_INDEXING_OP[node.op]
        return [
            self.g.add(
                term, (self.enc.mask([d.label]),), (self.operand(kw["arg"]), self.operand(kw["index"]))
            )
        ]

    def one_per_row(self, idx, out, dim: int, rest: set) -> bool:
        """Whether a take along ``dim`` with index type ``idx`` and result type ``out`` picks
        one element per row: the index has extent 1 along ``dim`` and spans the input's other
        axes ``rest``, as the result does."""
        return self.unit(idx.dims[dim]) and set(idx.labels) == rest and set(out.labels) == rest

    def zero_pad_dim(self, node: Node) -> int | None:
        """The dim that ``pad`` node pads with one +0.0 after its end, where that is all it
        does (lo 0, hi 1 there, no padding elsewhere; a floating input with a known type):
        Thunder's nll_loss pads the negated log-softmax so for an ignore_index outside
        [0, V). None for any other pad."""
        kw = node.kwargs
        t, value, widths = self.types[kw["arg"].id], kw["value"], kw["pad_widths"]
        if (
            not (isinstance(t, TensorType) and t.known and t.dtype in PADDED_FLOATS)
            or any(isinstance(w, bool) or not isinstance(w, int) for w in widths)
            or value is not None
            and (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or value != 0
                or math.copysign(1.0, value) < 0
            )
        ):
            return None
        pairs = [tuple(widths[k : k + 2]) for k in range(0, len(widths), 2)]
        padded = [k for k, p in enumerate(pairs) if p != (0, 0)]
        if len(padded) != 1 or pairs[padded[0]] != (0, 1):
            return None
        dim = t.rank - 1 - padded[0]
        return None if t.dims[dim].broadcast else dim

    def take_padded(self, node: Node, pad: Node) -> list[int] | None:
        """``take_along_axis`` along the dim that a zero pad (:meth:`zero_pad_dim`) padded, of
        an index with extent 1 there, as ``TakePad`` of the pad's input: labels as ``Take``'s.
        Other takes of it stay boundaries (and so does the pad)."""
        kw = node.kwargs
        t, idx = self.types[pad.kwargs["arg"].id], self.types[kw["index"].id]
        out = self.types[node.outputs[0]]
        dim = self.zero_pad_dim(pad)
        if (
            kw["dim"] != dim
            or not isinstance(idx, TensorType)
            or not idx.known
            or idx.dtype not in INDEX_DTYPES
        ):
            return None
        label = t.dims[dim].label
        if not self.one_per_row(idx, out, dim, set(t.labels) - {label}):
            return None
        return [
            self.g.add(
                "TakePad",
                (self.enc.mask([label]),),
                (self.operand(pad.kwargs["arg"]), self.operand(kw["index"])),
            )
        ]

    def iota(self, node: Node) -> list[int] | None:
        """``iota(n, 0, 1, Int)`` along one axis as an ``Iota`` term (a one-hot is an equality
        with it: ``where(iota == y, ...)``); other starts, steps and dtypes stay boundaries."""
        kw = node.kwargs
        out = self.types[node.outputs[0]]
        if (
            kw["start"] not in (None, 0)
            or kw["step"] not in (None, 1)
            or kw["dtype"] is not DataType.Int
            or any(isinstance(kw[p], bool) for p in ("start", "step"))
            or len(out.labels) != 1
        ):
            return None
        return [self.generic(self.g.add("Iota", (self.enc.mask(out.labels),)), node)]

    def link_op(self, node: Node) -> str:
        """The name the cost model knows a kept op by: its own, "opaque" for an op eqsat does
        not model, and "copy" for a stride order that lays its input out anew (one that keeps
        the layout its input has is a view: ``layout.lays_out_as_is``) and for a reshape that
        no strides view (``layout.copying_reshapes``)."""
        if node.opaque:
            return OPAQUE
        if node.op == "stride_order" and not layout.lays_out_as_is(self.f.producer, node):
            return COPY
        if node.op == "reshape" and node.outputs[0] in self.enc.copying_reshapes:
            return COPY
        return node.op

    def depth(self, tid: int) -> int:
        """The longest path from a leaf to term ``tid`` (kids precede their parents)."""
        for i in range(len(self.depths), tid + 1):
            self.depths.append(1 + max((self.depths[k] for k in self.g[i].kids), default=0))
        return self.depths[tid]

    def known_facts(self, tid: int, t) -> None:
        """The labels and dtype the IR gives the term of a value, stated with it at every
        ``FACT_STRIDE``-th level of depth: the analyses derive the same, but one egglog
        iteration per level (20 000 on a long chain); stated every so often, they need no
        more iterations than the stride, for a few more commands to insert."""
        if self.depth(tid) % FACT_STRIDE:
            return
        if isinstance(t, TensorType) and t.known:
            self.enc.labels.setdefault(tid, self.enc.mask(t.labels))
        elif isinstance(t, ScalarType):
            self.enc.labels.setdefault(tid, 0)
        code = _code(t)
        if code is not None:
            self.enc.dtype.setdefault(tid, code)

    def generic(self, tid: int, node: Node) -> int:
        """Generic constructors (Un/Bin/Tern) get their labels and dtype from the IR."""
        t = self.types[node.outputs[0]]
        self.enc.labels[tid] = self.enc.mask(t.labels) if isinstance(t, TensorType) else 0
        code = _code(t)
        if code is not None:
            self.enc.dtype[tid] = code
        return tid

    def run(self) -> Encoding:
        for node in self.f.nodes:
            try:
                terms = self.node(node)
            except NotEncodable as err:
                if "axis labels" in str(err):
                    raise
                terms = None
            if terms is None:
                self.keep(node)
                continue
            for v, tid in zip(node.outputs, terms):
                self.enc.term_of[v] = tid
                t = self.types[v]
                if isinstance(t, TensorType):
                    self.note_order(tid, t)
                self.known_facts(tid, t)
        for out in self.f.outputs:
            if out.value in self.deferred:
                self.keep(self.deferred.pop(out.value))
            self.enc.roots[out.value] = self.enc.term_of[out.value]
        read = self.data_refs | {out.value for out in self.f.outputs}
        self.enc.shape_only = {self.enc.roots[v] for v in self.shape_refs} - {self.enc.roots[v] for v in read}
        return self.enc

    def keep(self, node: Node) -> None:
        """``node`` as a boundary: its term inputs are roots, its outputs leaves (a deferred
        zero pad that it reads is kept first)."""
        for r in node.refs():
            if r.id in self.deferred:
                self.keep(self.deferred.pop(r.id))
        self.enc.boundaries.append(node)
        for r in node.refs():
            if r.id in self.enc.term_of:
                self.enc.roots[r.id] = self.enc.term_of[r.id]
                (self.shape_refs if node.op in SHAPE_QUERIES else self.data_refs).add(r.id)
        ins = tuple(
            self.enc.term_of[r.id]
            for r in node.refs()
            if r.id in self.enc.term_of and isinstance(self.types[r.id], TensorType)
        )
        for v in node.outputs:
            if isinstance(self.types[v], (TensorType, ScalarType)):
                self.enc.term_of[v] = self.leaf(v)
                if node.op == "define_tensor" and isinstance(self.types[v], TensorType):
                    self.note_allocation(self.enc.term_of[v], node, self.types[v])
                if not node.is_input and isinstance(self.types[v], TensorType):
                    self.enc.links[self.enc.term_of[v]] = (self.link_op(node), ins)


def encode(fusion: Fusion, extents: dict[int, int] | None = None) -> Encoding:
    """Terms for ``fusion``; where it cannot be encoded (more labels than the bit masks hold),
    an Encoding with every node a boundary and ``skipped`` saying why. ``extents`` (label ->
    extent, e.g. from example inputs) add to the static ones: nodes on empty axes stay
    boundaries."""
    try:
        return _Encoder(fusion, extents).run()
    except NotEncodable as err:
        enc = Encoding(fusion, skipped=str(err), copying_reshapes=layout.copying_reshapes(fusion, extents))
        enc.boundaries = list(fusion.nodes)
        return enc
