"""Terms -> Fusion IR: rebuild a fusion from chosen terms for its roots.

Labels become positions again. Each term is lowered to a *compact* tensor (one dim per
label it varies along, no broadcast dims) in an order that follows the original value's
where there was one; operands are permuted and broadcast where a consumer needs another
layout; roots (the outputs, and the inputs of boundary nodes) get exactly their original
dims, dtype, broadcast and expanded axes back. Boundary nodes and the fusion's inputs are
re-emitted verbatim, in their original order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eqsat.errors import FusionError
from eqsat.frontend.recorder import FusionDefinition
from eqsat.ir import dtypes as dt
from eqsat.ir.axes import ScalarType, TensorType
from eqsat.ir.dtypes import DataType
from eqsat.ir.fusion import Fusion, Node, Ref
from eqsat.ir.replay import node_call

from eqsat.egraph.terms import GENERIC, INDEXING_TERMS, IR_OP, REDUCTIONS, TermGraph, bits, code_dtype


class LoweringError(FusionError):
    """The chosen terms cannot be rebuilt as the original fusion's values (a rule bug)."""


@dataclass
class Lowered:
    handle: Any
    order: tuple[int, ...] | None  # original labels, one per dim; None for a scalar


class TermLowering:
    def __init__(
        self,
        fusion: Fusion,
        graph: TermGraph,
        roots: dict[int, int],
        boundaries: list[Node],
        label_of_bit: dict[int, int],
        order_hints: dict[int, tuple[int, ...]] | None = None,
    ):
        self.f = fusion
        self.types = fusion.types
        self.g = graph
        self.roots = roots
        self.boundaries = boundaries
        self.label_of_bit = label_of_bit
        self.hints = order_hints or {}
        self.fd = FusionDefinition()
        self.env: dict[int, Any] = {}
        self.memo: dict[int, Lowered] = {}
        self.var_means: dict[tuple, tuple] = {}
        self.source: dict[int, tuple[Any, int]] = {}  # label -> (handle, position)

    # -- labels and extents ------------------------------------------------------------------
    def labels(self, mask: int) -> list[int]:
        return [self.label_of_bit[b] for b in bits(mask)]

    def note(self, handle, labels) -> None:
        for pos, label in enumerate(labels):
            if label is not None:
                self.source.setdefault(label, (handle, pos))

    def extent(self, label: int):
        """The extent of ``label``: its static extent as a number where the definition fixes
        one (as the definition itself writes it: nothing for nvFuser to evaluate on the host),
        else ``size`` of a value that carries the axis."""
        static = self.types.extents.get(label)
        if static is not None:
            return static
        if label in self.source:
            handle, pos = self.source[label]
            return self.fd.ops.size(handle, dim=pos)
        raise LoweringError(f"no value carries axis a{label}, so its extent is unknown")

    def extent_product(self, labels):
        """The product of the extents of ``labels``, an Int scalar (static ones multiplied here)."""
        static, symbolic = 1, []
        for label in labels:
            e = self.extent(label)
            if isinstance(e, int):
                static *= e
            else:
                symbolic.append(e)
        out = self.fd.define_scalar(static, dtype=DataType.Int) if static != 1 or not symbolic else None
        for e in symbolic:
            out = e if out is None else self.fd.ops.mul(out, e)
        return out

    # -- layouts -----------------------------------------------------------------------------
    def compact(self, handle, t: TensorType) -> Lowered:
        """A value of the original fusion with its broadcast dims squeezed away."""
        unit = [i for i, d in enumerate(t.dims) if d.broadcast and self.types.extents.get(d.label) == 1]
        expanded = [i for i, d in enumerate(t.dims) if d.broadcast and i not in unit]
        if unit:
            handle = self.fd.ops.squeeze(handle, dims=unit)
            expanded = [i - sum(1 for u in unit if u < i) for i in expanded]
        if expanded:
            handle = self.fd.ops.squeeze(handle, dims=expanded, squeeze_expanded=True)
        order = tuple(d.label for d in t.dims if not d.broadcast)
        return Lowered(handle, order)

    def permuted(self, lv: Lowered, order: tuple[int, ...]) -> Lowered:
        if lv.order == order:
            return lv
        return Lowered(self.fd.ops.permute(lv.handle, dims=[lv.order.index(l) for l in order]), order)

    def conform(self, lv: Lowered, target: tuple[int, ...]):
        """``lv`` as an operand of an op whose output has labels ``target``."""
        if lv.order is None:
            return lv.handle
        mine = tuple(l for l in target if l in lv.order)
        lv = self.permuted(lv, mine)
        if len(mine) == len(target):
            return lv.handle
        return self.fd.ops.broadcast(lv.handle, is_broadcast_dim=[l not in lv.order for l in target])

    def to_type(self, lv: Lowered, t, what: str):
        """``lv`` with exactly the dims and dtype of the original value's type ``t``."""
        if isinstance(t, ScalarType):
            if lv.order is not None:
                raise LoweringError(f"{what} is a scalar but its term lowered to a tensor")
            return lv.handle
        want = tuple(d.label for d in t.dims if not d.broadcast)
        if lv.order is None or sorted(lv.order) != sorted(want):
            raise LoweringError(
                f"{what} varies along {sorted(want)} but its term along "
                f"{None if lv.order is None else sorted(lv.order)}"
            )
        got = lv.handle._type.dtype
        if got is not t.dtype:
            raise LoweringError(f"{what} has dtype {t.dtype.name} but its term gives {got.name}")
        handle = self.permuted(lv, want).handle
        if len(want) == len(t.dims):
            return handle
        positions = [i for i, d in enumerate(t.dims) if not d.broadcast]
        shape = []
        for i, d in enumerate(t.dims):
            if not d.broadcast:
                static = self.types.extents.get(d.label)
                shape.append(
                    static if static is not None else self.fd.ops.size(handle, dim=positions.index(i))
                )
            elif self.types.extents.get(d.label) == 1:
                shape.append(1)
            else:
                shape.append(self.extent(d.label))
        return self.fd.ops.broadcast_in_dim(handle, shape=shape, broadcast_dims=positions)

    def output_order(self, tid: int, kids: list[Lowered]) -> tuple[int, ...]:
        labels = set()
        for k in kids:
            labels.update(k.order or ())
        hint = self.hints.get(tid)
        if hint is not None:
            hint = tuple(self.label_of_bit[b] for b in hint)
            if set(hint) == labels:
                return hint
        tensors = sorted((k for k in kids if k.order is not None), key=lambda k: -len(k.order))
        order = list(tensors[0].order) if tensors else []
        for k in tensors[1:]:
            order += [l for l in k.order if l not in order]
        return tuple(order)

    # -- terms -------------------------------------------------------------------------------
    def lower(self, tid: int) -> Lowered:
        if tid in self.memo:
            return self.memo[tid]
        # Lower the kids first, deepest first, without recursion: a chain of thousands of ops
        # would overflow Python's stack. Each term is lowered in the order recursion would.
        stack, entered = [tid], set()
        while stack:
            top = stack[-1]
            if top in self.memo:
                stack.pop()
            elif top in entered or not any(k not in self.memo for k in self.g[top].kids):
                stack.pop()
                if top != tid:
                    self.lower_one(top)
            else:
                entered.add(top)
                stack.extend(k for k in reversed(self.g[top].kids) if k not in self.memo)
        return self.lower_one(tid)

    def lower_one(self, tid: int) -> Lowered:
        if tid not in self.memo:
            self.memo[tid] = self._lower(tid)
            lv = self.memo[tid]
            if lv.order is not None:
                self.note(lv.handle, lv.order)
        return self.memo[tid]

    def _lower(self, tid: int) -> Lowered:
        n = self.g[tid]
        fd, op = self.fd, n.op
        if op == "Leaf":
            vid = n.attrs[0]
            if vid not in self.env:
                raise LoweringError(f"value %{vid} is used before the node that makes it")
            t = self.types[vid]
            if isinstance(t, TensorType):
                return self.compact(self.env[vid], t)
            return Lowered(self.env[vid], None)
        if op == "Num":
            return Lowered(fd.define_scalar(float(n.attrs[0]), dtype=DataType.Double), None)
        if op == "Int":
            return Lowered(fd.define_scalar(int(n.attrs[0]), dtype=DataType.Int), None)
        if op == "Extent":
            return Lowered(self.extent_product(self.labels(n.attrs[0])), None)
        if op == "Iota":
            (label,) = self.labels(n.attrs[0])
            return Lowered(fd.ops.iota(self.extent(label), 0, 1, dtype=DataType.Int), (label,))
        if op in REDUCTIONS:
            return self.reduction(tid)
        if op in INDEXING_TERMS:
            return self.indexing(tid)
        kids = [self.lower(k) for k in n.kids]
        order = self.output_order(tid, kids) if any(k.order is not None for k in kids) else None
        args = [self.conform(k, order) if order is not None else k.handle for k in kids]
        if op == "Cast":
            dtype = code_dtype(n.attrs[0])
            return Lowered(fd.ops.cast(args[0], dtype=dtype), order)
        name = n.attrs[0] if op in GENERIC else IR_OP[op]  # a generic term names its op
        return Lowered(getattr(fd.ops, name)(*args), order)

    def reduction(self, tid: int) -> Lowered:
        n = self.g[tid]
        fd = self.fd
        x = self.lower(n.kids[0])
        labels = self.labels(n.attrs[0])
        if x.order is None:  # a scalar: constant along every label
            if n.op == "Sum" and labels:
                return Lowered(fd.ops.mul(x.handle, self.extent_product(labels)), None)
            if n.op == "Prod" and labels:
                return Lowered(fd.ops.pow(x.handle, self.extent_product(labels)), None)
            return x
        present = [l for l in labels if l in x.order]
        absent = [l for l in labels if l not in x.order]
        dims = sorted(x.order.index(l) for l in present)
        order = tuple(l for l in x.order if l not in present)
        if n.op in ("Mean", "Var"):
            if absent:
                raise LoweringError("var_mean over an axis its input lacks")
            correction = n.attrs[1] if n.op == "Var" else self.correction_for(n.kids[0], n.attrs[0])
            key = (n.kids[0], n.attrs[0], correction)
            if key not in self.var_means:
                self.var_means[key] = fd.ops.var_mean(x.handle, dims=dims, correction=correction)
            var, mean = self.var_means[key]
            return Lowered(var if n.op == "Var" else mean, order)
        op = n.op.lower()
        handle = getattr(fd.ops, op)(x.handle, dims=dims) if dims else x.handle
        integral = (
            not dt.is_float(handle._type.dtype)
            and handle._type.dtype not in dt.COMPLEX_TYPES
            and n.op in ("Sum", "Prod")
        )
        if not dims and integral and handle._type.dtype is not DataType.Int:
            handle = fd.ops.cast(handle, dtype=DataType.Int)
        if absent and n.op == "Sum":
            handle = fd.ops.mul(handle, self.extent_product(absent))
        elif absent and n.op == "Prod":
            handle = fd.ops.pow(handle, self.extent_product(absent))
        return Lowered(handle, order)

    def indexing(self, tid: int) -> Lowered:
        """``take_along_axis`` (Take; TakePad: of the input padded with one zero) or ``index_select``
        (IndexSelect) along the term's one label. The input keeps its order; for take_along_axis the
        index is laid out as the input, with an extent-1 broadcast dim at the indexed one (and where
        it lacks one of the input's labels: nvFuser takes the input's), and the result lacks the
        indexed label; index_select's 1-D index puts its label at the indexed dim."""
        n = self.g[tid]
        (label,) = self.labels(n.attrs[0])
        x, index = self.lower(n.kids[0]), self.lower(n.kids[1])
        if x.order is None or label not in x.order or index.order is None:
            raise LoweringError(f"{n.op} of a value that does not vary along the indexed axis a{label}")
        dim = x.order.index(label)
        if n.op == "IndexSelect":
            if len(index.order) != 1:
                raise LoweringError("index_select of an index that is not 1-D")
            out = self.fd.ops.index_select(x.handle, index.handle, dim=dim)
            return Lowered(out, x.order[:dim] + index.order + x.order[dim + 1 :])
        if set(index.order) - set(x.order):
            raise LoweringError("take_along_axis of an index along an axis its input lacks")
        target = tuple(None if l == label else l for l in x.order)
        idx = self.conform(index, target)
        source = x.handle
        if n.op == "TakePad":  # one +0.0 after the end of the indexed dim (innermost first)
            widths = [w for d in reversed(range(dim, len(x.order))) for w in ((0, 1) if d == dim else (0, 0))]
            source = self.fd.ops.pad(source, widths, 0.0)
        out = self.fd.ops.take_along_axis(source, idx, dim=dim)
        return Lowered(self.fd.ops.squeeze(out, dims=[dim]), tuple(l for l in x.order if l != label))

    def correction_for(self, kid: int, mask: int) -> int:
        for node in self.g.nodes:
            if node.op == "Var" and node.kids == (kid,) and node.attrs[0] == mask:
                return node.attrs[1]
        return 0

    # -- the fusion ----------------------------------------------------------------------------
    def live_boundaries(self) -> set[int]:
        """Boundary nodes (by index) that the outputs need, directly or through terms."""
        producer = {v: i for i, n in enumerate(self.boundaries) for v in n.outputs}
        live, seen, stack = set(), set(), []
        for out in self.f.outputs:
            stack.append(("v", out.value))
            if out.alias_input is not None:
                stack.append(("v", out.alias_input))
        while stack:
            kind, x = stack.pop()
            if (kind, x) in seen:
                continue
            seen.add((kind, x))
            if kind == "t":
                node = self.g[x]
                if node.op == "Leaf":
                    stack.append(("b", node.attrs[0]))
                stack.extend(("t", k) for k in node.kids)
            elif x in self.roots and kind == "v":
                stack.append(("t", self.roots[x]))
            elif x in producer:
                i = producer[x]
                if i not in live:
                    live.add(i)
                    for r in self.boundaries[i].refs():
                        stack.append(("v", r.id))
        return live

    def run(self) -> Fusion:
        live = self.live_boundaries()
        for i, node in enumerate(self.boundaries):
            if not (node.is_input or i in live):
                continue
            name, args, kwargs = node_call(node)
            args = [self.arg(a) for a in args]
            kwargs = {k: self.arg(v) for k, v in kwargs.items()}
            if name.startswith("define_"):
                result = getattr(self.fd, name)(*args, **kwargs)
            else:
                result = getattr(self.fd.ops, name)(*args, **kwargs)
            results = list(result) if len(node.outputs) > 1 else [result]
            for v, h in zip(node.outputs, results):
                self.env[v] = h
                t = self.types[v]
                if isinstance(t, TensorType) and t.known:
                    self.note(
                        h,
                        [
                            d.label if not d.broadcast or self.types.extents.get(d.label) != 1 else None
                            for d in t.dims
                        ],
                    )
        inputs = {id(self.env[v]) for v in self.f.inputs if v in self.env}
        for out in self.f.outputs:
            value = self.value(out.value, f"output %{out.value}")
            if id(value) in inputs and not self.f.producer[out.value].is_input:
                value = self.fd.ops.set(value)  # a fresh tensor, as the original's was,
            if out.alias_input is not None:  # not the caller's input itself
                self.fd.add_output(value, self.env[out.alias_input])
            elif out.stride_order is not None:
                self.fd.add_output(value, stride_order=list(out.stride_order))
            else:
                self.fd.add_output(value)
        return self.fd.fusion

    def value(self, vid: int, what: str):
        if vid in self.roots:
            node = self.g[self.roots[vid]]
            if node.op == "Leaf" and self.types[node.attrs[0]] == self.types[vid]:
                return self.env[node.attrs[0]]  # already in its original layout
            return self.to_type(self.lower(self.roots[vid]), self.types[vid], what)
        return self.env[vid]

    def arg(self, value):
        if isinstance(value, Ref):
            return self.value(value.id, f"%{value.id}")
        if isinstance(value, tuple):
            return [self.arg(v) for v in value]
        return value


def lower_terms(
    fusion: Fusion,
    graph: TermGraph,
    roots: dict[int, int],
    boundaries: list[Node],
    label_of_bit: dict[int, int],
    order_hints=None,
) -> Fusion:
    """The fusion that computes ``roots`` (IR value -> term in ``graph``) around the
    ``boundaries`` (nodes kept verbatim) of ``fusion``."""
    return TermLowering(fusion, graph, roots, boundaries, label_of_bit, order_hints).run()


def lower_encoding(enc) -> Fusion:
    """The encoding's own terms lowered back (an identity, up to layout choices)."""
    return lower_terms(enc.fusion, enc.graph, enc.roots, enc.boundaries, enc.label_of, enc.order)
