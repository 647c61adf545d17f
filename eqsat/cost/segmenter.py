"""The cost model's segmenter: which kernels nvFuser (0.2.35) makes of a candidate.

Each compute node starts as a :class:`Group` of its own (a kernel in the making). Groups merge
greedily along edges, pointwise with pointwise first (over spaces of one size, then any), then
with reductions, then siblings (groups that read a common value: nvFuser segments one fusion,
so independent parts stay in one kernel where they can), as long as every scheduler rule allows
the merged group and the graph of groups stays acyclic
(:class:`~eqsat.cost.kernel_graph.KernelGraph`). Each group then becomes zero, one or two
:class:`~eqsat.cost.group_kernels.Segment` s, which the cost model prices.

One method per rule of nvFuser's schedulers (the module docstring of ``eqsat.cost.model``
lists them):

- merging (here): :meth:`Segmenter.reference_tensor` (a kernel without reductions),
  :meth:`Segmenter.reduction_scheduler` (reductions with their prologue and epilogue),
  :meth:`Segmenter.reductions_share` (which reductions share a kernel, inner-outer among them),
  :meth:`Segmenter.resize_scheduler` and :meth:`Segmenter.needs_kernel_input` (slice, pad,
  cat and indexing ops), :meth:`Segmenter._relabels` (one axis on two dims: a causal mask),
  :meth:`Segmenter.translated_repeats` (a cat of one tensor is no resize),
  :meth:`Segmenter.persistent_fits` (a normalization keeps a row on chip: 227 KiB at most);
- kernels of a group (``eqsat.cost.group_kernels``): views alone (no kernel), an output's views
  (no kernel), an innermost reduction's epilogue, the inner-outer persistent kernel, the kind
  of a reduction kernel (grid, outer);
- what kernels recompute (``eqsat.cost.recomputing``): factory ops (no group, unless an
  output), privatized upcasts of inputs, and the chains eqsat's lowering makes a kernel
  recompute from the fusion's inputs rather than read from another kernel.

welford is a reduction here (``REDUCING``); a stride order that keeps its input's layout is a
view (the encoder links it as ``stride_order``, one that copies as ``copy``:
``eqsat.ir.layout.lays_out_as_is``). The rules were checked against nvFuser's own segments
(``NVFUSER_DUMP=segmented_fusion``) of both corpora on the H200.

Aliased outputs (copied in a segment of their own) are the cost model's, which knows them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eqsat.deadline import NEVER, Deadline
from eqsat.egraph.terms import DTYPES
from eqsat.ir.dtypes import ITEMSIZE

from .axis_mapping import AxisMapping
from .group_kernels import GroupKernels
from .kernel_graph import KernelGraph
from .ops import INDEXERS, REDUCING, RESIZES, Kept
from .recomputing import Recomputing
from .walks import consumers_of, downstream, labels_of

DEADLINE_EVERY = 256  # pairs tried between two looks at the deadline
# the most bytes of one row (the reduced labels) a normalization (persistent) kernel keeps on
# chip: nvFuser's getMaxRegOrSharedMemorySizeBitForPersistentBuffer takes the larger of half
# the register file (128 KiB) and the shared memory a block may opt in to (227 KiB on the
# H100/H200) less its workspace; beyond it (a row of 128256 bf16 logits is 250.5 KiB) no
# persistent scheduler takes the kernel, and the reduction and what reads it broadcast back
# run as separate kernels, each reading the row again
PERSISTENT_BYTES = 227 * 1024


@dataclass
class Group:
    """A kernel in the making: its members (node ids, in merge order) and what the scheduler
    rules ask of them, kept up to date as groups merge."""

    members: list[int]
    keys: set = field(default_factory=set)  # its reductions: (iteration space, reduced labels)
    spaces: set = field(default_factory=set)  # the distinct iteration spaces of its members
    covers: set = field(default_factory=set)  # what each member's iteration covers
    resizing: list = field(default_factory=list)  # its resize, indexing and relabeling members
    reshaping: list = field(default_factory=list)  # its reshape members

    def absorb(self, other: Group) -> None:
        """Take ``other``'s members in (the two groups merged into this one)."""
        self.keys |= other.keys
        self.members += other.members
        self.spaces |= other.spaces
        self.covers |= other.covers
        self.resizing += other.resizing
        self.reshaping += other.reshaping


class Segmenter(GroupKernels, Recomputing, AxisMapping):
    """Merges the compute nodes of a candidate into groups (:meth:`merge`), then reads each
    group as nvFuser's kernels (:meth:`segments`). ``model`` is the cost model (its ``numel``
    and ``space``); ``order``: the nodes in topological order; ``sinks``: what the kernels must
    write (outputs, barriers' inputs); ``barriers``: a barrier op's output -> its inputs;
    ``inner``: node -> the label of its innermost dim; ``outputs``: the fusion's outputs;
    ``deadline``: where merging stops (:class:`eqsat.deadline.Cut`); ``alloc_inner``: input
    -> the label of its innermost allocated dim, where its stride order makes that another
    than its last logical one."""

    def __init__(
        self,
        model,
        nodes: dict,
        order: list[int],
        sinks: set[int],
        barriers: dict,
        inner: dict,
        outputs: set[int],
        deadline: Deadline = NEVER,
        alloc_inner: dict | None = None,
    ):
        self.model, self.nodes, self.sinks, self.outputs = model, nodes, sinks, outputs
        self.alloc_inner = alloc_inner or {}  # input -> its innermost allocated label
        self.deadline = deadline
        self.inner = dict(inner)  # with what :meth:`innermost` derives (per candidate)
        self.factories = self.recomputed_factories(order)
        self.consumers = consumers_of(nodes, order)
        self.privatized = self.privatized_upcasts(order)
        self.input_views = self.views_of_inputs(order)
        self.compute = [
            n
            for n in order
            if nodes[n].op != "Leaf"
            and not nodes[n].is_scalar
            and n not in self.factories
            and n not in self.privatized
            and n not in self.input_views
        ]
        self.repeats = self.translated_repeats(order)
        self.relabeling = {n for n in order if self._relabels(n)}
        self.in_compute = set(self.compute)
        self.edges = [(n, c) for n in self.compute for c in self.consumers.get(n, ()) if c in self.in_compute]
        self.graph = self._kernel_graph(order, barriers)
        self.position = {n: i for i, n in enumerate(order)}
        self.cover = {n: self._cover(n) for n in self.compute}
        self.groups = {n: self._group(n) for n in self.compute}

    def _kernel_graph(self, order, barriers) -> KernelGraph:
        """The groups and the edges between them. A barrier op (matmul, ...) runs between the
        kernel that makes its inputs and those that read its output: a node that never merges."""
        consumers, in_compute = self.consumers, self.in_compute
        walls = [n for n in order if n in barriers and n in consumers]
        through = [(k, w) for w in walls for k in barriers[w] if k in in_compute] + [
            (w, c) for w in walls for c in consumers[w] if c in in_compute
        ]
        return KernelGraph([n for n in order if n in in_compute or n in barriers], self.edges + through)

    def _cover(self, n) -> int:
        """What node ``n``'s iteration covers: its space, and for a kept op the labels of its
        inputs too (nvFuser maps a reshaped or resized axis back to the one it came from)."""
        space = self.model.space(self.nodes, n)
        return space | kid_labels(self.nodes, n) if isinstance(self.nodes[n].op, Kept) else space

    def _group(self, n) -> Group:
        """Node ``n`` as a group of its own."""
        node = self.nodes[n]
        space = self.model.space(self.nodes, n)
        keys = set()
        # a reduction over labels of extent 1 only (a broadcast dim: keepdim, [N, 1] inputs) is
        # a squeeze to nvFuser, no reduction: it joins any kernel
        if node.op in REDUCING and self.model.numel(node.attrs[0] & space) > 1:
            keys.add((space, node.attrs[0]))
        return Group(
            [n],
            keys,
            {space},
            {self.cover[n]},
            [n]
            if (node.op in RESIZES and n not in self.repeats and not padded_cat(self.nodes, n))
            or node.op in INDEXERS
            or n in self.relabeling
            else [],
            [n] if node.op is Kept.reshape else [],
        )

    # -- merging -------------------------------------------------------------------------------

    def merge(self) -> None:
        """Pointwise groups with each other along edges, those over spaces of one size first
        (a small value broadcast into a large kernel joins it last, as nvFuser's segmenter
        leaves it: a RoPE's cos/sin table stays a kernel of its own where the resize
        scheduler's kernels cannot write it); then groups with reductions along edges; each of
        these along edges that carry no fusion output; then along every edge, then siblings.

        nvFuser's segmenter merges no two groups across an output in its level-by-level merge
        (``SegmentedGroup::getNeighborGroups``: "Don't fuse across output nodes"), only in its
        final merge of whole producer and consumer groups (``finalMerge``), by which time what
        reads the output has grown into a group of its own. A dropout chain read from a
        LayerNorm backward's reshaped output thus runs as the prologue of the bias gradient's
        reduction, which cannot join the inner-outer kernel, not as that kernel's epilogue
        (OPT's backward on the H200, nvFuser 0.2.35: the reduction kernel draws the mask)."""
        numel, space = self.model.numel, self.model.space
        not_across_outputs = [(n, c) for n, c in self.edges if n not in self.outputs]
        same = [
            (n, c)
            for n, c in not_across_outputs
            if numel(space(self.nodes, n)) == numel(space(self.nodes, c))
        ]
        self.merge_pairs(same, pointwise_only=True)
        self.merge_pairs(not_across_outputs, pointwise_only=True)
        self.merge_pairs(not_across_outputs, pointwise_only=False)
        self.merge_pairs(self.edges, pointwise_only=False)
        self.merge_pairs(self.siblings(), pointwise_only=False)

    def siblings(self) -> list[tuple[int, int]]:
        """Pairs of compute nodes that read a common value (not a factory: recomputed anyway)."""
        pairs = []
        for v, users in self.consumers.items():
            if v in self.factories:
                continue
            users = [u for u in users if u in self.in_compute]
            pairs += [(users[0], u) for u in users[1:]]
        return pairs

    def merge_pairs(self, pairs, pointwise_only: bool) -> None:
        """Merge the groups of each pair where the rules allow it and no cycle forms; a second
        pass where the first merged anything (in topological order one pass nearly always does)."""
        groups, graph, find = self.groups, self.graph, self.graph.find
        deadline = self.deadline
        changed, passes = True, 0
        while changed and passes < 2:
            changed, passes = False, passes + 1
            for i, (n, c) in enumerate(pairs):
                if i % DEADLINE_EVERY == 0:
                    deadline.check("an estimate")
                a, b = find(n), find(c)
                if a == b or (pointwise_only and (groups[a].keys or groups[b].keys)):
                    continue
                if self.compatible(a, b) and not graph.would_cycle(a, b):
                    kept, gone = graph.merge(a, b)
                    groups[kept].absorb(groups.pop(gone))
                    changed = True

    def compatible(self, a, b) -> bool:
        """Whether one scheduler of nvFuser takes groups ``a`` and ``b`` as one kernel."""
        if self.output_views(a) or self.output_views(b):
            return False
        if self.non_unique_broadcast(a, b):
            return False
        if not self.resize_scheduler(a, b):
            return False
        keys = self.groups[a].keys | self.groups[b].keys
        if not keys:
            return self.reference_tensor(a, b)
        return self.reduction_scheduler(a, b, keys)

    def reference_tensor(self, a, b) -> bool:
        """A kernel without reductions needs one tensor whose iteration covers every value it
        reads and writes (nvFuser's reference tensor; a reshaped or resized axis counts as the
        one it came from)."""
        ga, gb = self.groups[a], self.groups[b]
        union = 0
        for c in ga.covers | gb.covers:
            union |= c
        if any(c == union for c in ga.covers | gb.covers):
            return True
        # a member also covers what it computes from in the kernel
        ms = sorted(ga.members + gb.members, key=self.position.__getitem__)
        inside, cover = set(ms), {}
        for m in ms:
            c = self.cover[m]
            for k in self.nodes[m].kids:
                if k in inside:
                    c |= cover[k]
            cover[m] = c
        return any(c == union for c in cover.values())

    def reduction_scheduler(self, a, b, keys) -> bool:
        """nvFuser's reduction and persistent schedulers: reductions that may share a kernel
        (:meth:`reductions_share`) with the pointwise ops whose iteration space lies within
        theirs or has its size through a reshape (prologue, epilogue, broadcast back)."""
        if self.reductions_share(keys) is None:
            return False
        ga, gb = self.groups[a], self.groups[b]
        if not self.persistent_fits(ga, gb, keys):
            return False
        spaces_of = {s for s, _ in keys}
        size = self.model.numel(next(iter(spaces_of)))
        # a value reshaped into the iteration space (a norm's weight [C] made [1, G, C/G]) is
        # iterated over with it
        for m in ga.reshaping + gb.reshaping:
            for s in list(spaces_of):
                if self.nodes[m].labels & ~s == 0:
                    spaces_of.add(s | kid_labels(self.nodes, m))
        # equal size through other labels: a reshape of the space (only a reshape makes one)
        reshaped = bool(ga.reshaping or gb.reshaping)
        return all(
            any(sp & ~s == 0 for s in spaces_of) or (reshaped and self.model.numel(sp) == size)
            for sp in ga.spaces | gb.spaces
        )

    def persistent_fits(self, ga: Group, gb: Group, keys) -> bool:
        """Whether the merged group, where it would be a normalization kernel (something
        broadcast back), keeps a row of its inputs on chip (``PERSISTENT_BYTES``): the row is
        the reduced labels' extent times the bytes per element of the narrowest tensor it reads
        along them (nvFuser projects the buffer to the kernel's inputs). Rows of up to 64 Ki
        elements always fit and are not looked at further; nor are reductions along two label
        sets (the inner-outer scheduler, whose own rules :meth:`inner_outer_persistent` reads)."""
        numel = self.model.numel
        if len({r for _, r in keys}) > 1:
            return True  # inner-outer: its own rules (inner_outer_persistent)
        row = max(numel(r) for _, r in keys)
        if row * 2 <= PERSISTENT_BYTES:
            return True
        merged = Group(ga.members + gb.members, set(keys))
        if not self.broadcast_back(merged):
            return True
        reduced = 0
        for _, r in keys:
            reduced |= r
        inside = set(merged.members)
        read = {
            self.privatized.get(k, k) for m in merged.members for k in self.nodes[m].kids if k not in inside
        }
        widths = [
            ITEMSIZE.get(DTYPES[self.nodes[k].dtype], 4)
            for k in read
            if not self.nodes[k].is_scalar and self.nodes[k].labels & reduced == reduced
        ]
        return row * min(widths, default=4) <= PERSISTENT_BYTES

    def reductions_share(self, keys) -> str | None:
        """What the reductions of one kernel with ``keys`` (space, reduced labels) make: "same"
        (one key; or keys over different spaces of equal extents, horizontally fused),
        "inner_outer" (two keys over one space along disjoint labels: nvFuser's inner-outer
        persistent scheduler, a norm backward's row and column sums), or None (they cannot
        share a kernel)."""
        if len(keys) == 1:
            return "same"
        spaces = {s for s, _ in keys}
        if len(spaces) == 1:
            if len(keys) == 2:
                (_, r1), (_, r2) = keys
                if not r1 & r2:
                    return "inner_outer"
            return None
        numel = self.model.numel
        if len({(numel(s), numel(r)) for s, r in keys}) == 1:
            return "same"
        return None

    def resize_scheduler(self, a, b) -> bool:
        """nvFuser takes a resize (slice, pad, cat) on a value computed in the same kernel only
        in its resize scheduler: no reductions, no op that needs a kernel input
        (:meth:`needs_kernel_input`), and every output past each resize (no resize between the
        reference tensor and an output). On a kernel input any scheduler takes it."""
        ga, gb = self.groups[a], self.groups[b]
        find, nodes = self.graph.find, self.nodes
        in_kernel = lambda c: c in self.in_compute and find(c) in (a, b)
        outs = None
        for m in ga.resizing + gb.resizing:
            kids = nodes[m].kids if nodes[m].op is Kept.cat or m in self.relabeling else nodes[m].kids[:1]
            if not any(in_kernel(k) for k in kids):
                continue
            if self.needs_kernel_input(m) or ga.keys or gb.keys:
                return False
            if outs is None:
                outs = {w for w in ga.members + gb.members if self._written(w, a, b)}
            if not outs <= downstream(m, self.consumers, in_kernel):
                return False
        if outs is None:
            return True
        return not self.resizes_a_broadcast_axis(a, b) and len(self.resize_inner_dims(a, b, outs)) <= 1

    def needs_kernel_input(self, m) -> bool:
        """An indexing op (index_select, gather, ...), a pad or cat of a broadcast dim, or an op
        that relabels its inputs (``relabeling``, :meth:`_relabels`): no scheduler of nvFuser
        0.2.35 takes it on a value computed in the same kernel."""
        return self.nodes[m].op in INDEXERS or resizes_broadcast(self.nodes, m) or m in self.relabeling

    def _relabels(self, m) -> bool:
        """A kept elementwise op whose output does not carry an axis of its inputs: the IR gave
        it fresh axes because one axis of its inputs lies on two of its dims (a causal mask:
        ``le`` of an iota broadcast along rows and along columns). nvFuser maps that axis to
        both dims and cannot schedule the op with the producer of that axis: the producer's
        kernel writes the input, as its pointwise scheduler does before a transpose kernel."""
        node = self.nodes[m]
        if not (isinstance(node.op, Kept) and node.op.elementwise):
            return False
        ins = kid_labels(self.nodes, m)
        return bool(ins & ~node.labels) and bool(node.labels & ~ins)

    def _written(self, m, a, b) -> bool:
        """Whether the kernel of groups ``a`` and ``b`` writes member ``m`` (an output, a
        barrier's input, or read by another kernel)."""
        find = self.graph.find
        return m in self.sinks or any(
            c in self.in_compute and find(c) not in (a, b) for c in self.consumers.get(m, ())
        )

    def translated_repeats(self, order) -> set[int]:
        """A cat of pads of one tensor repeats it: nvFuser (its repeat-to-expand pass) makes
        it a broadcast, an expand and a reshape before segmenting, no resize. The cats and
        their pads (those that feed nothing else)."""
        nodes, out = self.nodes, set()
        for n in order:
            kids = nodes[n].kids
            if (
                nodes[n].op is not Kept.cat
                or len(kids) < 2
                or any(nodes[k].op is not Kept.pad or not nodes[k].kids for k in kids)
            ):
                continue
            if len({nodes[k].kids[0] for k in kids}) == 1:
                out.add(n)
                out.update(k for k in kids if set(self.consumers.get(k, ())) == {n})
        return out


def padded_cat(nodes, m) -> bool:
    """A cat of inputs padded already (``manual_padding=True``, as nvfuser_direct prints cats):
    its output keeps its inputs' axes (``eqsat.ir.shape_typing``), and nvFuser's ``CatOp`` then
    resizes nothing; its pads do, each on its own input (Thunder's ViT puts the class token
    before the patches so, and nvFuser runs that with the LayerNorm after it as one kernel)."""
    return nodes[m].op is Kept.cat and not nodes[m].labels & ~kid_labels(nodes, m)


def resizes_broadcast(nodes, m) -> bool:
    """A pad or cat whose input lacks a dim its output has: it resizes a broadcast dim, which
    nvFuser's resize scheduler does not take."""
    if nodes[m].op not in (Kept.pad, Kept.cat) or padded_cat(nodes, m):
        return False
    want = bin(nodes[m].labels).count("1")
    return any(bin(nodes[k].labels).count("1") < want for k in nodes[m].kids if not nodes[k].is_scalar)


def kid_labels(nodes, n) -> int:
    """The labels of node ``n``'s tensor inputs."""
    return labels_of(nodes, nodes[n].kids)
