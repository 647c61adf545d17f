"""Named axes: each tensor's positional dims carry axis labels, unified through the fusion.

Every iteration axis gets a label; elementwise ops unify the labels of the positions they
combine, so the same axis has the same label everywhere it is used. A dim marked
``broadcast`` is one the tensor is constant along: an extent-1 broadcast (its own label,
extent 1) or an expanded one (the label of the axis it was expanded to). A tensor's
``labels`` are its non-broadcast labels: reductions remove labels, broadcasts add dims.
Reshape, slice, pad, cat and similar ops mint new labels. Extents belong to labels: a
static int, or ``None`` for a symbolic extent (bound later from example inputs).

:func:`infer_types` derives all of this for a :class:`~eqsat.ir.Fusion`; the recorder runs
the same :class:`AxisInference` call by call, which is how a definition with mismatched
shapes is rejected at the offending line. Its typing rules, one per category of op, are in
:mod:`eqsat.ir.elementwise_typing` and :mod:`eqsat.ir.shape_typing`; the types themselves in
:mod:`eqsat.ir.value_types`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from eqsat.errors import FusionError

from . import dtypes as dt
from .dtypes import DataType
from .elementwise_typing import ElementwiseTyping
from .nodes import SCALAR, TENSOR, Node, Ref
from .opspec import OPS
from .shape_typing import ShapeTyping, resized_extent

# the value types (which the package imports from here too)
from .value_types import UNKNOWN_TENSOR, Dim, ScalarType, TensorType, VectorType

if TYPE_CHECKING:  # annotations only: fusion.py imports this module
    from .fusion import Fusion


class AxisInference(ElementwiseTyping, ShapeTyping):
    """Types of a fusion's values, computed node by node."""

    def __init__(self):
        self._parent: dict[int, int] = {}
        self._extent: dict[int, int | None] = {}
        self.same_extent: list[tuple[int, int]] = []  # (label, label of equal extent): reshapes
        self.reshapes: list[tuple[tuple[int, ...], tuple[int, ...]]] = []  # (in, out) labels
        self.resized: list[tuple[int, tuple[int, ...], tuple]] = []  # Types.resized
        self.types: dict[int, Any] = {}
        self.made_by: dict[int, Node] = {}  # value id -> the node that made it
        self.relabeled: set[int] = set()  # values on fresh axes (see combine)
        self.relabel = False
        self._node: Node | None = None

    # -- labels -------------------------------------------------------------------------
    def new_label(self, extent: int | None = None) -> int:
        label = len(self._parent)
        self._parent[label] = label
        self._extent[label] = extent
        return label

    def find(self, label: int) -> int:
        root = label
        while self._parent[root] != root:
            root = self._parent[root]
        while self._parent[label] != root:
            self._parent[label], label = root, self._parent[label]
        return root

    def extent(self, label: int) -> int | None:
        return self._extent[self.find(label)]

    def union(self, a: int, b: int) -> int:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return ra
        ea, eb = self._extent[ra], self._extent[rb]
        if ea is not None and eb is not None and ea != eb:
            self.fail(f"axis extents disagree: {ea} vs {eb}")
        if rb < ra:
            ra, rb = rb, ra
        self._parent[rb] = ra
        self._extent[ra] = ea if ea is not None else eb
        return ra

    def is_unit(self, d: Dim) -> bool:
        """An extent-1 broadcast (as opposed to an expanded one)."""
        return d.broadcast and self.extent(d.label) == 1

    def fail(self, message: str):
        node = self._node
        op = None
        if node is not None:
            op = f"fd.{node.op}" if node.op.startswith(("define_", "add_output")) else f"fd.ops.{node.op}"
        raise FusionError(message, line=node.line if node else None, op=op)

    # -- node dispatch -----------------------------------------------------------------
    def add(self, node: Node) -> list[Any]:
        self._node = node
        self.relabel = False
        if node.opaque or any(self._unknown(r) for r in node.refs()):
            outs = [
                UNKNOWN_TENSOR if k == TENSOR else ScalarType(None) if k == SCALAR else VectorType(None)
                for k in node.kinds
            ]
        else:
            rule = getattr(self, f"_op_{node.op}", None)
            if rule is None:
                rule = getattr(self, f"_cat_{OPS[node.op].category}")
            try:
                outs = rule(node, **node.kwargs)
            except ValueError as err:  # a dtype eqsat does not model there
                self.fail(str(err))
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        for v, t in zip(node.outputs, outs):
            self.types[v] = t
            self.made_by[v] = node
            if self.relabel:
                self.relabeled.add(v)
        self._node = None
        return outs

    def _unknown(self, ref: Ref) -> bool:
        t = self.types[ref.id]
        if isinstance(t, TensorType):
            return not t.known
        if isinstance(t, VectorType):
            return t.items is None
        return t.dtype is None

    def t(self, value) -> Any:
        if isinstance(value, Ref):
            return self.types[value.id]
        return ScalarType(dt.of_number(value), const=value)

    def tensor(self, value, what: str = "argument") -> TensorType:
        t = self.t(value)
        if not isinstance(t, TensorType):
            self.fail(f"{what} must be a tensor, got a scalar")
        return t

    def shape_items(self, shape, casting: bool = False) -> list[ScalarType]:
        """A shape argument (a list of ints and scalars, or a vector value) as scalar types."""
        if isinstance(shape, Ref):
            t = self.types[shape.id]
            if isinstance(t, VectorType):
                return list(t.items)
            self.fail("shape must be a list or a vector")
        if not isinstance(shape, tuple):
            self.fail(f"shape must be a list, got {shape!r}")
        items = []
        for s in shape:
            st = self.t(s)
            if not isinstance(st, ScalarType) or (
                st.dtype is not None and st.dtype not in dt.INT_TYPES and not casting
            ):
                self.fail(f"shape entries must be integer scalars, got {s!r}")
            if casting and st.dtype not in dt.INT_TYPES:
                st = ScalarType(DataType.Int, None if st.const is None else int(st.const))
            items.append(st)
        return items

    def item_dim(self, item: ScalarType, broadcast_if_one: bool = True) -> Dim:
        """A fresh output dim whose extent is given by a shape entry."""
        if item.extent_of is not None:
            return Dim(self.find(item.extent_of), broadcast=False)
        if item.const is not None:
            if item.const == 1 and broadcast_if_one:
                return Dim(self.new_label(1), broadcast=True)
            return Dim(self.new_label(item.const))
        return Dim(self.new_label(None))

    def item_extent(self, item: ScalarType) -> int | None:
        if item.const is not None:
            return item.const
        if item.extent_of is not None:
            return self.extent(item.extent_of)
        return None

    def combine(self, types: Sequence[TensorType]) -> tuple[Dim, ...]:
        """Positional broadcasting of elementwise operands (lower ranks padded on the left):
        the operands' axes at each position become one axis. Where that would put one axis at
        two positions (``le(x[:, None], x[None, :])``: a value used along two axes at once),
        the output gets fresh axes instead and the node is marked ``relabeled`` (the e-graph
        keeps it verbatim: its operands' axes are not its own)."""
        rank = max(t.rank for t in types)
        columns = [[t.dims[i - rank + t.rank] for t in types if i - rank + t.rank >= 0] for i in range(rank)]
        if self._would_repeat_an_axis(columns):
            self.relabel = True
            return tuple(self._fresh_column(col) for col in columns)
        out = []
        for dims in columns:
            full = [d for d in dims if not d.broadcast]
            expanded = [d for d in dims if d.broadcast and not self.is_unit(d)]
            if full:
                label = full[0].label
                for d in full[1:] + expanded:
                    label = self.union(label, d.label)
                out.append(Dim(label))
            elif expanded:
                label = expanded[0].label
                for d in expanded[1:]:
                    label = self.union(label, d.label)
                out.append(Dim(label, broadcast=True))
            else:
                out.append(dims[0])
        return tuple(out)

    def _would_repeat_an_axis(self, columns) -> bool:
        """Whether unifying each column's axes would leave one axis in two columns."""
        parent: dict[int, int] = {}

        def root(x):
            while parent.get(x, x) != x:
                x = parent[x]
            return x

        heads = []
        for col in columns:
            labels = [self.find(d.label) for d in col if not self.is_unit(d)]
            for other in labels[1:]:
                a, b = root(labels[0]), root(other)
                if a != b:
                    parent[b] = a
            heads.append(labels[0] if labels else None)
        named = [root(h) for h in heads if h is not None]
        return len(set(named)) != len(named)

    def _fresh_column(self, col: Sequence[Dim]) -> Dim:
        """A fresh axis for an output position whose operands' axes are not unified."""
        extents = {self.extent(d.label) for d in col if not self.is_unit(d)} - {None}
        if len(extents) > 1:
            self.fail(f"axis extents disagree: {' vs '.join(map(str, sorted(extents)))}")
        full = any(not d.broadcast for d in col)
        if not full and all(self.is_unit(d) for d in col):
            return col[0]
        return Dim(self.new_label(extents.pop() if extents else None), broadcast=not full)

    def elementwise(self, operands, dtype: DataType) -> Any:
        tensors = [t for t in operands if isinstance(t, TensorType)]
        if not tensors:
            return ScalarType(dtype)
        return TensorType(dtype, self.combine(tensors))

    # -- canonical result --------------------------------------------------------------------
    def canonical(self) -> "Types":
        """Labels replaced by their class representative, renumbered in order of appearance."""
        number: dict[int, int] = {}

        def lab(label: int) -> int:
            return number.setdefault(self.find(label), len(number))

        def fix(t):
            if isinstance(t, TensorType):
                if t.dims is None:
                    return t
                return TensorType(t.dtype, tuple(Dim(lab(d.label), d.broadcast) for d in t.dims))
            if isinstance(t, ScalarType):
                return t if t.extent_of is None else ScalarType(t.dtype, t.const, lab(t.extent_of))
            return t if t.items is None else VectorType(tuple(fix(i) for i in t.items))

        types = {v: fix(t) for v, t in self.types.items()}
        same = tuple((lab(a), lab(b)) for a, b in self.same_extent)
        reshapes = tuple((tuple(map(lab, a)), tuple(map(lab, b))) for a, b in self.reshapes)
        resized = tuple((lab(o), tuple(map(lab, ins)), how) for o, ins, how in self.resized)
        extents = {n: self._extent[root] for root, n in number.items()}
        return Types(types, extents, same, reshapes, frozenset(self.relabeled), resized)


@dataclass(frozen=True)
class Types:
    """Types of every value of a fusion, with each label's static extent (None: symbolic)."""

    of: dict[int, Any]
    extents: dict[int, int | None]
    same_extent: tuple[tuple[int, int], ...] = ()  # label pairs of equal (symbolic) extent
    reshapes: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()  # (in, out) labels: equal numel
    relabeled: frozenset[int] = frozenset()  # values whose axes are not their operands' (combine)
    # (out, in labels, how) where a slice, pad or cat makes an extent from symbolic ones:
    # ("slice", start, end), ("pad", low, high), ("cat",) (the sum)
    resized: tuple[tuple[int, tuple[int, ...], tuple], ...] = ()

    def __getitem__(self, value_id: int):
        return self.of[value_id]

    def bind(self, fusion: Fusion, inputs: Sequence[Any]) -> dict[int, int]:
        """Concrete extents of every label reachable from the input tensors' shapes.

        Raises FusionError where two input dims that the fusion uses as one axis (through an
        elementwise op, say) have different extents, naming both: torch would broadcast such
        inputs silently and nvFuser rejects them at run time."""
        out = {k: v for k, v in self.extents.items() if v is not None}
        seen: dict[int, tuple[int, int]] = {}  # label -> (input, dim) that set it
        for i, (vid, value) in enumerate(zip(fusion.inputs, inputs)):
            t = self.of[vid]
            if not (isinstance(t, TensorType) and t.dims is not None and hasattr(value, "shape")):
                continue
            for j, (d, n) in enumerate(zip(t.dims, value.shape)):
                if d.broadcast and self.extents.get(d.label) == 1:
                    continue
                n = int(n)
                if d.label in out and out[d.label] != n:
                    first = (
                        f"input {seen[d.label][0]} dim {seen[d.label][1]}"
                        if d.label in seen
                        else "the definition's static shapes"
                    )
                    raise FusionError(
                        f"input {i} dim {j} has extent {n}, but the fusion uses it as the same axis "
                        f"as {first}, of extent {out[d.label]}",
                        line=fusion.producer[vid].line,
                        op="fd.define_tensor",
                    )
                out[d.label] = n
                seen.setdefault(d.label, (i, j))
        for _ in range(len(self.same_extent) + len(self.reshapes) + len(self.resized)):  # chains
            for o, ins, how in self.resized:
                if o not in out and all(x in out for x in ins):
                    out[o] = resized_extent(how, [out[x] for x in ins])
            for a, b in self.same_extent:
                if b in out and a not in out:
                    out[a] = out[b]
            for ins, outs in self.reshapes:  # a reshape keeps the number of elements
                for known, unknown in ((ins, outs), (outs, ins)):
                    missing = {x for x in unknown if x not in out}
                    if len(missing) == 1 and all(x in out for x in known):
                        rest = math.prod(out[x] for x in unknown if x in out)
                        if rest:
                            out[missing.pop()] = math.prod(out[x] for x in known) // rest
        return out


def infer_types(fusion: Fusion) -> Types:
    inf = AxisInference()
    for node in fusion.nodes:
        inf.add(node)
    return inf.canonical()
