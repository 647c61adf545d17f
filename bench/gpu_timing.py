"""Timing helpers shared by the GPU benchmarks: CUDA-event medians (``time_us``,
``throughput_us``: the package's own, ``eqsat.verification.timing``, which GPU verification
uses), kernel lists from torch.profiler, and the device's copy bandwidth."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from dataclasses import dataclass

import torch

from eqsat.reference.compare import mismatch
from eqsat.verification.timing import throughput_us, time_us

# torch.profiler leaves CUPTI attached after it stops unless Kineto is told to tear it down: every
# launch after the first profile is slower (the host probe of bench/corpus.py went from 29.6 to
# 46.5 us over 8 profiled fusions on the H200), and the steady-state times measured after it
# with it. Benchmarks here profile each fusion after timing it, and time the next one after.
os.environ.setdefault("TEARDOWN_CUPTI", "1")

__all__ = [
    "time_us",
    "throughput_us",
    "KernelRun",
    "profile_kernels",
    "kernel_count",
    "kernel_count_and_time",
    "copy_bandwidth",
    "timed_run",
    "write_rows",
    "side_by_side_args",
    "direct_definition",
    "eqsat_run",
]


def side_by_side_args(doc: str, script: str, runs: int, argv=None):
    """The arguments of a side-by-side bench (``--runs``, default ``runs``; ``--json``), or None
    (with a message) where there is no CUDA GPU."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(f"bench/{script} needs a CUDA GPU and nvFuser", file=sys.stderr)
        return None
    return args


@dataclass
class KernelRun:
    name: str
    us: float

    @property
    def is_nvfuser(self) -> bool:
        return self.name.startswith("nvf")


def profile_kernels(fn, repeats: int = 1) -> list[KernelRun]:
    """The CUDA kernels one call of ``fn`` launches (memcpy/memset excluded), in launch order;
    with ``repeats`` > 1 each kernel's time is the median over that many profiled calls."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    per_call: list[list[KernelRun]] = []
    for _ in range(repeats):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        runs = [
            KernelRun(e.name, e.time_range.elapsed_us())
            for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA
            and not e.name.lower().startswith(("memcpy", "memset"))
        ]
        per_call.append(sorted(runs, key=lambda k: k.name))
    if repeats == 1 or len({len(r) for r in per_call}) != 1:
        return per_call[0]
    return [KernelRun(r[0].name, statistics.median(k.us for k in r)) for r in zip(*per_call)]


def kernel_count(fn) -> int:
    """nvFuser's kernels (names starting ``nvf``) one call launches; all kernels where there
    are none of nvFuser's (torch eager, torch.compile)."""
    return kernel_count_and_time(fn)[0]


def kernel_count_and_time(fn, repeats: int = 5) -> tuple[int, float]:
    """(kernel_count(fn), the device time of all the kernels one call launches, in µs: the
    sum of each kernel's median over ``repeats`` profiled calls; no host cost in it)."""
    runs = profile_kernels(fn, repeats)
    nvf = [k for k in runs if k.is_nvfuser]
    return (len(nvf) if nvf else len(runs)), sum(k.us for k in runs)


def copy_bandwidth() -> float:
    """Device-to-device copy bandwidth in bytes/s (read + write of 1 GiB)."""
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    t = time_us(lambda: y.copy_(x), 20)
    return 2 * x.numel() / (t * 1e-6)


def direct_definition(definition):
    """A fusion built with nvfuser_direct itself, so that nvFuser runs it as given:
    ``definition(DataType)`` is the fusion (a function of ``fd``) written with nvFuser's
    DataType (eqsat.testing's definitions take eqsat's or nvFuser's)."""
    from nvfuser_direct import DataType as NvDataType, FusionDefinition

    with FusionDefinition() as fd:
        definition(NvDataType)(fd)
    return fd


def predicted_run(form: str, fd, fusion, inputs, want, runs: int) -> dict:
    """``fd`` (nvFuser's definition of ``fusion``, as written) timed (``timed_run``) beside the
    cost model's estimate of ``fusion``: a row's fields, its form named."""
    import eqsat

    predicted = eqsat.estimate_fusion(fusion, inputs)
    row = {
        "form": form,
        **timed_run(form, lambda: fd.execute(inputs), want, runs),
        "predicted_us": predicted.time_us,
        "predicted_device_us": predicted.device_us,
        "predicted_kernels": len(predicted.kernels),
    }
    print(
        f"    predicted {predicted.time_us:.1f} us ({predicted.device_us:.1f} on the GPU) "
        f"in {len(predicted.kernels)} kernels"
    )
    return row


def finish(args, rows: list[dict]) -> int:
    """A side-by-side bench's end: its rows written where ``--json`` says; exit status 0
    where every row's outputs agreed, else 1."""
    if args.json:
        write_rows(args.json, rows)
    return 0 if all(r["agrees"] for r in rows) else 1


def eqsat_run(fusion, inputs, want, runs: int) -> dict:
    """``fusion`` optimized by eqsat at ``inputs``, lowered to nvfuser_direct and timed
    (``timed_run``): a row's fields, with the rules credited and the predictions after."""
    import eqsat

    optimized = eqsat.optimize_fusion(fusion, inputs)
    fd, after = optimized.to_nvfuser("nvfuser_direct"), optimized.report.after
    row = {
        "form": "eqsat",
        "credited": optimized.report.rules,
        **timed_run("eqsat", lambda: fd.execute(inputs), want, runs),
        "predicted_us": after.time_us,
        "predicted_device_us": after.device_us,
        "predicted_kernels": len(after.kernels),
    }
    print(f"    predicted {after.time_us:.1f} us ({', '.join(optimized.report.rules)})")
    return row


def write_rows(path: str, rows: list[dict]) -> None:
    """A benchmark's rows as JSON, with the GPU they were measured on."""
    with open(path, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(0), "rows": rows}, f, indent=1)


def timed_run(label: str, fn, want, runs: int) -> dict:
    """``fn`` run once and checked against ``want`` (its outputs, dtype tolerance), then timed:
    steady state (``us``), one call's latency, the kernels and their device time; a line
    printed. The row's measured fields."""
    problems = [p for p in (mismatch(g, w) for g, w in zip(fn(), want, strict=True)) if p]
    us, latency = throughput_us(fn, runs), time_us(fn, runs)
    kernels, device = kernel_count_and_time(fn)
    print(
        f"  {label:20s} {us:9.1f} us ({latency:8.1f} us latency, {device:8.1f} us on the GPU)  "
        f"{kernels:3d} kernels  {'agrees' if not problems else 'DIFFERS: ' + problems[0]}"
    )
    return {"us": us, "latency_us": latency, "device_us": device, "kernels": kernels, "agrees": not problems}
