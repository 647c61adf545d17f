"""GPU verification: the input as given and the best few candidates, run on the caller's inputs
on the device at hand; a candidate whose outputs disagree with the input's is rejected, the
others are timed at steady state, and the fastest is kept where it beats the input by more
than :data:`TIE` (the input wins ties). The decision is cached on disk
(``eqsat.verification.cache``), so each fusion is timed once.

The device is reached through a runner (``eqsat.verification.runner``); a fake one tests the
decisions here without a GPU.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from eqsat.errors import FusionError
from eqsat.ir.fusion import Fusion
from eqsat.lowering.source import fusion_source
from eqsat.reference.compare import mismatch, output_rtols
from eqsat.reference.devices import fresh_copies

from .cache import Entry, Record, VerificationCache, cache_key, source_hash
from .runner import Runner

TIE = 0.01  # a candidate must run more than 1% faster than the input to be kept
ROUNDS = 2  # each fusion is timed this many times, in alternating order; the least counts


@dataclass(frozen=True)
class Measurement:
    """One fusion's part in a verification: ``label`` ("input", "candidate 1", ...), its
    predicted and measured steady-state times (measured None where it was not timed), why it
    was rejected (None: it was not), whether it was kept."""

    label: str
    predicted_us: float
    measured_us: float | None
    problem: str | None
    kept: bool

    def __str__(self) -> str:
        measured = "not timed" if self.measured_us is None else f"{self.measured_us:.1f} us measured"
        text = f"{self.label}: {self.predicted_us:.1f} us predicted, {measured}"
        return text + (" (kept)" if self.kept else f" (rejected: {self.problem})" if self.problem else "")

    def summary(self) -> dict:
        return {
            "label": self.label,
            "predicted_us": round(self.predicted_us, 3),
            "measured_us": None if self.measured_us is None else round(self.measured_us, 3),
            "problem": self.problem,
            "kept": self.kept,
        }


@dataclass(frozen=True)
class Verification:
    """What verification decided: ``kept`` is the index of the candidate kept (-1: the input);
    ``measurements`` the input's and each candidate's (the input first); ``seconds`` the time
    it took now (a cache hit: reading the file), ``cached`` whether the decision came from the
    cache file ``cache_file``."""

    device: str
    kept: int
    measurements: tuple[Measurement, ...]
    seconds: float
    cached: bool
    cache_file: str

    def __str__(self) -> str:
        origin = f"from the cache ({self.cache_file})" if self.cached else f"cached in {self.cache_file}"
        lines = [
            f"verified on {self.device} in {self.seconds:.2f} s, {origin}; kept "
            f"{self.measurements[self.kept + 1].label}"
        ]
        return "\n".join(lines + [f"  {m}" for m in self.measurements])

    def summary(self) -> dict:
        return {
            "device": self.device,
            "kept": self.measurements[self.kept + 1].label,
            "seconds": round(self.seconds, 3),
            "cached": self.cached,
            "cache_file": self.cache_file,
            "measurements": [m.summary() for m in self.measurements],
        }


def check_verifiable(inputs: Sequence[Any] | None) -> None:
    """Raises FusionError unless ``inputs`` hold values to run (no meta tensors)."""
    if inputs is None:
        raise FusionError("verify='gpu' runs the fusions on the caller's inputs; none were given")
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.device.type == "meta":
            raise FusionError(
                f"verify='gpu' runs the fusions on the caller's inputs, and input {i} is a "
                "meta tensor (a shape without values); give CUDA tensors, or CPU tensors "
                "to be copied to the GPU"
            )


def verify(
    original: Fusion,
    candidates: Sequence[Fusion],
    predicted_us: Sequence[float],
    inputs: Sequence[Any],
    runner: Runner,
    cache: VerificationCache,
) -> Verification:
    """Decide between ``original`` and ``candidates`` (with their predicted steady-state times,
    the input's first) on ``runner``'s device, or read the decision from ``cache``."""
    began = time.perf_counter()
    check_verifiable(inputs)
    if len(predicted_us) != len(candidates) + 1:
        raise ValueError(
            f"{len(predicted_us)} predicted times for the input and {len(candidates)} candidates"
        )
    key = cache_key(fusion_source(original), inputs, runner.device, runner.versions)
    hashes = tuple(source_hash(fusion_source(c)) for c in candidates)
    entry = cache.load(key, hashes)
    cached = entry is not None
    if entry is None:
        records, kept = _measure(original, list(candidates), runner.prepare(original, inputs), runner)
        entry = Entry(hashes, records, kept, time.perf_counter() - began)
        cache.store(key, entry)
    labels = ["input"] + [f"candidate {i + 1}" for i in range(len(candidates))]
    measurements = tuple(
        Measurement(label, p, r.measured_us, r.problem, i - 1 == entry.kept)
        for i, (label, p, r) in enumerate(zip(labels, predicted_us, entry.records, strict=True))
    )
    return Verification(
        runner.device, entry.kept, measurements, time.perf_counter() - began, cached, str(cache.path(key))
    )


def _measure(
    original: Fusion, candidates: list[Fusion], inputs: list, runner: Runner
) -> tuple[tuple[Record, ...], int]:
    """(a record per fusion, the input first; the index of the candidate kept, -1: the input)."""
    try:
        want = _outputs(runner, original, inputs)
    except Exception as err:  # nvFuser's errors have no common type
        raise FusionError(f"verify='gpu': the input as given failed on the GPU: {_first_line(err)}") from err
    problems: list[str | None] = [None] + [
        _disagreement(runner, original, c, inputs, want) for c in candidates
    ]
    fusions = [original] + candidates
    timed = [i for i, p in enumerate(problems) if p is None]
    best: dict[int, float] = {}
    for round_ in range(ROUNDS):
        for i in timed if round_ % 2 == 0 else timed[::-1]:
            try:
                us = runner.steady_us(fusions[i], inputs)
            except Exception as err:  # nvFuser's errors have no common type
                if i == 0:
                    raise FusionError(f"verify='gpu': timing the input failed: {_first_line(err)}") from err
                problems[i] = f"failed while timed: {_first_line(err)}"
                best.pop(i, None)
                continue
            if problems[i] is None:
                best[i] = min(best.get(i, us), us)
    fastest = min((i for i in best if i), key=lambda i: (best[i], i), default=None)
    kept = fastest if fastest is not None and best[fastest] < best[0] * (1 - TIE) else 0
    for i in best:
        if i and i != kept:
            problems[i] = (
                f"not more than {TIE:.0%} faster than the input ({best[0]:.1f} us)"
                if kept == 0
                else f"slower than candidate {kept} ({best[kept]:.1f} us)"
            )
    records = tuple(Record(best.get(i), problems[i]) for i in range(len(fusions)))
    return records, kept - 1


def _outputs(runner: Runner, fusion: Fusion, inputs: list) -> list:
    """Outputs, then the tensor inputs as the run left them (aliased outputs land there)."""
    copies = fresh_copies(inputs)
    return list(runner.run(fusion, copies)) + [x for x in copies if isinstance(x, torch.Tensor)]


def _disagreement(
    runner: Runner, original: Fusion, candidate: Fusion, inputs: list, want: list
) -> str | None:
    """Why ``candidate``'s outputs are not the input's (dtype tolerance of the least precise dtype
    each output is computed through), or None. Random ops drawn from the device's generator
    (no ``rng_seed``) are compared by shape and dtype only."""
    try:
        got = _outputs(runner, candidate, inputs)
    except Exception as err:  # nvFuser's errors have no common type
        return f"failed on the GPU: {_first_line(err)}"
    if len(got) != len(want):
        return f"{len(got)} outputs and inputs after the run, not {len(want)}"
    values = not any(n.op in ("uniform", "normal") and n.arg("rng_seed") is None for n in original.nodes)
    returned = [
        rtol
        for rtol, out in zip(output_rtols(original), original.outputs, strict=True)
        if out.alias_input is None
    ]  # aliased outputs are not returned
    rtols = returned + [None] * (len(want) - len(returned))
    for i, (g, w, rtol) in enumerate(zip(got, want, rtols, strict=True)):
        if values:
            problem = mismatch(g, w, rtol=rtol)
        else:
            problem = (
                None
                if (g.shape, g.dtype) == (w.shape, w.dtype)
                else f"shape and dtype {tuple(g.shape)} {g.dtype} != {tuple(w.shape)} {w.dtype}"
            )
        if problem:
            what = f"output {i}" if i < len(returned) else f"input {i - len(returned)} after the run"
            return f"outputs disagree with the input's: {what}: {problem}"
    return None


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:300] if text else ''}"
