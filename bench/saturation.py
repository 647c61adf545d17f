"""Saturate every corpus fusion (and the two seeds) under the default limits; print per-file
e-graph size, iterations, why it stopped, the time it took, and the rules that fired.

    python bench/saturation.py [--corpus ../shared/corpus] [--json out.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import statistics
import sys
import time

import eqsat
from eqsat.egraph.explore import explore
from eqsat.testing.seeds import SEEDS


def main(argv=None) -> int:
    here = pathlib.Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpus", default=str(here.parent.parent / "shared" / "corpus"))
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    items = [(f"seed:{n}", s.model_ref) for n, s in SEEDS.items()]
    items += [(p.name, p) for p in sorted(pathlib.Path(args.corpus).glob("*.py"))]
    explore(items[0][1])  # the first call compiles the rules: not timed
    rows, totals = [], collections.Counter()
    print(f"{'fusion':52s} {'ops':>4s} {'nodes':>6s} {'iter':>4s} {'stop':>15s} {'ms':>7s}  rules fired")
    for name, definition in items:
        fusion = eqsat.ingest(definition)
        start = time.perf_counter()
        result = explore(fusion)
        ms = (time.perf_counter() - start) * 1e3
        sat = result.saturation
        totals.update(sat.fired)
        top = ", ".join(f"{k}×{v}" for k, v in sorted(sat.fired.items(), key=lambda kv: -kv[1])[:4])
        print(
            f"{name:52s} {len(fusion.nodes):4d} {sat.nodes:6d} {sat.iterations:4d} {sat.stop:>15s} "
            f"{ms:7.1f}  {top}"
        )
        rows.append(
            {
                "fusion": name,
                "ops": len(fusion.nodes),
                "nodes": sat.nodes,
                "iterations": sat.iterations,
                "stop": sat.stop,
                "ms": ms,
                "fired": sat.fired,
            }
        )
    times = [r["ms"] for r in rows]
    print(
        f"\n{len(rows)} fusions: median {statistics.median(times):.1f} ms, max {max(times):.1f} ms "
        f"({max(rows, key=lambda r: r['ms'])['fusion']})"
    )
    print("stops:", dict(collections.Counter(r["stop"] for r in rows)))
    print("rule matches over all fusions:")
    for rule, n in totals.most_common():
        print(f"  {rule:45s} {n}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
