"""Optimize every corpus fusion (and the seeds at the DESIGN.md shapes) with its inputs' shapes;
print predicted kernels/bytes/time before and after, and the optimizer's latency (median and
max per corpus).

    python bench/optimize_corpus.py [--corpus DIR ...] [--json out.json]

By default both corpora: ../shared/corpus and ../shared/corpus_thunder.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

import eqsat
from eqsat.testing.seeds import SEEDS


def main(argv=None) -> int:
    here = pathlib.Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__)
    shared = here.parent.parent / "shared"
    parser.add_argument(
        "--corpus", nargs="+", default=[str(shared / "corpus"), str(shared / "corpus_thunder")]
    )
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    items = [
        (f"seed:{n}", eqsat.from_function(s.model_ref), s.make_inputs(*s.demo_shape, device="meta"))
        for n, s in SEEDS.items()
    ]
    for corpus in args.corpus:
        for path in sorted(pathlib.Path(corpus).glob("*.py")):
            repro = eqsat.from_file(path, device="meta")
            items.append((f"{pathlib.Path(corpus).name}/{path.name}", repro.fusion, repro.inputs))
    eqsat.optimize_fusion(items[0][1], items[0][2])  # compiles the rules: not timed
    rows = []
    print(
        f"{'fusion':50s} {'kernels':>9s} {'MB before':>10s} {'MB after':>9s} {'us before':>10s} "
        f"{'us after':>9s} {'ms':>6s}"
    )
    for name, fusion, inputs in items:
        start = time.perf_counter()
        opt = eqsat.optimize_fusion(fusion, inputs)
        ms = (time.perf_counter() - start) * 1e3
        b, a = opt.report.before, opt.report.after
        mark = "*" if opt.report.changed else " "
        print(
            f"{name:50s} {len(b.kernels):4d}->{len(a.kernels):<3d} {b.bytes / 1e6:10.3f} "
            f"{a.bytes / 1e6:9.3f} "
            f"{b.time_us:10.1f} {a.time_us:9.1f} {ms:6.1f} {mark} {', '.join(opt.report.rules)}"
        )
        rows.append(
            {
                "fusion": name,
                "before": b.summary(),
                "after": a.summary(),
                "changed": opt.report.changed,
                "rules": opt.report.rules,
                "optimizer_ms": ms,
            }
        )
    times = [r["optimizer_ms"] for r in rows]
    worse = [r["fusion"] for r in rows if r["after"]["time_us"] > r["before"]["time_us"]]
    print(
        f"\n{len(rows)} fusions, {sum(r['changed'] for r in rows)} changed, estimated cost higher after: "
        f"{len(worse)}; optimizer median {statistics.median(times):.1f} ms, max {max(times):.1f} ms "
        f"({max(rows, key=lambda r: r['optimizer_ms'])['fusion']})"
    )
    for corpus in sorted({r["fusion"].split("/")[0] for r in rows if "/" in r["fusion"]}):
        ms = [r["optimizer_ms"] for r in rows if r["fusion"].startswith(corpus + "/")]
        print(
            f"{corpus}: {len(ms)} fusions, optimizer median {statistics.median(ms):.1f} ms, max "
            f"{max(ms):.1f} ms"
        )
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
