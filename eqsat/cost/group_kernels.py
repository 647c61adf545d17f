"""The kernels of the segmenter's merged groups (``eqsat.cost.segmenter``): each group becomes
zero, one or two :class:`Segment` s, which the cost model prices. One method per rule of
nvFuser's schedulers: :meth:`GroupKernels.views_alone` (no kernel), :meth:`GroupKernels.output_views`
(an output's views join no kernel), :meth:`GroupKernels.innermost_reduction_epilogue`,
:meth:`GroupKernels.inner_outer_persistent`, :meth:`GroupKernels.reduction_kind` (a reduction to
one element is a grid reduction, one that keeps the innermost axis an outer reduction).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .ops import REDUCING, Kept
from .profile import KernelKind
from .walks import depends_on, feeding, upstream_within

if TYPE_CHECKING:  # annotations only
    from .segmenter import Group

# the fewest elements a full reduction reduces across blocks (a grid reduction): nvFuser 0.2.35
# on the H200 summed 4096 in one block and 16384 across blocks (bench/calibrate.py, full_sum)
GRID_MIN = 8192
# the most elements a grid reduction leaves: nvFuser splits the reduced axis across blocks while
# the blocks the kept elements take fill at most half the SMs (reduction_non_tma.cpp: grdim grows
# while godim * grdim * 2 <= sm_count; 132 SMs on the H100/H200). A sum leaving 4 elements of
# [4, 2048, 5632] ran as slowly as the full sum it splits (H100, nvFuser 0.2.35: 110.6 vs 110.2 us)
GRID_MAX_KEPT = 64


@dataclass
class Segment:
    """One kernel of a group, for the cost model to price: its ``kind`` (the constants it runs
    with), its ``members``, and ``part_of``: the kernel id of every compute node, this one's
    being ``kernel`` (what it reads from another kernel, or writes for another, is memory)."""

    kind: KernelKind
    members: list[int]
    part_of: dict
    kernel: object
    extra_reads: set = field(default_factory=set)  # values outside it that it recomputes from
    partials: list = field(default_factory=list)  # inner-outer: the outer reductions (partial results)


class GroupKernels:
    """How nvFuser runs each merged group: the part of :class:`~eqsat.cost.segmenter.Segmenter`
    that reads groups as kernels. It reads the segmenter's ``nodes``, ``model``, ``graph``,
    ``groups``, ``compute``, ``in_compute``, ``consumers``, ``sinks``, ``inner`` and
    ``factories``."""

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
                return [
                    Segment(self.reduction_kind(head), head, split_of, g),
                    Segment(KernelKind.POINTWISE, tail, split_of, ("epilogue", g)),
                ]
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
        if reductions and all(
            numel(nodes[m].labels) <= GRID_MAX_KEPT
            and numel(self.model.space(nodes, m)) > GRID_MIN * max(numel(nodes[m].labels), 1)
            for m in reductions
        ):
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
        (``eqsat.lowering.from_terms.TermLowering.output_order``): a reduction keeps its input's innermost
        dim unless it reduces it; an elementwise op takes that of its operand with the most
        labels, where that operand has all of the op's. None where not known (a kept op)."""
        known, nodes = self.inner, self.nodes
        stack = [n]
        while stack:  # no recursion: a chain may be thousands of ops long
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
        return any(
            nodes[m].op not in REDUCING
            and numel(self.model.space(nodes, m)) == numel(space)
            and depends_on(nodes, m, reduced, ms_set)
            for m in group.members
        )

    def output_views(self, g) -> bool:
        """Views alone (:meth:`views_alone`) that make outputs and feed nothing else join no
        kernel: nvFuser puts the value they view behind a segment_set and aliases them to it
        (no bytes written; the host segment that runs them is the model's ``alias_segments``)."""
        ms = self.groups[g].members
        inside = set(ms)
        return (
            self.views_alone(ms)
            and any(m in self.sinks for m in ms)
            and not any(
                c in self.in_compute and c not in inside for m in ms for c in self.consumers.get(m, ())
            )
        )

    def views_alone(self, ms) -> bool:
        """A kernel of views of its inputs only (reshape, slice, squeeze) is no kernel:
        nvFuser aliases them (the host cost of the segment it runs them in is the model's:
        ``CostModel.alias_segments``). Views of a factory (an iota) are not: a kernel writes
        the values the factory makes."""
        nodes, factories = self.nodes, self.factories
        return all(self.is_view(m) and not any(k in factories for k in nodes[m].kids) for m in ms)

    def is_view(self, m) -> bool:
        """A reshape, a slice, a stride order, a cast to the dtype it has (nvFuser's ``set``), or
        a reduction over extent-1 labels (a squeeze)."""
        if self.aliases_input(m):
            return True
        return self.nodes[m].op in REDUCING and self.model.numel(self.nodes[m].attrs[0]) <= 1

    def innermost_reduction_epilogue(self, ms, keys) -> tuple[list, list] | None:
        """nvFuser's reduction scheduler, reducing the innermost axis, fuses no op after the
        reduction that reads a tensor the reductions do not: (reduction kernel, epilogue) then."""
        nodes = self.nodes
        _, reduced_labels = next(iter(keys))
        reductions = [m for m in ms if nodes[m].op in REDUCING]
        innermost = self.innermost(nodes[reductions[0]].kids[0]) if reductions else None
        if innermost is None or not (1 << innermost) & reduced_labels:
            return None  # an outer reduction (or a layout not known)
        ms_set = set(ms)
        head = upstream_within(nodes, reductions, ms_set)  # the reductions and what they read
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
        return [
            Segment(KernelKind.REDUCTION, first, part_of, g),
            Segment(self.reduction_kind(outer), outer, part_of, g, fed),
        ]
