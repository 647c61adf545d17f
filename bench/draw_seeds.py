"""Draw the seed fusions' predicted kernels as given and as eqsat optimizes them, at the demo's
shapes (``eqsat demo``), with ``eqsat.cost.drawing`` (what ``eqsat optimize FILE --draw OUT``
draws). By default LayerNorm + amax, to docs/images/layernorm_amax.svg (the README's picture):

    python bench/draw_seeds.py [--only NAME ...] [--out DIR] [--format svg|png|pdf|dot]

``--only`` names seeds of eqsat/testing/seeds.py (``all``: every one). Optimized with no
deadline, so the picture does not depend on the machine's load. .svg, .png and .pdf need
Graphviz's ``dot`` (``apt-get install graphviz``).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import eqsat
from eqsat.cost.drawing import DRAWN_SUFFIXES, TEXT_SUFFIXES, draw_kernels
from eqsat.testing.seeds import SEEDS

TITLES = {
    "reduction_broadcast": "Reduction of a broadcast product",
    "layernorm_amax": "LayerNorm + amax",
    "rmsnorm_fp8": "RMSNorm + FP8 current scaling",
}


def main(argv=None) -> int:
    root = pathlib.Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="+", default=["layernorm_amax"], choices=[*SEEDS, "all"])
    parser.add_argument("--out", default=str(root / "docs" / "images"))
    parser.add_argument("--format", default="svg", choices=[s[1:] for s in DRAWN_SUFFIXES + TEXT_SUFFIXES])
    args = parser.parse_args(argv)
    names = list(SEEDS) if "all" in args.only else args.only
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        seed = SEEDS[name]
        shape = "x".join(map(str, seed.demo_shape))
        opt = eqsat.optimize_fusion(
            seed.model_ref, seed.make_inputs(*seed.demo_shape, device="meta"), deadline_s=None
        )
        title = f"{TITLES.get(name, name)} at {shape}: {seed.summary}"
        print(draw_kernels(opt, out / f"{name}.{args.format}", title=title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
