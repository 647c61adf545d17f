"""``verify="gpu"`` on corpus fusions: what it decides and what it costs. Each fusion is
optimized twice with a fresh cache folder: the first call compiles, checks and times the input
and the candidates (the verification's seconds are its overhead), the second reads the decision
from the cache. The default margin's decision is printed beside it.

    python bench/verify_corpus.py [--corpus DIR ...] [--only NAME ...] [--json out.json]   # GPU
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

from corpus import DEFAULT_CORPORA, corpus_paths
from gpu_timing import write_rows

import eqsat
from eqsat.reference.devices import to_device
from eqsat.reference.index_inputs import in_range_inputs


def verify_one(path, cache_dir) -> dict:
    repro = eqsat.from_file(path)
    inputs = to_device(in_range_inputs(repro.fusion, repro.inputs), "cuda", repro.fusion)
    by_margin = eqsat.optimize_fusion(repro.fusion, repro.inputs).report
    began = time.perf_counter()
    first = eqsat.optimize_fusion(repro.fusion, inputs, verify="gpu", cache_dir=cache_dir).report
    first_s = time.perf_counter() - began
    began = time.perf_counter()
    again = eqsat.optimize_fusion(repro.fusion, inputs, verify="gpu", cache_dir=cache_dir).report
    again_s = time.perf_counter() - began
    v = first.verification
    return {
        "name": path.stem,
        "margin_changed": by_margin.changed,
        "verified_changed": first.changed,
        "cached_again": bool(again.verification and again.verification.cached),
        "same_decision": again.changed == first.changed,
        "verify_s": None if v is None else round(v.seconds, 3),
        "first_call_s": round(first_s, 3),
        "cached_call_s": round(again_s, 3),
        "measurements": [] if v is None else [m.summary() for m in v.measurements],
        "rejected": [r.summary() for r in first.rejected],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", nargs="+", default=DEFAULT_CORPORA)
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("verify_corpus.py times fusions on a CUDA GPU; none is available here", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory() as cache_dir:
        for path in corpus_paths([pathlib.Path(c) for c in args.corpus], args.only):
            try:
                r = verify_one(path, cache_dir)
            except Exception as err:  # one fusion's failure is reported, the rest run
                r = {"name": path.stem, "error": f"{type(err).__name__}: {err}"[:500]}
            rows.append(r)
            if "error" in r:
                print(f"{r['name']}: ERROR {r['error']}", flush=True)
                continue
            times = ", ".join(
                f"{m['label']} {m['measured_us']}"
                if m["measured_us"] is not None
                else f"{m['label']} ({m['problem']})"
                for m in r["measurements"]
            )
            print(
                f"{r['name']}: margin {'changes' if r['margin_changed'] else 'keeps'}, GPU "
                f"{'changes' if r['verified_changed'] else 'keeps'}; verification {r['verify_s']} s "
                f"(first call {r['first_call_s']} s, cached call {r['cached_call_s']} s, cache hit "
                f"{r['cached_again']}); {times}",
                flush=True,
            )
    if args.json:
        write_rows(args.json, rows)
    verified = [r for r in rows if r.get("verify_s") is not None]
    if verified:
        print(
            f"\n{len(verified)} fusions verified: median "
            f"{sorted(r['verify_s'] for r in verified)[len(verified) // 2]} s "
            f"of verification, max {max(r['verify_s'] for r in verified)} s; "
            f"{sum(r['verified_changed'] for r in verified)} kept rewritten"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
