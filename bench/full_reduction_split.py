"""Does splitting a full reduction into two reductions pay by itself on nvFuser? (the cost
model's ``grid_reduction`` kind, eqsat.cost.segmenter.reduction_kind)

A full sum (or amax) of a large tensor runs as a grid reduction: its blocks combine through
global memory. The calibration of 2026-12-02 found 1-D full sums slower per byte than row sums
(H200: 3.3-3.5 vs 4.5 TB/s), and the cost model credits a split whose first stage keeps many
elements with the difference. On the H100 three such splits in Thunder's FP8 regions ran no
faster than the single kernel they replaced. This bench measures, side by side on one GPU, for
each input and prologue: the full reduction as given (one kernel), split with the first stage
keeping the middle axis (sum over [0, 2] of [A, B, C]: what eqsat writes), and split keeping
the leading axes (sum over the last axis, then the rest). Per form: steady state, latency and
device time (bench/gpu_timing.timed_run), and the cost model's prediction.

    python bench/full_reduction_split.py [--runs 100] [--json out.json]
"""

from __future__ import annotations

import sys

import torch
from gpu_timing import finish, side_by_side_args, timed_run

import eqsat
from eqsat.ir.dtypes import DataType
from eqsat.lowering.nvfuser import to_nvfuser

CASES = {  # name: (shape, dtype, prologue)
    "sum fp32 [2, 8192, 16384]": (
        (2, 8192, 16384),
        torch.float32,
        None,
    ),  # (a size-1 dim may not be contiguous)
    "sum bf16 [4, 2048, 5632]": ((4, 2048, 5632), torch.bfloat16, None),
    "sum silu bf16 [4, 2048, 5632]": ((4, 2048, 5632), torch.bfloat16, "silu"),
    "amax |x| bf16 [4, 2048, 5632]": ((4, 2048, 5632), torch.bfloat16, "abs-max"),
}
FORMS = ("one kernel", "split keeping axis 1", "split keeping axes 0, 1")


def definition(shape, dtype, prologue, form):
    """The fusion of one case and form, as a function of fd (eqsat records it)."""
    nv_dtype = DataType.BFloat16 if dtype == torch.bfloat16 else DataType.Float
    reduce = "max" if prologue == "abs-max" else "sum"

    def fusion(fd):
        x = fd.define_tensor(shape=list(shape), contiguity=[True] * 3, dtype=nv_dtype)
        v = fd.ops.cast(x, dtype=DataType.Float)
        if prologue == "silu":
            v = fd.ops.mul(v, fd.ops.reciprocal(fd.ops.add(fd.ops.exp(fd.ops.neg(v)), 1.0)))
        elif prologue == "abs-max":
            v = fd.ops.abs(v)
        op = getattr(fd.ops, reduce)
        if form == "one kernel":
            out = op(v, dims=[0, 1, 2])
        elif form == "split keeping axis 1":
            out = op(op(v, dims=[0, 2]), dims=[0])
        else:
            out = op(op(v, dims=[2]), dims=[0, 1])
        fd.add_output(out)

    return fusion


def main(argv=None) -> int:
    args = side_by_side_args(__doc__, "full_reduction_split.py", 100, argv)
    if args is None:
        return 2
    rows = []
    for name, (shape, dtype, prologue) in CASES.items():
        x = torch.randn(shape, device="cuda", dtype=dtype)
        print(f"\n{name}")
        want = None
        for form in FORMS:
            fusion = eqsat.from_function(definition(shape, dtype, prologue, form))
            predicted = eqsat.estimate_fusion(fusion, [x])
            fd = to_nvfuser(fusion)
            fn = lambda fd=fd: fd.execute([x])  # noqa: E731
            want = want or fn()
            rows.append(
                {
                    "case": name,
                    "form": form,
                    **timed_run(form, fn, want, args.runs),
                    "predicted_us": predicted.time_us,
                    "predicted_kernels": len(predicted.kernels),
                    "predicted_kinds": [k.kind for k in predicted.kernels],
                }
            )
            print(
                f"    predicted {predicted.time_us:.1f} us: "
                f"{', '.join(r for r in rows[-1]['predicted_kinds'])}"
            )
    print(f"\n{'case':32s} " + " ".join(f"{f:>24s}" for f in FORMS) + "   (steady us / device us)")
    for name in CASES:
        cells = [next(r for r in rows if r["case"] == name and r["form"] == f) for f in FORMS]
        print(f"{name:32s} " + " ".join(f"{c['us']:11.1f} /{c['device_us']:10.1f}" for c in cells))
    return finish(args, rows)


if __name__ == "__main__":
    sys.exit(main())
