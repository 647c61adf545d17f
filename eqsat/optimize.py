"""``optimize_fusion``: ingest, then encode, saturate, extract and lower under one deadline,
keep the result only where its predicted saving exceeds the cost model's measured error (or,
with ``verify="gpu"``, where the GPU at hand runs it faster); and the object it returns."""
from __future__ import annotations

import numbers
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

import torch

from eqsat.cost.model import CostModel, Estimate, EstimateCut, GNode
from eqsat.cost.profile import load_profile
from eqsat.cost.walks import reachable
from eqsat.egraph.decode import lower_terms
from eqsat.egraph.recompute import copy_chains, with_recomputed, written_copies
from eqsat.egraph.encode import encode
from eqsat.egraph.saturate import Limits, Saturation, applicable, in_session, prepare, select_rules
from eqsat.frontend.ingest import ingest, ingest_with_inputs, source_file
from eqsat.ir.axes import TensorType
from eqsat.ir.fusion import Fusion
from eqsat.ir.layout import alias_output_sources
from eqsat.lowering.nvfuser import to_nvfuser
from eqsat.lowering.source import fusion_source
from eqsat.reference.inputs import check_inputs
from eqsat.reference.torch_executor import run_fusion
from eqsat.verification.cache import VerificationCache
from eqsat.verification.runner import NvFuserRunner, Runner
from eqsat.verification.verify import Verification, check_verifiable
from eqsat.verification.verify import verify as verify_on_gpu

from .defaults import DEADLINE_S, MIN_GAIN
from .errors import FusionError, naming_file
from .extract import SEARCH_BUDGET, dump, extract, to_term_graph
from .rules import RULES

DEFAULT_EXTENT = 1024     # the extent assumed for a symbolic axis when no inputs are given
VERIFY = (None, "gpu")    # optimize_fusion's verify=


@dataclass(frozen=True)
class SaturationSummary:
    """Where saturation stopped, as a report gives it. ``stop`` is "saturated", the limit that
    stopped it ("iteration limit", "node limit", "time limit", "deadline"), or "skipped" where
    it did not run (nothing encoded, or the deadline cut encoding): ``iterations`` and
    ``e_nodes`` are then None."""

    stop: str = "skipped"
    iterations: int | None = None
    e_nodes: int | None = None

    @classmethod
    def of(cls, sat: Saturation | None) -> "SaturationSummary":
        return cls() if sat is None else cls(sat.stop, sat.iterations, sat.nodes)

    @property
    def ran(self) -> bool:
        return self.iterations is not None

    def summary(self) -> dict:
        return {"stop": self.stop, "iterations": self.iterations, "e_nodes": self.e_nodes}

    def __str__(self) -> str:
        return f"{self.stop} after {self.iterations} iterations, {self.e_nodes} e-nodes" if self.ran \
            else self.stop


@dataclass(frozen=True)
class Rejection:
    """A candidate predicted cheaper than the input (under verify="gpu", or dearer by less than
    ``VERIFY_WINDOW``) that was not kept: its predicted time, the
    predicted saving (a fraction of the input's predicted time), the saving it had to exceed
    (None where none applied: under verify="gpu" the GPU decides), why it was rejected, and its
    measured time where the GPU timed it."""

    predicted_us: float
    saving: float
    margin: float | None
    reason: str
    measured_us: float | None = None

    def __str__(self) -> str:
        margin = "" if self.margin is None else f", margin {self.margin:.0%}"
        measured = "" if self.measured_us is None else f", {self.measured_us:.1f} us measured"
        return (f"candidate of {self.predicted_us:.1f} us predicted (saves {self.saving:.1%}{margin}"
                f"{measured}): {self.reason}")

    def summary(self) -> dict:
        return {"predicted_us": round(self.predicted_us, 3), "saving": round(self.saving, 4),
                "margin": self.margin, "reason": self.reason,
                "measured_us": None if self.measured_us is None else round(self.measured_us, 3)}


@dataclass
class Report:
    """What ``optimize_fusion`` did: the estimates before and after, whether it changed the
    fusion, the rules that fired and those credited with the result, where saturation stopped,
    the seconds it took (``phases``: read, encode, saturate, extract, lower, verify, total),
    ``notes``, the candidates ``rejected`` and why, and under verify="gpu" the
    ``verification`` (None where nothing was timed)."""

    before: Estimate
    after: Estimate
    changed: bool
    rules_fired: dict[str, int] = field(default_factory=dict)
    saturation: SaturationSummary = SaturationSummary()
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)   # fired rules whose right side is in the result
    # seconds: read, encode, saturate, extract, lower, total
    phases: dict[str, float] = field(default_factory=dict)
    estimated: bool = True      # False: the cost model gave no estimate of the input (before, after empty)
    rejected: list[Rejection] = field(default_factory=list)
    verification: Verification | None = None
    cut: str | None = None      # the first stage the deadline cut (None: it cut nothing)
    unchanged: str | None = None   # why the input was kept (None where it changed)
    search: dict = field(default_factory=dict)  # extraction's search: "scored", "nodes", "stop"

    def summary(self) -> dict:
        return {"before": self.before.summary() if self.estimated else None,
                "after": self.after.summary() if self.estimated else None,
                "changed": self.changed, "unchanged": self.unchanged, "cut": self.cut, "rules": self.rules,
                "rules_fired": dict(sorted(self.rules_fired.items())), "saturation": self.saturation.summary(),
                "optimizer_ms": round(self.seconds * 1e3, 2),
                "phases_ms": {k: round(v * 1e3, 2) for k, v in self.phases.items()},
                "notes": self.notes, "estimated": self.estimated, "search": self.search,
                "rejected": [r.summary() for r in self.rejected],
                "verification": None if self.verification is None else self.verification.summary()}

    def __str__(self) -> str:
        b, a = self.before, self.after
        if not self.estimated:
            lines = ["before: not estimated", "after:  not estimated (unchanged)"]
        else:
            lines = [f"before: {len(b.kernels)} kernels, {b.bytes / 1e6:.3f} MB, {b.flops / 1e6:.3f} MFLOP, "
                     f"{b.time_us:.1f} us estimated",
                     f"after:  {len(a.kernels)} kernels, {a.bytes / 1e6:.3f} MB, {a.flops / 1e6:.3f} MFLOP, "
                     f"{a.time_us:.1f} us estimated" + ("" if self.changed else " (unchanged)")]
        if self.rules:
            lines.append("rules that changed the result: " + ", ".join(self.rules))
        if self.rules_fired:
            lines.append("rules that fired: " + ", ".join(f"{k}×{v}" for k, v in sorted(
                self.rules_fired.items(), key=lambda kv: (-kv[1], kv[0]))))
        phases = ", ".join(f"{k} {v * 1e3:.0f}" for k, v in self.phases.items() if k != "total")
        search = f"; search: {self.search['scored']} candidates scored, {self.search['stop']}" \
            if self.search else ""
        lines.append(f"saturation: {self.saturation}{search}; optimizer {self.seconds * 1e3:.1f} ms"
                     + (f" ({phases} ms)" if phases else ""))
        lines += [f"rejected: {r}" for r in self.rejected]
        if self.unchanged:
            lines.append(f"unchanged: {self.unchanged}")
        if self.verification is not None:
            lines.append(str(self.verification))
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
        out.update(check_inputs(fusion, inputs))
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
                    default_extent: int = DEFAULT_EXTENT, search_budget: int = SEARCH_BUDGET,
                    search_seconds: float | None = None, min_gain: float | None = None, deadline_s: float | None = DEADLINE_S,
                    relower: bool = False, verify: str | None = None, cache_dir=None,
                    runner: Runner | None = None, recompute: bool = True) -> OptimizedFusion:
    """Optimize an nvFuser fusion.

    ``definition``: a function of ``fd``, repro text or a path to a repro file, a live
    ``nvfuser``/``nvfuser_direct`` FusionDefinition, eqsat's FusionDefinition or a Fusion.
    ``inputs`` give the extents the cost model uses (where none are given, a repro file's or
    text's own ``inputs`` list, read on the meta device; otherwise static extents, then
    ``default_extent`` for symbolic axes). ``rules`` selects rules by name (default: all);
    ``reassociate=False`` leaves out rules that reorder floating-point sums and products.
    ``limits`` bounds saturation; ``profile`` is a calibration profile (a path or dict).
    Extraction's local search stops where no single switch improves the candidate, or once
    the candidates it scored hold ``search_budget`` nodes together; ``search_seconds`` (None:
    none) bounds it in time as well, a backstop.

    A candidate is kept only where its predicted saving (``1 - after / before`` of the
    steady-state time) exceeds a margin: by default the cost model's measured error on a
    saving, from the profile's error table (``eqsat.cost.error_table``: the saving recorded
    candidates were predicted and did not deliver on the GPU), at the input's kernel count and
    predicted time (``MIN_GAIN``, 5%, where the profile has none); ``min_gain`` (a fraction)
    replaces it. ``report.rejected`` lists the
    candidates not kept, with their saving, margin and why.

    ``verify="gpu"``: instead of the margin, the GPU at hand decides. The input (as eqsat
    lowers it to nvFuser) and the best few candidates by predicted time (up to 4, each lowered)
    that are predicted cheaper, or dearer by less than ``VERIFY_WINDOW`` (10%: the cost model
    cannot tell them from the input, the GPU can), are compiled and run on ``inputs``, which must hold values: CUDA tensors are used as they
    are, CPU tensors are copied to the GPU (strides kept, integers zeroed where an index op
    would read out of range with them), meta tensors are refused. A candidate whose outputs
    disagree with the input's (dtype tolerance) is rejected; the others are timed at steady
    state, and the fastest kept where it runs more than 1% faster than the input. The
    decision is cached on disk, one file per definition, input shapes, dtypes and strides, GPU,
    and nvFuser and eqsat versions, in ``cache_dir`` (else ``$EQSAT_CACHE_DIR``, else
    ``~/.cache/eqsat``; the files lie in its ``verify/`` folder), so each fusion is timed once.
    ``report.verification`` gives the measured times, the one kept, the seconds it took and
    whether it came from the cache. ``runner`` compiles, runs and times (default: an
    ``eqsat.verification.NvFuserRunner`` on the current CUDA device; FusionError where there
    is none). The deadline does not bound verification.

    ``deadline_s``: seconds for encoding, saturation, extraction and lowering together,
    counted once the fusion is read, its inputs checked and the process's e-graph made (None:
    no deadline). It is a backstop: work limits (saturation's iterations and e-nodes, the
    search's budget) decide a normal result, so the same input and options give the same
    result on an idle or a busy machine. Saturation gets at most half of the time left when
    it begins (and ``limits.seconds`` at most); where the deadline cuts a stage, the result is
    the best candidate scored by then, or the input unchanged, ``report.cut`` names the stage
    and a ``report.notes`` line says so.
    ``relower``: keep a result that no creditable rewrite shaped (only identities such as
    cast-to-own-dtype, and the e-graph's re-lowering of the definition) where it is predicted
    cheaper; off by default, since such gains are where the cost model misreads nvFuser
    (``UNCREDITED``).

    ``recompute``: where nvFuser would hand a kernel an elementwise chain of the inputs that
    another kernel computed, through global memory, and recomputing it from the inputs reads
    fewer bytes, the lowered definition gives that kernel its own copy of the chain (credited
    as ``recompute_chains``; ``eqsat.egraph.recompute``). Exact: both copies compute the same
    ops. ``recompute=False`` lowers each value once.
    """
    start = time.perf_counter()
    Deadline.check(deadline_s)
    _check_min_gain(min_gain)
    _check_search_budget(search_budget, search_seconds)
    if verify not in VERIFY:
        raise ValueError(f"verify must be None or 'gpu', got {verify!r}")
    if inputs is None:          # a repro file's or text's own inputs, where it has them
        fusion, inputs = ingest_with_inputs(definition, device="cpu" if verify else "meta")
    else:
        fusion = ingest(definition)
    prof = load_profile(profile)
    with naming_file(source_file(definition)):        # a repro file's inputs: errors name it
        concrete = concrete_extents(fusion, inputs, extents, default_extent)
    if verify:
        check_verifiable(inputs)
        runner = runner or NvFuserRunner(prefer=fusion.frontend)
    options = dict(profile=profile, rules=rules, reassociate=reassociate, limits=limits,
                   extents=extents, default_extent=default_extent, search_budget=search_budget,
                   search_seconds=search_seconds,
                   min_gain=min_gain, deadline_s=deadline_s, relower=relower, verify=verify,
                   cache_dir=cache_dir, runner=runner, recompute=recompute)
    names = tuple(select_rules(rules, reassociate=reassociate))
    setup = prepare()           # the process's e-graph, made once: outside every fusion's deadline
    deadline = Deadline(deadline_s)
    a = _analyse(fusion, concrete, prof, names, limits or Limits(), deadline)
    if a.model is not None:
        a.model.recompute = recompute
    notes = _analysis_notes(a, limits or Limits(), deadline)
    phases = {"read": deadline.began - start - setup, "setup": setup, **a.phases}
    pick = _Pick(fusion)
    if a.cut is None:
        pick = _extract_and_choose(fusion, a, prof, inputs, options, deadline, notes)
        spent = [pick.phases]
        if RECOMPUTE in pick.credited and not verify and deadline.left() > 0:
            # extraction scored the result with copies of chains its lowering may not realise in
            # full (its estimate as written is then dearer): the best candidate without copies
            # is extracted from the same e-graph too, and the cheaper kept as written
            a.model.recompute = False
            alone = _extract_and_choose(fusion, a, prof, inputs, options, deadline, [])
            a.model.recompute = recompute
            spent.append(alone.phases)
            if alone.changed and alone.after.time_us < pick.after.time_us:
                notes.append(f"without recomputed chains: predicted {alone.after.time_us:.1f} us, "
                             f"with them {pick.after.time_us:.1f} us")
                alone.rejected = pick.rejected + alone.rejected
                pick = alone
        for stage, seconds in (kv for p in spent for kv in p.items()):
            phases[stage] = phases.get(stage, 0.0) + seconds
    result, before, after, changed, credited = pick.result, pick.before, pick.after, pick.changed, pick.credited
    rejected = pick.rejected
    verification = None
    if verify and pick.lowered:
        verification = verify_on_gpu(fusion, [c.fusion for c in pick.lowered],
                                     [before.time_us] + [c.estimate.time_us for c in pick.lowered], inputs,
                                     runner, VerificationCache(cache_dir))
        phases["verify"] = verification.seconds
        result, after, changed, credited = _verified(fusion, before, pick.lowered, verification, rejected)
    elif verify and pick.estimated:
        notes.append("verify='gpu': no candidate was predicted cheaper than the input, or dearer by less "
                     f"than {VERIFY_WINDOW:.0%}; nothing to time")
    if not changed:
        after = before
    end = time.perf_counter()
    phases["total"] = end - start
    sat = a.sat
    report = Report(before, after, changed, sat.fired if sat else {}, SaturationSummary.of(sat),
                    end - start, notes, credited, phases, pick.estimated, rejected, verification,
                    deadline.cuts[0] if deadline.cuts else None,
                    None if changed else _why_unchanged(a, pick, rejected, deadline, verification),
                    pick.search)
    key = _input_key(inputs) if inputs is not None else None
    return OptimizedFusion(fusion, result, report, options, key)


@dataclass
class _Pick:
    """What extraction and the choice of a candidate gave: the result (the input where none was
    kept), the estimates before and after, the rules credited, the candidates lowered for
    verify="gpu", those rejected, and the seconds extraction and lowering took."""
    result: Fusion
    before: Estimate = field(default_factory=Estimate)
    after: Estimate = field(default_factory=Estimate)
    changed: bool = False
    credited: list[str] = field(default_factory=list)
    estimated: bool = False
    lowered: list["_Lowered"] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    search: dict = field(default_factory=dict)     # extraction's search: candidates scored, nodes, stop


def _extract_and_choose(fusion: Fusion, a: "_Analysis", prof, inputs, options: dict, deadline: Deadline,
                        notes: list[str]) -> _Pick:
    """Extraction from the saturated e-graph ``a``, then the best candidate kept where its
    saving exceeds the margin (``_choose``) and its fresh estimate is below the input's
    (``_confirm_cheaper``); under verify="gpu", the best few lowered for the GPU to decide."""
    t_extract = time.perf_counter()
    lower_s = a.phases["encode"]        # lowering takes about as long as encoding (less, measured)
    ex = extract(a.dump, a.roots, a.original, a.model, budget=options["search_budget"],
                 budget_s=options["search_seconds"],
                 keep=VERIFY_CANDIDATES,
                 until=deadline.before(lower_s), guess_s=a.before_s)
    t_lower = time.perf_counter()
    p = _Pick(fusion, before=a.before or ex.base.estimate or Estimate(),
              estimated=a.before is not None or ex.base.estimate is not None,
              search={"scored": ex.scored, "nodes": ex.work, "stop": ex.stop})
    p.after = p.before
    if options["verify"]:
        p.lowered = _lower_candidates(fusion, a, ex, p.before, deadline, lower_s, options["relower"],
                                      notes, p.rejected)
    else:
        margin = _Margin(prof, options["min_gain"], p.before)
        p.result, p.after, p.changed, p.credited = _choose(fusion, a, ex, p.before, margin, deadline, lower_s,
                                                           options["relower"], notes, p.rejected)
    if p.changed and options["extents"] is None:
        if deadline.left() >= a.phases["encode"] + a.before_s:     # reading it again, then its estimate
            p.result, p.after, p.changed = _confirm_cheaper(fusion, p.result, p.after, p.before, inputs,
                                                            options["default_extent"], prof, p.rejected)
        else:
            p.result, p.after, p.changed = fusion, p.before, False
            notes.append(deadline.note("the fresh estimate of the lowered candidate", "kept the input"))
    p.credited = p.credited if p.changed else []
    p.phases = {"extract": t_lower - t_extract,
                "lower": time.perf_counter() - t_lower}
    return p


def _why_unchanged(a: "_Analysis", pick: "_Pick", rejected: list[Rejection], deadline: Deadline,
                   verification: Verification | None) -> str:
    """Why the input was kept, in a line: nothing to optimize, the deadline, no candidate
    predicted cheaper, or the best candidate's rejection."""
    if a.enc is not None and a.enc.skipped:
        return f"not optimized: {a.enc.skipped}"
    if deadline.cuts and not pick.estimated:
        return f"the deadline ({deadline.seconds:g} s) cut {deadline.cuts[0]} before the input was estimated"
    if verification is not None and verification.kept < 0:
        return "on the GPU, no candidate ran more than 1% faster than the input"
    if rejected:
        return f"rejected the {rejected[0]}"
    if deadline.cuts:
        return f"the deadline ({deadline.seconds:g} s) cut {deadline.cuts[0]}"
    return "no candidate in the saturated e-graph is predicted cheaper than the input"


def _check_search_budget(budget, seconds) -> None:
    if isinstance(budget, bool) or not isinstance(budget, numbers.Integral) or budget < 0:
        raise ValueError(f"search_budget must be a whole number of nodes >= 0, got {budget!r}")
    if seconds is not None and not (isinstance(seconds, numbers.Real) and seconds >= 0):
        raise ValueError(f"search_seconds must be a number of seconds >= 0, or None; got {seconds!r}")


def _check_min_gain(min_gain) -> None:
    if min_gain is not None and not (isinstance(min_gain, numbers.Real) and 0 <= min_gain < 1):
        raise ValueError(f"min_gain must be a fraction >= 0 and < 1 (the least predicted saving kept), "
                         f"or None (the cost model's measured error); got {min_gain!r}")


class Deadline:
    """A time limit over the stages after reading (``seconds`` None: none): ``at`` is the
    ``perf_counter`` time it passes, or None."""

    def __init__(self, seconds: float | None):
        self.check(seconds)
        self.seconds = seconds
        self.began = time.perf_counter()
        self.at = None if seconds is None else self.began + seconds
        self.cuts: list[str] = []       # the stages it cut, in order (see note)

    @staticmethod
    def check(seconds: float | None) -> None:
        if seconds is not None and not (isinstance(seconds, numbers.Real) and seconds >= 0):
            raise ValueError(f"deadline_s must be a number of seconds >= 0, or None; got {seconds!r}")

    def passed(self) -> bool:
        return self.at is not None and time.perf_counter() >= self.at

    def left(self) -> float:
        return float("inf") if self.at is None else self.at - time.perf_counter()

    def before(self, seconds: float) -> float | None:
        """The time ``seconds`` before the deadline."""
        return None if self.at is None else self.at - seconds

    def share(self, fraction: float) -> float | None:
        """The time by which ``fraction`` of what is left now will have passed."""
        if self.at is None:
            return None
        now = time.perf_counter()
        return now + max(0.0, self.at - now) * fraction

    def note(self, stage: str, kept: str) -> str:
        """The report's note that the deadline cut ``stage`` and what was ``kept``; records the
        stage in ``cuts``."""
        self.cuts.append(stage)
        return f"the deadline ({self.seconds:g} s) cut {stage}: {kept}"


SATURATION_SHARE = 0.5      # of the time left when saturation begins; extraction and lowering get the rest


def _analysis_notes(a: "_Analysis", limits: Limits, deadline: Deadline) -> list[str]:
    """What the report says of encoding and saturation: why nothing was encoded, which limit
    stopped saturation, which stage the deadline cut."""
    notes = [f"not optimized: {a.enc.skipped}"] if a.enc is not None and a.enc.skipped else []
    sat = a.sat
    if sat and sat.stop == "deadline" and sat.analysed:
        notes.append(deadline.note(f"saturation after {sat.iterations} iterations",
                                   "the result is the best of the rewrites explored by then"))
    elif sat and sat.stop not in ("saturated", "deadline"):
        notes.append(f"saturation stopped at the {sat.stop} ({_limit_text(limits, sat.stop)}): "
                     f"the result is the best of the rewrites explored by then")
    if a.cut is not None:
        notes.append(deadline.note(a.cut, "kept the input (not estimated)"))
    return notes


class _Margin:
    """The saving a candidate must exceed, a fraction of the input's predicted time:
    ``min_gain`` where given, else the cost model's measured error on a saving at the input's
    kernel count and predicted time (the profile's error table: the saving recorded candidates
    were predicted and did not deliver), else ``MIN_GAIN``."""

    def __init__(self, prof, min_gain: float | None, before: Estimate):
        self.table, self.min_gain, self.before = prof.error, min_gain, before

    def __call__(self, after: Estimate) -> tuple[float, str]:
        """(the margin, what it is)."""
        if self.min_gain is not None:
            return self.min_gain, f"min_gain={self.min_gain:g}, as given"
        if self.table is None:
            return MIN_GAIN, f"the default margin {MIN_GAIN:.0%} (the profile has no error table)"
        m = self.table.margin(len(self.before.kernels), self.before.time_us)
        return m.error, f"the cost model's measured error on a saving, {m}"


def _choose(fusion: Fusion, a: "_Analysis", ex, before: Estimate, margin: _Margin, deadline: Deadline,
            lower_s: float, relower: bool, notes: list[str],
            rejected: list[Rejection]) -> tuple[Fusion, Estimate, bool, list[str]]:
    """(the result, its estimate, whether it changed, the rules credited with it): the best
    candidate lowered where its predicted saving exceeds the ``margin``, a creditable rewrite
    shaped it (or ``relower``), and the deadline leaves the ``lower_s`` seconds lowering is
    expected to take, else the input. Appends to ``notes`` where the deadline cut extraction,
    and to ``rejected`` the candidate not kept and why."""
    best = ex.best
    lowered, why, credited = None, "", []
    if best.estimate is None:
        why = "kept the input: the cost model could not score it"
    elif (gain := _saving(before, best.estimate)) > 0:
        need, what = margin(best.estimate)
        if gain <= max(need, 1e-6):
            rejected.append(Rejection(best.score, gain, need, f"the predicted saving is within {what}"))
        else:
            lowered, why, credited = _lower_candidate(fusion, a, best, before, need, deadline, lower_s,
                                                      relower, rejected)
    if ex.cut:
        notes.append(deadline.note("extraction", "kept the input" if lowered is None else
                                   "kept the best candidate scored by then"))
    if why and not (ex.cut and best.estimate is None):
        notes.append(why)
    if lowered is None:
        return fusion, before, False, []
    return lowered, best.estimate, True, credited


def _saving(before: Estimate, after: Estimate) -> float:
    return 1 - after.time_us / before.time_us if before.time_us > 0 else 0.0


@dataclass
class _Lowered:
    fusion: Fusion
    estimate: Estimate
    credited: list[str]


# Under verify="gpu", candidates predicted dearer than the input by less than this fraction are
# timed too: the cost model cannot tell them from the input (its steady-state error is 21.8% at
# the median over both corpora). SwiGLU's FP8 amax split over the hidden axis first is predicted
# 6.6% dearer than the single grid reduction at [16384, 4096] (H200 profile) and ran 1.20x
# faster on an H100 (bench/results/h100_fp8_amax_035_s31.json, "nvFuser hand split").
VERIFY_WINDOW = 0.10
# Under verify="gpu", the candidates timed at most (extraction keeps this many). SwiGLU's FP8 amax: the split over the rows
# first is predicted 139.0 us, over the hidden axis first 141.2 us (4th of the best scored),
# and on an H100 they ran 161.5 and 126.9 us (bench/results/h100_fp8_amax_035_s31.json).
VERIFY_CANDIDATES = 4


def _lower_candidates(fusion: Fusion, a: "_Analysis", ex, before: Estimate, deadline: Deadline,
                      lower_s: float, relower: bool, notes: list[str],
                      rejected: list[Rejection]) -> list[_Lowered]:
    """Under verify="gpu": the best few distinct candidates predicted cheaper than the input,
    or dearer by less than ``VERIFY_WINDOW`` (the GPU decides what the model cannot tell
    apart), lowered (each that lowers, a creditable rewrite shaped or ``relower``, and the
    deadline leaves time to lower), distinct as lowered, cheapest first."""
    if ex.cut:
        notes.append(deadline.note("extraction", "the candidates scored by then are verified"))
    out: list[_Lowered] = []
    for choice in ex.top:
        if choice.estimate is None or _saving(before, choice.estimate) <= -VERIFY_WINDOW:
            continue
        if deadline.left() < lower_s:
            notes.append(deadline.note("lowering", f"{len(out)} candidates lowered"))
            break
        lowered, _, credited = _lower_candidate(fusion, a, choice, before, None, deadline, lower_s,
                                                relower, rejected)
        if lowered is not None and all(lowered != c.fusion for c in out):
            out.append(_Lowered(lowered, choice.estimate, credited))
    return out


def _verified(fusion: Fusion, before: Estimate, lowered: list[_Lowered], v: Verification,
              rejected: list[Rejection]) -> tuple[Fusion, Estimate, bool, list[str]]:
    """(the result, its estimate, whether it changed, the rules credited) as the GPU decided;
    the candidates it rejected are added to ``rejected``."""
    for c, m in zip(lowered, v.measurements[1:], strict=True):
        if m.problem is not None:
            rejected.append(Rejection(c.estimate.time_us, _saving(before, c.estimate), None,
                                      f"on the GPU: {m.problem}", m.measured_us))
    if v.kept < 0:
        return fusion, before, False, []
    c = lowered[v.kept]
    return c.fusion, c.estimate, True, c.credited


# what Report.credited names a lowering that copies chains for the kernels that recompute them
RECOMPUTE = "recompute_chains"

# A result that no creditable rewrite shaped (only identities such as cast-to-own-dtype and the
# e-graph's own re-lowering of the definition) is predicted cheaper only where the cost model
# misreads the input: on the H200 (nvFuser 0.2.35), four such Thunder RoPE fusions ran 28% and
# 36% longer on the device for two of them, and one 35% longer per call (bench/results/
# h200_thunder_corpus_035.json). Until the cost model reads nvFuser's segments and host cost
# well enough to trust such a gain, the input is kept.
UNCREDITED = ("no rewrite changed it, only identities and the re-lowering of its definition, whose "
              "predicted gain the cost model cannot yet be trusted with")


def _confirm_cheaper(fusion: Fusion, lowered: Fusion, after: Estimate, before: Estimate, inputs,
                     default_extent: int, prof, rejected: list[Rejection]) -> tuple[Fusion, Estimate, bool]:
    """(the result, its estimate, whether it changed): the lowered fusion estimated afresh, as
    ``estimate_fusion`` reads it, and kept only where that is below the input's estimate.
    Lowering may add work that extraction did not score (a copy of an output that would
    otherwise be the caller's input), so the optimized fusion is never estimated dearer."""
    again = _analyse(lowered, concrete_extents(lowered, inputs, None, default_extent), prof, (), None).before
    if again is None or again.time_us < before.time_us:
        return lowered, again or after, True
    rejected.append(Rejection(after.time_us, _saving(before, after), None,
                              f"lowered, it re-estimates at {again.time_us:.1f} us, not below the "
                              f"input's {before.time_us:.1f} us"))
    return fusion, before, False


def _lower_candidate(fusion: Fusion, a: "_Analysis", choice, before: Estimate, margin: float | None,
                     deadline: Deadline, lower_s: float,
                     relower: bool, rejected: list[Rejection]) -> tuple[Fusion | None, str, list[str]]:
    """The candidate ``choice`` lowered and the rules credited with it; or None, and a note
    where the deadline cut lowering (where it was rejected, a record in ``rejected``)."""
    gain = _saving(before, choice.estimate)
    credited = _credited_rules(choice.pick, a.roots, a.original, a.sat.fired if a.sat else {})
    if choice.estimate.recomputed:
        credited = sorted(credited + [RECOMPUTE])
    if not credited and not relower:
        rejected.append(Rejection(choice.score, gain, margin, UNCREDITED))
        return None, "", []
    if deadline.left() < lower_s:
        return None, deadline.note("lowering", "kept the input"), []
    try:
        return _lower_choice(fusion, a.enc, choice.pick, a.roots, a.cls, choice.estimate.recomputed), "", credited
    except FusionError as err:
        rejected.append(Rejection(choice.score, gain, margin, f"it did not lower ({err})"))
        return None, "", []


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
    model: CostModel | None
    sat: Any
    before: Estimate | None      # the input as written, term by term (no e-class merged)
    before_s: float = 0.0        # seconds the cost model took over it
    cut: str | None = None       # the stage the deadline cut before extraction could begin
    phases: dict[str, float] = field(default_factory=dict)   # seconds: encode, saturate, extract


def _analyse(fusion: Fusion, concrete: dict, prof, names: tuple, limits: Limits | None,
             deadline: Deadline | None = None) -> _Analysis:
    """Encode, fill the e-graph, saturate (unless ``limits`` is None), dump; the input's own
    choice as GNodes, and a cost model over the concrete extents. Where ``deadline`` passes
    before the input is estimated, ``cut`` names the stage and the rest is left empty."""
    deadline = deadline or Deadline(None)
    began = time.perf_counter()
    enc = encode(fusion, concrete)

    def work(s):
        s.eg.push()
        try:
            scope = s.fresh_scope()
            inserted = s.insert(enc, scope, deadline.at)
            encoded = time.perf_counter()
            sat = None
            if inserted and not deadline.passed():       # analyses always run
                sat = s.saturate(applicable(names, enc.graph) if rewrite else (), limits or Limits(),
                                 deadline.share(SATURATION_SHARE))
            saturated = time.perf_counter()
            cut = _cut_before_extraction(sat, deadline, encoded - began)
            return scope, encoded, sat, saturated, cut, dump(s.eg) if cut is None else None
        finally:
            s.eg.pop()

    rewrite = limits is not None and not enc.skipped
    scope, encoded, sat, saturated, cut, d = in_session(work)
    phases = {"encode": encoded - began, "saturate": sat.seconds if sat else 0.0, "extract": 0.0}
    shown = sat if rewrite else None
    if cut is not None:
        return _Analysis(enc, None, {}, {}, [], None, shown, None, cut=cut, phases=phases)
    a = _choices(fusion, enc, d, scope, concrete, prof, shown)
    a.phases = phases
    if deadline.passed():
        a.cut = "the estimate of the input"
    else:
        estimating = time.perf_counter()
        a.model.until = deadline.at
        try:
            a.before = _estimate_input(fusion, enc, d, a)
        except EstimateCut:
            a.cut = "the estimate of the input"
        a.before_s = time.perf_counter() - estimating
    phases["extract"] = time.perf_counter() - saturated      # the dump, and the input's estimate
    return a


def _cut_before_extraction(sat, deadline: Deadline, encode_s: float) -> str | None:
    """The stage the deadline cut, where extraction cannot begin: it can not where less time
    is left than encoding took (the dump and the input's estimate alone take most of that)."""
    if sat is None:
        return "encoding"
    if not sat.analysed:
        return "the analyses of the input"
    if deadline.left() < encode_s:
        return "the estimate of the input"
    return None


def _choices(fusion: Fusion, enc, d, scope: int, concrete: dict, prof, sat) -> _Analysis:
    """The input's own choice (class -> GNode), its roots, and the cost model over classes."""
    cls = {tid: d.names[scope, tid] for tid in range(len(enc.graph.nodes))}
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
                      inner={cls[t]: b for t, b in inner.items()},
                      alias_segments=len(alias_output_sources(fusion)), output_count=len(fusion.outputs),
                      shape_only={cls[t] for t in enc.shape_only})
    return _Analysis(enc, d, cls, original, roots, model, sat, None)


def _estimate_input(fusion: Fusion, enc, d, a: _Analysis) -> Estimate | None:
    """The cost model's estimate of the input as written, term by term (no e-class merged).
    Values the definition computes twice (eqsat's lowering of a candidate that recomputes a
    chain, or such a copy written by hand or by Thunder), which the encoding merges into one
    term, are separate nodes again (``written_copies``): nvFuser puts each copy where its
    readers are."""
    cls = a.cls
    output_terms = {enc.roots[o.value] for o in fusion.outputs if o.value in enc.roots}
    inner = {t: order[-1] for t, order in enc.order.items() if order}
    terms = {tid: GNode(n.op, n.attrs, n.kids, d.labels.get(cls[tid], -1), d.dtype.get(cls[tid], -1))
             for tid, n in enumerate(enc.graph.nodes)}
    terms, maps = copy_chains(terms, written_copies(enc))
    for copy in maps:
        inner.update((c, inner[t]) for t, c in copy.items() if t in inner)
    try:
        est = a.model.estimate(terms, sorted(set(enc.roots.values())), links=enc.links,
                               outputs=output_terms, inner=inner, recompute=False, shape_only=enc.shape_only)
    except ValueError:
        return None
    _name_tensors(est, fusion, enc, maps, a.model.extents)
    return est


def _name_tensors(est: Estimate, fusion: Fusion, enc, copies, extents: dict[int, int]) -> None:
    """``est.tensors`` (by term) named as the definition names their values (``T3``: the first
    value a term holds, before its broadcasts; a copy of a chain as what it copies) and shaped
    as the value's dims (a broadcast dim of extent 1; a square matrix, whose two dims share
    an axis that the cost model counts once, is shown with both)."""
    value_of: dict[int, int] = {}
    for v, t in sorted(enc.term_of.items()):
        value_of.setdefault(t, v)
    for copy in copies:
        value_of.update((c, value_of[t]) for t, c in copy.items() if t in value_of)
    types = fusion.types
    for n, tensor in est.tensors.items():
        v = value_of.get(n)
        if v is None:
            continue
        t, shape = types[v], tensor.shape
        if isinstance(t, TensorType) and t.known and all(d.label in enc.bit_of or d.broadcast
                                                         for d in t.dims):
            shape = tuple(1 if d.broadcast else extents.get(enc.bit_of[d.label], 1) for d in t.dims)
        est.tensors[n] = replace(tensor, name=f"T{v}", shape=shape)


def estimate_fusion(definition: Any, inputs: Sequence[Any] | None = None, *, profile=None,
                    extents: dict[int, int] | None = None,
                    default_extent: int = DEFAULT_EXTENT) -> Estimate:
    """The cost model's estimate of a fusion as given (kernels, bytes, time), without rewriting;
    at ``inputs``' shapes, else at those of a repro file's or text's own inputs, else at static
    extents and ``default_extent``."""
    if inputs is None:
        fusion, inputs = ingest_with_inputs(definition)
    else:
        fusion = ingest(definition)
    concrete = concrete_extents(fusion, inputs, extents, default_extent)
    a = _analyse(fusion, concrete, load_profile(profile), (), None)
    if a.enc.skipped or a.before is None:
        raise FusionError(f"cannot estimate: {a.enc.skipped or 'the fusion has no cost-model reading'}")
    return a.before


def _credited_rules(pick, roots, original, fired) -> list[str]:
    """Fired rules whose right-hand side (two constructor levels or more) matches a node of the
    result that the input did not have."""
    chosen = reachable(pick, roots)
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
        if name not in RULES or not RULES[name].creditable:
            continue
        shape = RULES[name].rhs_shape()
        if any(matches(c, shape) for c, _ in new):
            out.append(name)
    return sorted(out)


def _lower_choice(fusion: Fusion, enc, pick, roots, cls, recomputed=()) -> Fusion:
    graph, tid_of = to_term_graph(pick, roots)
    graph = with_recomputed(graph, tid_of, recomputed)
    root_terms = {v: tid_of[cls[t]] for v, t in enc.roots.items()}
    hints = {}
    for t, order in enc.order.items():
        c = cls[t]
        if c in tid_of:
            hints.setdefault(tid_of[c], order)
    lowered = lower_terms(fusion, graph, root_terms, enc.boundaries, enc.label_of, hints)
    if len(lowered.outputs) != len(fusion.outputs):
        raise FusionError(f"the lowered fusion has {len(lowered.outputs)} outputs, not {len(fusion.outputs)}")
    for a, b in zip(fusion.outputs, lowered.outputs, strict=True):
        ta, tb = fusion.types[a.value], lowered.types[b.value]
        if isinstance(ta, TensorType) and ta.known:
            same = tb.dtype is ta.dtype and tb.rank == ta.rank and \
                [d.broadcast for d in tb.dims] == [d.broadcast for d in ta.dims]
            if not same:
                raise FusionError(f"output %{a.value} would change type")
    return lowered
