"""The cost model: how nvFuser would segment a candidate into kernels, and what each costs.

It scores a whole candidate (a DAG of term nodes with labels and dtypes), because kernel
count and bytes are not additive over nodes:

1. **Segmentation** (``eqsat.cost.segmenter``: a method per rule below). Pointwise ops fuse
   with each other. A reduction joins a kernel only with reductions of the same key (the same
   reduced labels over the same iteration space: the normalization pattern, nvFuser's
   persistent schedulers) or, once, with reductions over the same space along the other,
   disjoint labels (nvFuser's inner-outer persistent kernel: a norm backward's row and column
   sums), and with the pointwise ops whose iteration space lies within it or has its size (a
   reshape of it): prologue, epilogue, broadcast back.
   Groups are merged greedily along edges while they stay compatible and the kernel graph
   stays acyclic (pointwise pairs over spaces of one size first). Ops eqsat keeps verbatim
   (reshape, slice, pad, cat, index_select, full, random...) count as pointwise ops on their
   inputs, welford as a reduction; matmul/linear, segment_set and unknown ops are barriers
   (their outputs are read like inputs, and no kernel spans one).
   The rules of nvFuser's schedulers (0.2.35) that decide a merge:
   - a kernel without reductions needs one tensor whose iteration covers all it reads and
     writes (the reference tensor; a reshaped or resized axis counts as the one it came from);
   - slice/pad/cat take a value computed in the same kernel only in a kernel without
     reductions whose outputs all lie past the resize (the resize scheduler); indexing ops
     (index_select, gather), and pads/cats of a broadcast dim, only a kernel input;
   - reductions along two label sets share a kernel only with something broadcast back
     (inner-outer persistent); an innermost-axis reduction kernel takes no epilogue that
     reads other tensors; a kernel of views alone (reshape, slice, squeeze) is no kernel;
   - an elementwise op that puts one axis of its inputs on two of its dims (a causal mask of
     one iota) takes its inputs from another kernel; a cat of pads of one tensor is a repeat
     (nvFuser makes it an expand), no resize; a stride order that keeps its input's layout,
     like reshape and slice, is a view;
   - factory ops (full, iota, random) are recomputed in each kernel that uses them (one that
     is an output is written by a kernel); an output aliased to an input is copied in a
     segment of its own.
2. **Bytes** per kernel: the tensors it reads (inputs, and intermediates another kernel
   wrote) and writes (roots, and intermediates another kernel reads). **Arithmetic**: one op
   per element of each node's iteration space (special functions weigh more, casts nothing;
   kept ops such as reshape count one, as data movement).
3. **Time** = host cost + sum over kernels of (launch + max(bytes / bandwidth, flops /
   throughput)), with the constants of the kernel's kind from the profile (pointwise,
   reduction, grid_reduction: a reduction to one element, whose blocks combine through global
   memory, and normalization). The host cost is nvFuser's per ``execute`` at steady state: a
   base, and a cost per segment (each kernel, and each segment of views the host runs: nvFuser
   puts the outputs that view a value behind a ``segment_set``, ``alias_segments``), per input,
   output, op, resize op and grid reduction; a fusion of views alone still pays it, and one that
   computes nothing and views nothing pays none (the profile's ``host``; the default H200 profile,
   ``h200_host_fit``, holds the fit of bench/host_cost.py, where a segment costs about 7 µs of
   host time, more than most kernels' device time; its ``h200`` twin charges the base alone).
"""

from __future__ import annotations

import copy
import math

from eqsat.deadline import NEVER, Deadline
from eqsat.egraph.terms import BARRIER_TERMS, DTYPES, FREE_TERMS, INDEXING_TERMS, SPECIAL_TERMS, bits
from eqsat.ir.dtypes import ITEMSIZE

from .estimate import Estimate, GNode, Kernel, Recomputation, Tensor
from .group_kernels import Segment
from .ops import BARRIERS, DRAWS, REDUCING, RESIZES, Kept
from .profile import KernelKind, Profile
from .segmenter import Segmenter
from .walks import labels_of, live_sinks, topological

PARTIAL_ROWS = 132  # an inner-outer kernel's partial results: about one row per SM (H200)


class CostModel:
    def __init__(
        self,
        profile: Profile,
        extents: dict[int, int],
        links: dict[int, tuple[str, tuple[int, ...]]] | None = None,
        outputs: set[int] | None = None,
        aliased: int = 0,
        inner: dict[int, int] | None = None,
        alloc_inner: dict[int, int] | None = None,
        alias_segments: int = 0,
        output_count: int | None = None,
        shape_only=frozenset(),
        recompute: bool = True,
    ):
        self.recompute = recompute  # estimate's default: candidates eqsat lowers recompute chains
        self.profile = profile
        self.extents = extents  # label bit -> extent
        self.links = links or {}  # kept op's output class -> (op, input classes)
        self.outputs = outputs  # the fusion's output classes (None: every root)
        self.aliased = aliased  # outputs written into an input (add_output(t, alias))
        self.inner = inner or {}  # class -> the label of its innermost (last logical) dim
        # input class -> the label of its innermost allocated dim, where not its last logical one
        self.alloc_inner = alloc_inner or {}
        # segments of views the host runs (outputs that view a value: eqsat.ir.layout.alias_output_sources)
        self.alias_segments = alias_segments
        # the fusion's outputs, for the host cost (outputs that view one value are one class)
        self.output_count = output_count
        # roots only a shape query reads (Encoding.shape_only, as classes): no kernel writes them
        self.shape_only = frozenset(shape_only)
        self._numel: dict[int, int] = {}

    def linked(self, nodes: dict, links: dict | None = None) -> tuple[dict, dict[int, tuple[int, ...]]]:
        """``nodes`` with each kept op's output leaf as a pointwise node on its inputs, and the
        kept ops that stay barriers: their output leaf -> their inputs (which a kernel writes)."""
        out, barriers = dict(nodes), {}
        for c, (op, ins) in (self.links if links is None else links).items():
            node = nodes.get(c)
            if node is None or node.op != "Leaf":
                continue
            ins = tuple(k for k in ins if k in nodes)
            kept = Kept[op]
            if kept in BARRIERS:
                barriers[c] = ins
                continue
            attrs = node.attrs
            if kept in REDUCING:  # welford: its attrs are the labels it reduces
                attrs = (labels_of(nodes, ins) & ~node.labels,)
            out[c] = GNode(kept, attrs, ins, node.labels, node.dtype)
        return out, barriers

    def numel(self, mask: int) -> int:
        n = self._numel.get(mask)
        if n is None:
            n = self._numel[mask] = math.prod(self.extents.get(b, 1) for b in bits(mask))
        return n

    def nbytes(self, node: GNode) -> int:
        if node.is_scalar:
            return 0
        return self.numel(node.labels) * ITEMSIZE.get(DTYPES[node.dtype], 4)

    def gathered_bytes(self, node: GNode, source: GNode) -> int:
        """What an indexing term (Take, IndexSelect) reads of the tensor it indexes: one element
        of ``source`` per element of its result (cross-entropy's target gathers one element
        of each row of the logits). Kept indexing ops (those the e-graph does not model) are
        still charged the whole tensor, as before, in every candidate alike."""
        return self.numel(node.labels) * ITEMSIZE.get(DTYPES[source.dtype], 4)

    def space(self, nodes, nid: int) -> int:
        """Labels of node ``nid``'s iteration space: a reduction iterates over its input's."""
        node = nodes[nid]
        if node.op in REDUCING:
            return nodes[node.kids[0]].labels
        return node.labels

    def with_recompute(self, recompute: bool) -> "CostModel":
        """This model with another default for ``estimate``'s ``recompute``."""
        other = copy.copy(self)
        other.recompute = recompute
        return other

    def estimate(
        self,
        nodes: dict,
        roots: list[int],
        links: dict | None = None,
        outputs: set[int] | None = None,
        inner: dict[int, int] | None = None,
        recompute: bool | None = None,
        alloc_inner: dict[int, int] | None = None,
        shape_only=None,
        deadline: Deadline = NEVER,
    ) -> Estimate:
        """``nodes``: id -> GNode (only those reachable from ``roots`` are counted); ``links``,
        ``outputs``, ``inner`` and ``alloc_inner``: kept ops, the fusion's outputs, innermost
        labels and inputs' innermost allocated labels by node id, if not the model's own (which
        are by e-class). ``recompute`` (default the model's
        own): the candidate is lowered by eqsat, which gives a kernel its own copy of a chain
        it would read from another kernel where that is cheaper (the segmenter's
        ``recomputed_chains``; ``Estimate.recomputed`` says which); False for a definition run
        as written. ``shape_only`` (default the model's own): roots only a shape query reads,
        which no kernel writes. Raises :class:`eqsat.deadline.Cut` where the ``deadline`` passes
        before it ends."""
        inner = self.inner if inner is None else inner
        outputs = self.outputs if outputs is None else outputs
        recompute = self.recompute if recompute is None else recompute
        nodes, order, sinks, barriers = self._reading(nodes, roots, links, outputs)
        sinks -= self.shape_only if shape_only is None else set(shape_only)
        segmenter = Segmenter(
            self,
            nodes,
            order,
            sinks,
            barriers,
            inner,
            set(outputs) if outputs is not None else set(roots),
            deadline,
            self.alloc_inner if alloc_inner is None else alloc_inner,
        )
        segmenter.merge()
        segments = segmenter.segments()
        est = self._priced(segments, segmenter, {})
        plans = segmenter.recomputed_chains(segments) if recompute else {}
        if plans:
            again = self._priced(segments, segmenter, plans)
            if again.device_us < est.device_us:
                est = again
                est.recomputed = [
                    Recomputation(frozenset(cone), self._readers(segments[i], cone, segmenter))
                    for i, cone in sorted(plans.items())
                ]
        est.kernels.sort(key=lambda k: -k.time_us)
        self._describe(est, nodes, barriers, links, set(roots if outputs is None else outputs), inner)
        if segmenter.compute or self.aliased or self.alias_segments:
            output_count = self.output_count
            if output_count is None:
                output_count = len(outputs) if outputs is not None else len(roots)
            est.host_us = self._host_us(est, nodes, order, segmenter.compute, output_count)
        return est

    def _host_us(self, est: Estimate, nodes: dict, order: list[int], compute, output_count: int) -> float:
        """The host's cost of one ``execute`` of the kernels of ``est``."""
        return self.profile.host.cost_us(
            segments=len(est.kernels) + self.alias_segments,
            inputs=sum(nodes[n].op == "Leaf" for n in order),
            outputs=output_count,
            ops=len(compute) + sum(len(r.cone) for r in est.recomputed),
            resizes=sum(nodes[m].op in RESIZES for m in compute),
            grids=sum(k.kind.grid for k in est.kernels),
        )

    def _describe(
        self, est: Estimate, nodes: dict, barriers: dict, links: dict | None, outputs: set, inner: dict
    ) -> None:
        """Fill ``est.tensors`` (each tensor its kernels read or write) and ``est.barriers``
        (the ops outside the kernels: ``barriers``, output -> inputs, named by ``links`` or as
        the ``segment_set`` cuts they are). Shapes take one extent per axis, innermost last."""
        ops = self.links if links is None else links
        est.barriers = {
            c: (ops[c][0] if c in ops else "segment_set", tuple(ins)) for c, ins in barriers.items()
        }
        written = {n for k in est.kernels for n in k.writes}
        todo = [n for k in est.kernels for n in (*k.reads, *k.writes)]
        todo += [n for c, ins in barriers.items() for n in (c, *ins) if n in nodes and not nodes[n].is_scalar]
        while todo:
            n = todo.pop()
            if n in est.tensors:
                continue
            node = nodes[n]
            known = node.labels >= 0  # an opaque op's output has no labels analysis: no shape
            axes = sorted(bits(node.labels), key=lambda b: (b == inner.get(n), b)) if known else []
            source, of = None, ()
            if n in written:
                pass
            elif n in barriers:
                source = est.barriers[n][0]
            elif node.op == "Leaf":
                source = "input"
            else:  # a value no kernel writes (a view, such as a reshape): made of its inputs
                source = node.op.op if isinstance(node.op, Kept) else node.op
                of = tuple(k for k in node.kids if k in nodes and not nodes[k].is_scalar)
                todo += of
            est.tensors[n] = Tensor(
                DTYPES[node.dtype].name if 0 <= node.dtype < len(DTYPES) else "?",
                tuple(self.extents.get(b, 1) for b in axes) if known else None,
                self.nbytes(node) if known else 0,
                n in outputs,
                source,
                of=of,
            )

    def _priced(self, segments: list[Segment], segmenter: Segmenter, plans: dict[int, set[int]]) -> Estimate:
        """The kernels of ``segments`` priced, segment ``i`` recomputing ``plans[i]``."""
        recomputed_in: dict[int, set] = {}
        for i, cone in plans.items():
            for v in cone:
                recomputed_in.setdefault(v, set()).add(segments[i].kernel)
        est = Estimate()
        for i, segment in enumerate(segments):
            est.kernels.append(self._price(segment, segmenter, plans.get(i, set()), recomputed_in))
        est.kernels += self._alias_copies()
        return est

    @staticmethod
    def _readers(segment: Segment, cone: set[int], segmenter: Segmenter) -> frozenset:
        """The members of ``segment`` that read a node of ``cone`` (what the copy feeds)."""
        nodes, privatized = segmenter.nodes, segmenter.privatized
        return frozenset(
            m for m in segment.members if any(privatized.get(k, k) in cone for k in nodes[m].kids)
        )

    def _reading(self, nodes, roots, links, outputs) -> tuple[dict, list[int], set[int], dict]:
        """The candidate as the segmenter reads it: its nodes (kept ops linked to their inputs
        where the model knows them), their topological order, the sinks (what kernels must
        write) and the barrier ops (output -> inputs)."""
        barriers = {}
        nodes, links = self._cut(nodes, self.links if links is None else links)
        if links:
            linked, barriers = self.linked(nodes, links)
            try:
                # what the outputs need: kept ops' inputs are roots of the e-graph, but a kept op
                # no output needs (dead code) costs nothing
                sinks = live_sinks(linked, barriers, outputs) if outputs is not None else set(roots)
                return linked, topological(linked, sorted(sinks)), sinks, barriers
            except ValueError:  # a kept op's input made equal to its output: unlinked
                pass  # (the barriers stay: their leaves are still read)
        return nodes, topological(nodes, roots), set(roots), barriers

    @staticmethod
    def _cut(nodes: dict, links: dict) -> tuple[dict, dict]:
        """``nodes`` and ``links`` with each ``SegmentSet`` term as the kept op nvFuser cuts
        the fusion at: a leaf (read like an input by the kernels after it) linked to the value
        it passes on (which the kernel before it writes)."""
        cuts = {c: n for c, n in nodes.items() if n.op in BARRIER_TERMS}
        if not cuts:
            return nodes, links
        leaves = {c: GNode("Leaf", ("segment_set",), (), n.labels, n.dtype) for c, n in cuts.items()}
        return ({**nodes, **leaves}, {**links, **{c: ("segment_set", n.kids) for c, n in cuts.items()}})

    def _price(
        self, segment: Segment, segmenter: Segmenter, recomputed=frozenset(), recomputed_in=None
    ) -> Kernel:
        """The kernel of ``segment``, recomputing ``recomputed`` (``recomputed_in``: node -> the
        kernels that recompute it); an inner-outer kernel's outer reduction goes through per-block
        partial results (written and read back, about one row of them per SM) and a second
        launch, and takes the kind's ``inner_outer_row_ns`` per row it reduces."""
        k = self._kernel(
            segment.kind,
            segmenter.nodes,
            segment.members,
            segment.part_of,
            segment.kernel,
            segmenter.consumers,
            segmenter.sinks,
            segmenter.factories,
            segment.extra_reads,
            segmenter.privatized,
            recomputed,
            recomputed_in,
        )
        if segment.partials:
            consts = self.profile.kinds[segment.kind]
            partial = 2 * PARTIAL_ROWS * sum(self.nbytes(segmenter.nodes[m]) for m in segment.partials)
            k.time_us += consts.launch_us + partial / (consts.bandwidth_GBps * 1e3)
            k.time_us += (
                consts.inner_outer_row_ns
                * 1e-3
                * max(self.rows_reduced(segmenter.nodes, m) for m in segment.partials)
            )
        return k

    def rows_reduced(self, nodes: dict, m) -> int:
        """How many elements reduction ``m`` folds into each it keeps."""
        return self.numel(nodes[nodes[m].kids[0]].labels) // max(1, self.numel(nodes[m].labels))

    def _alias_copies(self) -> list[Kernel]:
        """An output written into an input (``add_output(t, alias)``): nvFuser copies it in a
        segment of its own."""
        pointwise = KernelKind.POINTWISE
        return [
            Kernel(pointwise, ["alias-copy"], 0, 0, 0.0, self.profile.kinds[pointwise].launch_us)
            for _ in range(self.aliased)
        ]

    def _kernel(
        self,
        kind,
        nodes,
        ms,
        group_of,
        g,
        consumers,
        sinks,
        factories,
        extra_reads=(),
        privatized=None,
        recomputed=frozenset(),
        recomputed_in=None,
    ) -> Kernel:
        """One kernel of ``ms`` (members of group ``g`` of ``group_of``): what it reads (besides
        ``extra_reads``: values it recomputes from) and writes, its arithmetic, and its time with
        the constants of ``kind``; ``privatized``: privatized upcasts (the segmenter's
        ``privatized_upcasts``), whose input a kernel reads in their place; ``recomputed``:
        other kernels' values it computes again from their inputs (``recomputed_in``: node ->
        the kernels that do, which its own kernel need not write it for)."""
        recomputed_in = recomputed_in or {}
        if recomputed_in:
            ms = _live(ms, g, group_of, consumers, sinks, recomputed_in)
        ms_set = set(ms) | recomputed
        reads, written = set(extra_reads), set()
        gathered: dict[int, int] = {}  # read only by indexing ops: the bytes they gather
        draws = {m for m in ms_set if nodes[m].op in DRAWS}  # random draws it computes
        flops = 0.0
        for m in [*ms, *sorted(recomputed)]:
            node = nodes[m]
            flops += self.numel(self.space(nodes, m)) * self._weight(node.op)
            for i, k in enumerate(node.kids):
                k = privatized.get(k, k) if privatized else k  # a privatized upcast: its input is read
                if k in factories and nodes[k].op in DRAWS:
                    draws.add(k)  # drawn again in this kernel
                if k not in ms_set and group_of.get(k) != g and not nodes[k].is_scalar and k not in factories:
                    if i == 0 and node.op in INDEXING_TERMS:
                        gathered[k] = gathered.get(k, 0) + self.gathered_bytes(node, nodes[k])
                    else:
                        reads.add(k)
            if m in recomputed:
                continue
            if m in sinks or any(
                group_of.get(c) != g and group_of.get(c) not in recomputed_in.get(m, ())
                for c in consumers.get(m, ())
            ):
                written.add(m)
        return self._timed_kernel(kind, nodes, ms, reads, gathered, written, flops, draws, len(recomputed))

    def _weight(self, op: str) -> float:
        """An op's arithmetic per element: a special function's weight, none for a free op."""
        if op in SPECIAL_TERMS:
            return self.profile.special_function_weight
        return 0.0 if op in FREE_TERMS else 1.0

    def _timed_kernel(self, kind, nodes, ms, reads, gathered, written, flops, draws, recomputed) -> Kernel:
        """The kernel of members ``ms`` that reads ``reads`` (and ``gathered``: node -> the bytes
        indexing ops gather of it), writes ``written``, computes ``flops`` and draws ``draws``,
        timed with ``kind``'s constants: its launch, then its bytes or its arithmetic, the
        longer."""
        consts = self.profile.kinds[kind]
        read = {r: self.nbytes(nodes[r]) for r in reads}
        read.update((k, min(b, self.nbytes(nodes[k]))) for k, b in gathered.items() if k not in reads)
        rbytes = sum(read.values())
        write = {w: self.nbytes(nodes[w]) for w in written}
        wbytes = sum(write.values())
        memory_us = (rbytes + wbytes) / (consts.bandwidth_GBps * 1e3)
        compute_us = flops / (consts.gflops * 1e3) + self._draw_us(consts, nodes, ms, draws)
        t = consts.launch_us + max(memory_us, compute_us)
        return Kernel(
            kind,
            [nodes[m].op for m in ms],
            rbytes,
            wbytes,
            flops,
            t,
            recomputed,
            read,
            write,
            "compute" if compute_us > memory_us else "memory",
            sum(self.numel(nodes[d].labels) for d in draws),
        )

    def _draw_us(self, consts, nodes, ms, draws) -> float:
        """The time a kernel of ``consts``'s kind takes to draw ``draws`` (random ops): the
        kind's ``draw_ps`` per element, or where more its ``draw_row_ns`` per row its
        reductions (members of ``ms``) reduce: the elements drawn over the most elements one
        of them keeps."""
        if not draws:
            return 0.0
        drawn = sum(self.numel(nodes[d].labels) for d in draws)
        us = drawn * consts.draw_ps * 1e-6
        kept = max((self.numel(nodes[m].labels) for m in ms if nodes[m].op in REDUCING), default=0)
        if consts.draw_row_ns and kept:
            us = max(us, drawn / kept * consts.draw_row_ns * 1e-3)
        return us


def _live(ms, g, group_of, consumers, sinks, recomputed_in) -> list:
    """The members of ``ms`` (group ``g``) that its kernel still computes once other kernels
    recompute what they read of it (``recomputed_in``: node -> the kernels that do): an output,
    or read by a live member, or read by a kernel that does not recompute it. The rest is dead
    code in the lowered definition (each kernel has its own copy of the chain)."""
    live: set = set()
    grew = True
    while grew:  # members come in merge order, not topological order
        grew = False
        for m in ms:
            if m not in live and (
                m in sinks
                or any(
                    c in live
                    if group_of.get(c) == g
                    else group_of.get(c) is not None and group_of.get(c) not in recomputed_in.get(m, ())
                    for c in consumers.get(m, ())
                )
            ):
                live.add(m)
                grew = True
    return [m for m in ms if m in live]
