"""The two seed fusions on a GPU, side by side: nvFuser on the definition as given, on eqsat's
output and on the hand rewrite; torch eager; torch.compile. Time (CUDA events, warm-up, many
runs), kernels (torch.profiler), and achieved bandwidth against a measured copy.

    python bench/seeds.py [--runs 100] [--json out.json] [--quick]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch

import eqsat
from eqsat.lowering.nvfuser import to_nvfuser
from eqsat.seeds import SEEDS

SHAPES = {"reduction_broadcast": [(1024, 1024, 1024), (4096, 2048, 1024)],
          "layernorm_amax": [(16384, 4096), (8192, 8192), (65536, 1024)]}


def time_us(fn, runs: int) -> float:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3)
    return statistics.median(samples)


def kernels(fn) -> int:
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    nvf = [n for n in names if n.startswith("nvf")]
    return len(nvf) if nvf else len(names)


def copy_bandwidth() -> float:
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    t = time_us(lambda: y.copy_(x), 20)
    return 2 * x.numel() / (t * 1e-6)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--json")
    parser.add_argument("--quick", action="store_true", help="skip torch.compile")
    args = parser.parse_args(argv)
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s")
    rows = []
    for name, seed in SEEDS.items():
        for shape in SHAPES[name]:
            inputs = seed.make_inputs(*shape, device="cuda")
            given = to_nvfuser(eqsat.from_function(seed.model_ref))
            hand = to_nvfuser(eqsat.from_function(seed.model))
            opt = eqsat.optimize_fusion(seed.model_ref, inputs)
            ours = opt.to_nvfuser()
            runs = {"nvFuser as given": lambda: given.execute(inputs),
                    "nvFuser + eqsat": lambda: ours.execute(inputs),
                    "nvFuser hand-rewritten": lambda: hand.execute(inputs),
                    "torch eager": lambda: seed.torch_reference(*inputs)}
            if not args.quick:
                compiled = torch.compile(seed.torch_reference)
                runs["torch.compile"] = lambda: compiled(*inputs)
            nbytes = sum(t.numel() * t.element_size() for t in inputs)
            outs = seed.torch_reference(*inputs)
            outs = outs if isinstance(outs, list) else [outs]
            nbytes += sum(t.numel() * t.element_size() for t in outs)
            print(f"\n{name} {'x'.join(map(str, shape))}  (predicted {opt.report.before.time_us:.0f} -> "
                  f"{opt.report.after.time_us:.0f} us, {len(opt.report.before.kernels)} -> "
                  f"{len(opt.report.after.kernels)} kernels)")
            for label, fn in runs.items():
                t = time_us(fn, args.runs)
                k = kernels(fn)
                achieved = nbytes / (t * 1e-6)
                print(f"  {label:24s} {t:9.1f} us  {k:3d} kernels  {achieved / bw * 100:5.1f}% of copy bandwidth")
                rows.append({"seed": name, "shape": shape, "run": label, "us": t, "kernels": k,
                             "bandwidth_fraction": achieved / bw})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"copy_bandwidth": bw, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
