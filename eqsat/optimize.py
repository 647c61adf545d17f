"""``optimize_fusion``: ingest, encode, saturate, extract, lower; and the object it returns."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import torch

from .axes import TensorType
from .cost import CostModel, Estimate, GNode
from .encode import encode
from .errors import FusionError
from .extract import dump, extract, to_term_graph
from .ingest import ingest
from .ir import Fusion
from .profile import load_profile
from .saturate import Limits, select_rules, session
from .torch_executor import check_tensor_input, run_fusion

DEFAULT_EXTENT = 1024     # the extent assumed for a symbolic axis when no inputs are given
# The least predicted saving worth a change. On the H200 corpus run (bench/results), the three
# changes predicted to save 1.8-3.4% ran 13-39% slower; the cost model's median error on the
# calibration microbenchmarks is about 16%.
MIN_GAIN = 0.05


@dataclass
class Report:
    before: Estimate
    after: Estimate
    changed: bool
    rules_fired: dict[str, int] = field(default_factory=dict)
    saturation: str = ""
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)   # fired rules whose right side is in the result
    phases: dict[str, float] = field(default_factory=dict)  # seconds: saturate, extract, lower, total

    def summary(self) -> dict:
        return {"before": self.before.summary(), "after": self.after.summary(),
                "changed": self.changed, "rules": self.rules,
                "rules_fired": self.rules_fired, "saturation": self.saturation,
                "optimizer_ms": round(self.seconds * 1e3, 2),
                "phases_ms": {k: round(v * 1e3, 2) for k, v in self.phases.items()},
                "notes": self.notes}

    def __str__(self) -> str:
        b, a = self.before, self.after
        lines = [f"before: {len(b.kernels)} kernels, {b.bytes / 1e6:.3f} MB, {b.flops / 1e6:.3f} MFLOP, "
                 f"{b.time_us:.1f} us estimated",
                 f"after:  {len(a.kernels)} kernels, {a.bytes / 1e6:.3f} MB, {a.flops / 1e6:.3f} MFLOP, "
                 f"{a.time_us:.1f} us estimated" + ("" if self.changed else " (unchanged)")]
        if self.rules:
            lines.append("rules that changed the result: " + ", ".join(self.rules))
        if self.rules_fired:
            lines.append("rules that fired: " + ", ".join(f"{k}×{v}" for k, v in sorted(
                self.rules_fired.items(), key=lambda kv: -kv[1])))
        phases = ", ".join(f"{k} {v * 1e3:.0f}" for k, v in self.phases.items() if k != "total")
        lines.append(f"saturation: {self.saturation}; optimizer {self.seconds * 1e3:.1f} ms"
                     + (f" ({phases} ms)" if phases else ""))
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def _input_key(inputs: Sequence[Any]) -> tuple:
    key = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            key.append(("T", tuple(x.shape), str(x.dtype), tuple(x.stride())))
        else:
            key.append(("S", type(x).__name__))
    return tuple(key)


def concrete_extents(fusion: Fusion, inputs: Sequence[Any] | None, extents: dict | None,
                     default_extent: int) -> dict[int, int]:
    """label -> extent: static ones, then from ``inputs`` (checked against the definition),
    then ``extents`` given by label, then ``default_extent``."""
    types = fusion.types
    out = {k: v for k, v in types.extents.items() if v is not None}
    if inputs is not None:
        if len(inputs) != len(fusion.inputs):
            raise FusionError(f"the definition takes {len(fusion.inputs)} inputs, got {len(inputs)}")
        for i, (vid, value) in enumerate(zip(fusion.inputs, inputs)):
            node = fusion.producer[vid]
            if node.op == "define_tensor":
                try:
                    check_tensor_input(i, value, node.arg("shape"), node.arg("dtype"),
                                       node.arg("contiguity"), node.arg("stride_order"))
                except FusionError as err:
                    raise FusionError(err.message, line=node.line, op="fd.define_tensor") from None
        out.update(types.bind(fusion, inputs))
    out.update(extents or {})
    for label in types.extents:
        out.setdefault(label, default_extent)
    return out


class OptimizedFusion:
    """The result of :func:`optimize_fusion`: executes like a FusionDefinition."""

    def __init__(self, original: Fusion, fusion: Fusion, report: Report, options: dict,
                 key: tuple | None):
        self.original = original
        self.fusion = fusion.with_frontend(original.frontend)
        self.report = report
        self._options = options
        self._key = key
        self._cache: dict[tuple, OptimizedFusion] = {} if key is None else {key: self}
        self._nvfuser: dict[str | None, Any] = {}
        self._lock = threading.Lock()

    @property
    def frontend(self) -> str | None:
        """The nvFuser frontend the definition was written for (None: unknown); ``source``,
        ``to_nvfuser`` and ``execute`` use it unless told another."""
        return self.original.frontend

    @property
    def source(self) -> str:
        """The optimized definition in the print style of its frontend."""
        from .lowering.source import fusion_source

        return fusion_source(self.fusion)

    def explain(self) -> str:
        return (f"{self.report}\n\npredicted kernels as given:\n{self.report.before.explain()}\n\n"
                f"predicted kernels optimized:\n{self.report.after.explain()}")

    def for_inputs(self, inputs: Sequence[Any]) -> "OptimizedFusion":
        """The fusion optimized for these inputs' shapes and dtypes (cached per shape)."""
        key = _input_key(inputs)
        with self._lock:
            found = self._cache.get(key)
        if found is None:
            found = optimize_fusion(self.original, inputs, **self._options)
            with self._lock:
                found = self._cache.setdefault(key, found)
        return found

    def run_reference(self, inputs: Sequence[Any], **kwargs) -> list:
        """The optimized fusion through the torch executor."""
        return run_fusion(self.for_inputs(inputs).fusion, inputs, **kwargs)

    def to_nvfuser(self, frontend: str | None = None):
        """A live nvFuser FusionDefinition of the optimized fusion, on ``frontend``
        (``"nvfuser"`` or ``"nvfuser_direct"``); by default the definition's own frontend
        where it imports, else whichever does."""
        from .lowering.nvfuser import to_nvfuser

        with self._lock:
            if frontend not in self._nvfuser:
                self._nvfuser[frontend] = to_nvfuser(self.fusion, frontend)
            return self._nvfuser[frontend]

    def execute(self, inputs: Sequence[Any], frontend: str | None = None, **kwargs) -> list:
        """Run on nvFuser (CUDA), through ``frontend`` as in :meth:`to_nvfuser`;
        re-optimizes for new input shapes and dtypes."""
        if not torch.cuda.is_available():
            raise FusionError("execute needs a CUDA device and nvFuser; none is available here "
                              "(run_reference runs the optimized fusion through torch instead)")
        return self.for_inputs(inputs).to_nvfuser(frontend).execute(list(inputs), **kwargs)


def optimize_fusion(definition: Any, inputs: Sequence[Any] | None = None, *, profile=None,
                    rules: Iterable[str] | None = None, reassociate: bool = True,
                    limits: Limits | None = None, extents: dict[int, int] | None = None,
                    default_extent: int = DEFAULT_EXTENT, search_seconds: float = 0.5,
                    min_gain: float = MIN_GAIN) -> OptimizedFusion:
    """Optimize an nvFuser fusion.

    ``definition``: a function of ``fd``, repro text or a path to a repro file, a live
    ``nvfuser``/``nvfuser_direct`` FusionDefinition, eqsat's FusionDefinition or a Fusion.
    ``inputs`` give the extents the cost model uses (otherwise static extents, then
    ``default_extent`` for symbolic axes). ``rules`` selects rules by name (default: all);
    ``reassociate=False`` leaves out rules that reorder floating-point sums and products.
    ``limits`` bounds saturation; ``profile`` is a calibration profile (a path or dict).
    ``min_gain``: the least predicted time saving (a fraction) worth a change; smaller
    predicted gains keep the input, since they are within the cost model's error.
    """
    start = time.perf_counter()
    fusion = ingest(definition)
    options = dict(profile=profile, rules=rules, reassociate=reassociate, limits=limits,
                   extents=extents, default_extent=default_extent, search_seconds=search_seconds,
                   min_gain=min_gain)
    prof = load_profile(profile)
    concrete = concrete_extents(fusion, inputs, extents, default_extent)
    names = tuple(select_rules(rules, reassociate=reassociate))
    a = _analyse(fusion, concrete, prof, names, limits or Limits())
    enc, d, cls, original, roots, model, sat = a.enc, a.dump, a.cls, a.original, a.roots, a.model, a.sat
    notes = [f"not optimized: {enc.skipped}"] if enc.skipped else []
    if sat and sat.stop != "saturated":
        notes.append(f"saturation stopped at the {sat.stop} ({_limit_text(limits or Limits(), sat.stop)}): "
                     f"the result is the best of the rewrites explored by then")
    t_extract = time.perf_counter()
    best, base = extract(d, roots, original, model, budget_s=search_seconds)
    t_lower = time.perf_counter()
    before = a.before or base.estimate or Estimate()
    result, after, changed = fusion, before, False
    gain = (1 - best.score / before.time_us) if best.estimate is not None and before.time_us > 0 else 0.0
    if gain > 0 and gain < max(min_gain, 1e-6):
        notes.append(f"kept the input: the best candidate saves {gain:.1%} of the predicted time, "
                     f"less than min_gain={min_gain:.0%}")
    elif gain > 0:
        try:
            result = _lower_choice(fusion, enc, best.pick, roots, cls)
            after, changed = best.estimate, True
        except FusionError as err:
            notes.append(f"kept the input: the best candidate did not lower ({err})")
    elif best.estimate is None:
        notes.append("kept the input: the cost model could not score it")
    credited = _credited_rules(best.pick, roots, original, sat.fired if sat else {}) if changed else []
    end = time.perf_counter()
    phases = {"saturate": sat.seconds if sat else 0.0, "extract": t_lower - t_extract,
              "lower": end - t_lower, "total": end - start}
    report = Report(before, after, changed, sat.fired if sat else {},
                    (f"{sat.stop} after {sat.iterations} iterations, {sat.nodes} e-nodes" if sat else
                     "skipped"), end - start, notes, credited, phases)
    key = _input_key(inputs) if inputs is not None else None
    return OptimizedFusion(fusion, result, report, options, key)


def _limit_text(limits: Limits, stop: str) -> str:
    return {"time limit": f"{limits.seconds:g} s", "node limit": f"{limits.nodes} e-nodes",
            "iteration limit": f"{limits.iterations} iterations"}.get(stop, stop)


@dataclass
class _Analysis:
    enc: Any
    dump: Any
    cls: dict
    original: dict
    roots: list
    model: CostModel
    sat: Any
    before: Estimate | None      # the input as written, term by term (no e-class merged)


def _analyse(fusion: Fusion, concrete: dict, prof, names: tuple, limits: Limits | None) -> _Analysis:
    """Encode, fill the e-graph, saturate (unless ``limits`` is None), dump; the input's own
    choice as GNodes, and a cost model over the concrete extents."""
    enc = encode(fusion, concrete)
    s = session()
    s.eg.push()
    try:
        prefix = s.fresh_prefix()
        s.insert(enc, prefix)
        rewrite = limits is not None and not enc.skipped
        sat = s.saturate(names if rewrite else (), limits or Limits())   # analyses always run
        d = dump(s.eg)
    finally:
        s.eg.pop()
    cls = {tid: d.lets[f"${prefix}{tid}"] for tid in range(len(enc.graph.nodes))}
    original: dict[int, GNode] = {}
    for tid, node in enumerate(enc.graph.nodes):
        c = cls[tid]
        original.setdefault(c, GNode(node.op, node.attrs, tuple(cls[k] for k in node.kids),
                                     d.labels.get(c, -1), d.dtype.get(c, -1)))
    roots = sorted({cls[t] for t in enc.roots.values()})
    links = {cls[leaf]: (op, tuple(cls[t] for t in ins)) for leaf, (op, ins) in enc.links.items()}
    output_terms = {enc.roots[o.value] for o in fusion.outputs if o.value in enc.roots}
    aliased = sum(1 for o in fusion.outputs if o.alias_input is not None)
    inner = {t: order[-1] for t, order in enc.order.items() if order}
    model = CostModel(prof, {enc.bit_of[l]: e for l, e in concrete.items() if l in enc.bit_of}, links,
                      outputs={cls[t] for t in output_terms}, aliased=aliased,
                      inner={cls[t]: b for t, b in inner.items()})
    terms = {tid: GNode(n.op, n.attrs, n.kids, d.labels.get(cls[tid], -1), d.dtype.get(cls[tid], -1))
             for tid, n in enumerate(enc.graph.nodes)}
    try:
        before = model.estimate(terms, sorted(set(enc.roots.values())), links=enc.links, outputs=output_terms,
                                inner=inner)
    except ValueError:
        before = None
    return _Analysis(enc, d, cls, original, roots, model, sat if rewrite else None, before)


def estimate_fusion(definition: Any, inputs: Sequence[Any] | None = None, *, profile=None,
                    extents: dict[int, int] | None = None,
                    default_extent: int = DEFAULT_EXTENT) -> Estimate:
    """The cost model's estimate of a fusion as given (kernels, bytes, time), without rewriting."""
    fusion = ingest(definition)
    concrete = concrete_extents(fusion, inputs, extents, default_extent)
    a = _analyse(fusion, concrete, load_profile(profile), (), None)
    if a.enc.skipped or a.before is None:
        raise FusionError(f"cannot estimate: {a.enc.skipped or 'the fusion has no cost-model reading'}")
    return a.before


def _credited_rules(pick, roots, original, fired) -> list[str]:
    """Fired rules whose right-hand side (two constructor levels or more) matches a node of the
    result that the input did not have."""
    from .extract import _reachable
    from .rules import RULES

    chosen = _reachable(pick, roots)
    new = [(c, n) for c, n in chosen.items() if original.get(c) != n]

    def matches(c, shape):
        if shape is None:
            return True
        node = chosen.get(c) or pick.get(c)
        if node is None or node.op != shape[0]:
            return False
        kid_shapes = shape[1:]
        return len(kid_shapes) == len(node.kids) and all(matches(k, ks) for k, ks in zip(node.kids, kid_shapes))

    out = []
    for name in fired:
        shape = RULES[name].rhs_shape() if name in RULES else None
        if shape is None or not any(isinstance(k, tuple) for k in shape[1:]):
            continue            # identities and one-level rewrites are not credited
        if any(matches(c, shape) for c, _ in new):
            out.append(name)
    return sorted(out)


def _lower_choice(fusion: Fusion, enc, pick, roots, cls) -> Fusion:
    from .lowering.from_terms import lower_terms

    graph, tid_of = to_term_graph(pick, roots)
    root_terms = {v: tid_of[cls[t]] for v, t in enc.roots.items()}
    hints = {}
    for t, order in enc.order.items():
        c = cls[t]
        if c in tid_of:
            hints.setdefault(tid_of[c], order)
    lowered = lower_terms(fusion, graph, root_terms, enc.boundaries, enc.label_of, hints)
    for a, b in zip(fusion.outputs, lowered.outputs):
        ta, tb = fusion.types[a.value], lowered.types[b.value]
        if isinstance(ta, TensorType) and ta.known:
            same = tb.dtype is ta.dtype and tb.rank == ta.rank and \
                [d.broadcast for d in tb.dims] == [d.broadcast for d in ta.dims]
            if not same:
                raise FusionError(f"output %{a.value} would change type")
    return lowered
