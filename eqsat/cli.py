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
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except FusionError as err:
        print(f"eqsat: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
