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

from gpu_timing import side_by_side_args, timed_run, write_rows

import eqsat
from eqsat.testing.dropout_backward import definition, make_inputs, torch_reference

SHAPES = ((4096, 1024), (8192, 4096))
REDUCES = (None, "rows", "cols")


def direct_definition(shape, reduce, split: bool):
    """The form built with nvfuser_direct itself: nvFuser runs the definition as given."""
    from nvfuser_direct import DataType as NvDataType, FusionDefinition
    with FusionDefinition() as fd:
        definition(shape, reduce, split, NvDataType)(fd)
    return fd


def main(argv=None) -> int:
    args = side_by_side_args(__doc__, "random_split.py", 50, argv)
    if args is None:
        return 2
    rows = []
    for shape in SHAPES:
        inputs = make_inputs(shape, "cuda")
        for reduce in REDUCES:
            given = direct_definition(shape, reduce, False)
            want = torch_reference(inputs[0], given.execute(inputs)[0], reduce)
            print(f"\n{list(shape)}, reduce {reduce}")
            for form, split in (("as Thunder writes it", False), ("mask drawn apart", True)):
                predicted = eqsat.estimate_fusion(definition(shape, reduce, split), inputs)
                fd = given if not split else direct_definition(shape, reduce, True)
                rows.append({"shape": list(shape), "reduce": reduce, "form": form,
                             **timed_run(form, lambda fd=fd: fd.execute(inputs), want, args.runs),
                             "predicted_us": predicted.time_us, "predicted_device_us": predicted.device_us,
                             "predicted_kernels": len(predicted.kernels)})
                print(f"    predicted {predicted.time_us:.1f} us ({predicted.device_us:.1f} on the GPU) "
                      f"in {len(predicted.kernels)} kernels")
            optimized = eqsat.optimize_fusion(definition(shape, reduce), inputs)
            fd = optimized.to_nvfuser("nvfuser_direct")
            rows.append({"shape": list(shape), "reduce": reduce, "form": "eqsat", "credited": optimized.report.rules,
                         **timed_run("eqsat", lambda fd=fd: fd.execute(inputs), want, args.runs),
                         "predicted_us": optimized.report.after.time_us,
                         "predicted_device_us": optimized.report.after.device_us,
                         "predicted_kernels": len(optimized.report.after.kernels)})
            print(f"    predicted {optimized.report.after.time_us:.1f} us ({', '.join(optimized.report.rules)})")
    if args.json:
        write_rows(args.json, rows)
    return 0 if all(r["agrees"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
