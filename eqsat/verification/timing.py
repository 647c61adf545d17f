"""Timing a call on the GPU: at steady state (calls issued back to back, what a training loop
sees and what GPU verification compares) and one call at a time (the latency). torch's CUDA
events are used only when a function here is called, so this imports without a GPU."""

from __future__ import annotations

import statistics
import time

import torch


def time_us(fn, runs: int = 50, warmup: int = 5, max_seconds: float | None = None) -> float:
    """Median latency of one ``fn()`` in µs between CUDA events, each call waited for before the
    next (so the host's launch cost is inside it), after ``warmup`` calls; stops early (after at
    least 10 runs) once ``max_seconds`` of samples are taken."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples: list[float] = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3)
        if max_seconds is not None and len(samples) >= 10 and sum(samples) * 1e-6 > max_seconds:
            break
    return statistics.median(samples)


def throughput_us(fn, runs: int = 100, warmup: int = 5, max_seconds: float | None = None) -> float:
    """Median time of one ``fn()`` in µs at steady state: CUDA events around each call, calls
    issued back to back without waiting (as a training loop issues them), so the host's launch
    cost of one call overlaps the GPU work of the ones before it. Where the GPU work is longer than
    the host cost this is the GPU time of one call; where it is shorter, the GPU catches up and
    waits on the host, and this approaches the latency. ``time_us`` (one call at a time) is the
    latency, host cost always included. Stops early (after at least 10 runs) once
    ``max_seconds`` have passed."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = []
    start = time.perf_counter()
    for _ in range(runs):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        events.append((a, b))
        if max_seconds is not None and len(events) >= 10 and time.perf_counter() - start > max_seconds:
            break
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) * 1e3 for a, b in events)
