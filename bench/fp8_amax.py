"""The FP8 amax families (issue 17, ``eqsat.testing.fp8_amax``) on a GPU, side by side in one
run: nvFuser on the definition as given, on eqsat's output and on the split written by hand;
torch eager; torch.compile. Per run: ``us`` at steady state (calls issued back to back; the
speedups are of this), ``latency_us`` (one call at a time, host cost inside), ``device_us``
(the kernels' own time, torch.profiler), the kernels, and whether the outputs agree with
torch eager (dtype tolerance). The table ends with eqsat / hand split at steady state; the
target (H200, 16384x4096 bf16): within 1.05x for rmsnorm and swiglu. ``--verify`` adds a row
of eqsat with ``verify="gpu"`` (a fresh cache: the GPU times the candidates), with the seconds
verification took and the candidate kept; the target then also reads that row.

    python bench/fp8_amax.py [--families rmsnorm,swiglu] [--shape 16384x4096]
                             [--amax-of scaled|unscaled|both] [--min-gain F] [--runs 100] [--quick] [--verify]
                             [--json out.json]
"""

from __future__ import annotations

import argparse
import sys
import tempfile

import torch
from gpu_timing import finish, timed_run

import eqsat
from eqsat.lowering.nvfuser import to_nvfuser
from eqsat.testing.fp8_amax import AMAX_FAMILIES, DEMO_SHAPE, definition, make_inputs, torch_reference

TARGET, TARGETED = 1.05, ("rmsnorm", "swiglu")  # eqsat / hand split, at steady state
GIVEN, OURS, HAND = "nvFuser as given", "nvFuser + eqsat", "nvFuser hand split"
VERIFIED = "nvFuser + eqsat (verify)"


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--families",
        default=",".join(AMAX_FAMILIES),
        help=f"comma-separated, of {', '.join(AMAX_FAMILIES)} (default: all)",
    )
    parser.add_argument("--shape", default="x".join(map(str, DEMO_SHAPE)), help="N x H (default %(default)s)")
    parser.add_argument(
        "--amax-of",
        choices=["scaled", "unscaled", "both"],
        default="scaled",
        help="the amax of |y * s| (default), of |y| (delayed scaling), or both",
    )
    parser.add_argument(
        "--min-gain",
        type=float,
        help="optimize_fusion's min_gain (default: the profile's margin, the cost model's error)",
    )
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="skip torch.compile")
    parser.add_argument("--verify", action="store_true", help="add eqsat with verify='gpu' (timed afresh)")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    args.families = [f for f in args.families.split(",") if f]
    unknown = [f for f in args.families if f not in AMAX_FAMILIES]
    if unknown:
        parser.error(f"unknown families {unknown}; known: {', '.join(AMAX_FAMILIES)}")
    args.shape = tuple(int(n) for n in args.shape.lower().split("x"))
    return args


def measure(
    family: str, scaled: bool, shape, runs: int, quick: bool, min_gain=None, verify: bool = False
) -> list[dict]:
    """The rows of one family and form at ``shape``: one per run."""
    inputs = make_inputs(family, *shape, device="cuda")
    as_given = definition(family, scaled_amax=scaled)
    opt = eqsat.optimize_fusion(as_given, inputs, min_gain=min_gain)
    fds = {
        GIVEN: to_nvfuser(eqsat.from_function(as_given)),
        OURS: opt.to_nvfuser(),
        HAND: to_nvfuser(eqsat.from_function(definition(family, split=True, scaled_amax=scaled))),
    }
    extra = {}
    if verify:
        with tempfile.TemporaryDirectory() as cache:
            checked = eqsat.optimize_fusion(as_given, inputs, verify="gpu", cache_dir=cache)
        v = checked.report.verification
        fds[VERIFIED] = checked.to_nvfuser()
        extra[VERIFIED] = {
            "verify_s": v.seconds if v else 0.0,
            "kept": v.kept if v else -1,
            "verified_us": [m.measured_us for m in v.measurements] if v else [],
            "rules": checked.report.rules,
        }
    reference = torch_reference(family, scaled_amax=scaled)
    calls = {label: (lambda fd=fd: fd.execute(inputs)) for label, fd in fds.items()}
    calls["torch eager"] = lambda: reference(*inputs)
    if not quick:
        compiled = torch.compile(reference)
        calls["torch.compile"] = lambda: compiled(*inputs)
    want = reference(*inputs)
    case = f"{family} amax of |{'y*s' if scaled else 'y'}|"
    b, a = opt.report.before, opt.report.after
    print(
        f"\n{case} {'x'.join(map(str, shape))}  (eqsat predicts {b.time_us:.0f} -> {a.time_us:.0f} us, "
        f"{len(b.kernels)} -> {len(a.kernels)} kernels; rules {', '.join(opt.report.rules) or 'none'})"
    )
    rows = []
    for label, fn in calls.items():
        rows.append(
            {
                "family": family,
                "amax_of": "y*s" if scaled else "y",
                "shape": list(shape),
                "run": label,
                **timed_run(label, fn, want, runs),
                "predicted_us": {"before": b.time_us, "after": a.time_us},
                **extra.get(label, {}),
            }
        )
    return rows


def table(rows) -> str:
    """Per case: each run's steady-state time and speedup over nvFuser as given, and eqsat /
    hand split at steady state and on the GPU alone (the target where it applies)."""
    cases: dict[tuple, dict] = {}
    for r in rows:
        cases.setdefault((r["family"], r["amax_of"], tuple(r["shape"])), {})[r["run"]] = r
    names = list(dict.fromkeys(r["run"] for r in rows))
    lines = [
        f"{'family':10s} {'amax':4s} {'shape':>10s}  "
        + "  ".join(f"{n:>20s}" for n in names)
        + "  eqsat/hand  (GPU alone)"
    ]
    for (family, amax_of, shape), runs in cases.items():
        base = runs[GIVEN]["us"]
        cells = [
            f"{runs[n]['us']:8.1f} us {base / runs[n]['us']:5.2f}x" if n in runs else f"{'-':>20s}"
            for n in names
        ]
        for ours in (OURS, VERIFIED):
            if ours not in runs:
                continue
            ratio = runs[ours]["us"] / runs[HAND]["us"]
            verdict = (
                ""
                if family not in TARGETED
                else "  target met"
                if ratio <= TARGET
                else f"  target {TARGET}x MISSED"
            )
            lines.append(
                f"{family:10s} {amax_of:4s} {'x'.join(map(str, shape)):>10s}  "
                + "  ".join(cells)
                + f"  {ratio:10.3f}  ({runs[ours]['device_us'] / runs[HAND]['device_us']:.3f})"
                f"{verdict}{' (verify)' if ours == VERIFIED else ''}"
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("bench/fp8_amax.py needs a CUDA GPU and nvFuser", file=sys.stderr)
        return 2
    forms = {"scaled": [True], "unscaled": [False], "both": [True, False]}[args.amax_of]
    rows = [
        r
        for family in args.families
        for scaled in forms
        for r in measure(family, scaled, args.shape, args.runs, args.quick, args.min_gain, args.verify)
    ]
    print("\n" + table(rows))
    return finish(args, rows)


if __name__ == "__main__":
    sys.exit(main())
