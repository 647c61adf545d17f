"""nvFuser's host cost per ``execute``, measured on a GPU: how it grows with segments (kernels),
inputs, outputs, ops, resize ops (slice/pad/cat) and tensor rank. The tensors are tiny (a few
hundred elements), so the kernels take a few µs and each call's time is the host's.

    python bench/host_cost.py --out host.json [--frontend nvfuser_direct] [--runs 200]

For each microbenchmark it records the steady-state time of one call (calls back to back:
``gpu_timing.throughput_us``), one call's latency (``time_us``), the host's own time per call
(``time.perf_counter`` over calls issued back to back, not waited for), the kernels nvFuser ran
and their device time (torch.profiler), and the features the fit uses. It then fits
``host_us = base + per_segment * segments + per_input * inputs + per_output * outputs
+ per_op * ops + per_resize * resizes + per_grid * grid reductions + per_alias * values the
outputs view`` by least squares (non-negative), and prints the fit and each row's error. (Grid reductions need
tensors too large for the host alone to show: those rows' steady and latency times may hold the kernels'.)

``--fit host.json`` refits recorded measurements without a GPU.

The 52 microbenchmarks take about 5 minutes on the H200 (a run cut short keeps what it
measured: the fit of 2026-12-04 got 27 of them, up to resizes4). Real fusions' host cost grows
with their resize ops (on the corpus run of 2026-12-04 the host time the fit misses correlates
0.6 with them), so the list reaches 32 resize ops and RoPE blocks of rank 4. Thunder's
host-bound fusions take ~14 us more host time than the fit at the median, even with their
alias-only segments counted (correlated 0.5 with their kernels and ops, and they have 3x the
ops of ../shared/corpus's): the last rows try what Thunder writes and the others lack (static
extents, broadcast weights, outputs that are views).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import numpy as np

import eqsat
from eqsat.ir.dtypes import DataType
from eqsat.ir.layout import alias_output_sources

F32 = DataType.Float
FEATURES = ("segments", "inputs", "outputs", "ops", "resizes", "grids", "aliases")
COEFFICIENTS = ("base",) + tuple(f"per_{f[:-2] if f.endswith('ses') else f[:-1]}" for f in FEATURES)
SIDE = 8  # each dim's extent: 8 elements per dim, so the kernels take a few µs


def _tensor(fd, rank, static=False):
    """An input of ``rank`` dims, their extents symbolic (-1) or ``static`` (SIDE each)."""
    return fd.define_tensor(shape=[SIDE if static else -1] * rank, contiguity=[True] * rank, dtype=F32)


def chain(length, rank=2, static=False):
    """One input, one output, ``length`` pointwise ops: one kernel. ``static``: the extents
    written into the definition (Thunder writes static shapes; the other microbenchmarks, like
    ../shared/corpus, symbolic ones)."""

    def definition(fd):
        x = _tensor(fd, rank, static)
        y = x
        for i in range(length):
            y = fd.ops.mul(y, x) if i % 2 else fd.ops.add(y, x)
        fd.add_output(y)

    return definition, [rank]


def many_inputs(n, rank=2):
    """``n`` inputs summed pointwise: one kernel, one output."""

    def definition(fd):
        xs = [_tensor(fd, rank) for _ in range(n)]
        y = xs[0]
        for x in xs[1:]:
            y = fd.ops.add(y, x)
        if n == 1:
            y = fd.ops.neg(y)
        fd.add_output(y)

    return definition, [rank] * n


def many_outputs(n, rank=2):
    """One input scaled ``n`` ways, each an output: one kernel."""

    def definition(fd):
        x = _tensor(fd, rank)
        for i in range(n):
            fd.add_output(fd.ops.mul(x, fd.define_scalar(1.0 + i, dtype=DataType.Double)))

    return definition, [rank]


def segments(n, rank=2):
    """A chain cut by ``segment_set`` into ``n`` kernels."""

    def definition(fd):
        x = _tensor(fd, rank)
        y = fd.ops.neg(x)
        for _ in range(n - 1):
            y = fd.ops.neg(fd.ops.segment_set(y))
        fd.add_output(y)

    return definition, [rank]


def resizes(n, rank=2):
    """``n`` slices of the last dim, padded back and added (a RoPE-like block): resize ops."""

    def definition(fd):
        x = _tensor(fd, rank)
        y = fd.ops.neg(x)
        for i in range(n):
            half = fd.ops.slice(
                y, start_indices=[0] * rank, end_indices=[SIDE] * (rank - 1) + [SIDE // 2], strides=[1] * rank
            )
            y = fd.ops.add(y, fd.ops.pad(half, [0, SIDE // 2] + [0, 0] * (rank - 1)))
        fd.add_output(y)

    return definition, [rank]


def rotary(n, rank=4):
    """``n`` rotary embeddings (RoPE, as Thunder writes them for 4-D activations): the last dim
    halved by two slices, the second half negated, concatenated back and combined: resize ops
    over a rank-4 tensor, the kind real fusions hold dozens of."""

    def definition(fd):
        x = _tensor(fd, rank)
        y = x
        for _ in range(n):
            lo = fd.ops.slice(
                y, start_indices=[0] * rank, end_indices=[SIDE] * (rank - 1) + [SIDE // 2], strides=[1] * rank
            )
            hi = fd.ops.slice(
                y, start_indices=[0] * (rank - 1) + [SIDE // 2], end_indices=[SIDE] * rank, strides=[1] * rank
            )
            y = fd.ops.add(fd.ops.mul(y, x), fd.ops.cat([fd.ops.neg(hi), lo], dim=rank - 1))
        fd.add_output(y)

    return definition, [rank]


def full_sums(n, rows=1024):
    """``n`` inputs of [rows, 1024], each summed over both axes: ``n`` grid reductions (large
    enough that nvFuser's blocks combine through global memory: it zeroes a semaphore buffer
    with a kernel of its own each call), ``n`` kernels."""

    def definition(fd):
        for _ in range(n):
            fd.add_output(fd.ops.sum(_tensor(fd, 2), dims=[0, 1]))

    return definition, [(rows, 1024)] * n


def alias_outputs(n, rank=2):
    """One kernel (the negation of the first input) and ``n`` outputs that are views of the
    other inputs (a reshape each): nvFuser cuts such alias-only regions off into segments its
    expression evaluator runs on the host, no kernel (MarkAliasesPreparePass)."""

    def definition(fd):
        xs = [_tensor(fd, rank) for _ in range(n + 1)]
        fd.add_output(fd.ops.neg(xs[0]))
        for x in xs[1:]:
            fd.add_output(fd.ops.reshape(x, new_shape=[SIDE**rank]))

    return definition, [rank] * (n + 1)


def broadcasts(n, rank=3):
    """``n`` vectors broadcast to a rank-``rank`` tensor and added to it, as
    Thunder writes a bias or a norm's weight: ops that move no data, in one kernel."""

    def definition(fd):
        x = _tensor(fd, rank)
        y = x
        for _ in range(n):
            v = _tensor(fd, 1)
            b = fd.ops.broadcast_in_dim(v, shape=fd.ops.shape(x), broadcast_dims=[rank - 1])
            y = fd.ops.add(y, b)
        fd.add_output(y)

    return definition, [rank] + [1] * n


def microbenchmarks():
    out = []
    for n in (1, 4, 16, 64, 256):
        out.append((f"chain{n}", *chain(n)))
    for n in (1, 2, 4, 8, 16, 32):
        out.append((f"inputs{n}", *many_inputs(n)))
        out.append((f"outputs{n}", *many_outputs(n)))
    for n in (1, 2, 3, 4, 6, 8, 12):
        out.append((f"segments{n}", *segments(n)))
    for n in (1, 2, 4, 8, 16, 32):
        out.append((f"resizes{n}", *resizes(n)))
    for n in (1, 2, 4, 8):  # real fusions' resizes: RoPE blocks of 3 resize ops each
        out.append((f"rotary{n}", *rotary(n)))
    for rank in (1, 3, 4):
        out.append((f"chain4_rank{rank}", *chain(4, rank)))
        out.append((f"inputs8_rank{rank}", *many_inputs(8, rank)))
    for n in (1, 2, 4):
        out.append((f"full_sums{n}", *full_sums(n)))
    out.append(("full_sum_small", *full_sums(1, rows=2)))
    for n in (1, 2, 4):
        out.append((f"alias_outputs{n}", *alias_outputs(n)))
    for n in (4, 64):
        out.append((f"static_chain{n}", *chain(n, rank=3, static=True)))
    for n in (1, 4, 16):
        out.append((f"broadcasts{n}", *broadcasts(n)))
    return out


def features(fusion, kernels: int, grids: int) -> dict:
    """What the fit reads: nvFuser's kernels, the grid reductions among them (the kernels of
    another library it launched beside them: each zeroes one grid reduction's semaphores),
    and the definition's inputs, outputs, ops, resize ops and the values its outputs view (one
    alias segment each, as the cost model counts them)."""
    ops = [n for n in fusion.nodes if not n.op.startswith("define_")]
    return {
        "segments": kernels,
        "inputs": len(fusion.inputs),
        "outputs": len(fusion.outputs),
        "ops": len(ops),
        "resizes": sum(n.op in ("slice", "pad", "cat") for n in ops),
        "grids": grids,
        "aliases": len(alias_output_sources(fusion)),
    }


def host_only_us(fn, runs: int) -> float:
    """The host's time per call: calls issued back to back, the clock stopped before the GPU
    is waited for (the GPU's queue absorbs them)."""
    import torch

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(runs):
        fn()
    took = time.perf_counter() - start
    torch.cuda.synchronize()
    return took / runs * 1e6


def measure(runs: int, frontend: str, save=None) -> list[dict]:
    import torch
    from gpu_timing import profile_kernels, throughput_us, time_us

    from eqsat.lowering.nvfuser import to_nvfuser

    rows = []
    for name, definition, ranks in microbenchmarks():
        fusion = eqsat.from_function(definition)
        inputs = [torch.randn(*(r if isinstance(r, tuple) else [SIDE] * r), device="cuda") for r in ranks]
        fd = to_nvfuser(fusion, frontend)
        call = lambda: fd.execute(inputs)  # noqa: E731
        call()
        # timed before the profile: torch.profiler's CUPTI slows launches after it (gpu_timing)
        steady, latency, host = throughput_us(call, runs), time_us(call, runs), host_only_us(call, runs)
        launched = profile_kernels(call, repeats=5)
        kernels, device = sum(k.is_nvfuser for k in launched), sum(k.us for k in launched)
        row = {
            "name": name,
            **features(fusion, kernels, len(launched) - kernels),
            "device_us": device,
            "steady_us": steady,
            "latency_us": latency,
            "host_us": host,
        }
        rows.append(row)
        if save:
            save(rows)  # a run cut short keeps what it measured
        print(
            f"  {name:18s} kernels {kernels:2d} grids {row['grids']} device {device:6.1f} us  "
            f"steady {row['steady_us']:7.1f}  "
            f"latency {row['latency_us']:7.1f}  host {row['host_us']:7.1f}",
            flush=True,
        )
    return rows


def fit(rows: list[dict], target: str = "host_us") -> dict:
    """Non-negative least squares of ``target`` on [1, features]: coefficients and errors."""
    X = np.array([[1.0] + [r.get(f, 0) for f in FEATURES] for r in rows])  # older runs: no grids
    y = np.array([r[target] for r in rows])
    active = list(range(X.shape[1]))
    while True:  # drop negative coefficients one at a time, refit
        coef, *_ = np.linalg.lstsq(X[:, active], y, rcond=None)
        worst = int(np.argmin(coef))
        if coef[worst] >= 0 or len(active) == 1:
            break
        active.pop(worst)
    full = np.zeros(X.shape[1])
    full[active] = coef
    pred = X @ full
    err = np.abs(pred - y) / y
    return {
        "target": target,
        "coefficients_us": dict(zip(COEFFICIENTS, np.round(full, 3).tolist())),
        "median_rel_error": round(float(np.median(err)), 4),
        "max_rel_error": round(float(err.max()), 4),
        "samples": len(rows),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", help="write the measurements and fits here (JSON)")
    parser.add_argument("--fit", help="refit recorded measurements (JSON written by --out)")
    parser.add_argument("--frontend", default="nvfuser_direct")
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args(argv)
    if args.fit:
        with open(args.fit) as f:
            data = json.load(f)
        rows = data["rows"]
    else:
        import torch

        data = {
            "device": torch.cuda.get_device_name(0),
            "host": platform.processor() or platform.machine(),
            "frontend": args.frontend,
            "nvfuser": _nvfuser_version(args.frontend),
            "rows": [],
        }

        def save(rows):
            if args.out:
                with open(args.out, "w") as f:
                    json.dump({**data, "rows": rows}, f, indent=1)

        data["rows"] = rows = measure(args.runs, args.frontend, save)
    data["fits"] = [fit(rows, t) for t in ("host_us", "steady_us", "latency_us")]
    for f in data["fits"]:
        print(json.dumps(f))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(data, f, indent=1)
    return 0


def _nvfuser_version(frontend: str) -> str:
    module = __import__(frontend)
    return str(getattr(module, "version", lambda: "?")())


if __name__ == "__main__":
    sys.exit(main())
