"""The ``eqsat`` command line."""
from __future__ import annotations

import argparse
import sys

import torch

from .errors import FusionError


def _demo(args) -> int:
    from .ingest import from_function
    from .seeds import SEEDS
    from .torch_executor import run_fusion

    for seed in SEEDS.values():
        for label, fn in (("as given (model_ref)", seed.model_ref), ("by hand (model)", seed.model)):
            fusion = from_function(fn)
            inputs = seed.make_inputs()
            outs = run_fusion(fusion, inputs)
            want = seed.torch_reference(*inputs)
            want = want if isinstance(want, list) else [want]
            print(f"== {seed.name}, {label}: {seed.summary}")
            print(fusion)
            for i, (got, ref) in enumerate(zip(outs, want)):
                err = (got.double() - ref.double()).abs().max().item()
                print(f"   output {i}: {got.dtype} {tuple(got.shape)}, max |torch executor - torch| = {err:.3g}")
            print()
    return 0


def _show(args) -> int:
    from .ingest import from_file
    from .lowering.source import fusion_source

    repro = from_file(args.file, inputs=args.run)
    print(repro.fusion)
    if args.source:
        print()
        print(fusion_source(repro.fusion, args.style))
    if args.run and repro.inputs is not None:
        from .torch_executor import run_fusion

        for i, out in enumerate(run_fusion(repro.fusion, repro.inputs, seed=0)):
            print(f"output {i}: {out.dtype} {tuple(out.shape)}")
    return 0


def _rules_list(args) -> int:
    from .rules import RULES

    for rule in RULES.values():
        flag = " [reassociates]" if rule.reassociates else ""
        print(f"{rule.name} ({rule.family}){flag}")
        if args.verbose:
            print("    " + rule.doc.replace("\n", "\n    "))
    return 0


def _rules_verify(args) -> int:
    from .verify import verify

    try:
        verdicts = verify(args.names, cases=args.cases, seed=args.seed)
    except ValueError as err:
        print(f"eqsat: {err}", file=sys.stderr)
        return 2
    width = max(len(v.rule) for v in verdicts)
    for v in verdicts:
        status = "pass" if v.passed else f"FAIL: {v.problem}"
        print(f"{v.rule:<{width}}  cases {v.cases:4d}  worst error {v.worst_error:9.2e}  {status}")
    failed = [v for v in verdicts if not v.passed]
    print(f"{len(verdicts) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="eqsat", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="ingest the two seed fusions, print their IR and check them "
                                       "through the torch executor")
    demo.set_defaults(handler=_demo)
    show = sub.add_parser("show", help="ingest a repro file and print its Fusion IR")
    show.add_argument("file")
    show.add_argument("--source", action="store_true", help="also print the re-emitted definition")
    show.add_argument("--style", choices=["classic", "direct"], default="classic")
    show.add_argument("--run", action="store_true", help="run it on the file's inputs (torch executor)")
    show.set_defaults(handler=_show)
    rules = sub.add_parser("rules", help="list or verify the rewrite rules")
    rules_sub = rules.add_subparsers(dest="rules_command", required=True)
    listing = rules_sub.add_parser("list", help="the rules, by family")
    listing.add_argument("-v", "--verbose", action="store_true", help="with their docstrings")
    listing.set_defaults(handler=_rules_list)
    ver = rules_sub.add_parser("verify", help="check both sides of each rule agree on random "
                                              "shapes and values (float64, torch executor)")
    ver.add_argument("names", nargs="*", help="rules to verify (default: all)")
    ver.add_argument("--cases", type=int, default=60, help="cases per rule (default 60)")
    ver.add_argument("--seed", type=int, default=0)
    ver.set_defaults(handler=_rules_verify)
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except FusionError as err:
        print(f"eqsat: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
