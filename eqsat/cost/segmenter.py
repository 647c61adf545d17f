"""The cost model's segmenter: which kernels nvFuser (0.2.35) makes of a candidate.

Each compute node starts as a :class:`Group` of its own (a kernel in the making). Groups merge
greedily along edges, pointwise with pointwise first (over spaces of one size, then any), then
with reductions, then siblings (groups
that read a common value: nvFuser segments one fusion, so independent parts stay in one kernel
where they can), as long as every scheduler rule allows the merged group and the graph of
groups stays acyclic (:class:`~eqsat.cost.kernel_graph.KernelGraph`). Each group then becomes
zero, one or two :class:`Segment` s, which the cost model prices.

One method per rule of nvFuser's schedulers (the module docstring of ``eqsat.cost.model``
lists them):

- merging: :meth:`Segmenter.reference_tensor` (a kernel without reductions),
  :meth:`Segmenter.reduction_scheduler` (reductions with their prologue and epilogue),
  :meth:`Segmenter.reductions_share` (which reductions share a kernel, inner-outer among them),
  :meth:`Segmenter.resize_scheduler` and :meth:`Segmenter.needs_kernel_input` (slice, pad,
  cat and indexing ops), :meth:`Segmenter._relabels` (one axis on two dims: a causal mask),
  :meth:`Segmenter.translated_repeats` (a cat of one tensor is no resize);
- kernels of a group: :meth:`Segmenter.views_alone` (no kernel), :meth:`Segmenter.output_views`
  (an output's views join no kernel),
  :meth:`Segmenter.innermost_reduction_epilogue`, :meth:`Segmenter.inner_outer_persistent`,
  :meth:`Segmenter.reduction_kind` (a reduction to one element is a grid reduction, one that
  keeps the innermost axis an outer reduction);
- :meth:`Segmenter.recomputed_factories` (factory ops belong to no group, unless an output),
  :meth:`Segmenter.privatized_upcasts` (an upcast of an input is recomputed in each kernel);
- :meth:`Segmenter.recomputed_chains` (what eqsat's lowering makes a kernel recompute from the
  fusion's inputs rather than read from another kernel);
- :meth:`Segmenter.persistent_fits` (a normalization keeps a row on chip: 227 KiB at most).

welford is a reduction here (``REDUCING``); a stride order that keeps its input's layout is a
view (the encoder links it as ``stride_order``, one that copies as ``copy``:
``eqsat.ir.layout.lays_out_as_is``). The rules were checked against nvFuser's own segments
(``NVFUSER_DUMP=segmented_fusion``) of both corpora on the H200.

Aliased outputs (copied in a segment of their own) are the cost model's, which knows them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from eqsat.egraph.terms import DTYPES, ELEMENTWISE_TERMS
from eqsat.ir import dtypes as dt
from eqsat.ir.dtypes import ITEMSIZE

from .kernel_graph import KernelGraph
from .ops import INDEXERS, REDUCING, RESIZES, VIEWS, Kept
from .profile import KernelKind
from .walks import consumers_of, depends_on, downstream, feeding, labels_of, upstream_within

# the fewest elements a full reduction reduces across blocks (a grid reduction): nvFuser 0.2.35
# on the H200 summed 4096 in one block and 16384 across blocks (bench/calibrate.py, full_sum)
GRID_MIN = 8192
# the most elements a grid reduction leaves: nvFuser splits the reduced axis across blocks while
# the blocks the kept elements take fill at most half the SMs (reduction_non_tma.cpp: grdim grows
# while godim * grdim * 2 <= sm_count; 132 SMs on the H100/H200). A sum leaving 4 elements of
# [4, 2048, 5632] ran as slowly as the full sum it splits (H100, nvFuser 0.2.35: 110.6 vs 110.2 us)
GRID_MAX_KEPT = 64
# the most nodes a kernel recomputes from the inputs in place of one value it would read
RECOMPUTE_MAX_NODES = 32
DEADLINE_EVERY = 256        # pairs tried between two looks at the model's deadline
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
    keys: set = field(default_factory=set)          # its reductions: (iteration space, reduced labels)
    spaces: set = field(default_factory=set)        # the distinct iteration spaces of its members
    covers: set = field(default_factory=set)        # what each member's iteration covers
    resizing: list = field(default_factory=list)    # its resize, indexing and relabeling members
    reshaping: list = field(default_factory=list)   # its reshape members

    def absorb(self, other: Group) -> None:
        """Take ``other``'s members in (the two groups merged into this one)."""
        self.keys |= other.keys
        self.members += other.members
        self.spaces |= other.spaces
        self.covers |= other.covers
        self.resizing += other.resizing
        self.reshaping += other.reshaping


@dataclass
class Segment:
    """One kernel of a group, for the cost model to price: its ``kind`` (the constants it runs
    with), its ``members``, and ``part_of``: the kernel id of every compute node, this one's
    being ``kernel`` (what it reads from another kernel, or writes for another, is memory)."""

    kind: KernelKind
    members: list[int]
    part_of: dict
    kernel: object
    extra_reads: set = field(default_factory=set)   # values outside it that it recomputes from
    partials: list = field(default_factory=list)    # inner-outer: the outer reductions (partial results)


class Segmenter:
    """Merges the compute nodes of a candidate into groups (:meth:`merge`), then reads each
    group as nvFuser's kernels (:meth:`segments`). ``model`` is the cost model (its ``numel``,
    ``space`` and deadline); ``order``: the nodes in topological order; ``sinks``: what the
    kernels must write (outputs, barriers' inputs); ``barriers``: a barrier op's output -> its
    inputs; ``inner``: node -> the label of its innermost dim; ``outputs``: the fusion's
    outputs."""

    def __init__(self, model, nodes: dict, order: list[int], sinks: set[int], barriers: dict, inner: dict,
                 outputs: set[int]):
        self.model, self.nodes, self.sinks, self.outputs = model, nodes, sinks, outputs
        self.inner = dict(inner)        # with what :meth:`innermost` derives (per candidate)
        self.factories = self.recomputed_factories(order)
        self.consumers = consumers_of(nodes, order)
        self.privatized = self.privatized_upcasts(order)
        self.compute = [n for n in order if nodes[n].op != "Leaf" and not nodes[n].is_scalar
                        and n not in self.factories and n not in self.privatized]
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
        through = [(k, w) for w in walls for k in barriers[w] if k in in_compute] + \
                  [(w, c) for w in walls for c in consumers[w] if c in in_compute]
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
        return Group([n], keys, {space}, {self.cover[n]},
                     [n] if (node.op in RESIZES and n not in self.repeats) or node.op in INDEXERS
                     or n in self.relabeling else [],
                     [n] if node.op is Kept.reshape else [])

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
        same = [(n, c) for n, c in not_across_outputs
                if numel(space(self.nodes, n)) == numel(space(self.nodes, c))]
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
        until = self.model.until
        changed, passes = True, 0
        while changed and passes < 2:
            changed, passes = False, passes + 1
            for i, (n, c) in enumerate(pairs):
                if until is not None and i % DEADLINE_EVERY == 0:
                    self.model.check_deadline()
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
        return all(any(sp & ~s == 0 for s in spaces_of) or (reshaped and self.model.numel(sp) == size)
                   for sp in ga.spaces | gb.spaces)

    def persistent_fits(self, ga: Group, gb: Group, keys) -> bool:
        """Whether the merged group, where it would be a normalization kernel (something
        broadcast back), keeps a row of its inputs on chip (``PERSISTENT_BYTES``): the row is
        the reduced labels' extent times the bytes per element of the narrowest tensor it reads
        along them (nvFuser projects the buffer to the kernel's inputs). Rows of up to 64 Ki
        elements always fit and are not looked at further; nor are reductions along two label
        sets (the inner-outer scheduler, whose own rules :meth:`inner_outer_persistent` reads)."""
        numel = self.model.numel
        if len({r for _, r in keys}) > 1:
            return True          # inner-outer: its own rules (inner_outer_persistent)
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
        read = {self.privatized.get(k, k) for m in merged.members for k in self.nodes[m].kids
                if k not in inside}
        widths = [ITEMSIZE.get(DTYPES[self.nodes[k].dtype], 4) for k in read
                  if not self.nodes[k].is_scalar and self.nodes[k].labels & reduced == reduced]
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
        in_kernel = (lambda c: c in self.in_compute and find(c) in (a, b))
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
        return True

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
        return m in self.sinks or any(c in self.in_compute and find(c) not in (a, b)
                                      for c in self.consumers.get(m, ()))

    # -- kernels of the groups -------------------------------------------------------------------

    def segments(self) -> list[Segment]:
        """The kernels of the merged groups, group by group."""
        part_of = {n: self.graph.find(n) for n in self.compute}
        out = []
        for g, group in self.groups.items():
            out += self.kernels_of(g, group, part_of)
        return out

    def kernels_of(self, g, group: Group, part_of: dict) -> list[Segment]:
        """Group ``g``'s kernels: none, one, or two where a rule splits it."""
        ms = group.members
        if self.views_alone(ms):
            return []
        if not group.keys:
            return [Segment(KernelKind.POINTWISE, ms, part_of, g)]
        back = self.broadcast_back(group)
        if self.reductions_share(group.keys) == "inner_outer":
            return self.inner_outer_persistent(g, group, part_of, back)
        if not back:
            split = self.innermost_reduction_epilogue(ms, group.keys)
            if split:
                head, tail = split
                split_of = {**part_of, **{m: ("epilogue", g) for m in tail}}
                return [Segment(self.reduction_kind(head), head, split_of, g),
                        Segment(KernelKind.POINTWISE, tail, split_of, ("epilogue", g))]
        return [Segment(KernelKind.NORMALIZATION if back else self.reduction_kind(ms), ms, part_of, g)]

    def reduction_kind(self, ms) -> KernelKind:
        """A reduction kernel whose reductions all leave at most ``GRID_MAX_KEPT`` elements,
        each of more than ``GRID_MIN`` (a full sum, an FP8 amax, the first stage of a full sum
        split over a short leading axis) is nvFuser's grid reduction, its blocks combining
        through global memory: ``grid_reduction``, with its own constants in the profile
        (slower per byte than a reduction that keeps many elements: bench/calibrate.py, and at
        about half the arithmetic throughput on a compute-heavy prologue). One whose reductions
        all leave their input's innermost axis (a sum over rows) is nvFuser's outer reduction
        scheduler: ``outer_reduction`` (as fast per byte; ~1.18x slower on a compute-heavy
        prologue: bench/calibrate.py's silu_*amax_c4096_bf16 on an H100)."""
        nodes, numel = self.nodes, self.model.numel
        reductions = [m for m in ms if nodes[m].op in REDUCING]
        if reductions and all(numel(nodes[m].labels) <= GRID_MAX_KEPT
                              and numel(self.model.space(nodes, m)) > GRID_MIN * max(numel(nodes[m].labels), 1)
                              for m in reductions):
            return KernelKind.GRID_REDUCTION
        if reductions and all(self.is_outer(m) for m in reductions):
            return KernelKind.OUTER_REDUCTION
        return KernelKind.REDUCTION

    def is_outer(self, m) -> bool:
        """Whether reduction ``m`` keeps its input's innermost axis (False where that axis is
        not known)."""
        innermost = self.innermost(self.nodes[m].kids[0])
        return innermost is not None and not (1 << innermost) & self.nodes[m].attrs[0]

    def innermost(self, n) -> int | None:
        """The label of node ``n``'s innermost dim: as given (``inner``: the fusion's own
        values), else as eqsat's lowering lays a new value out
        (``eqsat.egraph.decode.Lowerer.output_order``): a reduction keeps its input's innermost
        dim unless it reduces it; an elementwise op takes that of its operand with the most
        labels, where that operand has all of the op's. None where not known (a kept op)."""
        known, nodes = self.inner, self.nodes
        stack = [n]
        while stack:                # no recursion: a chain may be thousands of ops long
            top = stack[-1]
            if top in known:
                stack.pop()
                continue
            node = nodes[top]
            kid = None
            if node.op in REDUCING:
                kid = node.kids[0] if node.kids else None
            elif node.op != "Leaf" and not isinstance(node.op, Kept):
                tensors = [k for k in node.kids if not nodes[k].is_scalar]
                widest = max(tensors, key=lambda k: bin(nodes[k].labels).count("1"), default=None)
                kid = widest if widest is not None and nodes[widest].labels == node.labels else None
            if kid is not None and kid not in known:
                stack.append(kid)
                continue
            stack.pop()
            inner = known.get(kid) if kid is not None else None
            if inner is not None and node.op in REDUCING and (1 << inner) & node.attrs[0]:
                inner = None
            known[top] = inner
        return known[n]

    def broadcast_back(self, group: Group) -> bool:
        """Whether a pointwise member over the reductions' full space reads a reduction: a
        normalization (persistent) kernel, not a plain reduction."""
        nodes, numel = self.nodes, self.model.numel
        space = next(iter(group.keys))[0]
        ms_set = set(group.members)
        reduced = {m for m in group.members if nodes[m].op in REDUCING}
        return any(nodes[m].op not in REDUCING and numel(self.model.space(nodes, m)) == numel(space)
                   and depends_on(nodes, m, reduced, ms_set) for m in group.members)

    def output_views(self, g) -> bool:
        """Views alone (:meth:`views_alone`) that make outputs and feed nothing else join no
        kernel: nvFuser puts the value they view behind a segment_set and aliases them to it
        (no bytes written; the host segment that runs them is the model's ``alias_segments``)."""
        ms = self.groups[g].members
        inside = set(ms)
        return self.views_alone(ms) and any(m in self.sinks for m in ms) and not any(
            c in self.in_compute and c not in inside for m in ms for c in self.consumers.get(m, ()))

    def views_alone(self, ms) -> bool:
        """A kernel of views of its inputs only (reshape, slice, squeeze) is no kernel:
        nvFuser aliases them (the host cost of the segment it runs them in is the model's:
        ``CostModel.alias_segments``)."""
        return all(self.is_view(m) for m in ms)

    def is_view(self, m) -> bool:
        """A reshape, a slice, a stride order, or a reduction over extent-1 labels (a squeeze)."""
        op = self.nodes[m].op
        if op in VIEWS:
            return True
        return op in REDUCING and self.model.numel(self.nodes[m].attrs[0]) <= 1

    def innermost_reduction_epilogue(self, ms, keys) -> tuple[list, list] | None:
        """nvFuser's reduction scheduler, reducing the innermost axis, fuses no op after the
        reduction that reads a tensor the reductions do not: (reduction kernel, epilogue) then."""
        nodes = self.nodes
        _, reduced_labels = next(iter(keys))
        reductions = [m for m in ms if nodes[m].op in REDUCING]
        innermost = self.innermost(nodes[reductions[0]].kids[0]) if reductions else None
        if innermost is None or not (1 << innermost) & reduced_labels:
            return None                     # an outer reduction (or a layout not known)
        ms_set = set(ms)
        head = upstream_within(nodes, reductions, ms_set)   # the reductions and what they read
        # the epilogue: what reads a reduction; values beside the reductions that read none
        # (a prologue's own output, an FP8 cast of the reduced tensor) stay in their kernel
        reduced = set(reductions)
        tail = [m for m in ms if m not in head and depends_on(nodes, m, reduced, ms_set)]
        if not tail or not feeding(nodes, tail, ms_set) - head - feeding(nodes, reductions, ms_set):
            return None
        epilogue = set(tail)
        return [m for m in ms if m not in epilogue], tail

    def inner_outer_persistent(self, g, group: Group, part_of: dict, back: bool) -> list[Segment]:
        """Reductions along two disjoint label sets of one space: with something broadcast
        back, nvFuser's inner-outer persistent kernel, whose outer reduction goes through
        per-block partial results (the segment's ``partials``); with nothing broadcast back, no
        persistent buffer, so two reduction kernels over the same input. The outer reduction
        is taken to be the one over the lower labels (leading dims)."""
        nodes, ms = self.nodes, group.members
        outer_labels = min(r for _, r in group.keys)
        outer = [m for m in ms if nodes[m].op in REDUCING and nodes[m].attrs[0] == outer_labels]
        if back:
            return [Segment(KernelKind.NORMALIZATION, ms, part_of, g, partials=outer)]
        first = [m for m in ms if m not in set(outer)]
        fed = feeding(nodes, outer, set(ms)) - self.factories
        return [Segment(KernelKind.REDUCTION, first, part_of, g),
                Segment(self.reduction_kind(outer), outer, part_of, g, fed)]

    def translated_repeats(self, order) -> set[int]:
        """A cat of pads of one tensor repeats it: nvFuser (its repeat-to-expand pass) makes
        it a broadcast, an expand and a reshape before segmenting, no resize. The cats and
        their pads (those that feed nothing else)."""
        nodes, out = self.nodes, set()
        for n in order:
            kids = nodes[n].kids
            if nodes[n].op is not Kept.cat or len(kids) < 2 or \
                    any(nodes[k].op is not Kept.pad or not nodes[k].kids for k in kids):
                continue
            if len({nodes[k].kids[0] for k in kids}) == 1:
                out.add(n)
                out.update(k for k in kids if set(self.consumers.get(k, ())) == {n})
        return out

    def privatized_upcasts(self, order) -> dict[int, int]:
        """Upcasts of fusion inputs that nvFuser copies into each kernel that reads them, which
        read the input, so the wide tensor is never written: where the input is also indexed
        (``SegmentCandidateFinder::privatizeUpCastOrSqueezeOp``, made for cross-entropy: bf16
        logits read by a take_along_axis and, cast to Float, by the logsumexp), and where the
        input has no other use and the cast's readers all iterate over its labels (its input
        forwarding, ``forwardInputs``, where each kernel that the cast's readers make takes its
        copy in; readers over other spaces or kept ops, where nvFuser was seen to keep the cast
        in a kernel of its own, are left as they were). Not one that an indexing op indexes
        (no scheduler indexes a value computed in its kernel: it is written for the indexing
        kernel) nor an output. The casts -> their input (what those kernels read instead)."""
        nodes, out = self.nodes, {}

        def indexed(v) -> bool:          # an indexing op indexes v (its first kid)
            return any(nodes[c].op in INDEXERS and nodes[c].kids[0] == v for c in self.consumers.get(v, ()))

        for n in order:
            node = nodes[n]
            if node.op != "Cast" or len(node.kids) != 1 or n in self.sinks:
                continue
            (k,) = node.kids
            src = nodes[k]
            if src.op != "Leaf" or src.is_scalar or node.is_scalar or not _upcast(src.dtype, node.dtype):
                continue
            if indexed(n):
                continue
            users, readers = self.consumers.get(k, ()), self.consumers.get(n, ())
            if indexed(k) or (len(users) == 1 and len(readers) > 1 and all(self._same_space(c, n) for c in readers)):
                out[n] = k
        return out

    def _same_space(self, c, n) -> bool:
        """Whether node ``c``, a reader of ``n``, is an op of the e-graph iterating over
        ``n``'s labels (a reduction of it, or elementwise over them)."""
        node = self.nodes[c]
        return not isinstance(node.op, Kept) and self.model.space(self.nodes, c) == self.nodes[n].labels

    def recomputed_chains(self, segments: list[Segment]) -> dict[int, set[int]]:
        """Values that a kernel, rather than read them from the kernel that wrote them, can
        recompute from the fusion's inputs, where that reads fewer bytes: segment index -> the
        nodes it recomputes. nvFuser's segmenter hands a kernel every intermediate it shares with
        another kernel through global memory (its input forwarding recomputes unary chains from
        inputs only); eqsat's lowering gives such a kernel its own copy of the chain
        (``eqsat.egraph.recompute``), which nvFuser then keeps in that kernel. A SiLU backward
        through an FP8 amax's count, as Thunder writes it, read four fp32 intermediates of the
        bf16 input from its reduction kernel; recomputing them halved its time (H100, nvFuser
        0.2.35: 462 -> 243 us, bench/rematerialize.py).

        A value qualifies where everything it is computed from, up to the fusion's inputs
        (scalars, factories), is elementwise terms of the e-graph (no reduction, no kept op),
        at most ``RECOMPUTE_MAX_NODES`` of them, and the inputs the kernel would read for it
        and does not already read take fewer bytes than the value. Kernels that share their
        group with another (inner-outer) are left as they are. Whether recomputing pays once
        arithmetic is counted is the cost model's to decide (``CostModel.estimate``)."""
        nodes = self.nodes
        counts: dict = {}
        for s in segments:
            counts[s.kernel] = counts.get(s.kernel, 0) + 1
        plans = {}
        for i, s in enumerate(segments):
            if counts[s.kernel] > 1:
                continue
            inside = set(s.members)
            reads = {k: self.model.nbytes(nodes[k]) for m in s.members for k in self._tensor_kids(m)
                     if k not in inside}
            recomputed: set[int] = set()
            for r in sorted((k for k in reads if k in self.in_compute), key=lambda k: (-reads[k], self.position[k])):
                if r in recomputed or r not in reads:
                    continue
                cone = self._chain(r)
                if cone is None:
                    continue
                leaves = self._chain_inputs(cone)
                new = sum(self.model.nbytes(nodes[v]) for v in leaves if v not in reads)
                if new >= reads[r]:
                    continue
                recomputed |= cone
                for v in cone:
                    reads.pop(v, None)
                for v in leaves:
                    reads.setdefault(v, self.model.nbytes(nodes[v]))
            if recomputed:
                plans[i] = recomputed
        return plans

    def _chain(self, r) -> set[int] | None:
        """The compute nodes value ``r`` is computed from, itself included, where all are
        elementwise terms, at most ``RECOMPUTE_MAX_NODES``; else None."""
        nodes, seen, stack = self.nodes, {r}, [r]
        while stack:
            v = stack.pop()
            if nodes[v].op not in ELEMENTWISE_TERMS:
                return None
            for k in nodes[v].kids:
                k = self.privatized.get(k, k)
                if k in self.in_compute and k not in seen:
                    if len(seen) >= RECOMPUTE_MAX_NODES:
                        return None
                    seen.add(k)
                    stack.append(k)
        return seen

    def _chain_inputs(self, cone: set[int]) -> set[int]:
        """The tensors a kernel reads to recompute ``cone``: fusion inputs and values outside
        the kernels (no scalars, no factories)."""
        return {k for v in cone for k in self._tensor_kids(v) if k not in cone}

    def _tensor_kids(self, v) -> list[int]:
        """The tensors node ``v`` reads, as a kernel reads them: a privatized upcast's input in
        its place, no scalars, no factories (recomputed in each kernel)."""
        nodes = self.nodes
        return [k for k in (self.privatized.get(k, k) for k in nodes[v].kids)
                if not nodes[k].is_scalar and k not in self.factories]

    def recomputed_factories(self, order) -> set[int]:
        """Ops that make a tensor from scalars alone (full, iota, random; the e-graph's Iota):
        nvFuser recomputes them in each kernel that uses them, like a scalar, so they belong
        to no group. One that is an output is written by a kernel: it is a compute node."""
        nodes = self.nodes
        return {n for n in order if n not in self.sinks and (nodes[n].op == "Iota" or (
                isinstance(nodes[n].op, Kept) and all(nodes[k].is_scalar for k in nodes[n].kids)))}


def _upcast(src: int, dst: int) -> bool:
    """A cast from dtype code ``src`` to a wider floating-point ``dst``."""
    if src >= len(DTYPES) or dst >= len(DTYPES):
        return False
    a, b = DTYPES[src], DTYPES[dst]
    return dt.is_float(a) and dt.is_float(b) and ITEMSIZE.get(a, 0) < ITEMSIZE.get(b, 0)


def resizes_broadcast(nodes, m) -> bool:
    """A pad or cat whose input lacks a dim its output has: it resizes a broadcast dim, which
    nvFuser's resize scheduler does not take."""
    if nodes[m].op not in (Kept.pad, Kept.cat):
        return False
    want = bin(nodes[m].labels).count("1")
    return any(bin(nodes[k].labels).count("1") < want for k in nodes[m].kids if not nodes[k].is_scalar)


def kid_labels(nodes, n) -> int:
    """The labels of node ``n``'s tensor inputs."""
    return labels_of(nodes, nodes[n].kids)
