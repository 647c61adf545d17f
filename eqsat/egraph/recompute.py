"""Copies of the chains a kernel recomputes: the cost model's ``Estimate.recomputed`` made real
in the term graph that eqsat lowers.

nvFuser segments one definition and passes every value two of its kernels share through global
memory. Where the cost model found a kernel cheaper recomputing an elementwise chain from the
fusion's inputs (``eqsat.cost.segmenter.Segmenter.recomputed_chains``), the chain is copied,
node by node, and the kernel's nodes that read it read the copy: the lowered definition then
computes the chain twice, and nvFuser's segmenter puts each copy in the kernel that reads it.
Both copies compute the same value, op for op, so the rewrite is exact for every dtype and
special value.
"""
from __future__ import annotations

from .terms import TermGraph, TNode


def with_recomputed(graph: TermGraph, tid_of: dict[int, int], recomputed) -> TermGraph:
    """``graph`` (term ids ``tid_of[class]``) with, for each recomputation (``cone`` and
    ``readers`` by class), a copy of the cone's terms that the readers read instead. The copies
    are appended as new terms (not hash-consed: they equal the originals), so lowering makes
    each of them afresh; a reader that is no term of the graph (a kept op reads its input by
    the original value) is left as it was."""
    if not recomputed:
        return graph
    nodes = list(graph.nodes)
    for r in recomputed:
        cone = {tid_of[c] for c in r.cone if c in tid_of}
        copy: dict[int, int] = {}
        for t in sorted(cone):              # term ids are topological: kids before parents
            n = nodes[t]
            nodes.append(TNode(n.op, n.attrs, tuple(copy.get(k, k) for k in n.kids)))
            copy[t] = len(nodes) - 1
        for c in r.readers:
            t = tid_of.get(c)
            if t is None or t in cone:
                continue
            n = nodes[t]
            nodes[t] = TNode(n.op, n.attrs, tuple(copy.get(k, k) for k in n.kids))
    out = TermGraph()
    out.nodes = nodes
    out.index = dict(graph.index)
    return out
