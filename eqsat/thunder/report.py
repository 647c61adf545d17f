"""What eqsat did with each of Thunder's nvFuser regions: one :class:`RegionRecord` per region
and input signature (a region is optimized at its first call with new input shapes), gathered
in a :class:`ThunderReport` (``Optimize(...).report``)."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field

from eqsat.pipeline.report import Report


@dataclass
class RegionRecord:
    """One region at one input signature.

    ``region``: Thunder's name for it (``nvFusion3``); ``trace``: "forward" or "backward"
    (Thunder numbers each trace's regions from 0); ``ops``: the Thunder ops it fuses;
    ``inputs``: the input shapes and dtypes it was optimized for. ``changed``: whether eqsat's
    definition runs instead of Thunder's; ``rules``: the rules credited with the change.
    ``predicted_*_us``: the cost model's steady-state time of Thunder's definition and of the
    one that runs (equal where unchanged; None where it gave none); ``measured_*_us``: the same,
    timed on the GPU under ``verify="gpu"`` (None otherwise, or where nothing was timed).
    ``error``: why eqsat's definition is not used where eqsat failed (the region then runs as
    Thunder built it, with a warning naming it); None where it did not fail.
    ``bytes_before``, ``device_before_us``, ``host_before_us``: the cost model's bytes moved,
    kernel time and host time of Thunder's definition (None where it gave none).
    ``causal_masks``: the outputs found to be causal attention masks at the first call
    (:mod:`eqsat.thunder.causal_masks`), by position.
    A record is updated in place if eqsat's definition fails later, at a call."""

    region: str
    trace: str
    ops: str = ""
    inputs: str = ""
    changed: bool = False
    rules: tuple[str, ...] = ()
    kernels_before: int | None = None
    kernels_after: int | None = None
    predicted_before_us: float | None = None
    predicted_after_us: float | None = None
    measured_before_us: float | None = None
    measured_after_us: float | None = None
    optimizer_s: float | None = None
    notes: tuple[str, ...] = ()
    error: str | None = None
    bytes_before: int | None = None
    device_before_us: float | None = None
    host_before_us: float | None = None
    causal_masks: tuple[int, ...] = ()

    @classmethod
    def of(cls, region: str, trace: str, ops: str, inputs: str, report: Report) -> "RegionRecord":
        """The record of an ``optimize_fusion`` report."""
        before = report.before.time_us if report.estimated else None
        after = report.after.time_us if report.estimated else None
        measured_before = measured_after = None
        v = report.verification
        if v is not None:
            measured_before = v.measurements[0].measured_us
            measured_after = v.measurements[v.kept + 1].measured_us
        return cls(
            region,
            trace,
            ops,
            inputs,
            report.changed,
            tuple(report.rules),
            len(report.before.kernels) if report.estimated else None,
            len(report.after.kernels) if report.estimated else None,
            before,
            after,
            measured_before,
            measured_after,
            report.seconds,
            tuple(report.notes),
            bytes_before=report.before.bytes if report.estimated else None,
            device_before_us=report.before.device_us if report.estimated else None,
            host_before_us=report.before.host_us if report.estimated else None,
        )

    def fell_back(self, error: BaseException) -> None:
        """eqsat failed on this region: it runs as Thunder built it."""
        self.changed = False
        self.rules = ()
        self.predicted_after_us = self.predicted_before_us
        self.kernels_after = self.kernels_before
        self.measured_after_us = self.measured_before_us
        self.error = describe_error(error)

    @property
    def predicted_gain(self) -> float | None:
        """The predicted saving, a fraction of Thunder's time (0 where unchanged)."""
        return _gain(self.predicted_before_us, self.predicted_after_us)

    @property
    def measured_gain(self) -> float | None:
        """The measured saving, a fraction of Thunder's time (None where nothing was timed)."""
        return _gain(self.measured_before_us, self.measured_after_us)

    @property
    def status(self) -> str:
        return "fell back" if self.error else "rewritten" if self.changed else "unchanged"

    def summary(self) -> dict:
        out = asdict(self)
        out.update(status=self.status, predicted_gain=self.predicted_gain, measured_gain=self.measured_gain)
        return out

    def __str__(self) -> str:
        parts = [f"{self.trace:<8} {self.region:<12} {self.status:<9}"]
        if self.error:
            parts.append(self.error)
        else:
            if self.kernels_before is not None:
                parts.append(
                    f"{self.kernels_before} kernels"
                    if self.kernels_after == self.kernels_before
                    else f"{self.kernels_before} -> {self.kernels_after} kernels"
                )
            parts.append(_times("predicted", self.predicted_before_us, self.predicted_after_us))
            if self.measured_before_us is not None:
                parts.append(_times("measured", self.measured_before_us, self.measured_after_us))
            if self.rules:
                parts.append("rules: " + ", ".join(self.rules))
        if self.causal_masks:
            parts.append("causal masks: outputs " + ", ".join(map(str, self.causal_masks)))
        if self.inputs:
            parts.append(f"inputs: {self.inputs}")
        return "  ".join(p for p in parts if p)


def describe_error(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:300] if lines else ''}"


def _gain(before: float | None, after: float | None) -> float | None:
    if before is None or after is None or before <= 0:
        return None
    return 1 - after / before


def _times(what: str, before: float | None, after: float | None) -> str:
    if before is None:
        return f"not {what}"
    if after is None or after == before:
        return f"{before:.1f} us {what}"
    gain = _gain(before, after)
    return f"{before:.1f} -> {after:.1f} us {what}" + ("" if gain is None else f" ({-gain:+.1%})")


@dataclass
class ThunderReport:
    """The records of every region eqsat has seen, in the order first called, and ``notes`` on
    the run as a whole (why there is no region at all, say); thread-safe."""

    regions: list[RegionRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self):
        self._lock = threading.Lock()

    def add(self, record: RegionRecord) -> None:
        with self._lock:
            self.regions.append(record)

    def note(self, text: str) -> bool:
        """Add a note, once: True where it is new."""
        with self._lock:
            if text in self.notes:
                return False
            self.notes.append(text)
            return True

    def clear(self) -> None:
        """Forget the regions (the notes, which hold for the run as a whole, stay)."""
        with self._lock:
            self.regions.clear()

    def rewritten(self) -> list[RegionRecord]:
        """The regions where eqsat's definition runs instead of Thunder's."""
        return [r for r in self.regions if r.changed and not r.error]

    def fallbacks(self) -> list[RegionRecord]:
        """The regions where eqsat failed (they run as Thunder built them)."""
        return [r for r in self.regions if r.error]

    def summary(self) -> dict:
        return {
            "regions": len(self.regions),
            "rewritten": len(self.rewritten()),
            "fell_back": len(self.fallbacks()),
            "records": [r.summary() for r in self.regions],
            "notes": list(self.notes),
        }

    def __str__(self) -> str:
        by_trace = {}
        for r in self.regions:
            by_trace[r.trace] = by_trace.get(r.trace, 0) + 1
        traces = ", ".join(f"{n} {t}" for t, n in by_trace.items())
        n = len(self.regions)
        head = (
            f"eqsat over Thunder: {n} region{'' if n == 1 else 's'}"
            + (f" ({traces})" if traces else "")
            + f", {len(self.rewritten())} rewritten, {len(self.fallbacks())} fell back"
        )
        return "\n".join([head] + [f"  {r}" for r in self.regions] + [f"  note: {n}" for n in self.notes])
