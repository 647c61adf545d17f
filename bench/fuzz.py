"""Fuzz the optimizer: random fusions (eqsat.testing.random_fusion), each optimized for large shapes
and run on small inputs through the torch executor against the original.

    python bench/fuzz.py [--examples 2000] [--seed 0] [--no-reassociate] [--min-gain 0]
                         [--special] [--edges] [--mixed] [--timeout 120] [--json out.json]

``--special`` draws special values into the inputs and scalar constants (NaN, +-inf, +-0.0,
each dtype's largest and smallest values, integers at their limits: eqsat.testing.random_fusion.
special_inputs); the judge (eqsat.testing.fuzz.output_problem) then wants NaN and inf in the same
places wherever no rule inexact on them shaped the result (eqsat.testing.fuzz.
exact_on_special_values; always with --no-reassociate), else compares the places finite in both.
``--edges`` runs each fusion, optimized for large shapes, with axes of extent 0 and 1 too (the
optimized definition is symbolic: it must hold at every extent); ``--mixed`` makes some inputs
Int32, Int64 or Bool and adds integer constants, casts and division (integer, float and bool
operands meet, and integers wrap). ``--all`` is the three together.

Each example runs in a worker process; one that takes longer than ``--timeout`` seconds is a
hang: the worker is killed and restarted, and the seed is reported as a failure (the optimizer
has its own time limits; a case past them is a bug).

Prints counts (examples, rewritten, failures by kind: mismatches, and how many of them a rule
flagged [reassociates] or [special values] is credited with, whose rounding or special values
the judge may still misread; cost rises, the optimizer raising, hangs) and the first failing
seeds with their fusion and credited rules; exit status 1 if any example failed. ``--json``
writes the counts and every failure (seed, kind, problem, fusion), so that chunks
(``--seed``, ``--examples``) run apart can be added up.
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import sys
import time
import traceback


def _case(seed: int, args):
    from eqsat.testing.choosers import RandomChooser
    from eqsat.testing.random_fusion import random_fusion

    return random_fusion(
        RandomChooser(seed),
        max_steps=args["max_steps"],
        special=args["special"],
        edges=args["edges"],
        mixed=args["mixed"],
    )


def _check(seed: int, args) -> dict:
    """One example: its ops, and how it went (kind: ok, mismatch, cost, raised)."""
    from eqsat.testing.fuzz import check_case

    case = _case(seed, args)
    out = {"seed": seed, "ops": case.ops, "fusion": repr(case)}
    try:
        result = check_case(case, min_gain=args["min_gain"], reassociate=args["reassociate"])
    except Exception as err:  # an exception is a failure too: the optimizer must not raise
        return {
            **out,
            "kind": "raised",
            "problem": f"{type(err).__name__}: {err}",
            "traceback": traceback.format_exc(),
        }
    kind = "ok" if not result.problem else "mismatch" if result.problem.startswith("output") else "cost"
    from eqsat.rules import RULES

    flagged = [n for n in result.rules if n in RULES and not RULES[n].exact_on_special_values]
    return {
        **out,
        "kind": kind,
        "problem": result.problem,
        "changed": result.changed,
        "exact": result.changed and result.exact,
        "rules": list(result.rules),
        "flagged": flagged,
    }


def _worker(conn, args):
    while True:
        seed = conn.recv()
        if seed is None:
            return
        conn.send(_check(seed, args))


class _Runner:
    """Examples, one at a time, in a worker process that is restarted after a hang."""

    def __init__(self, args: dict, timeout: float):
        self.args, self.timeout, self.proc = args, timeout, None
        self.ctx = multiprocessing.get_context("spawn")

    def _start(self):
        self.conn, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker, args=(child, self.args), daemon=True)
        self.proc.start()

    def run(self, seed: int) -> dict:
        if self.proc is None or not self.proc.is_alive():
            self._start()
        self.conn.send(seed)
        if self.conn.poll(self.timeout):
            try:
                return self.conn.recv()
            except EOFError:
                pass  # the worker died (a crash): below
        hung = self.proc.is_alive()
        self.proc.kill()
        self.proc.join()
        code, self.proc = self.proc.exitcode, None
        what = f"no answer in {self.timeout:g} s" if hung else f"the worker died (exit status {code})"
        case = _case(seed, self.args)
        return {
            "seed": seed,
            "kind": "hang" if hung else "raised",
            "problem": what,
            "fusion": repr(case),
            "ops": case.ops,
        }

    def close(self):
        if self.proc is not None and self.proc.is_alive():
            self.conn.send(None)
            self.proc.join(5)
            if self.proc.is_alive():
                self.proc.kill()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--no-reassociate", action="store_true")
    parser.add_argument(
        "--min-gain",
        type=float,
        default=0.0,
        help="optimize_fusion's min_gain (default 0: take every predicted gain)",
    )
    parser.add_argument("--max-steps", type=int, default=8)
    parser.add_argument(
        "--special",
        action="store_true",
        help="draw NaN, +-inf, +-0.0, huge and tiny values into inputs and constants",
    )
    parser.add_argument("--edges", action="store_true", help="run at extents 0 and 1 too")
    parser.add_argument("--mixed", action="store_true", help="integer and bool inputs, constants and casts")
    parser.add_argument("--all", action="store_true", help="--special --edges --mixed")
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds one example may take before it counts as a hang (default 120)",
    )
    parser.add_argument("--json", help="write the counts and failures here")
    args = parser.parse_args(argv)
    options = {
        "max_steps": args.max_steps,
        "special": args.special or args.all,
        "edges": args.edges or args.all,
        "mixed": args.mixed or args.all,
        "min_gain": args.min_gain,
        "reassociate": not args.no_reassociate,
    }
    counts: collections.Counter = collections.Counter()
    ops: collections.Counter = collections.Counter()
    failures = []
    runner = _Runner(options, args.timeout)
    start = time.perf_counter()
    try:
        for seed in range(args.seed, args.seed + args.examples):
            result = runner.run(seed)
            ops.update(result.get("ops", []))
            kind = result["kind"]
            if kind in ("raised", "hang"):
                counts[kind] += 1
                failures.append(result)
                continue
            counts["examples"] += 1
            counts["rewritten"] += bool(result["changed"])
            counts["exact"] += bool(result["exact"])
            if kind != "ok":
                counts[kind] += 1
                counts[f"{kind} by flagged rules"] += bool(result["flagged"])
                failures.append(result)
    finally:
        runner.close()
    seconds = time.perf_counter() - start
    drawn = [name for name in ("special", "edges", "mixed") if options[name]]
    print(
        f"{args.examples} random fusions (seeds {args.seed}..{args.seed + args.examples - 1}"
        f"{', ' + ', '.join(drawn) if drawn else ''}) in {seconds:.1f} s "
        f"({seconds / max(args.examples, 1) * 1e3:.1f} ms each)"
    )
    print(
        f"  checked {counts['examples']}, rewritten {counts['rewritten']} ({counts['exact']} by rules "
        f"exact on NaN and inf: compared place by place), mismatches {counts['mismatch']} "
        f"({counts['mismatch by flagged rules']} where a rule flagged [reassociates] or [special values] "
        f"is credited), cost rises {counts['cost']}, optimizer raised {counts['raised']}, "
        f"hangs {counts['hang']}"
    )
    print("  steps drawn: " + ", ".join(f"{k} {v}" for k, v in ops.most_common()))
    for f in failures[:5]:
        rules = f"; rules {', '.join(f['rules'])}" if f.get("rules") else ""
        print(
            f"\nseed {f['seed']} ({f['kind']}{rules}): {f['problem']}\n{f['fusion']}\n"
            f"{f.get('traceback', '')}"
        )
    if args.json:
        with open(args.json, "w") as out:
            json.dump(
                {
                    "options": options,
                    "first_seed": args.seed,
                    "examples": args.examples,
                    "seconds": seconds,
                    "counts": dict(counts),
                    "ops": dict(ops),
                    "failures": failures,
                },
                out,
                indent=1,
            )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
