"""Does what eqsat returns depend on the machine's load? Optimize every corpus fusion and the
seeds, record what was decided (changed, a hash of the optimized source, where saturation
stopped, how many candidates extraction scored) and the seconds each stage took; compare two
such records.

    python bench/determinism.py record OUT.json [--deadline S|none] [--busy N] [--cli]
                                                [--corpus DIR ...] [--only SUBSTRING ...]
    python bench/determinism.py compare A.json B.json

``--busy N`` spins N busy processes while recording (six on a 2-core machine is "busy").
``--cli`` runs each file as a cold ``eqsat optimize --json`` process (the set-up of every
process included), else every fusion in this one process. The seeds are optimized in-process
only (they are functions, not files).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared"


def _spin() -> None:
    while True:
        pass


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _files(corpora: list[str], only: list[str]) -> list[pathlib.Path]:
    paths = [p for c in corpora for p in sorted(pathlib.Path(c).glob("*.py"))]
    return [p for p in paths if not only or any(o in str(p) for o in only)]


def _row_of_report(opt, seconds: float) -> dict:
    r = opt.report
    return {
        "changed": r.changed,
        "source": _sha(opt.source),
        "estimated": r.estimated,
        "stop": r.saturation.stop,
        "iterations": r.saturation.iterations,
        "e_nodes": r.saturation.e_nodes,
        "before_us": round(r.before.time_us, 3),
        "after_us": round(r.after.time_us, 3),
        "rules": r.rules,
        "seconds": round(seconds, 3),
        "phases": {k: round(v, 3) for k, v in r.phases.items()},
        "cut": [n for n in r.notes if n.startswith("the deadline")],
    }


def _in_process(files, deadline, only) -> dict:
    import eqsat
    from eqsat.testing.seeds import SEEDS

    rows = {}
    items = (
        []
        if only
        else [
            (f"seed:{n}", s.model_ref, s.make_inputs(*s.demo_shape, device="meta")) for n, s in SEEDS.items()
        ]
    )
    for path in files:
        repro = eqsat.from_file(path, device="meta")
        items.append((f"{path.parent.name}/{path.name}", repro.fusion, repro.inputs))
    for name, definition, inputs in items:
        start = time.perf_counter()
        opt = eqsat.optimize_fusion(definition, inputs, deadline_s=deadline)
        rows[name] = _row_of_report(opt, time.perf_counter() - start)
        print(
            f"{name:60s} {rows[name]['seconds']:7.3f} s {'*' if rows[name]['changed'] else ' '}", flush=True
        )
    return rows


def _cold_cli(files, deadline) -> dict:
    rows = {}
    for path in files:
        cmd = [sys.executable, "-m", "eqsat.cli", "optimize", str(path), "--json"]
        if deadline != "default":
            cmd += ["--deadline", "none" if deadline is None else str(deadline)]
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        name = f"{path.parent.name}/{path.name}"
        if done.returncode:
            rows[name] = {"error": done.stderr[-500:], "seconds": round(seconds, 3)}
        else:
            out = json.loads(done.stdout)
            rows[name] = {
                "changed": out["changed"],
                "source": _sha(out["source"]),
                "estimated": out.get("estimated"),
                "cut": out.get("cut"),
                "seconds": round(seconds, 3),
            }
        print(f"{name:60s} {seconds:7.3f} s {'*' if rows[name].get('changed') else ' '}", flush=True)
    return rows


def record(args) -> int:
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for p in spinners:
        p.start()
    try:
        files = _files(args.corpus, args.only)
        deadline = None if args.deadline == "none" else float(args.deadline) if args.deadline else None
        if args.cli:
            rows = _cold_cli(files, "default" if args.deadline is None else deadline)
        else:
            import eqsat.optimize

            rows = _in_process(
                files, eqsat.optimize.DEADLINE_S if args.deadline is None else deadline, args.only
            )
    finally:
        for p in spinners:
            p.terminate()
    pathlib.Path(args.out).write_text(
        json.dumps({"busy": args.busy, "deadline": args.deadline, "cli": args.cli, "rows": rows}, indent=1)
    )
    slowest = max(rows.items(), key=lambda kv: kv[1]["seconds"])
    print(
        f"{len(rows)} fusions, {sum(bool(r.get('changed')) for r in rows.values())} changed; slowest "
        f"{slowest[0]} {slowest[1]['seconds']:.2f} s"
    )
    return 0


def compare(args) -> int:
    a, b = (json.loads(pathlib.Path(p).read_text())["rows"] for p in (args.a, args.b))
    differ = [
        n
        for n in sorted(set(a) & set(b))
        if (a[n].get("changed"), a[n].get("source")) != (b[n].get("changed"), b[n].get("source"))
    ]
    for n in differ:
        print(
            f"{n}: {a[n].get('changed')}/{a[n].get('source')} vs {b[n].get('changed')}/{b[n].get('source')}"
            f" (cut: {a[n].get('cut')} / {b[n].get('cut')})"
        )
    print(f"{len(set(a) & set(b))} compared, {len(differ)} differ in changed or source")
    return 1 if differ else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("out")
    rec.add_argument("--deadline", help="seconds, or none (default: eqsat's default)")
    rec.add_argument("--busy", type=int, default=0)
    rec.add_argument("--cli", action="store_true")
    rec.add_argument("--corpus", nargs="+", default=[str(SHARED / "corpus"), str(SHARED / "corpus_thunder")])
    rec.add_argument("--only", nargs="*", default=[])
    rec.set_defaults(run=record)
    cmp = sub.add_parser("compare")
    cmp.add_argument("a")
    cmp.add_argument("b")
    cmp.set_defaults(run=compare)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
