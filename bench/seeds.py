"""The seed fusions on a GPU, side by side: nvFuser on the definition as given, on eqsat's
output and on the hand rewrite; torch eager; torch.compile. Time (CUDA events, warm-up, many
runs): ``us`` at steady state (calls issued back to back, the host's launch cost overlapped
with the GPU work before it; the speedups are of this), ``latency_us`` (one call at a time,
host cost inside) and ``device_us`` (the kernels' own time, torch.profiler: what is left where
a call is bound by nvFuser's host cost); kernels (torch.profiler); achieved bandwidth against
a measured copy.

    python bench/seeds.py [--runs 100] [--json out.json] [--png speedups.png] [--quick]
                          [--only SEED[:SHAPE] ...]

``--only layernorm_amax:65536x1024`` times that seed at that shape alone (a seed alone: all its shapes).
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
from gpu_timing import copy_bandwidth, kernel_count_and_time, throughput_us, time_us

import eqsat
from eqsat.lowering.nvfuser import to_nvfuser
from eqsat.testing.seeds import SEEDS

SHAPES = {
    "reduction_broadcast": [(1024, 1024, 1024), (4096, 2048, 1024)],
    "layernorm_amax": [(16384, 4096), (8192, 8192), (65536, 1024)],
    "rmsnorm_fp8": [(16384, 4096), (8192, 8192), (65536, 1024)],
}


def chosen_shapes(only) -> dict[str, list[tuple]]:
    """Seed -> the shapes to time: all (``only`` None), or those ``only`` names."""
    if not only:
        return SHAPES
    chosen: dict[str, list[tuple]] = {}
    for item in only:
        name, _, shape = item.partition(":")
        if name not in SHAPES:
            raise ValueError(f"--only {item}: no seed {name!r}; seeds: {', '.join(SHAPES)}")
        shapes = SHAPES[name] if not shape else [s for s in SHAPES[name] if "x".join(map(str, s)) == shape]
        if not shapes:
            raise ValueError(
                f"--only {item}: {name} runs at "
                f"{', '.join('x'.join(map(str, s)) for s in SHAPES[name])}, not {shape}"
            )
        chosen.setdefault(name, []).extend(x for x in shapes if x not in chosen.get(name, []))
    return chosen


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--json")
    parser.add_argument("--png", help="plot of speedups over nvFuser as given (needs matplotlib)")
    parser.add_argument("--quick", action="store_true", help="skip torch.compile")
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="SEED[:SHAPE]",
        help=f"these seeds ({', '.join(SEEDS)}), or one shape of a seed (layernorm_amax:65536x1024)",
    )
    args = parser.parse_args(argv)
    try:
        chosen = chosen_shapes(args.only)
    except ValueError as err:
        parser.error(str(err))
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s")
    rows = []
    for name, seed in SEEDS.items():
        for shape in chosen.get(name, ()):
            inputs = seed.make_inputs(*shape, device="cuda")
            given = to_nvfuser(eqsat.from_function(seed.model_ref))
            hand = to_nvfuser(eqsat.from_function(seed.model))
            opt = eqsat.optimize_fusion(seed.model_ref, inputs)
            ours = opt.to_nvfuser()
            runs = {
                "nvFuser as given": lambda: given.execute(inputs),
                "nvFuser + eqsat": lambda: ours.execute(inputs),
                "nvFuser hand-rewritten": lambda: hand.execute(inputs),
                "torch eager": lambda: seed.torch_reference(*inputs),
            }
            if not args.quick:
                compiled = torch.compile(seed.torch_reference)
                runs["torch.compile"] = lambda: compiled(*inputs)
            nbytes = sum(t.numel() * t.element_size() for t in inputs)
            outs = seed.torch_reference(*inputs)
            outs = outs if isinstance(outs, list) else [outs]
            nbytes += sum(t.numel() * t.element_size() for t in outs)
            print(
                f"\n{name} {'x'.join(map(str, shape))}  (predicted {opt.report.before.time_us:.0f} -> "
                f"{opt.report.after.time_us:.0f} us, {len(opt.report.before.kernels)} -> "
                f"{len(opt.report.after.kernels)} kernels)"
            )
            for label, fn in runs.items():
                t = throughput_us(fn, args.runs)
                latency = time_us(fn, args.runs)
                k, device = kernel_count_and_time(fn)
                achieved = nbytes / (t * 1e-6)
                print(
                    f"  {label:24s} {t:9.1f} us ({latency:7.1f} us latency, {device:7.1f} us on the GPU)  "
                    f"{k:3d} kernels  {achieved / bw * 100:5.1f}% of copy bandwidth"
                )
                rows.append(
                    {
                        "seed": name,
                        "shape": shape,
                        "run": label,
                        "us": t,
                        "latency_us": latency,
                        "device_us": device,
                        "kernels": k,
                        "bandwidth_fraction": achieved / bw,
                    }
                )
    print("\n" + table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"device": torch.cuda.get_device_name(0), "copy_bandwidth": bw, "rows": rows}, f, indent=1
            )
    if args.png:
        plot(rows, args.png)
    return 0


def _cases(rows):
    cases: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        cases.setdefault((r["seed"], tuple(r["shape"])), {})[r["run"]] = r
    return cases


def table(rows) -> str:
    """Speedup of each run over nvFuser as given, and eqsat against the hand rewrite."""
    lines = [
        f"{'seed':20s} {'shape':>16s}  " + "  ".join(f"{n:>22s}" for n in _run_names(rows)) + "  eqsat/hand"
    ]
    for (seed, shape), runs in _cases(rows).items():
        base = runs["nvFuser as given"]["us"]
        cells = [
            f"{runs[n]['us']:9.1f} us {base / runs[n]['us']:6.2f}x" if n in runs else f"{'-':>22s}"
            for n in _run_names(rows)
        ]
        ratio = runs["nvFuser + eqsat"]["us"] / runs["nvFuser hand-rewritten"]["us"]
        lines.append(f"{seed:20s} {'x'.join(map(str, shape)):>16s}  " + "  ".join(cells) + f"  {ratio:10.3f}")
    lines.append("on the GPU alone (kernel time, no host cost): eqsat's speedup over as given, eqsat/hand")
    for (seed, shape), runs in _cases(rows).items():
        if all(
            "device_us" in runs.get(n, {})
            for n in ("nvFuser as given", "nvFuser + eqsat", "nvFuser hand-rewritten")
        ):
            ours = runs["nvFuser + eqsat"]["device_us"]
            lines.append(
                f"{seed:20s} {'x'.join(map(str, shape)):>16s}  "
                f"{runs['nvFuser as given']['device_us'] / ours:8.2f}x  "
                f"{ours / runs['nvFuser hand-rewritten']['device_us']:8.3f}"
            )
    return "\n".join(lines)


def _run_names(rows):
    names = []
    for r in rows:
        if r["run"] not in names:
            names.append(r["run"])
    return names


def plot(rows, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = _cases(rows)
    names = [n for n in _run_names(rows) if n != "nvFuser as given"]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / len(names)
    for j, name in enumerate(names):
        xs, ys = [], []
        for i, runs in enumerate(cases.values()):
            if name in runs:
                xs.append(i + j * width)
                ys.append(runs["nvFuser as given"]["us"] / runs[name]["us"])
        ax.bar(xs, ys, width, label=name)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(cases))])
    ax.set_xticklabels([f"{s}\n{'x'.join(map(str, sh))}" for s, sh in cases], fontsize=8)
    ax.set_ylabel("speedup over nvFuser as given")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
