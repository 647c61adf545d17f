"""What a kernel computes again rather than reads, as the segmenter (``eqsat.cost.segmenter``)
reads a candidate: :meth:`Recomputing.recomputed_factories` (factory ops belong to no group,
unless an output), :meth:`Recomputing.privatized_upcasts` (an upcast of an input is recomputed
in each kernel), :meth:`Recomputing.views_of_inputs` (each kernel reads a view of an input from
the input), and :meth:`Recomputing.recomputed_chains` (what eqsat's lowering makes a kernel
recompute from the fusion's inputs rather than read from another kernel).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eqsat.egraph.terms import DTYPES, ELEMENTWISE_TERMS
from eqsat.ir import dtypes as dt
from eqsat.ir.dtypes import ITEMSIZE

from .ops import INDEXERS, VIEWS, Kept

if TYPE_CHECKING:  # annotations only
    from .group_kernels import Segment

# the most nodes a kernel recomputes from the inputs in place of one value it would read
RECOMPUTE_MAX_NODES = 32


class Recomputing:
    """The part of :class:`~eqsat.cost.segmenter.Segmenter` that finds what kernels recompute. It
    reads the segmenter's ``nodes``, ``model``, ``sinks``, ``consumers``, ``in_compute``,
    ``position``, ``privatized`` and ``factories``."""

    def privatized_upcasts(self, order) -> dict[int, int]:
        """Upcasts of fusion inputs that nvFuser copies into each kernel that reads them, which
        read the input, so the wide tensor is never written: where the input is also indexed
        (``SegmentCandidateFinder::privatizeUpCastOrSqueezeOp``, made for cross-entropy: bf16
        logits read by a take_along_axis and, cast to Float, by the logsumexp), and where the
        input has no other use and the cast's readers all iterate over its labels or over a
        broadcast of them (its input forwarding, ``forwardInputs``, where each kernel that the
        cast's readers make takes its copy in; readers over other spaces or kept ops, where
        nvFuser was seen to keep the cast in a kernel of its own, are left as they were). A
        rotary table [s, d] that Thunder expands and casts once for q's heads and once for k's
        is one cast in eqsat's IR; nvFuser casts it in the rotation of each (H100: Gemma's
        rotary backward, ``thunder_gemma_20``, ran as 2 kernels, and Llama's rotations as one
        each, where keeping the cast in one side's kernel made 4). Not one that an indexing op indexes
        (no scheduler indexes a value computed in its kernel: it is written for the indexing
        kernel) nor an output. The casts -> their input (what those kernels read instead)."""
        nodes, out = self.nodes, {}

        def indexed(v) -> bool:  # an indexing op indexes v (its first kid)
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
            if indexed(k) or (
                len(users) == 1 and len(readers) > 1 and all(self._iterates_over(c, n) for c in readers)
            ):
                out[n] = k
        return out

    def views_of_inputs(self, order) -> set[int]:
        """Views (reshape, slice, stride order, a cast to the same dtype) of the fusion's inputs,
        and views of those, that are not outputs: nvFuser runs them in no kernel (its expression
        evaluator's segments alias them to the input), and each kernel that reads one reads its
        elements from the input. They belong to no group, so that two kernels may read one view rather
        than one kernel writing it for the other: Phi-3's q and k, views of the fused
        projection, are read by the rotations' resize kernels and by the kernels that multiply
        the rotary tables (4 kernels, as nvFuser's segments of Thunder's phi3_05 region on the
        H100 show, where one kernel writing the view for the other made 6)."""
        nodes, out = self.nodes, set()
        for n in order:
            node = nodes[n]
            if node.is_scalar or not self.aliases_input(n) or n in self.sinks:
                continue
            kids = [k for k in node.kids if not nodes[k].is_scalar]
            if kids and all(nodes[k].op == "Leaf" or k in out for k in kids):
                out.add(n)
        return out

    def aliases_input(self, n) -> bool:
        """Whether nvFuser's alias analysis makes node ``n`` a view of its input: a view op, or
        a cast to the dtype it has (:meth:`_is_set`), but not a reshape that makes an expanded
        axis concrete (:meth:`_materializes`)."""
        return (self.nodes[n].op in VIEWS and not self._materializes(n)) or self._is_set(n)

    def _materializes(self, n) -> bool:
        """A reshape with more elements than its input: it merges an axis that was broadcast
        and expanded (a labels-free axis here) with another, so the expanded values must be
        written. Thunder writes one to repeat grouped keys and values to every head
        (``broadcast``, ``expand``, ``reshape`` to [b, heads, s, d]): nvFuser ran each as a
        pointwise kernel that writes the repeated tensor (H100, session 45's Llama region
        ``thunder_llama_06``: 2 such kernels of 6.8 us beside the labels' pad)."""
        node, numel = self.nodes[n], self.model.numel
        if node.op is not Kept.reshape or not node.kids:
            return False
        return numel(node.labels) > numel(self.nodes[node.kids[0]].labels)

    def _is_set(self, n) -> bool:
        """A cast to the dtype its input has: nvFuser's ``castOp`` makes it a ``set``
        (csrc/ops/arith.cpp), which its alias analysis follows as it does a view (Thunder
        writes such casts after the broadcasts of a stacked q, k, v gradient)."""
        node = self.nodes[n]
        return node.op == "Cast" and len(node.kids) == 1 and self.nodes[node.kids[0]].dtype == node.dtype

    def _iterates_over(self, c, n) -> bool:
        """Whether node ``c``, a reader of ``n``, is an op of the e-graph iterating over
        ``n``'s labels: a reduction of it, an elementwise op over them, or over more labels
        than ``n`` has (``n`` broadcast into its space)."""
        node, labels = self.nodes[c], self.nodes[n].labels
        return not isinstance(node.op, Kept) and self.model.space(self.nodes, c) & labels == labels

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
            reads = {
                k: self.model.nbytes(nodes[k])
                for m in s.members
                for k in self._tensor_kids(m)
                if k not in inside
            }
            recomputed: set[int] = set()
            dearest_first = sorted(
                (k for k in reads if k in self.in_compute), key=lambda k: (-reads[k], self.position[k])
            )
            for r in dearest_first:
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
        return [
            k
            for k in (self.privatized.get(k, k) for k in nodes[v].kids)
            if not nodes[k].is_scalar and k not in self.factories
        ]

    def recomputed_factories(self, order) -> set[int]:
        """Ops that make a tensor from scalars alone (full, iota, random; the e-graph's Iota):
        nvFuser recomputes them in each kernel that uses them, like a scalar, so they belong
        to no group. One that is an output is written by a kernel: it is a compute node."""
        nodes = self.nodes
        return {
            n
            for n in order
            if n not in self.sinks
            and (
                nodes[n].op == "Iota"
                or (isinstance(nodes[n].op, Kept) and all(nodes[k].is_scalar for k in nodes[n].kids))
            )
        }


def _upcast(src: int, dst: int) -> bool:
    """A cast from dtype code ``src`` to a wider floating-point ``dst``."""
    if src >= len(DTYPES) or dst >= len(DTYPES):
        return False
    a, b = DTYPES[src], DTYPES[dst]
    return dt.is_float(a) and dt.is_float(b) and ITEMSIZE.get(a, 0) < ITEMSIZE.get(b, 0)
