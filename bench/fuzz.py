"""Fuzz the optimizer: random fusions (eqsat.testing.random_fusion), each optimized for large shapes
and run on small inputs through the torch executor against the original.

    python bench/fuzz.py [--examples 2000] [--seed 0] [--no-reassociate] [--min-gain 0] [--special]

``--special`` draws special values into the inputs and scalar constants (NaN, +-inf, +-0.0,
each dtype's largest and smallest values: eqsat.testing.random_fusion.special_inputs); the judge
(eqsat.testing.fuzz.output_problem) then wants NaN and inf in the same places wherever no rule inexact
on them shaped the result (eqsat.testing.fuzz.exact_on_special_values; always with --no-reassociate),
else compares the places finite in both.

Prints counts (examples, rewritten, failures by kind, generator errors) and the first failing
seeds with their fusion; exit status 1 if any example failed.
"""
from __future__ import annotations

import argparse
import collections
import sys
import time
import traceback

from eqsat.testing.fuzz import check_case
from eqsat.testing.random_fusion import RandomChooser, random_fusion


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--no-reassociate", action="store_true")
    parser.add_argument("--min-gain", type=float, default=0.0,
                        help="optimize_fusion's min_gain (default 0: take every predicted gain)")
    parser.add_argument("--max-steps", type=int, default=8)
    parser.add_argument("--special", action="store_true",
                        help="draw NaN, +-inf, +-0.0, huge and tiny values into inputs and constants")
    args = parser.parse_args(argv)
    counts: collections.Counter = collections.Counter()
    ops: collections.Counter = collections.Counter()
    failures = []
    start = time.perf_counter()
    for seed in range(args.seed, args.seed + args.examples):
        case = random_fusion(RandomChooser(seed), max_steps=args.max_steps, special=args.special)
        ops.update(case.ops)
        try:
            result = check_case(case, min_gain=args.min_gain, reassociate=not args.no_reassociate)
        except Exception as err:     # an exception is a failure too: the optimizer must not raise
            counts["raised"] += 1
            failures.append((seed, f"{type(err).__name__}: {err}", case, traceback.format_exc()))
            continue
        counts["examples"] += 1
        counts["rewritten"] += result.changed
        counts["exact"] += result.changed and result.exact
        if result.problem:
            kind = "mismatch" if result.problem.startswith("output") else "cost"
            counts[kind] += 1
            failures.append((seed, result.problem, case, ""))
    seconds = time.perf_counter() - start
    print(f"{args.examples} random fusions{' with special values' if args.special else ''} in "
          f"{seconds:.1f} s ({seconds / args.examples * 1e3:.1f} ms each)")
    print(f"  checked {counts['examples']}, rewritten {counts['rewritten']} ({counts['exact']} by rules exact "
          f"on NaN and inf: compared place by place), mismatches {counts['mismatch']}, "
          f"cost rises {counts['cost']}, optimizer raised {counts['raised']}")
    print("  steps drawn: " + ", ".join(f"{k} {v}" for k, v in ops.most_common()))
    for seed, problem, case, tb in failures[:5]:
        print(f"\nseed {seed}: {problem}\n{case!r}\n{tb}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
