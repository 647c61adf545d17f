"""The typing rules of shape ops, factories, data movement and the ops eqsat keeps as they are:
the part of :class:`eqsat.ir.axes.AxisInference` that gives each such op's output types (one
method per category of :data:`eqsat.ir.opspec.OPS`, ``_cat_<category>``)."""

from __future__ import annotations

import math

from . import dtypes as dt
from . import layout
from .dtypes import DataType
from .value_types import Dim, ScalarType, TensorType, VectorType


class ShapeTyping:
    """Typing rules of :class:`~eqsat.ir.axes.AxisInference` (which calls them with the node and
    its bound arguments): broadcasts, squeezes, permutes, reshapes, sizes, factories, slices,
    cats, pads, indexing, matmuls and the kept ops. They read its ``t``, ``tensor``,
    ``new_label``, ``union``, ``fail``..."""

    # -- shape ops ---------------------------------------------------------------------------
    def _cat_broadcast(self, node, arg, is_broadcast_dim):
        t = self.tensor(arg)
        if sum(1 for b in is_broadcast_dim if not b) != t.rank:
            self.fail(
                f"is_broadcast_dim {list(is_broadcast_dim)} has "
                f"{sum(1 for b in is_broadcast_dim if not b)} False entries; expected one per "
                f"input dim ({t.rank})"
            )
        it = iter(t.dims)
        return TensorType(
            t.dtype, tuple(Dim(self.new_label(1), True) if b else next(it) for b in is_broadcast_dim)
        )

    def broadcast_dim(self, d: Dim, item: ScalarType, j: int, taken: set[int]) -> Dim:
        """Input dim ``d`` placed at an output position whose requested extent is ``item``.
        ``taken``: the axes the output has at its other positions, which this one must not
        become (``expand(t, [fd.ops.size(x, 0)] * 2)`` gives two axes of one extent)."""
        if item.const == -1:
            return d
        if self.is_unit(d):
            if item.const == 1:
                return d
            label = self.item_dim(item).label
            if self.find(label) in taken:
                label = self.new_label(self.extent(label))
                if item.extent_of is not None:
                    self.same_extent.append((label, item.extent_of))
            return Dim(label, broadcast=True)
        if item.extent_of is not None:
            if self.find(item.extent_of) in taken - {self.find(d.label)}:
                self.same_extent.append((d.label, item.extent_of))
                return d
            return Dim(self.union(d.label, item.extent_of), d.broadcast)
        if item.const is not None:
            have = self.extent(d.label)
            if have is not None and have != item.const:
                self.fail(f"output dim {j} has extent {item.const} but the input's dim has extent {have}")
            if have is None:
                self._extent[self.find(d.label)] = item.const
        return d

    def _cat_broadcast_in_dim(self, node, arg, shape, broadcast_dims):
        t = self.tensor(arg)
        items = self.shape_items(shape)
        if len(broadcast_dims) != t.rank:
            self.fail(
                f"broadcast_dims {list(broadcast_dims)} has {len(broadcast_dims)} entries; "
                f"expected one per input dim ({t.rank})"
            )
        if any(not 0 <= b < len(items) for b in broadcast_dims) or list(broadcast_dims) != sorted(
            set(broadcast_dims)
        ):
            self.fail(
                f"broadcast_dims {list(broadcast_dims)} must be increasing and below the "
                f"output rank {len(items)}"
            )
        where = {b: i for i, b in enumerate(broadcast_dims)}
        taken = self.axes_of(t.dims)
        dims = []
        for j, item in enumerate(items):
            if j in where:
                d = self.broadcast_dim(t.dims[where[j]], item, j, taken)
            else:
                d = self.broadcast_dim(Dim(self.new_label(1), True), item, j, taken)
            taken |= self.axes_of([d])
            dims.append(d)
        return TensorType(t.dtype, tuple(dims))

    def axes_of(self, dims) -> set[int]:
        return {self.find(d.label) for d in dims if not self.is_unit(d)}

    def _cat_expand(self, node, arg, shape):
        """nvFuser's expand: -1 keeps a dim; a shape longer than the input's rank prepends
        broadcast dims (extent-1 ones, expanded to the extents given)."""
        t = self.tensor(arg)
        items = self.shape_items(shape)
        if len(items) < t.rank:
            self.fail(f"shape has {len(items)} entries; expected at least the input's rank {t.rank}")
        lead = len(items) - t.rank
        dims = tuple(Dim(self.new_label(1), True) for _ in range(lead)) + t.dims
        for j in range(lead):
            if items[j].const == -1:
                self.fail(f"shape entry {j} is -1, but the input has no dim there to keep")
        taken = self.axes_of(dims)
        out = []
        for j, (d, item) in enumerate(zip(dims, items)):
            out.append(self.broadcast_dim(d, item, j, taken))
            taken |= self.axes_of(out[-1:])
        return TensorType(t.dtype, tuple(out))

    def _cat_squeeze(self, node, arg, dims, squeeze_expanded):
        t = self.tensor(arg)
        for i in dims:
            d = t.dims[i]
            if not d.broadcast and self.extent(d.label) not in (1, None):
                self.fail(f"cannot squeeze dim {i} of extent {self.extent(d.label)}")
            if d.broadcast and not self.is_unit(d) and not squeeze_expanded:
                self.fail(f"dim {i} is an expanded broadcast; pass squeeze_expanded=True to squeeze it")
        return TensorType(t.dtype, tuple(d for i, d in enumerate(t.dims) if i not in dims))

    def _cat_permute(self, node, arg, dims):
        t = self.tensor(arg)
        if sorted(dims) != list(range(t.rank)):
            self.fail(f"dims {list(dims)} is not a permutation of the input's {t.rank} dims")
        return TensorType(t.dtype, tuple(t.dims[i] for i in dims))

    def _cat_stride_order(self, node, arg, stride_order):
        """A copy of ``arg`` laid out in ``stride_order``; an empty one (nvfuser_direct prints
        it) is a plain copy in the default row-major layout."""
        t = self.tensor(arg)
        problem = layout.permutation_problem(stride_order, t.rank) if stride_order else None
        if problem:
            self.fail(problem)
        return t

    def _static_numel(self, t: TensorType) -> int | None:
        extents = [self.extent(d.label) for d in t.dims]
        return None if None in extents else math.prod(extents)

    def _cat_reshape(self, node, arg, new_shape):
        t = self.tensor(arg)
        items = self.shape_items(new_shape)
        extents = [self.item_extent(i) for i in items]
        numel = self._static_numel(t)
        if extents.count(-1) > 1:
            self.fail("new_shape may hold at most one -1")
        if -1 in extents and numel is not None and None not in extents:
            rest = math.prod(e for e in extents if e != -1)
            extents[extents.index(-1)] = numel // rest if rest else 0
        if numel is not None and None not in extents and -1 not in extents and math.prod(extents) != numel:
            self.fail(f"cannot reshape {numel} elements into new_shape {extents}")
        dims = []
        for e, item in zip(extents, items):
            e = None if e == -1 else e
            dims.append(Dim(self.new_label(1), True) if e == 1 else Dim(self.new_label(e)))
            if e is None and item.extent_of is not None:  # new_shape=[..., fd.ops.size(x, i), ...]
                self.same_extent.append((dims[-1].label, item.extent_of))
        self.reshapes.append((tuple(d.label for d in t.dims), tuple(d.label for d in dims)))
        return TensorType(t.dtype, tuple(dims))

    def _cat_size(self, node, arg, dim):
        t = self.tensor(arg)
        d = t.dims[dim]
        extent = self.extent(d.label)
        if extent == 1:
            return ScalarType(DataType.Int, const=1)
        return ScalarType(DataType.Int, const=extent, extent_of=d.label)

    def _cat_shape(self, node, arg):
        t = self.tensor(arg)
        return VectorType(tuple(self._cat_size(node, arg, i) for i in range(t.rank)))

    # -- factories ---------------------------------------------------------------------------
    def _cat_full(self, node, shape, fill_value, dtype):
        return TensorType(dtype, tuple(self.item_dim(i) for i in self.shape_items(shape)))

    def _cat_iota(self, node, length, start, step, dtype):
        return TensorType(dtype, (self.item_dim(self.t(length), broadcast_if_one=False),))

    def _cat_random(self, node, arg1, arg2, shape, rng_seed, rng_offset, dtype):
        return TensorType(dtype, tuple(self.item_dim(i) for i in self.shape_items(shape)))

    # -- data movement -----------------------------------------------------------------------
    def _fresh(self, extent: int | None) -> Dim:
        return Dim(self.new_label(1), True) if extent == 1 else Dim(self.new_label(extent))

    def _cat_slice(self, node, arg, start_indices, end_indices, strides, manual_normalization):
        """nvFuser's slice: steps of 1 only. Without ``manual_normalization`` indices are
        normalized as in Python (negative ones count from the end, then clamped to the
        extent); with it they are taken as they are, so they must lie in 0 <= start <= end
        <= extent (nvFuser does not check; eqsat refuses what it can see is outside)."""
        t = self.tensor(arg)
        n = t.rank
        if len(start_indices) != n or len(end_indices) != n or (strides is not None and len(strides) != n):
            self.fail(f"start_indices, end_indices and strides need one entry per dim ({n})")
        if strides is not None and any(self.t(s).const != 1 for s in strides):
            self.fail(f"strides {list(strides)}: nvFuser slices with steps of 1 only")
        dims = []
        for i, d in enumerate(t.dims):
            start, end = self.t(start_indices[i]), self.t(end_indices[i])
            extent = self.extent(d.label)
            if manual_normalization:
                self._check_normalized(i, start.const, end.const, extent)
            whole_end = (end.extent_of is not None and self.find(end.extent_of) == self.find(d.label)) or (
                extent is not None and end.const is not None and end.const >= extent
            )
            if start.const == 0 and whole_end:
                dims.append(d)
                continue
            constant = start.const is not None and end.const is not None
            how = ("slice", start.const, end.const) if constant else None
            dims.append(self._resized(how, [d.label]))
        return TensorType(t.dtype, tuple(dims))

    def _check_normalized(self, i: int, start, end, extent) -> None:
        if start is not None and start < 0 or end is not None and end < 0:
            self.fail(
                f"dim {i}: with manual_normalization=True the indices are not normalized, "
                f"so they must not be negative (start {start}, end {end})"
            )
        if start is not None and end is not None and end < start:
            self.fail(f"dim {i}: end {end} is before start {start}")
        if (
            extent is not None
            and start is not None
            and start > extent
            or extent is not None
            and end is not None
            and end > extent
            and start != 0
        ):
            self.fail(
                f"dim {i}: indices {start}:{end} reach past the extent {extent}; with "
                f"manual_normalization=True nvFuser does not clamp them"
            )

    def _cat_cat(self, node, tensors, dim, manual_padding):
        """nvFuser's cat: tensors of one dtype and rank. With ``manual_padding`` each input is
        made by ``fd.ops.pad`` and already spans the output along ``dim`` (nvfuser_direct
        prints cats so); the output there is what the padded inputs hold."""
        ts = [self.tensor(x, "each of tensors") for x in tensors]
        rank = ts[0].rank
        if any(x.rank != rank for x in ts):
            self.fail(f"all tensors must have the same rank, got {[x.rank for x in ts]}")
        if len({x.dtype for x in ts}) > 1:
            self.fail(
                f"all tensors must have the same dtype (nvFuser does not promote in cat), got "
                f"{', '.join(x.dtype.name for x in ts)}"
            )
        if manual_padding:
            unpadded = [x for x in tensors if self.made_by[x.id].op != "pad"]
            if unpadded:
                self.fail(
                    f"manual_padding=True needs every input made by fd.ops.pad; "
                    f"{', '.join(map(repr, unpadded))} is not"
                )
        dims = []
        for i in range(rank):
            if i == dim and not manual_padding:
                dims.append(self._resized(("cat",), [x.dims[i].label for x in ts]))
            else:
                dims.append(self.combine([TensorType(x.dtype, (x.dims[i],)) for x in ts])[0])
        return TensorType(ts[0].dtype, tuple(dims))

    def _resized(self, how: tuple | None, labels: list[int]) -> Dim:
        """A fresh dim for what a slice, pad or cat (``how``, as ``Types.resized`` holds it;
        None: its indices are not constants) makes of the axes ``labels``: of static extent
        where theirs are, else recorded in ``resized`` for ``Types.bind`` to derive from the
        bound inputs."""
        extents = [self.extent(label) for label in labels]
        static = how is not None and None not in extents
        dim = self._fresh(resized_extent(how, extents) if static else None)
        if how is not None and not static:
            self.resized.append((dim.label, tuple(labels), how))
        return dim

    def _cat_pad(self, node, arg, pad_widths, value):
        t = self.tensor(arg)
        if len(pad_widths) % 2 or len(pad_widths) > 2 * t.rank:
            self.fail(f"pad_widths needs pairs for at most {t.rank} dims, got {len(pad_widths)} entries")
        dims = list(t.dims)
        for k in range(len(pad_widths) // 2):
            i = t.rank - 1 - k
            lo, hi = (self.t(p).const for p in pad_widths[2 * k : 2 * k + 2])
            if lo == 0 and hi == 0:
                continue
            how = ("pad", lo, hi) if lo is not None and hi is not None else None
            dims[i] = self._resized(how, [dims[i].label])
        return TensorType(t.dtype, tuple(dims))

    def _computed_along(self, t: TensorType) -> tuple[Dim, ...]:
        """``t``'s axes for a result computed along them (a sort, a scan, a gather by an index
        of these axes): none broadcast but extent-1 ones."""
        return tuple(d if self.is_unit(d) else Dim(d.label, False) for d in t.dims)

    def _index(self, value, what: str = "index") -> TensorType:
        idx = self.tensor(value, what)
        if idx.dtype not in dt.INT_TYPES:
            self.fail(f"{what} must be an integer tensor, got {idx.dtype.name}")
        return idx

    def _cat_gather(self, node, arg, index, dim):
        t, idx = self.tensor(arg), self.tensor(index, "index")
        if idx.rank != t.rank:
            self.fail(f"index has rank {idx.rank}; expected the input's rank {t.rank}")
        for i in range(t.rank):
            if i == dim or t.dims[i].broadcast or idx.dims[i].broadcast:
                continue
            # take_along_axis: the index spans the input's other axes. gather (torch.gather):
            # the index may be shorter there; the same axis only where both extents are static
            # and equal (then gather is take_along_axis)
            ea, eb = self.extent(t.dims[i].label), self.extent(idx.dims[i].label)
            if node.op == "take_along_axis" or (ea is not None and ea == eb):
                self.union(t.dims[i].label, idx.dims[i].label)
        return TensorType(t.dtype, self._computed_along(idx))

    def _cat_index_select(self, node, arg, index, dim):
        """``out[..., j, ...] = arg[..., index[j], ...]`` along ``dim``. The index is 1-D, 0-D
        (one entry: the output has extent 1 there), or of the input's rank with extent-1
        broadcast dims everywhere but ``dim`` (nvfuser_direct prints embeddings so)."""
        t, idx = self.tensor(arg), self._index(index)
        dims = list(t.dims)
        if idx.rank == 0:
            dims[dim] = Dim(self.new_label(1), True)
        elif idx.rank == 1:
            dims[dim] = Dim(idx.dims[0].label, False) if not self.is_unit(idx.dims[0]) else idx.dims[0]
        elif idx.rank == t.rank and all(self.is_unit(d) for i, d in enumerate(idx.dims) if i != dim):
            d = idx.dims[dim]
            dims[dim] = Dim(d.label, False) if not self.is_unit(d) else d
        else:
            self.fail(
                f"index must be 1-D, 0-D, or of the input's rank {t.rank} with extent-1 "
                f"broadcast dims but at dim {dim}; got rank {idx.rank}"
            )
        return TensorType(t.dtype, tuple(dims))

    def _cat_linear(self, node, arg1, arg2, bias):
        a, w = self.tensor(arg1), self.tensor(arg2, "weight")
        if w.rank not in (1, 2) or a.rank < 1:
            self.fail(f"linear takes a weight of rank 1 or 2, got {w.rank}")
        self.combine([TensorType(a.dtype, a.dims[-1:]), TensorType(w.dtype, w.dims[-1:])])
        dims = a.dims[:-1] + ((Dim(w.dims[0].label),) if w.rank == 2 else ())
        return TensorType(a.dtype, dims)

    def _cat_matmul(self, node, arg1, arg2):
        a, b = self.tensor(arg1), self.tensor(arg2)
        if a.rank == 0 or b.rank == 0:
            self.fail("matmul needs tensors of rank 1 or more")
        self.combine(
            [TensorType(a.dtype, a.dims[-1:]), TensorType(b.dtype, b.dims[-2:-1] if b.rank > 1 else b.dims)]
        )
        if a.rank == 1 and b.rank == 1:
            return TensorType(a.dtype, ())
        if b.rank == 1:
            return TensorType(a.dtype, a.dims[:-1])
        if a.rank == 1:
            return TensorType(a.dtype, b.dims[:-2] + b.dims[-1:])
        batch = (
            self.combine([TensorType(a.dtype, a.dims[:-2]), TensorType(b.dtype, b.dims[:-2])])
            if a.rank > 2 or b.rank > 2
            else ()
        )
        return TensorType(a.dtype, tuple(batch) + a.dims[-2:-1] + b.dims[-1:])

    # -- ops kept as they are: sorts, scans, scatter, embedding, grouped matmul ------------------
    def _cat_topk(self, node, arg, k, dim, largest, sorted):
        """(values, indices): the input's dims with ``dim`` of extent ``k``; indices are Int.
        A rank-0 input is its own top element, at index 0 (nvFuser 0.2.35, arith.cpp topk)."""
        t, kt = self.tensor(arg), self.t(k)
        if not isinstance(kt, ScalarType) or kt.dtype not in dt.INT_TYPES or isinstance(k, bool):
            self.fail(f"k must be an Int scalar, got {k!r}")
        if t.rank == 0:
            return [t, TensorType(DataType.Int, ())]
        extent = self.extent(t.dims[dim].label)
        if kt.const is not None and (kt.const < 0 or extent is not None and kt.const > extent):
            self.fail(f"k = {kt.const} is outside 0..{extent}, the extent of dim {dim}")
        dims = list(self._computed_along(t))
        dims[dim] = self._fresh(kt.const)
        return [TensorType(t.dtype, tuple(dims)), TensorType(DataType.Int, tuple(dims))]

    def _cat_argsort(self, node, arg, dim, descending, stable):
        return TensorType(DataType.Int, self._computed_along(self.tensor(arg)))

    def _cat_scan(self, node, arg, dim, init):
        """cumsum, cumprod, cummin, cummax: the input's dtype (no promotion, nvFuser's
        arith.cpp scan) and shape. nvFuser's printer never writes ``init``; eqsat models
        scans from the op's identity only."""
        if init is not None:
            self.fail("a scan with an init value is not modelled by eqsat; leave init out")
        t = self.tensor(arg)
        return TensorType(t.dtype, self._computed_along(t))

    def _cat_scatter(self, node, arg, index, src, dim):
        """torch.scatter out of place: ``arg`` with ``src`` (a tensor of ``index``'s rank, or a
        scalar) written where ``index`` points along ``dim``."""
        t, idx = self.tensor(arg), self._index(index)
        srct = self.t(src)
        if idx.rank != t.rank or isinstance(srct, TensorType) and srct.rank != t.rank:
            self.fail(f"index and src must have the input's rank {t.rank}")
        return TensorType(t.dtype, self._computed_along(t))

    def _cat_embedding(
        self, node, input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse
    ):
        """F.embedding: ``weight``'s rows (a [V, D] weight) picked by ``input``: input's dims,
        then D, in the weight's dtype."""
        idx, w = self._index(input, "input"), self.tensor(weight, "weight")
        if w.rank != 2 or idx.rank < 1:
            self.fail(
                f"embedding_fwd takes an index of rank 1 or more and a weight of rank 2, got "
                f"ranks {idx.rank} and {w.rank}"
            )
        return TensorType(w.dtype, self._computed_along(idx) + (Dim(w.dims[1].label, False),))

    def _cat_grouped_mm(self, node, arg1, arg2, offsets):
        """Matmuls of groups that ``offsets`` (1-D, Int32, each group's end) cut along one
        axis (nvFuser 0.2.35, ops/arith.cpp grouped_mm): [m, k] x [k, n] cut along k gives
        [g, m, n]; [g, m, k] x [k, n] cut along n and [m, k] x [g, k, n] cut along m give
        [m, n]. The dtype is the first operand's."""
        a, b, off = self.tensor(arg1), self.tensor(arg2), self._index(offsets, "offsets")
        if off.rank != 1:
            self.fail(f"offsets must be 1-D, got rank {off.rank}")
        (g,) = off.dims
        if (a.rank, b.rank) == (2, 2):
            self.combine([TensorType(a.dtype, a.dims[1:]), TensorType(b.dtype, b.dims[:1])])
            dims = (Dim(g.label, False), a.dims[0], b.dims[1])
        elif (a.rank, b.rank) == (3, 2):
            self.combine([TensorType(a.dtype, a.dims[2:]), TensorType(b.dtype, b.dims[:1])])
            self.union(a.dims[0].label, g.label)
            dims = (a.dims[1], b.dims[1])
        elif (a.rank, b.rank) == (2, 3):
            self.combine([TensorType(a.dtype, a.dims[1:]), TensorType(b.dtype, b.dims[1:2])])
            self.union(b.dims[0].label, g.label)
            dims = (a.dims[0], b.dims[2])
        else:
            self.fail(
                f"grouped_mm takes operands of ranks (2, 2), (3, 2) or (2, 3), got ({a.rank}, {b.rank})"
            )
        return TensorType(a.dtype, tuple(Dim(d.label, False) for d in dims))


def resized_extent(how: tuple, extents: list[int]) -> int:
    """The extent a slice, pad or cat makes of its input extents (``Types.resized``)."""
    if how[0] == "slice":
        return len(range(extents[0])[how[1] : how[2]])
    if how[0] == "pad":
        return extents[0] + how[1] + how[2]
    return sum(extents)
