"""Copies of the chains a kernel recomputes, in two directions:

- ``with_recomputed``: the cost model's ``Estimate.recomputed`` made real in the term graph that
  eqsat lowers. nvFuser segments one definition and passes every value two of its kernels
  share through global memory. Where the cost model found a kernel cheaper recomputing an
  elementwise chain from the fusion's inputs (``eqsat.cost.segmenter.Segmenter.
  recomputed_chains``), the chain is copied, node by node, and the kernel's nodes that read it
  read the copy: the lowered definition then computes the chain twice, and nvFuser's segmenter
  puts each copy in the kernel that reads it. Both copies compute the same value, op for op,
  so the rewrite is exact for every dtype and special value.
- ``written_copies``: the copies a definition already has (eqsat's lowering above, or written
  by hand, or by Thunder), which the encoding's hash-consing merges into one term: where the
  cost model reads the definition as written, it gets them back as separate nodes.
"""

from __future__ import annotations

from dataclasses import replace

from eqsat.ir.axes import TensorType

from .terms import ELEMENTWISE_TERMS, TermGraph


def copy_chains(nodes: dict, chains) -> tuple[dict, list[dict]]:
    """``nodes`` (id -> a node with ``kids``) with, per chain (``cone`` and ``readers``, node
    ids), a copy of the cone's nodes at fresh ids, which the readers read instead (a reader in
    the cone, or not among ``nodes``, is left as it was). Ids are taken to be topological
    (kids before parents). Also per chain: original id -> its copy's id."""
    nodes = dict(nodes)
    fresh = max(nodes, default=-1) + 1
    maps = []
    for cone, readers in chains:
        cone = {t for t in cone if t in nodes}
        copy: dict[int, int] = {}
        for t in sorted(cone):
            nodes[fresh] = replace(nodes[t], kids=tuple(copy.get(k, k) for k in nodes[t].kids))
            copy[t], fresh = fresh, fresh + 1
        for r in readers:
            if r in nodes and r not in cone:
                nodes[r] = replace(nodes[r], kids=tuple(copy.get(k, k) for k in nodes[r].kids))
        maps.append(copy)
    return nodes, maps


def with_recomputed(graph: TermGraph, tid_of: dict[int, int], recomputed) -> TermGraph:
    """``graph`` (term ids ``tid_of[class]``) with, for each recomputation (``cone`` and
    ``readers`` by class), a copy of the cone's terms that the readers read instead. The copies
    are appended as new terms (not hash-consed: they equal the originals), so lowering makes
    each of them afresh; a reader that is no term of the graph (a kept op reads its input by
    the original value) is left as it was."""
    if not recomputed:
        return graph
    chains = [
        ({tid_of[c] for c in r.cone if c in tid_of}, {tid_of[c] for c in r.readers if c in tid_of})
        for r in recomputed
    ]
    nodes, _ = copy_chains(dict(enumerate(graph.nodes)), chains)
    out = TermGraph()
    out.nodes = [nodes[t] for t in range(len(nodes))]
    out.index = dict(graph.index)
    return out


def written_copies(enc) -> list[tuple[set[int], set[int]]]:
    """The chains the definition of ``enc`` (an Encoding) computes twice, as ``copy_chains`` takes
    them: a tensor made by a second call of the elementwise op (``ELEMENTWISE_TERMS``, what the cost
    model recomputes too; no cast: the model already reads an upcast of an input in each kernel, and
    a cast's copy alone is what Thunder writes where nvFuser's segments do not follow it) that made
    an equal one earlier is a copy; the cone is the terms of the copies, the readers the terms of
    the other calls that read a copy. One chain for the whole definition: a reader is taken to read
    the copy of every term of the cone it reads (a call that reads an original and a copy of another
    value is read as reading two copies)."""
    made: set[tuple[int, str]] = set()  # (term, op) of the calls seen so far
    copies: set[int] = set()  # IR values that are copies
    readers: set[int] = set()
    for node in enc.fusion.nodes:
        if node.is_input:
            continue
        terms = [enc.term_of.get(v) for v in node.outputs]
        if all(t is not None and (t, node.op) in made for t in terms) and _recomputable(enc, node):
            copies.update(node.outputs)
            continue
        made.update((t, node.op) for t in terms if t is not None)
        if any(r.id in copies for r in node.refs()):
            readers.update(t for t in terms if t is not None)
    if not copies:
        return []
    return [({enc.term_of[v] for v in copies}, readers)]


def _recomputable(enc, node) -> bool:
    """Whether ``node``'s results are tensors of an elementwise term other than a cast."""
    types = enc.fusion.types
    return all(
        isinstance(types[v], TensorType)
        and enc.graph[enc.term_of[v]].op in ELEMENTWISE_TERMS
        and enc.graph[enc.term_of[v]].op != "Cast"
        for v in node.outputs
    )
