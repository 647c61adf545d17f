"""Optimizer time against fusion size: generated fusions of a few dozen to tens of thousands of
ops, optimized under the default limits and deadline (or ``--deadline``); each result is checked
against the input through the torch executor on small tensors. Prints ops, e-nodes, why
saturation stopped, the seconds spent reading (ingestion and type inference: outside the
deadline) and optimizing (what the deadline bounds), the latter by phase, predicted kernels
before and after, and which stage the deadline cut, if any.

    python bench/large.py [--sizes 100,300,1000,3000] [--kinds chain,wide] [--deadline S|none]
                          [--json out.json]

The fusions are eqsat.testing.large_fusions.LARGE_FUSIONS (chain, elementwise, wide, distributed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import eqsat
from eqsat.reference.compare import mismatch
from eqsat.testing.large_fusions import LARGE_FUSIONS


def _deadline(text: str) -> dict:
    """optimize_fusion's options for ``--deadline``."""
    return {"deadline_s": None if text == "none" else float(text)}


def measure(kind: str, size: int, options: dict) -> dict:
    """Optimize one generated fusion and check the result against it on small inputs."""
    definition, make_inputs = LARGE_FUSIONS[kind](size)
    start = time.perf_counter()
    fusion = eqsat.ingest(definition)
    fusion.types  # reading: ingestion and type inference
    read = time.perf_counter() - start
    inputs = make_inputs(4096, 4096)
    start = time.perf_counter()
    opt = eqsat.optimize_fusion(fusion, inputs, **options)
    total = time.perf_counter() - start
    r = opt.report
    small = make_inputs(8, 16)
    want = eqsat.run_fusion(fusion, small)
    got = eqsat.run_fusion(opt.fusion, small)
    problems = [p for p in (mismatch(g, w) for g, w in zip(got, want, strict=True)) if p]
    return dict(
        kind=kind,
        ops=size,
        ir_nodes=len(fusion.nodes),
        e_nodes=r.saturation.e_nodes if r.saturation.ran else "-",
        stop=r.saturation.stop,
        read_s=round(read, 3),
        optimize_s=round(total, 3),
        phases=r.phases,
        kernels_before=len(r.before.kernels),
        kernels_after=len(r.after.kernels),
        changed=r.changed,
        ok=not problems,
        problems=problems,
        notes=r.notes,
        cut=_cut_stage(r.notes),
    )


def _cut_stage(notes: list[str]) -> str:
    """The stage a "the deadline (...) cut STAGE: ..." note names, or ""."""
    return next((n.split(" cut ", 1)[1].split(":")[0] for n in notes if n.startswith("the deadline")), "")


PHASES = ("encode", "saturate", "extract", "lower")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100,300,1000,3000")
    parser.add_argument("--kinds", default=",".join(LARGE_FUSIONS), help="which fusions (default: all)")
    parser.add_argument(
        "--deadline",
        type=_deadline,
        default={},
        help="optimize_fusion's deadline_s (default: its default; none: no deadline)",
    )
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    options = args.deadline
    eqsat.optimize_fusion(LARGE_FUSIONS["chain"](10)[0])  # compiles the rules: not timed
    rows = []
    print(
        f"{'fusion':>12s} {'ops':>6s} {'e-nodes':>8s} {'stop':>16s} {'read s':>6s} {'opt s':>7s} "
        + " ".join(f"{p[:7]:>7s}" for p in PHASES)
        + f" {'kernels':>9s}  ok  deadline cut"
    )
    for kind in args.kinds.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            row = measure(kind, size, options)
            rows.append(row)
            print(
                f"{kind:>12s} {size:6d} {row['e_nodes']!s:>8} {row['stop']:>16s} {row['read_s']:6.2f} "
                f"{row['optimize_s']:7.2f} "
                + " ".join(f"{row['phases'].get(p, 0.0):7.2f}" for p in PHASES)
                + f" {row['kernels_before']:4d}->{row['kernels_after']:<4d} "
                f"{'yes' if row['ok'] else row['problems']}  {row['cut']}",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
