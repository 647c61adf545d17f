"""Calibrate the cost model on this GPU: run microbenchmark fusions on nvFuser, fit the
profile's constants, write a profile that ``optimize_fusion(..., profile=PATH)`` and
``eqsat optimize --profile PATH`` accept, and report how well it fits.

    python bench/calibrate.py --out my_gpu.json [--raw raw.json]     # on a GPU with nvFuser
    python bench/calibrate.py --fit raw.json [more.json] --out my_gpu.json   # refit recorded runs
    python bench/calibrate.py --only silu_amax full_sum_2d --raw more.json --out part.json

Microbenchmarks (fp32 unless named): pointwise (a*b+a), a long multiply-add chain (compute
bound), inner, outer and full sums (1-D and 2-D), a reduction of a broadcast product (compute
bound), softmax and layer norm (persistent normalization), the amax of silu(a) * b over both
axes, over rows and over columns (a full reduction with a compute-heavy prologue, and its two first stages),
the bfloat16 amax of a centered SiLU per row (a compute-bound normalization), each
from launch-bound to bandwidth-bound sizes. For each: the time of one ``execute`` (CUDA
events, median), the kernels nvFuser runs (torch.profiler, their device time), and the cost
model's prediction of the same fusion.

The fit, per kernel kind of the cost model (pointwise, reduction, grid_reduction,
normalization), of ``launch + max(bytes / bandwidth, flops / throughput)`` against each kernel's device time,
over the microbenchmarks whose predicted kernel count equals nvFuser's (see fit_kind);
host_us is the median of (execute time - kernel time) over the launch-bound ones.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time

import numpy as np

import eqsat
from eqsat.cost.profile import HAND_FITTED, KernelKind, load_profile
from eqsat.ir.dtypes import DataType
from eqsat.testing.seeds import reduction_broadcast_ref

F32 = DataType.Float
BF16 = DataType.BFloat16
BF16_SUFFIX = "_bf16"  # microbenchmarks so named take bfloat16 inputs (else float32)


def _tensor(fd, rank, dtype=F32):
    return fd.define_tensor(shape=[-1] * rank, contiguity=[True] * rank, dtype=dtype)


def pointwise(fd):
    a, b = _tensor(fd, 1), _tensor(fd, 1)
    fd.add_output(fd.ops.add(fd.ops.mul(a, b), a))


def mul_add_chain(fd, length=128):
    x = _tensor(fd, 1)
    y = x
    for i in range(length):
        y = fd.ops.add(
            fd.ops.mul(y, fd.define_scalar(1.0001, dtype=DataType.Double)),
            fd.define_scalar(0.5 / (i + 1), dtype=DataType.Double),
        )
    fd.add_output(y)


def inner_sum(fd):
    fd.add_output(fd.ops.sum(_tensor(fd, 2), dims=[1]))


def outer_sum(fd):
    fd.add_output(fd.ops.sum(_tensor(fd, 2), dims=[0]))


def full_sum(fd):
    fd.add_output(fd.ops.sum(_tensor(fd, 1), dims=[0]))


def full_sum_2d(fd):
    fd.add_output(fd.ops.sum(_tensor(fd, 2), dims=[0, 1]))


def _silu_product(fd):
    a, b = _tensor(fd, 2), _tensor(fd, 2)
    return fd.ops.mul(fd.ops.mul(a, fd.ops.sigmoid(a)), b)


def silu_amax(fd):
    """y = silu(a) * b and max |y| over both axes (the FP8 amax of a SwiGLU): a full
    reduction with a compute-heavy prologue and an output of the prologue, one grid kernel."""
    y = _silu_product(fd)
    fd.add_output(y)
    fd.add_output(fd.ops.max(fd.ops.abs(y), dims=[0, 1]))


def silu_row_amax(fd):
    """silu_amax's first stage: max |y| over the rows' innermost axis (a plain reduction)."""
    y = _silu_product(fd)
    fd.add_output(y)
    fd.add_output(fd.ops.max(fd.ops.abs(y), dims=[1]))


def silu_col_amax(fd):
    """silu_amax's other first stage: max |y| over the outer axis (an outer reduction with a
    compute-heavy prologue; nvFuser's outer scheduler, unlike its inner one)."""
    y = _silu_product(fd)
    fd.add_output(y)
    fd.add_output(fd.ops.max(fd.ops.abs(y), dims=[0]))


def _silu_as_thunder_writes_it(fd, a):
    """silu(a) = a / (1 + exp(-a)), as neg, exp, add, reciprocal, mul."""
    e = fd.ops.exp(fd.ops.neg(a))
    return fd.ops.mul(a, fd.ops.reciprocal(fd.ops.add(e, fd.define_scalar(1.0, dtype=DataType.Double))))


def _silu_amax_bf16(dims):
    """max |silu(a)| over ``dims`` of a bfloat16 ``a``, SiLU written as Thunder writes it
    (a / (1 + exp(-a)) as neg, exp, add, reciprocal, mul, in float32) and nothing else
    written: 13 counted flops per 2 bytes read, compute-bound on an H100 or H200, so these fit
    the reductions' arithmetic throughput (a full reduction's, an inner and an outer one)."""

    def fusion(fd):
        y = _silu_as_thunder_writes_it(fd, fd.ops.cast(_tensor(fd, 2, BF16), F32))
        fd.add_output(fd.ops.max(fd.ops.abs(y), dims=dims))

    fusion.__name__ = f"silu_amax_bf16_over_{'_'.join(map(str, dims))}"
    return fusion


def silu_centered_amax_bf16(fd):
    """max_j |silu(a_ij - mean_i a)| of a bfloat16 ``a``: a persistent normalization (a sum,
    broadcast back over its row, then the amax) whose second pass is compute-heavy, SiLU
    written as Thunder writes it; the row stays in registers as the input itself, so nvFuser
    has nothing to recompute. About 16 counted flops per 2 bytes read: compute-bound, so it
    fits the normalization kind's arithmetic throughput (the softmax and layer-norm samples,
    about one flop per byte, are bandwidth-bound and leave it unconstrained)."""
    a = fd.ops.cast(_tensor(fd, 2, BF16), F32)
    shape = fd.ops.shape(a)
    mean = fd.ops.broadcast_in_dim(fd.ops.sum(a, dims=[1]), shape=shape, broadcast_dims=[0])
    c = fd.ops.sub(a, fd.ops.div(mean, fd.ops.cast(fd.ops.size(a, dim=1), F32)))
    fd.add_output(fd.ops.max(fd.ops.abs(_silu_as_thunder_writes_it(fd, c)), dims=[1]))


def broadcast_product_sum(fd):
    """sum_k x[i,k] * b[i,j]: N*K*J multiply-adds in one reduction kernel."""
    reduction_broadcast_ref(fd)


def softmax(fd):
    x = _tensor(fd, 2)
    shape = fd.ops.shape(x)
    m = fd.ops.broadcast_in_dim(fd.ops.max(x, dims=[1]), shape=shape, broadcast_dims=[0])
    e = fd.ops.exp(fd.ops.sub(x, m))
    s = fd.ops.broadcast_in_dim(fd.ops.sum(e, dims=[1]), shape=shape, broadcast_dims=[0])
    fd.add_output(fd.ops.div(e, s))


def layer_norm(fd):
    x = _tensor(fd, 2)
    shape = fd.ops.shape(x)
    var, mean = fd.ops.var_mean(x, dims=[1], correction=0)
    rstd = fd.ops.rsqrt(fd.ops.add(var, fd.define_scalar(1e-5, dtype=DataType.Double)))
    y = fd.ops.mul(
        fd.ops.sub(x, fd.ops.broadcast_in_dim(mean, shape=shape, broadcast_dims=[0])),
        fd.ops.broadcast_in_dim(rstd, shape=shape, broadcast_dims=[0]),
    )
    fd.add_output(y)


def _sizes_1d():
    return [(1 << p,) for p in range(12, 29, 2)]


def _sizes_2d(columns):
    return [((1 << p) // columns, columns) for p in range(14, 29, 2) if (1 << p) >= columns]


def microbenchmarks():
    """(name, definition, shapes of each input)."""
    out = []
    for (n,) in _sizes_1d():
        out.append(("pointwise", pointwise, [(n,), (n,)]))
        out.append(("full_sum", full_sum, [(n,)]))
    for (n,) in [(1 << p,) for p in (16, 20, 22, 24, 26)]:
        out.append(("mul_add_chain", mul_add_chain, [(n,)]))
    for columns in (1024, 8192):
        for r, c in _sizes_2d(columns):
            out.append((f"inner_sum_c{columns}", inner_sum, [(r, c)]))
            out.append((f"outer_sum_c{columns}", outer_sum, [(r, c)]))
            out.append((f"softmax_c{columns}", softmax, [(r, c)]))
            out.append((f"layer_norm_c{columns}", layer_norm, [(r, c)]))
    for n in (64, 128, 256, 512, 768, 1024):
        out.append(("broadcast_product_sum", broadcast_product_sum, [(n, n), (n, n)]))
    for r, c in _sizes_2d(4096):  # full reductions of 2-D tensors: nvFuser's grid reductions
        out.append(("full_sum_2d_c4096", full_sum_2d, [(r, c)]))
        out.append(("silu_amax_c4096", silu_amax, [(r, c), (r, c)]))
        out.append(("silu_row_amax_c4096", silu_row_amax, [(r, c), (r, c)]))
        out.append(("silu_col_amax_c4096", silu_col_amax, [(r, c), (r, c)]))
    for r, c in [(1 << p, 4096) for p in (10, 12, 14, 15)]:  # compute-bound: bfloat16 inputs
        out.append(("silu_amax_c4096_bf16", _silu_amax_bf16([0, 1]), [(r, c)]))
        out.append(("silu_row_amax_c4096_bf16", _silu_amax_bf16([1]), [(r, c)]))
        out.append(("silu_col_amax_c4096_bf16", _silu_amax_bf16([0]), [(r, c)]))
        out.append(("silu_centered_amax_c4096_bf16", silu_centered_amax_bf16, [(r, c)]))
    return out


def measure(runs: int, only=None) -> list[dict]:
    import torch
    from gpu_timing import profile_kernels, time_us

    from eqsat.lowering.nvfuser import to_nvfuser

    records = []
    gen = torch.Generator(device="cuda").manual_seed(0)
    for name, fn, shapes in microbenchmarks():
        if only and not any(name.startswith(o) for o in only):
            continue
        dtype = _input_dtype(name)
        inputs = [torch.randn(*s, device="cuda", generator=gen).to(dtype) for s in shapes]
        fd = to_nvfuser(eqsat.from_function(fn))
        t = time_us(lambda: fd.execute(inputs), runs, max_seconds=1.0)
        kernels = profile_kernels(lambda: fd.execute(inputs), repeats=5)
        predicted = _predicted(fn, shapes, dtype)
        records.append(
            {
                "name": name,
                "shapes": shapes,
                "execute_us": t,
                "kernels": [{"name": k.name, "us": k.us} for k in kernels],
                "predicted": predicted,
            }
        )
        print(
            f"  {name:24s} {'x'.join(map(str, shapes[0])):>14s} {t:9.1f} us, "
            f"{len(kernels)} kernel(s) {sum(k.us for k in kernels):9.1f} us, predicted {len(predicted)}",
            flush=True,
        )
    return records


def _input_dtype(name: str):
    import torch

    return torch.bfloat16 if name.endswith(BF16_SUFFIX) else torch.float32


def _predicted(fn, shapes, dtype) -> list[dict]:
    import torch

    est = eqsat.estimate_fusion(
        eqsat.from_function(fn), [torch.empty(*s, device="meta", dtype=dtype) for s in shapes]
    )
    return [{"kind": k.kind, "bytes": k.bytes, "flops": k.flops} for k in est.kernels]


def repredict(records: list[dict]) -> None:
    """Recorded measurements with the current cost model's predictions (the kernels' kinds,
    bytes and flops), so a changed model is refitted without measuring again."""
    defs = {(name, tuple(map(tuple, shapes))): fn for name, fn, shapes in microbenchmarks()}
    for r in records:
        fn = defs.get((r["name"], tuple(map(tuple, r["shapes"]))))
        if fn is not None:
            r["predicted"] = _predicted(fn, r["shapes"], _input_dtype(r["name"]))


def _kernel_time(launch, bw, gf, nbytes, flops):
    return launch + np.maximum(nbytes / (bw * 1e3), flops / (gf * 1e3))


def fit_kind(samples: list[tuple[float, float, float]]) -> tuple[dict, dict]:
    """Constants from (bytes, flops, us) samples: the launch cost is the median time of the
    small kernels (under 1 MB moved); bandwidth and throughput minimise the squared relative
    error over the kernels of 10 us or more (a log-spaced grid search, refined twice): the
    mid-size ones, slow for want of parallelism rather than of bytes or flops, would
    otherwise drag the throughput down for all."""
    b = np.array([s[0] for s in samples], dtype=float)
    f = np.array([s[1] for s in samples], dtype=float)
    t = np.array([s[2] for s in samples], dtype=float)
    small = t[b < 1e6]
    launch = float(np.median(small)) if len(small) else 2.0
    big = t >= 10.0
    if big.sum() < 2:
        big = t >= np.median(t)
    bws, gfs = np.geomspace(500, 8000, 80), np.geomspace(500, 200000, 80)
    best = None
    for _ in range(3):
        B, G = np.meshgrid(bws, gfs, indexing="ij")
        pred = _kernel_time(launch, B[..., None], G[..., None], b[big], f[big])
        err = ((pred / t[big] - 1.0) ** 2).sum(-1)
        i = np.unravel_index(np.argmin(err), err.shape)
        best = (launch, float(B[i]), float(G[i]))
        bws = np.geomspace(best[1] / 1.2, best[1] * 1.2, 31)
        gfs = np.geomspace(best[2] / 1.5, best[2] * 1.5, 31)
    rel = np.abs(_kernel_time(*best, b, f) / t - 1.0)
    consts = {
        "launch_us": round(best[0], 3),
        "bandwidth_GBps": round(best[1], 1),
        "gflops": round(best[2], 1),
    }
    quality = {
        "samples": len(samples),
        "fitted_on": int(big.sum()),
        "median_rel_error": round(float(np.median(rel)), 4),
        "median_rel_error_fitted": round(float(np.median(rel[big])), 4),
        "max_rel_error": round(float(rel.max()), 4),
    }
    return consts, quality


def grid_throughput(grid: dict, quality: dict, reduction: dict, samples) -> tuple[dict, dict]:
    """A grid reduction's arithmetic throughput where no sample was compute-bound (full sums
    are not): the reduction's (the same code, its blocks combining through global memory once
    at the end), rather than whatever value the bandwidth-bound samples leave unconstrained.
    Measured: a compute-bound FP8 amax of silu over [4, 2048, 5632] bf16 as one grid reduction
    ran as fast as the first stage of its split, a reduction keeping 8192 rows (H100, nvFuser
    0.2.35: 96.3 vs 96.6 us). A sample is compute-bound where the reduction's constants say so."""
    compute_bound = any(f / reduction["gflops"] > b / reduction["bandwidth_GBps"] for b, f, _ in samples)
    if compute_bound:
        return grid, quality
    grid = {**grid, "gflops": reduction["gflops"]}
    b, f, t = (np.array([s[i] for s in samples], dtype=float) for i in range(3))
    rel = np.abs(_kernel_time(grid["launch_us"], grid["bandwidth_GBps"], grid["gflops"], b, f) / t - 1.0)
    return grid, {
        **quality,
        "gflops": "the reduction's (no compute-bound sample)",
        "median_rel_error": round(float(np.median(rel)), 4),
        "max_rel_error": round(float(rel.max()), 4),
    }


def fit(records: list[dict], device: str) -> tuple[dict, dict]:
    """A profile (as a dict) and a fit report from microbenchmark records."""
    per_kind: dict[str, list] = {k: [] for k in KernelKind}
    host = []
    mismatched = []
    for r in records:
        nvf = [k for k in r["kernels"] if k["name"].startswith("nvf")] or r["kernels"]
        if len(nvf) != len(r["predicted"]):
            mismatched.append(
                f"{r['name']} {r['shapes'][0]}: predicted {len(r['predicted'])} kernels, "
                f"nvFuser ran {len(nvf)}"
            )
            continue
        device_us = sum(k["us"] for k in nvf)
        if len(nvf) == 1:
            p = r["predicted"][0]
            per_kind[p["kind"]].append((p["bytes"], p["flops"], nvf[0]["us"]))
        if device_us < 15.0:
            host.append(r["execute_us"] - device_us)
    default = load_profile()
    kinds, quality = {}, {}
    for kind in KernelKind:
        if len(per_kind[kind]) >= 3:
            kinds[kind], quality[kind] = fit_kind(per_kind[kind])
            if kind == "grid_reduction" and "reduction" in kinds:
                kinds[kind], quality[kind] = grid_throughput(
                    kinds[kind], quality[kind], kinds["reduction"], per_kind[kind]
                )
        else:
            c = default.kinds[kind]
            kinds[kind] = {"launch_us": c.launch_us, "bandwidth_GBps": c.bandwidth_GBps, "gflops": c.gflops}
            quality[kind] = {"samples": len(per_kind[kind]), "note": "too few samples; kept the default"}
        for field in HAND_FITTED:  # the microbenchmarks draw nothing and have no inner-outer kernel
            if getattr(default.kinds[kind], field):
                kinds[kind][field] = getattr(default.kinds[kind], field)
    host_us = round(statistics.median(host), 2) if host else default.host_us
    profile = {
        "name": f"{device}, calibrated by bench/calibrate.py",
        "source": f"bench/calibrate.py on {device}, {time.strftime('%Y-%m-%d')}: "
        f"{len(records)} microbenchmarks, {len(mismatched)} left out of the fit "
        "(kernel count differs from the prediction); "
        f"{', '.join(HAND_FITTED)} as the default profile's",
        "host_us": host_us,
        "kinds": kinds,
        "special_function_weight": default.special_function_weight,
        "fit": quality,
    }
    # end-to-end check: the whole model with the fitted profile against each execute time
    prof = load_profile(profile)
    rel = []
    for r in records:
        pred = prof.host_us + sum(
            _kernel_time(
                prof.kinds[p["kind"]].launch_us,
                prof.kinds[p["kind"]].bandwidth_GBps,
                prof.kinds[p["kind"]].gflops,
                p["bytes"],
                p["flops"],
            )
            for p in r["predicted"]
        )
        rel.append(abs(pred / r["execute_us"] - 1.0))
    report = {
        "per_kind": quality,
        "host_us_samples": len(host),
        "execute_time_rel_error": {
            "median": round(float(np.median(rel)), 4),
            "p90": round(float(np.quantile(rel, 0.9)), 4),
            "max": round(float(max(rel)), 4),
        },
        "left_out": mismatched,
    }
    profile["fit"] = {**quality, "execute_time_rel_error": report["execute_time_rel_error"]}
    return profile, report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", required=True, help="profile JSON to write")
    parser.add_argument("--raw", help="also write the raw measurements here")
    parser.add_argument(
        "--fit",
        metavar="RAW",
        nargs="+",
        help="fit recorded measurements (several files: their records together) instead of measuring",
    )
    parser.add_argument(
        "--only", metavar="NAME", nargs="+", help="measure only the microbenchmarks whose name starts so"
    )
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args(argv)
    if args.fit:
        raws = []
        for path in args.fit:
            with open(path) as f:
                raws.append(json.load(f))
        devices = {r["device"] for r in raws}
        if len(devices) > 1:
            parser.error(f"--fit: the records come from different GPUs ({', '.join(sorted(devices))})")
        raw = {**raws[0], "records": [rec for r in raws for rec in r["records"]]}
        repredict(raw["records"])
    else:
        import torch

        if not torch.cuda.is_available():
            print(
                "calibrate.py measures on a CUDA GPU with nvFuser; none is available here "
                "(use --fit RAW to refit recorded measurements)",
                file=sys.stderr,
            )
            return 2
        device = torch.cuda.get_device_name(0)
        print(f"measuring on {device}")
        raw = {"device": device, "host": platform.node(), "records": measure(args.runs, args.only)}
        if args.raw:
            with open(args.raw, "w") as f:
                json.dump(raw, f, indent=1)
    profile, report = fit(raw["records"], raw["device"])
    with open(args.out, "w") as f:
        json.dump(profile, f, indent=2)
        f.write("\n")
    print(f"\nwrote {args.out}: host {profile['host_us']} us")
    for kind in KernelKind:
        print(f"  {kind:14s} {profile['kinds'][kind]}  fit {report['per_kind'][kind]}")
    print(f"  execute time, relative error over all microbenchmarks: {report['execute_time_rel_error']}")
    for line in report["left_out"]:
        print(f"  left out: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
