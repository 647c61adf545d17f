"""The cost model: how nvFuser would segment a candidate into kernels, and what each costs.

It scores a whole candidate (a DAG of term nodes with labels and dtypes), because kernel
count and bytes are not additive over nodes:

1. **Segmentation.** Pointwise ops fuse with each other. A reduction joins a kernel only with
   reductions of the same key (the same reduced labels over the same iteration space: the
   normalization pattern, nvFuser's persistent schedulers) or, once, with reductions over
   the same space along the other, disjoint labels (nvFuser's inner-outer persistent kernel:
   a norm backward's row and column sums), and with the pointwise ops whose iteration space
   lies within it or has its size (a reshape of it): prologue, epilogue, broadcast back.
   Groups are merged greedily along edges while they stay compatible and the kernel graph
   stays acyclic. Ops eqsat keeps verbatim (reshape, slice, pad, cat, index_select, full,
   random...) count as pointwise ops on their inputs; matmul/linear, welford, segment_set and
   unknown ops are barriers (their outputs are read like inputs, and no kernel spans one).
   The rules of nvFuser's schedulers (0.2.35) that decide a merge:
   - a kernel without reductions needs one tensor whose iteration covers all it reads and
     writes (the reference tensor; a reshaped or resized axis counts as the one it came from);
   - slice/pad/cat take a value computed in the same kernel only in a kernel without
     reductions whose outputs all lie past the resize (the resize scheduler); indexing ops
     (index_select, gather), and pads/cats of a broadcast dim, only a kernel input;
   - reductions along two label sets share a kernel only with something broadcast back
     (inner-outer persistent); an innermost-axis reduction kernel takes no epilogue that
     reads other tensors; a kernel of views alone (reshape, slice, squeeze) is no kernel;
   - factory ops (full, iota, random) are recomputed in each kernel that uses them; an output
     aliased to an input is copied in a segment of its own.
2. **Bytes** per kernel: the tensors it reads (inputs, and intermediates another kernel
   wrote) and writes (roots, and intermediates another kernel reads). **Arithmetic**: one op
   per element of each node's iteration space (special functions weigh more, casts nothing;
   kept ops such as reshape count one, as data movement).
3. **Time** = host cost + sum over kernels of (launch + max(bytes / bandwidth, flops /
   throughput)), with the constants of the kernel's kind from the profile. The host cost is
   nvFuser's per ``execute`` at steady state: a base, and a cost per segment (kernel), per
   input, output, op and resize op (the profile's ``host``; the default H200 profile charges
   the base alone, its ``h200_host_fit`` twin the fit of bench/host_cost.py, where a segment
   costs about 12 µs of host time, more than most kernels' device time).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from eqsat.egraph.terms import DTYPES, REDUCTIONS, bits
from eqsat.ir.dtypes import ITEMSIZE

from .kernel_graph import KernelGraph
from .profile import Profile
from .walks import depends_on, downstream, feeding, live_sinks, topological

SPECIAL = frozenset({"Exp", "Log", "Sqrt", "Rsqrt", "Recip", "Tanh", "Sigmoid", "Pow", "Un", "Tern"})
SCALARS = frozenset({"Num", "Int", "Extent"})
FREE = frozenset({"Cast"})      # no arithmetic worth counting (a conversion on load or store)
PARTIAL_ROWS = 132        # an inner-outer kernel's partial results: about one row per SM (H200)
# kept ops that nvFuser does not fuse into a pointwise/reduction kernel (or that are not its kernels)
BARRIERS = frozenset({"matmul", "linear", "welford", "segment_set", "opaque"})
# kept ops that resize an axis: nvFuser's pointwise and reduction schedulers take them only on a
# kernel's inputs; its resize scheduler takes them anywhere in a kernel without reductions
RESIZES = frozenset({"Kept:slice", "Kept:pad", "Kept:cat"})
# kept ops that index a tensor: their indexed input must be a kernel input (no scheduler of
# nvFuser 0.2.35 takes them on a value computed in the same kernel)
INDEXING = frozenset({"Kept:index_select", "Kept:gather", "Kept:select", "Kept:take_along_axis"})


@dataclass(frozen=True)
class GNode:
    """A node of a candidate: constructor, attributes, children (node ids), and the analyses
    of its class: label mask and dtype code."""

    op: str
    attrs: tuple
    kids: tuple
    labels: int
    dtype: int

    @property
    def is_scalar(self) -> bool:
        return self.dtype >= 100 or self.op in SCALARS

    @property
    def space(self) -> int:
        """Labels of the iteration space: a reduction iterates over its input's."""
        return self.labels


@dataclass
class Kernel:
    kind: str
    ops: list[str]
    bytes_read: int
    bytes_written: int
    flops: float
    time_us: float

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written


@dataclass
class Estimate:
    kernels: list[Kernel] = field(default_factory=list)
    host_us: float = 0.0

    @property
    def bytes(self) -> int:
        return sum(k.bytes for k in self.kernels)

    @property
    def flops(self) -> float:
        return sum(k.flops for k in self.kernels)

    @property
    def time_us(self) -> float:
        return self.host_us + sum(k.time_us for k in self.kernels)

    def summary(self) -> dict:
        return {"kernels": len(self.kernels), "bytes": self.bytes, "flops": self.flops,
                "time_us": round(self.time_us, 3)}

    def explain(self) -> str:
        lines = [f"{len(self.kernels)} kernels, {self.bytes / 1e6:.3f} MB, {self.flops / 1e6:.3f} MFLOP, "
                 f"{self.time_us:.1f} us (host {self.host_us:.0f} us)"]
        for i, k in enumerate(self.kernels):
            ops = ", ".join(_counted(k.ops))
            lines.append(f"  kernel {i} [{k.kind}]: read {k.bytes_read / 1e6:.3f} MB, write "
                         f"{k.bytes_written / 1e6:.3f} MB, {k.flops / 1e6:.3f} MFLOP, {k.time_us:.1f} us: {ops}")
        return "\n".join(lines)


def _counted(ops):
    counts: dict[str, int] = {}
    for op in ops:
        counts[op] = counts.get(op, 0) + 1
    return [f"{op}×{n}" if n > 1 else op for op, n in counts.items()]


class EstimateCut(Exception):
    """An estimate stopped at ``CostModel.until``: no reading of the candidate."""


class CostModel:
    until: float | None = None          # a perf_counter time an estimate stops at (EstimateCut)

    def __init__(self, profile: Profile, extents: dict[int, int],
                 links: dict[int, tuple[str, tuple[int, ...]]] | None = None,
                 outputs: set[int] | None = None, aliased: int = 0, inner: dict[int, int] | None = None):
        self.profile = profile
        self.extents = extents          # label bit -> extent
        self.links = links or {}        # kept op's output class -> (op, input classes)
        self.outputs = outputs          # the fusion's output classes (None: every root)
        self.aliased = aliased          # outputs written into an input (add_output(t, alias))
        self.inner = inner or {}        # class -> the label of its innermost (last logical) dim
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
            if op in BARRIERS:
                barriers[c] = ins
                continue
            out[c] = GNode(f"Kept:{op}", node.attrs, ins, node.labels, node.dtype)
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

    def reduction_kind(self, ks) -> str | None:
        """What the reductions of one kernel with keys ``ks`` (space, reduced labels) make:
        "same" (one key; or keys over different spaces of equal extents, horizontally fused),
        "inner_outer" (two keys over one space along disjoint labels), or None (they cannot
        share a kernel)."""
        if len(ks) == 1:
            return "same"
        spaces = {s for s, _ in ks}
        if len(spaces) == 1:
            if len(ks) == 2:
                (_, r1), (_, r2) = ks
                if not r1 & r2:
                    return "inner_outer"
            return None
        if len({(self.numel(s), self.numel(r)) for s, r in ks}) == 1:
            return "same"
        return None

    def space(self, nodes, nid: int) -> int:
        node = nodes[nid]
        if node.op in REDUCTIONS:
            return nodes[node.kids[0]].labels
        return node.labels

    def estimate(self, nodes: dict, roots: list[int], links: dict | None = None,
                 outputs: set[int] | None = None, inner: dict[int, int] | None = None) -> Estimate:
        """``nodes``: id -> GNode (only those reachable from ``roots`` are counted); ``links``,
        ``outputs`` and ``inner``: kept ops, the fusion's outputs and innermost labels by node
        id, if not the model's own (which are by e-class)."""
        inner = self.inner if inner is None else inner
        order = None
        barriers = {}
        outputs = self.outputs if outputs is None else outputs
        if self.links or links:
            try:
                linked, barriers = self.linked(nodes, links)
                # what the outputs need: kept ops' inputs are roots of the e-graph, but a kept op
                # no output needs (dead code) costs nothing
                sinks = live_sinks(linked, barriers, outputs) if outputs is not None else set(roots)
                order, nodes = topological(linked, sorted(sinks)), linked
            except ValueError:          # a kept op's input made equal to its output: unlinked
                pass
        if order is None:
            order = topological(nodes, roots)
            sinks = set(roots)
        # ops that make a tensor from scalars alone (full, iota, random): nvFuser recomputes
        # them in each kernel that uses them, like a scalar
        factories = {n for n in order if nodes[n].op.startswith("Kept:")
                     and all(nodes[k].is_scalar for k in nodes[n].kids)}
        compute = [n for n in order if nodes[n].op != "Leaf" and not nodes[n].is_scalar and n not in factories]
        consumers: dict[int, list[int]] = {}
        for n in order:
            for k in nodes[n].kids:
                consumers.setdefault(k, []).append(n)
        in_compute = set(compute)
        edges = [(n, c) for n in compute for c in consumers.get(n, ()) if c in in_compute]
        # a barrier op (matmul, ...) runs between the kernel that makes its inputs and those that
        # read its output: a node of the kernel graph that never merges
        walls = [n for n in order if n in barriers and n in consumers]
        through = [(k, w) for w in walls for k in barriers[w] if k in in_compute] + \
                  [(w, c) for w in walls for c in consumers[w] if c in in_compute]
        graph = KernelGraph([n for n in order if n in in_compute or n in barriers], edges + through)
        find = graph.find

        keys = {n: set() for n in compute}          # group -> reduction keys
        spaces = {n: self.space(nodes, n) for n in compute}
        for n in compute:
            # a reduction over labels of extent 1 only (a broadcast dim: keepdim, [N, 1]
            # inputs) is a squeeze to nvFuser, no reduction: it joins any kernel
            if nodes[n].op in REDUCTIONS and self.numel(nodes[n].attrs[0] & spaces[n]) > 1:
                keys[n].add((spaces[n], nodes[n].attrs[0]))
        members = {n: [n] for n in compute}
        group_spaces = {n: {spaces[n]} for n in compute}     # the distinct iteration spaces
        # what a node's iteration covers: its space, and for a kept op the labels of its inputs
        # too (nvFuser maps a reshaped or resized axis back to the one it came from)
        covers = {n: spaces[n] | (_kid_labels(nodes, n) if nodes[n].op.startswith("Kept:") else 0)
                  for n in compute}
        group_covers = {n: {covers[n]} for n in compute}
        resizing = {n: [n] if nodes[n].op in RESIZES or nodes[n].op in INDEXING else [] for n in compute}
        reshaping = {n: [n] if nodes[n].op == "Kept:reshape" else [] for n in compute}
        position = {n: i for i, n in enumerate(order)}

        def written(m, a, b):
            return m in sinks or any(c in in_compute and find(c) not in (a, b) for c in consumers.get(m, ()))

        def resize_ok(a, b):
            """nvFuser takes a resize or indexing op on a value computed in the same kernel only
            in its resize scheduler: no reductions, no indexing, and every output past each
            resize (no resize between the reference tensor and an output)."""
            outs = None
            for m in resizing[a] + resizing[b]:
                kids = nodes[m].kids if nodes[m].op == "Kept:cat" else nodes[m].kids[:1]
                if not any(k in in_compute and find(k) in (a, b) for k in kids):
                    continue
                if nodes[m].op in INDEXING or keys[a] or keys[b] or _resizes_broadcast(nodes, m):
                    return False
                if outs is None:
                    outs = {w for w in members[a] + members[b] if written(w, a, b)}
                if not outs <= downstream(m, consumers, lambda c: c in in_compute and find(c) in (a, b)):
                    return False
            return True

        def covered(a, b):
            """A kernel without reductions needs one tensor whose iteration covers every value it
            reads and writes (nvFuser's reference tensor); a reduction's covers its kernel."""
            union = 0
            for c in group_covers[a] | group_covers[b]:
                union |= c
            if any(c == union for c in group_covers[a] | group_covers[b]):
                return True
            ms = sorted(members[a] + members[b], key=position.__getitem__)
            inside, cover = set(ms), {}
            for m in ms:
                c = covers[m]
                for k in nodes[m].kids:
                    if k in inside:
                        c |= cover[k]
                cover[m] = c
            return any(c == union for c in cover.values())

        def compatible(a, b):
            if not resize_ok(a, b):
                return False
            ks = keys[a] | keys[b]
            if not ks:
                return covered(a, b)
            kind = self.reduction_kind(ks)
            if kind is None:
                return False
            spaces_of = {s for s, _ in ks}
            size = self.numel(next(iter(spaces_of)))
            # a value reshaped into the iteration space (a norm's weight [C] made [1, G, C/G])
            # is iterated over with it
            for m in reshaping[a] + reshaping[b]:
                for s in list(spaces_of):
                    if nodes[m].labels & ~s == 0:
                        spaces_of.add(s | _kid_labels(nodes, m))
            # equal size through other labels: a reshape of the space (only a reshape makes one)
            reshaped = bool(reshaping[a] or reshaping[b])
            return all(any(sp & ~s == 0 for s in spaces_of) or (reshaped and self.numel(sp) == size)
                       for sp in group_spaces[a] | group_spaces[b])

        # pointwise with pointwise first, then groups with reductions, along edges; then
        # siblings (groups reading a common value: nvFuser segments one fusion, so independent
        # parts stay in one kernel where they are compatible)
        def merge_pairs(pairs, pointwise_only):
            changed, passes = True, 0
            while changed and passes < 2:      # in topological order one pass nearly always does
                changed, passes = False, passes + 1
                for i, (n, c) in enumerate(pairs):
                    if self.until is not None and i % 256 == 0 and time.perf_counter() > self.until:
                        raise EstimateCut("the deadline passed during an estimate")
                    a, b = find(n), find(c)
                    if a == b or (pointwise_only and (keys[a] or keys[b])):
                        continue
                    if compatible(a, b) and not graph.would_cycle(a, b):
                        kept, gone = graph.merge(a, b)
                        keys[kept] |= keys.pop(gone)
                        members[kept] += members.pop(gone)
                        group_spaces[kept] |= group_spaces.pop(gone)
                        group_covers[kept] |= group_covers.pop(gone)
                        resizing[kept] += resizing.pop(gone)
                        reshaping[kept] += reshaping.pop(gone)
                        changed = True

        merge_pairs(edges, True)
        merge_pairs(edges, False)
        siblings = []
        for v, users in consumers.items():
            if v in factories:
                continue
            users = [u for u in users if u in in_compute]
            siblings += [(users[0], u) for u in users[1:]]
        merge_pairs(siblings, False)
        inputs = sum(nodes[n].op == "Leaf" for n in order)
        n_outputs = len(outputs) if outputs is not None else len(roots)
        return self._kernels(nodes, compute, find, keys, members, consumers, sinks, factories, inner,
                             inputs, n_outputs)

    def _kernels(self, nodes, compute, find, keys, members, consumers, sinks, factories, inner,
                 inputs: int, outputs: int) -> Estimate:
        """The kernels of the groups, and the host cost of the whole (``inputs``: the fusion's
        inputs the candidate reads; ``outputs``: its outputs)."""
        est = Estimate()
        group_of = {n: find(n) for n in compute}
        for g, ms in members.items():
            ms_set = set(ms)
            kind, inner_outer = "pointwise", False
            if keys[g]:
                space = next(iter(keys[g]))[0]
                reduced = {m for m in ms if nodes[m].op in REDUCTIONS}
                back = any(nodes[m].op not in REDUCTIONS and self.numel(self.space(nodes, m)) == self.numel(space)
                           and depends_on(nodes, m, reduced, ms_set) for m in ms)
                kind = "normalization" if back else "reduction"
                inner_outer = self.reduction_kind(keys[g]) == "inner_outer"
            if all(self._is_view(nodes, m) for m in ms):
                continue            # views of its inputs only: nvFuser aliases, no kernel
            if kind == "reduction" and not inner_outer:
                split = self._epilogue_split(nodes, ms, keys[g], inner)
                if split:
                    head, tail = split
                    part_of = {**group_of, **{m: ("epilogue", g) for m in tail}}
                    est.kernels.append(self._kernel("reduction", nodes, head, part_of, g, consumers, sinks,
                                                    factories))
                    est.kernels.append(self._kernel("pointwise", nodes, tail, part_of, ("epilogue", g), consumers,
                                                    sinks, factories))
                    continue
            if inner_outer:
                # the outer reduction is taken to be the one over the lower labels (leading dims)
                outer_labels = min(r for _, r in keys[g])
                outer = [m for m in ms if nodes[m].op in REDUCTIONS and nodes[m].attrs[0] == outer_labels]
            if inner_outer and not back:
                # reductions along two sets of labels with nothing broadcast back: no persistent
                # buffer, so nvFuser runs them as two reduction kernels over the same input
                first = [m for m in ms if m not in set(outer)]
                fed = feeding(nodes, outer, ms_set) - factories
                est.kernels.append(self._kernel("reduction", nodes, first, group_of, g, consumers, sinks, factories))
                est.kernels.append(self._kernel("reduction", nodes, outer, group_of, g, consumers, sinks, factories, fed))
                continue
            k = self._kernel(kind, nodes, ms, group_of, g, consumers, sinks, factories)
            if inner_outer:
                # inner-outer: the outer reduction goes through per-block partial results
                # (written and read back, about one row of them per SM) and a second launch
                consts = self.profile.kinds[kind]
                partial = 2 * PARTIAL_ROWS * sum(self.nbytes(nodes[m]) for m in outer)
                k.time_us += consts.launch_us + partial / (consts.bandwidth_GBps * 1e3)
            est.kernels.append(k)
        for _ in range(self.aliased):
            # an output written into an input: nvFuser copies it in a segment of its own
            est.kernels.append(Kernel("pointwise", ["alias-copy"], 0, 0, 0.0,
                                      self.profile.kinds["pointwise"].launch_us))
        est.kernels.sort(key=lambda k: -k.time_us)
        if compute or self.aliased:
            est.host_us = self.profile.host.cost_us(
                segments=len(est.kernels), inputs=inputs, outputs=outputs,
                ops=len(compute), resizes=sum(nodes[m].op in RESIZES for m in compute))
        return est

    def _is_view(self, nodes, m) -> bool:
        """A reshape, a slice, or a reduction over extent-1 labels (a squeeze)."""
        op = nodes[m].op
        if op in ("Kept:reshape", "Kept:slice"):
            return True
        return op in REDUCTIONS and self.numel(nodes[m].attrs[0]) <= 1

    def _epilogue_split(self, nodes, ms, keys, inner) -> tuple[list, list] | None:
        """nvFuser's reduction scheduler, reducing the innermost axis, fuses no op after the
        reduction that reads a tensor the reductions do not: (reduction kernel, epilogue) then."""
        space, reduced_labels = next(iter(keys))
        reductions = [m for m in ms if nodes[m].op in REDUCTIONS]
        innermost = inner.get(nodes[reductions[0]].kids[0]) if reductions else None
        if innermost is None or not (1 << innermost) & reduced_labels:
            return None                     # an outer reduction (or a layout not known)
        ms_set = set(ms)
        head = set(reductions)
        stack = list(reductions)
        while stack:                        # the reductions and what they read in the group
            for k in nodes[stack.pop()].kids:
                if k in ms_set and k not in head:
                    head.add(k)
                    stack.append(k)
        tail = [m for m in ms if m not in head]
        if not tail or not feeding(nodes, tail, ms_set) - head - feeding(nodes, reductions, ms_set):
            return None
        return [m for m in ms if m in head], tail

    def _kernel(self, kind, nodes, ms, group_of, g, consumers, sinks, factories, extra_reads=()) -> Kernel:
        """One kernel of ``ms`` (members of group ``g`` of ``group_of``): what it reads (besides
        ``extra_reads``: values it recomputes from) and writes, its arithmetic, and its time with
        the constants of ``kind``."""
        ms_set = set(ms)
        reads, written = set(extra_reads), set()
        flops = 0.0
        for m in ms:
            node = nodes[m]
            weight = self.profile.special_function_weight if node.op in SPECIAL else \
                0.0 if node.op in FREE else 1.0
            flops += self.numel(self.space(nodes, m)) * weight
            for k in node.kids:
                if k not in ms_set and group_of.get(k) != g and not nodes[k].is_scalar and k not in factories:
                    reads.add(k)
            if m in sinks or any(group_of.get(c) != g for c in consumers.get(m, ())):
                written.add(m)
        consts = self.profile.kinds[kind]
        rbytes = sum(self.nbytes(nodes[r]) for r in reads)
        wbytes = sum(self.nbytes(nodes[w]) for w in written)
        t = consts.launch_us + max((rbytes + wbytes) / (consts.bandwidth_GBps * 1e3),
                                   flops / (consts.gflops * 1e3))
        return Kernel(kind, [nodes[m].op for m in ms], rbytes, wbytes, flops, t)


def _resizes_broadcast(nodes, m) -> bool:
    """A pad or cat whose input lacks a dim its output has: it resizes a broadcast dim, which
    nvFuser's resize scheduler does not take."""
    if nodes[m].op not in ("Kept:pad", "Kept:cat"):
        return False
    want = bin(nodes[m].labels).count("1")
    return any(bin(nodes[k].labels).count("1") < want for k in nodes[m].kids if not nodes[k].is_scalar)


def _kid_labels(nodes, n) -> int:
    mask = 0
    for k in nodes[n].kids:
        if not nodes[k].is_scalar:
            mask |= nodes[k].labels
    return mask
