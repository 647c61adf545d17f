"""Which axes nvFuser maps to one another inside a kernel, for the segmenter's rules that ask
it (a mixin of :class:`eqsat.cost.segmenter.Segmenter`, whose groups, nodes and layouts it
reads):

- :meth:`AxisMapping.resize_inner_dims`: nvFuser's resize scheduler takes no kernel whose inputs
  and outputs have innermost dims that do not map to one another ("transpose-like");
- :meth:`AxisMapping.non_unique_broadcast`: no scheduler takes a kernel that concretizes one
  broadcast to two axes that do not map to one another.

Both were read from nvFuser's source (0.2.35: ``ResizeScheduler::canScheduleCompileTime``,
``registry_utils::hasNonUniqueBcast``) and checked against the kernels nvFuser makes of both
corpora on the H200 (``bench/results/h200_corpus_035_s25.json``: 157 -> 160 of 173 counts
matched).
"""

from __future__ import annotations

from functools import cached_property

from eqsat.egraph.terms import bits

from .ops import REDUCING, RESIZES, Kept
from .union_find import UnionFind


class AxisMapping:
    """The segmenter's rules on mapped axes."""

    def resize_inner_dims(self, a, b, outs) -> set:
        """The innermost dims of what the resize kernel of groups ``a`` and ``b`` reads (its
        inputs' allocated innermost dims, of extent above 1) and writes (``outs``), as classes of
        labels nvFuser maps to one another (:meth:`mapped_labels`). nvFuser's resize scheduler
        takes no kernel whose inputs and outputs fall in two or more such groups
        (``ResizeScheduler::canScheduleCompileTime``: "Transpose-like patterns not supported",
        by ``TransposeDomainMap::groupInputsOutputsByInnerDim``): a rotary table read along
        its last dim into a transposed output splits from it."""
        nodes, members = self.nodes, set(self.groups[a].members + self.groups[b].members)
        find = self.mapped_labels.find
        dims = set()
        for m in members:
            for k in nodes[m].kids:
                if k in members or nodes[k].is_scalar:
                    continue
                i = self.allocated_inner(k)
                if i is not None and self.model.numel(1 << i) > 1:
                    dims.add(find(i))
        for m in outs:
            i = self.innermost(m)
            if i is not None:
                dims.add(find(i))
        return dims

    @cached_property
    def mapped_labels(self) -> UnionFind:
        """Labels nvFuser maps one to the other along innermost dims: a resized label with the
        one it came from (slice, pad, cat), a reshape's innermost label with its input's (once
        per segmenter: the candidate's nodes do not change while it merges)."""
        nodes, classes = self.nodes, UnionFind()
        for m in self.position:
            node = nodes[m]
            if node.op in RESIZES:
                for k in node.kids:
                    if nodes[k].is_scalar:
                        continue
                    new, old = node.labels & ~nodes[k].labels, nodes[k].labels & ~node.labels
                    if new.bit_count() == 1 and old.bit_count() == 1:
                        classes.union(new.bit_length() - 1, old.bit_length() - 1)
            elif node.op is Kept.reshape and node.kids:
                i, j = self.innermost(m), self.innermost(node.kids[0])
                if i is not None and j is not None:
                    classes.union(i, j)
        return classes

    def allocated_inner(self, k) -> int | None:
        """The label of kernel input ``k``'s innermost allocated dim: a fusion input's from its
        stride order; a cast of one, or a view of one that runs as no kernel (nvFuser's no-op
        segment aliases it), keeps its input's, mapped through the view; a value another kernel
        writes is laid out in its logical order."""
        nodes, chain = self.nodes, []
        while nodes[k].op != "Leaf":
            node = nodes[k]
            is_view = node.op in (Kept.reshape, Kept.slice) and self._runs_no_kernel(k)
            if not node.kids or not (node.op == "Cast" or is_view):
                return self.innermost(k)
            chain.append(k)
            k = node.kids[0]
        inner = self.alloc_inner.get(k, self.innermost(k))
        find = self.mapped_labels.find
        for v in reversed(chain):  # through the views and casts, outermost first
            if inner is None:
                return None
            if not (1 << inner) & nodes[v].labels:
                same = [b for b in bits(nodes[v].labels) if find(b) == find(inner)]
                inner = same[0] if same else None
        return inner

    def _runs_no_kernel(self, k) -> bool:
        """Whether ``k``'s group is views alone (``GroupKernels.views_alone``: nvFuser's no-op
        segment, no kernel)."""
        if k not in self.in_compute:
            return True
        group = self.groups.get(self.graph.find(k))
        return group is not None and self.views_alone(group.members)

    def resizes_a_broadcast_axis(self, a, b) -> bool:
        """Whether a resize of the kernel of groups ``a`` and ``b`` (which needs the resize
        scheduler) resizes an axis that a value of the kernel is broadcast along: nvFuser's
        resize scheduler rejects it ("Resize of a broadcast ID is not allowed": the resize
        would reach the broadcast through the broadcast graph, ``ResizeScheduler::
        canScheduleCompileTime``). A table broadcast into q's rows, q then padded along its
        rows for a cat, runs as two kernels (H100, nvFuser 0.2.35)."""
        nodes, groups = self.nodes, (self.groups[a], self.groups[b])
        broadcast = 0  # labels a member's tensor inputs are broadcast along
        for m in groups[0].members + groups[1].members:
            for k in nodes[m].kids:
                if not nodes[k].is_scalar and nodes[k].labels:
                    broadcast |= broadcast_along(nodes[m], nodes[k])
        if not broadcast:
            return False
        for m in groups[0].resizing + groups[1].resizing:
            if nodes[m].op not in RESIZES:
                continue
            for k in nodes[m].kids:
                if not nodes[k].is_scalar and nodes[k].labels & ~nodes[m].labels & broadcast:
                    return True
        return False

    def non_unique_broadcast(self, a, b) -> bool:
        """Whether the kernel of groups ``a`` and ``b`` concretizes one broadcast to dims that
        are not mapped within it: every scheduler of nvFuser rejects it
        (``registry_utils::hasNonUniqueBcast``, by ``ConcretizedBroadcastDomains``). Phi-3's
        rotary tables broadcast into both dq's and dk's head axes, which meet only through a
        merge and a pad. Here a value (a kernel input, or a reduction in the kernel) is
        broadcast where an elementwise op reads it with labels it lacks; two labels are mapped
        where a chain of the kernel's ops carries one label between them; the broadcast is
        not unique where its missing labels fall in more classes than it has broadcast dims."""
        nodes = self.nodes
        members = sorted(set(self.groups[a].members + self.groups[b].members), key=self.position.__getitem__)
        inside = set(members)
        mapped = UnionFind()
        origins: dict[int, set] = {}  # member -> the values its data comes from
        broadcasts: dict[int, list] = {}  # value -> (member, labels it is broadcast along)
        for m in members:
            node = nodes[m]
            came_from = set()
            for k in node.kids:
                kid = nodes[k]
                if kid.is_scalar or not kid.labels:
                    continue
                for label in bits(node.labels & kid.labels):
                    mapped.union((m, label), (k, label))
                sources = origins.get(k, {k}) if k in inside else {k}
                missing = broadcast_along(node, kid)
                if missing:
                    for o in sources:
                        broadcasts.setdefault(o, []).append((m, missing))
                came_from |= sources
            origins[m] = {m} if node.op in REDUCING else came_from
        width = max(nodes[m].labels.bit_count() for m in members)
        for o, events in broadcasts.items():
            if len(events) < 2:
                continue
            classes = {mapped.find((m, label)) for m, missing in events for label in bits(missing)}
            if len(classes) > width - nodes[o].labels.bit_count():
                return True
        return False


def broadcast_along(node, kid) -> int:
    """The labels along which elementwise ``node`` broadcasts its input ``kid`` (those it has
    and ``kid`` lacks); none for a kept op that is not elementwise (a reshape, a pad)."""
    if isinstance(node.op, Kept) and not node.op.elementwise:
        return 0
    return node.labels & ~kid.labels
