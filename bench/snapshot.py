"""Everything eqsat decides, written down so that two versions can be compared byte for byte: for
every fusion of both corpora, the seeds and N random fusions, the optimized definition, whether
it changed, the rules credited and the cost model's predictions (kernels, bytes, time) before and
after. A refactor that changes no behaviour leaves the file identical.

    python bench/snapshot.py OUT.json [--fuzz 2000] [--corpus DIR ...]
    cmp A.json B.json            # or: diff <(python -m json.tool A.json) <(python -m json.tool B.json)

Optimized with no deadline (what work limits decide, the same on any machine); the seconds it
took are left out.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import eqsat
from eqsat.testing.choosers import RandomChooser
from eqsat.testing.random_fusion import random_fusion
from eqsat.testing.seeds import SEEDS

SHARED = pathlib.Path(__file__).resolve().parent.parent.parent / "shared"


def _row(opt) -> dict:
    r = opt.report
    return {
        "changed": r.changed,
        "rules": r.rules,
        "estimated": r.estimated,
        "before": r.before.summary() if r.estimated else None,
        "after": r.after.summary() if r.estimated else None,
        "saturation": r.saturation.summary(),
        "search": r.search,
        "unchanged": r.unchanged,
        "rejected": [x.summary() for x in r.rejected],
        "source": opt.source,
    }


def snapshot(corpora: list[str], fuzz: int) -> dict:
    rows = {}
    for name, seed in SEEDS.items():
        rows[f"seed:{name}"] = _row(
            eqsat.optimize_fusion(
                seed.model_ref, seed.make_inputs(*seed.demo_shape, device="meta"), deadline_s=None
            )
        )
    for corpus in corpora:
        for path in sorted(pathlib.Path(corpus).glob("*.py")):
            repro = eqsat.from_file(path, device="meta")
            rows[f"{path.parent.name}/{path.name}"] = _row(
                eqsat.optimize_fusion(repro.fusion, repro.inputs, deadline_s=None)
            )
    for seed in range(fuzz):
        case = random_fusion(
            RandomChooser(seed), special=seed % 2 == 1, edges=seed % 3 == 1, mixed=seed % 4 == 3
        )
        rows[f"fuzz:{seed}"] = _row(
            eqsat.optimize_fusion(case.fusion, case.planning_inputs, min_gain=0.0, deadline_s=None)
        )
        if seed % 200 == 199:
            print(f"fuzz {seed + 1}/{fuzz}", file=sys.stderr, flush=True)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out")
    parser.add_argument("--fuzz", type=int, default=2000, help="random fusions (default 2000)")
    parser.add_argument(
        "--corpus", nargs="*", default=[str(SHARED / "corpus"), str(SHARED / "corpus_thunder")]
    )
    args = parser.parse_args(argv)
    rows = snapshot(args.corpus, args.fuzz)
    pathlib.Path(args.out).write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    print(f"{len(rows)} fusions, {sum(r['changed'] for r in rows.values())} changed -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
