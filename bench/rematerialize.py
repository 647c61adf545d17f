"""Does recomputing an input-derived chain in the second segment pay on nvFuser?

A fusion whose pointwise tail needs a full reduction of values it also uses (SiLU's backward
through an amax's gradient, as Thunder writes it for FP8 current scaling: the count of
elements equal to the amax) runs as two segments: the reduction, then the pointwise tail.
nvFuser's segmenter hands the tail every intermediate it shares with the reduction's segment
(SiLU's value, its sigmoid, the widened input) through global memory, in fp32, four bytes per
element each, where the tail could recompute them from the bf16 input (two bytes per element)
for a few flops. This bench measures, side by side on one GPU, the fusion written with one
chain (what Thunder writes) and with the reduction's branch given its own copy of the chain
from the input (by hand), eqsat's optimization of the first, and the cost model's prediction
of each (the fusion: eqsat.testing.silu_amax_backward).

    python bench/rematerialize.py [--runs 50] [--json out.json]
"""

from __future__ import annotations

import sys

from gpu_timing import direct_definition, eqsat_run, finish, predicted_run, side_by_side_args

from eqsat.testing.silu_amax_backward import definition, make_inputs, torch_reference

SHAPES = ((4, 2048, 5632), (8, 4096, 2048))
FORMS = {"one chain": False, "reduction branch recomputed": True}  # as written; by hand


def main(argv=None) -> int:
    args = side_by_side_args(__doc__, "rematerialize.py", 50, argv)
    if args is None:
        return 2
    rows = []
    for shape in SHAPES:
        inputs = make_inputs(shape, "cuda")
        want = [torch_reference(*inputs)]
        print(f"\n{list(shape)}")
        for form, recomputed in FORMS.items():
            fd = direct_definition(lambda DT: definition(recomputed, DT))
            rows.append(
                {
                    "shape": list(shape),
                    **predicted_run(form, fd, definition(recomputed), inputs, want, args.runs),
                }
            )
        rows.append({"shape": list(shape), **eqsat_run(definition(), inputs, want, args.runs)})
    return finish(args, rows)


if __name__ == "__main__":
    sys.exit(main())
