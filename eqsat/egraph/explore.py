"""Inspection: saturate a fusion and look at the e-graph — its size, which rules fired how
often, and whether other fusions are in it (an equivalence check)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from egglog import EggSmolError

from eqsat.frontend.ingest import ingest
from eqsat.ir.axes import TensorType
from eqsat.ir.fusion import Fusion

from .egglog_text import run_text, term_ref
from .encode import Encoding, encode
from .saturate import Limits, Saturation, in_session, select_rules
from .terms import REDUCTIONS, TermGraph, bits


@dataclass
class Exploration:
    saturation: Saturation
    encoding: Encoding
    contains: list[bool] = field(default_factory=list)  # one per target, in order

    @property
    def nodes(self) -> int:
        return self.saturation.nodes

    @property
    def fired(self) -> dict[str, int]:
        return self.saturation.fired


def _translate(source: Encoding, target: Encoding) -> tuple[TermGraph, dict[int, int]] | None:
    """The target's terms in the source's leaf ids and label bits; None where a target term
    refers to something the source does not have (so it cannot be in the source's e-graph)."""
    src, tgt = source.fusion, target.fusion
    if len(src.inputs) != len(tgt.inputs):
        return None
    leaf = dict(zip(tgt.inputs, src.inputs))
    label = {}
    for s, t in zip(src.inputs, tgt.inputs):
        st, tt = src.types[s], tgt.types[t]
        if isinstance(st, TensorType) != isinstance(tt, TensorType):
            return None
        if isinstance(st, TensorType):
            if st.rank != tt.rank:
                return None
            for ds, dt_ in zip(st.dims, tt.dims):
                label[dt_.label] = ds.label
    tgt_label_of = target.label_of

    def mask(m: int) -> int | None:
        out = 0
        for b in bits(m):
            s_label = label.get(tgt_label_of[b])
            if s_label is None or s_label not in source.bit_of:
                return None
            out |= 1 << source.bit_of[s_label]
        return out

    graph, new_id = TermGraph(), {}
    for tid, node in enumerate(target.graph.nodes):
        attrs = list(node.attrs)
        if node.op == "Leaf":
            if attrs[0] not in leaf:
                return None
            attrs[0] = leaf[attrs[0]]
        elif node.op == "Extent" or node.op in REDUCTIONS:
            m = mask(attrs[0])
            if m is None:
                return None
            attrs[0] = m
        new_id[tid] = graph.add(node.op, tuple(attrs), tuple(new_id[k] for k in node.kids))
    return graph, new_id


def explore(
    definition: Any,
    *,
    contains: Sequence[Any] = (),
    rules: Iterable[str] | None = None,
    reassociate: bool = True,
    limits: Limits | None = None,
) -> Exploration:
    """Saturate ``definition`` (any ingestible form) and report on the e-graph; for each of
    ``contains`` (fusions with the same inputs and outputs), whether every output of it is
    in the class of the matching output of ``definition``."""
    fusion = ingest(definition)
    enc = encode(fusion)
    names = tuple(select_rules(rules, reassociate=reassociate))
    targets = [ingest(t) for t in contains]

    def work(s):
        s.eg.push()
        try:
            scope = s.fresh_scope()
            s.insert(enc, scope)
            return s.saturate(names, limits or Limits()), [_contains(s, enc, scope, t) for t in targets]
        finally:
            s.eg.pop()

    sat, found = in_session(work)
    return Exploration(sat, enc, found)


def _contains(s, source: Encoding, scope: int, target_fusion: Fusion) -> bool:
    target = encode(target_fusion)
    if len(target_fusion.outputs) != len(source.fusion.outputs) or target.skipped or source.skipped:
        return False
    translated = _translate(source, target)
    if translated is None:
        return False
    graph, new_id = translated
    target_scope = s.fresh_scope()
    s.insert_terms(graph, target_scope)
    for so, to in zip(source.fusion.outputs, target_fusion.outputs):
        a = source.roots.get(so.value)
        b = target.roots.get(to.value)
        if a is None or b is None:
            return False
        try:
            run_text(s.eg, f"(check (= {term_ref(scope, a)} {term_ref(target_scope, new_id[b])}))")
        except EggSmolError:
            return False
    return True
