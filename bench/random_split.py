"""What a random draw costs inside nvFuser's kernels, and does drawing it in a kernel of its own pay?

Thunder's dropout backward draws the keep mask again from the forward's seed and offset
(eqsat.testing.dropout_backward). In a pointwise kernel the draw is cheap; recorded runs of
OPT's backward fusions on the H200 put an outer reduction that draws 4 Mi elements at 55 us
where its bytes take 7. This bench measures, side by side on one GPU, the dropout backward
with no reduction, with the sum over its rows (outer) and along them (inner), each as Thunder
writes it and with the mask behind a segment_set (written by hand: a pointwise kernel draws it
and writes it as bool), eqsat's optimization of the first, and the cost model's prediction of
each. Outputs are checked against torch, given the mask the as-given run drew.

    python bench/random_split.py [--runs 50] [--json out.json]
"""

from __future__ import annotations

import sys

from gpu_timing import direct_definition, eqsat_run, finish, predicted_run, side_by_side_args

from eqsat.testing.dropout_backward import definition, make_inputs, torch_reference

SHAPES = ((4096, 1024), (8192, 4096))
REDUCES = (None, "rows", "cols")


def main(argv=None) -> int:
    args = side_by_side_args(__doc__, "random_split.py", 50, argv)
    if args is None:
        return 2
    rows = []
    for shape in SHAPES:
        inputs = make_inputs(shape, "cuda")
        for reduce in REDUCES:
            given = direct_definition(lambda DT: definition(shape, reduce, False, DT))
            want = torch_reference(inputs[0], given.execute(inputs)[0], reduce)
            print(f"\n{list(shape)}, reduce {reduce}")
            for form, split in (("as Thunder writes it", False), ("mask drawn apart", True)):
                fd = given if not split else direct_definition(lambda DT: definition(shape, reduce, True, DT))
                rows.append(
                    {
                        "shape": list(shape),
                        "reduce": reduce,
                        **predicted_run(form, fd, definition(shape, reduce, split), inputs, want, args.runs),
                    }
                )
            rows.append(
                {
                    "shape": list(shape),
                    "reduce": reduce,
                    **eqsat_run(definition(shape, reduce), inputs, want, args.runs),
                }
            )
    return finish(args, rows)


if __name__ == "__main__":
    sys.exit(main())
