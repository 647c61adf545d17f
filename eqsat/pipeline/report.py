"""What an optimization reports: ``Report`` (the estimates, the rules, where each stage stopped,
the notes), ``Rejection`` (a candidate not kept, and why) and ``SaturationSummary``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eqsat.cost.model import Estimate
    from eqsat.egraph.saturate import Saturation
    from eqsat.verification.verify import Verification


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
        if not self.ran:
            return self.stop
        return f"{self.stop} after {self.iterations} iterations, {self.e_nodes} e-nodes"


@dataclass(frozen=True)
class Rejection:
    """A candidate predicted cheaper than the input (under verify="gpu", or dearer by less than
    ``VERIFY_WINDOW``) that was not kept: its predicted time, the predicted saving (a fraction
    of the input's predicted time), the saving it had to exceed (None where none applied: under
    verify="gpu" the GPU decides), why it was rejected, and its measured time where the GPU
    timed it."""

    predicted_us: float
    saving: float
    margin: float | None
    reason: str
    measured_us: float | None = None

    def __str__(self) -> str:
        margin = "" if self.margin is None else f", margin {self.margin:.0%}"
        measured = "" if self.measured_us is None else f", {self.measured_us:.1f} us measured"
        return (
            f"candidate of {self.predicted_us:.1f} us predicted (saves {self.saving:.1%}{margin}"
            f"{measured}): {self.reason}"
        )

    def summary(self) -> dict:
        return {
            "predicted_us": round(self.predicted_us, 3),
            "saving": round(self.saving, 4),
            "margin": self.margin,
            "reason": self.reason,
            "measured_us": None if self.measured_us is None else round(self.measured_us, 3),
        }


@dataclass
class Report:
    """What ``optimize_fusion`` did: the estimates before and after, whether it changed the
    fusion, the rules that fired and those credited with the result, where saturation stopped,
    the seconds it took (``phases``: read, setup, encode, saturate, extract, lower, verify,
    total), ``notes``, the candidates ``rejected`` and why, and under verify="gpu" the
    ``verification`` (None where nothing was timed)."""

    before: Estimate
    after: Estimate
    changed: bool
    rules_fired: dict[str, int] = field(default_factory=dict)
    saturation: SaturationSummary = SaturationSummary()
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)  # fired rules whose right side is in the result
    phases: dict[str, float] = field(default_factory=dict)  # seconds by stage
    estimated: bool = True  # False: the cost model gave no estimate of the input (before, after empty)
    rejected: list[Rejection] = field(default_factory=list)
    verification: Verification | None = None
    cut: str | None = None  # the first stage the deadline cut (None: it cut nothing)
    unchanged: str | None = None  # why the input was kept (None where it changed)
    search: dict = field(default_factory=dict)  # extraction's search: "scored", "nodes", "stop"

    def summary(self) -> dict:
        return {
            "before": self.before.summary() if self.estimated else None,
            "after": self.after.summary() if self.estimated else None,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "cut": self.cut,
            "rules": self.rules,
            "rules_fired": dict(sorted(self.rules_fired.items())),
            "saturation": self.saturation.summary(),
            "optimizer_ms": round(self.seconds * 1e3, 2),
            "phases_ms": {k: round(v * 1e3, 2) for k, v in self.phases.items()},
            "notes": self.notes,
            "estimated": self.estimated,
            "search": self.search,
            "rejected": [r.summary() for r in self.rejected],
            "verification": None if self.verification is None else self.verification.summary(),
        }

    def __str__(self) -> str:
        lines = self._estimates()
        if self.rules:
            lines.append("rules that changed the result: " + ", ".join(self.rules))
        if self.rules_fired:
            lines.append(
                "rules that fired: "
                + ", ".join(
                    f"{k}×{v}" for k, v in sorted(self.rules_fired.items(), key=lambda kv: (-kv[1], kv[0]))
                )
            )
        phases = ", ".join(f"{k} {v * 1e3:.0f}" for k, v in self.phases.items() if k != "total")
        search = (
            f"; search: {self.search['scored']} candidates scored, {self.search['stop']}"
            if self.search
            else ""
        )
        lines.append(
            f"saturation: {self.saturation}{search}; optimizer {self.seconds * 1e3:.1f} ms"
            + (f" ({phases} ms)" if phases else "")
        )
        lines += [f"rejected: {r}" for r in self.rejected]
        if self.unchanged:
            lines.append(f"unchanged: {self.unchanged}")
        if self.verification is not None:
            lines.append(str(self.verification))
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _estimates(self) -> list[str]:
        if not self.estimated:
            return ["before: not estimated", "after:  not estimated (unchanged)"]
        b, a = self.before, self.after
        return [
            f"before: {len(b.kernels)} kernels, {b.bytes / 1e6:.3f} MB, {b.flops / 1e6:.3f} MFLOP, "
            f"{b.time_us:.1f} us estimated",
            f"after:  {len(a.kernels)} kernels, {a.bytes / 1e6:.3f} MB, {a.flops / 1e6:.3f} MFLOP, "
            f"{a.time_us:.1f} us estimated" + ("" if self.changed else " (unchanged)"),
        ]
