"""The cost model's measured error on a predicted saving, by the input's predicted kernel count
and time: the margin a candidate's predicted saving must exceed before ``optimize_fusion`` keeps
it (``eqsat.pipeline.choose.margin``).

A profile's optional ``error`` table (``bench/corpus.py --predict RUN.json ... --fit-error
PROFILE.json`` fits it from recorded GPU runs) holds, for each bucket of the input's predicted
kernel count (rows) and predicted steady-state time (columns), a quantile of the saving the
model promised and nvFuser did not deliver, ``max(0, predicted saving - measured saving)`` (each
a fraction of the input's steady-state time), over recorded (as given, candidate) pairs whose
input fell in it, with how many pairs that was. Only the shortfall counts: a rewrite that runs
faster than predicted is no risk of running slower.

Where a bucket holds fewer than ``min_samples`` pairs its value comes from a coarser one, in
this order: the same time bucket over all kernel counts, the same kernel-count bucket over all
times, all pairs
(``basis`` says which: "cell", "time", "kernels", "all"; ``count`` is then the coarser
bucket's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

KERNEL_BOUNDS = (1, 2, 4, 8)  # buckets 1, 2-3, 4-7, 8+ (0 kernels counts as 1)
TIME_BOUNDS_US = (50.0, 200.0, 1000.0)  # buckets <50, 50-200, 200-1000, >=1000 µs
QUANTILE = 0.75
MIN_SAMPLES = 5
BASES = ("cell", "time", "kernels", "all")


def real_number(
    value, field: str, *, positive: bool = False, whole: bool = False, most: float = math.inf
) -> float:
    """``value`` as a float where it is a finite real number (a JSON number: not a bool, not
    text) >= 0, > 0 where ``positive``, whole where ``whole`` and <= ``most``; else ValueError
    naming ``field`` and what was expected."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{field} must be a number, got {value!r}")
    if not (0 < value if positive else 0 <= value) or not value <= most or not math.isfinite(value):
        bound = f"{'> 0' if positive else '>= 0'}{f' and <= {most:g}' if most < math.inf else ''}"
        raise ValueError(f"{field} must be finite and {bound}, got {value!r}")
    if whole and value != int(value):
        raise ValueError(f"{field} must be a whole number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Margin:
    """The error that applies to one estimate: its value, the buckets and where it came from."""

    error: float
    kernels: str  # the kernel-count bucket, e.g. "2-3"
    time: str  # the time bucket, e.g. "50-200 us"
    basis: str  # "cell", "time", "kernels", "all"
    count: int  # the fusions it was measured over

    def __str__(self) -> str:
        where = {
            "cell": "",
            "time": f", from all pairs of {self.time}",
            "kernels": f", from all pairs of {self.kernels} kernels",
            "all": ", from all pairs",
        }[self.basis]
        return f"{self.error:.0%} at {self.kernels} kernels, {self.time} ({self.count} pairs measured{where})"


@dataclass(frozen=True)
class ErrorTable:
    """Rows: kernel-count buckets (lower bounds ``kernel_bounds``); columns: time buckets
    (``time_bounds_us`` separate them). ``error[row][col]`` is the relative error used there,
    ``count`` and ``basis`` what it was measured over (see the module's docstring). The field
    names are the JSON keys."""

    kernel_bounds: tuple[int, ...]
    time_bounds_us: tuple[float, ...]
    error: tuple[tuple[float, ...], ...]
    count: tuple[tuple[int, ...], ...]
    basis: tuple[tuple[str, ...], ...]
    default: float  # over all fusions
    quantile: float = QUANTILE
    min_samples: int = MIN_SAMPLES
    samples: int = 0
    source: str = ""

    def kernel_labels(self) -> list[str]:
        b = self.kernel_bounds
        return [str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}" for lo, hi in zip(b, b[1:])] + [f"{b[-1]}+"]

    def time_labels(self) -> list[str]:
        b = [f"{x:g}" for x in self.time_bounds_us]
        return [f"<{b[0]} us"] + [f"{lo}-{hi} us" for lo, hi in zip(b, b[1:])] + [f">={b[-1]} us"]

    def margin(self, kernels: int, time_us: float) -> Margin:
        """The error that applies to an estimate of ``kernels`` kernels and ``time_us``."""
        row, col = cell(kernels, time_us, self.kernel_bounds, self.time_bounds_us)
        return Margin(
            self.error[row][col],
            self.kernel_labels()[row],
            self.time_labels()[col],
            self.basis[row][col],
            self.count[row][col],
        )

    def to_dict(self) -> dict:
        return {
            "quantile": self.quantile,
            "min_samples": self.min_samples,
            "samples": self.samples,
            "kernel_bounds": list(self.kernel_bounds),
            "time_bounds_us": list(self.time_bounds_us),
            "error": [list(r) for r in self.error],
            "count": [list(r) for r in self.count],
            "basis": [list(r) for r in self.basis],
            "default": self.default,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: dict) -> "ErrorTable":
        """Raises ValueError, KeyError or TypeError naming the field that is wrong; every number
        is checked (:func:`real_number`)."""
        kb = tuple(int(real_number(x, "error.kernel_bounds", whole=True)) for x in data["kernel_bounds"])
        tb = tuple(real_number(x, "error.time_bounds_us") for x in data["time_bounds_us"])
        if not kb or kb[0] < 1 or any(a >= b for a, b in zip(kb, kb[1:])):
            raise ValueError(f"error.kernel_bounds must rise from 1 or more, got {list(kb)}")
        if not tb or tb[0] <= 0 or any(a >= b for a, b in zip(tb, tb[1:])) or tb[-1] == math.inf:
            raise ValueError(f"error.time_bounds_us must rise from above 0, got {list(tb)}")
        shape = (len(kb), len(tb) + 1)
        grids = {}
        kinds = {
            "error": lambda x: real_number(x, "error.error values"),
            "count": lambda x: int(real_number(x, "error.count values", whole=True)),
            "basis": str,
        }
        for name, kind in kinds.items():
            grid = data[name]
            if len(grid) != shape[0] or any(len(r) != shape[1] for r in grid):
                raise ValueError(
                    f"error.{name} must be {shape[0]} rows (kernel_bounds) of {shape[1]} (time_bounds_us + 1)"
                )
            grids[name] = tuple(tuple(kind(x) for x in r) for r in grid)
        unknown = {b for r in grids["basis"] for b in r} - set(BASES)
        if unknown:
            raise ValueError(f"error.basis values must be one of {BASES}, got {sorted(unknown)}")
        default = real_number(data["default"], "error.default")
        q = real_number(data.get("quantile", QUANTILE), "error.quantile", positive=True, most=1.0)
        least = int(real_number(data.get("min_samples", MIN_SAMPLES), "error.min_samples", whole=True))
        samples = int(real_number(data.get("samples", 0), "error.samples", whole=True))
        return cls(
            kb,
            tb,
            grids["error"],
            grids["count"],
            grids["basis"],
            default,
            q,
            least,
            samples,
            str(data.get("source", "")),
        )

    def text(self) -> str:
        """The table as rows of text (error / fusions, with a mark where it came from a coarser
        bucket)."""
        mark = {"cell": "", "time": " t", "kernels": " k", "all": " *"}
        labels = self.time_labels()
        lines = [f"{'kernels':>8s} " + " ".join(f"{t:>16s}" for t in labels)]
        for name, errs, counts, bases in zip(self.kernel_labels(), self.error, self.count, self.basis):
            cells = [f"{e:.0%} / {n}{mark[b]}" for e, n, b in zip(errs, counts, bases)]
            lines.append(f"{name:>8s} " + " ".join(f"{c:>16s}" for c in cells))
        lines.append(
            f"(error at the {self.quantile:.0%} quantile / pairs; t: from the time bucket, "
            f"k: from the kernel-count bucket, *: from all {self.samples} pairs "
            f"({self.default:.0%}), where a cell has fewer than {self.min_samples})"
        )
        return "\n".join(lines)


def cell(kernels: int, time_us: float, kernel_bounds, time_bounds_us) -> tuple[int, int]:
    """(row, column) of an estimate of ``kernels`` kernels and ``time_us`` among the buckets."""
    row = max(0, sum(1 for lo in kernel_bounds if kernels >= lo) - 1)
    col = sum(1 for hi in time_bounds_us if time_us >= hi)
    return row, col


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values``, linear between the nearest ranks."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("the quantile of no values")
    x = q * (len(ordered) - 1)
    i = int(math.floor(x))
    j = min(i + 1, len(ordered) - 1)
    return ordered[i] + (ordered[j] - ordered[i]) * (x - i)


def fit_error_table(
    samples: Iterable[tuple[int, float, float]],
    *,
    q: float = QUANTILE,
    min_samples: int = MIN_SAMPLES,
    kernel_bounds: tuple[int, ...] = KERNEL_BOUNDS,
    time_bounds_us: tuple[float, ...] = TIME_BOUNDS_US,
    source: str = "",
) -> ErrorTable:
    """The table of ``samples``: (the input's predicted kernels, its predicted µs, the error) per
    recorded pair, the error a fraction >= 0 (see the module's docstring)."""
    samples = list(samples)
    if not samples:
        raise ValueError("no samples to fit the error table on")
    by_cell: dict[tuple[int, int], list[float]] = {}
    for kernels, predicted, error in samples:
        if not 0 <= error < math.inf:
            raise ValueError(f"an error must be finite and >= 0, got {error}")
        by_cell.setdefault(cell(kernels, predicted, kernel_bounds, time_bounds_us), []).append(error)
    rows, cols = len(kernel_bounds), len(time_bounds_us) + 1
    everything = [e for errs in by_cell.values() for e in errs]
    by_row = {r: [e for (r2, _), errs in by_cell.items() if r2 == r for e in errs] for r in range(rows)}
    by_col = {c: [e for (_, c2), errs in by_cell.items() if c2 == c for e in errs] for c in range(cols)}
    error, count, basis = [], [], []
    for r in range(rows):
        er, cr, br = [], [], []
        for c in range(cols):
            for name, errs in (
                ("cell", by_cell.get((r, c), [])),
                ("time", by_col[c]),
                ("kernels", by_row[r]),
                ("all", everything),
            ):
                if len(errs) >= min_samples or name == "all":
                    er.append(round(quantile(errs, q), 3))
                    cr.append(len(errs))
                    br.append(name)
                    break
        error.append(tuple(er))
        count.append(tuple(cr))
        basis.append(tuple(br))
    return ErrorTable(
        tuple(kernel_bounds),
        tuple(float(t) for t in time_bounds_us),
        tuple(error),
        tuple(count),
        tuple(basis),
        round(quantile(everything, q), 3),
        q,
        min_samples,
        len(everything),
        source,
    )


def shortfall(
    predicted_before: float, predicted_after: float, measured_before: float, measured_after: float
) -> float:
    """The saving predicted and not measured, ``max(0, predicted - measured)``, each saving a
    fraction of the input's time (the error :func:`fit_error_table` takes)."""
    predicted = 1 - predicted_after / predicted_before
    measured = 1 - measured_after / measured_before
    return max(0.0, predicted - measured)
