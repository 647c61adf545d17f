"""Does recomputing an input-derived chain in the second segment pay on nvFuser?

A fusion whose pointwise tail needs a full reduction of values it also uses (SiLU's backward
through an amax's gradient, as Thunder writes it for FP8 current scaling: the count of
elements equal to the amax) runs as two segments: the reduction, then the pointwise tail.
nvFuser's segmenter hands the tail every intermediate it shares with the reduction's segment
(SiLU's value, its sigmoid, the widened input) through global memory, in fp32, four bytes per
element each, where the tail could recompute them from the bf16 input (two bytes per element)
for a few flops. This bench measures, side by side on one GPU, the fusion written with one
chain (what Thunder writes) and with the reduction's branch given its own copy of the chain
from the input (``dup``), and the cost model's prediction of each.

    python bench/rematerialize.py [--runs 50] [--json out.json]
"""
from __future__ import annotations

import argparse
import sys

import torch
from gpu_timing import timed_run, write_rows

import eqsat
from eqsat.ir.dtypes import DataType

SHAPES = ((4, 2048, 5632), (8, 4096, 2048))
FORMS = ("one chain", "reduction branch recomputed")


def silu_parts(fd, x, DataType=DataType):
    """(widened x, sigmoid(x), silu(x)) of a bf16 tensor."""
    xf = fd.ops.cast(x, dtype=DataType.Float)
    sig = fd.ops.reciprocal(fd.ops.add(1.0, fd.ops.exp(fd.ops.neg(xf))))
    return xf, sig, fd.ops.mul(xf, sig)


def definition(shape, form, DataType=DataType):
    """SiLU's backward with the gradient of an amax of |silu(x)| flowing in; ``DataType`` eqsat's
    or nvFuser's (the same names)."""
    def fusion(fd):
        x = fd.define_tensor(shape=list(shape), contiguity=[True] * 3, dtype=DataType.BFloat16)
        amax = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float)
        coef = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float)
        g = fd.define_tensor(shape=list(shape), contiguity=[True] * 3, dtype=DataType.BFloat16)
        xf, sig, s = silu_parts(fd, x, DataType)
        _, _, s_reduced = silu_parts(fd, x, DataType) if form == FORMS[1] else (xf, sig, s)
        wide = lambda v: fd.ops.expand(fd.ops.broadcast(v, is_broadcast_dim=[True] * 3), shape=list(shape))  # noqa: E731
        hit = fd.ops.eq(fd.ops.abs(s), wide(amax))
        hit_reduced = fd.ops.eq(fd.ops.abs(s_reduced), wide(amax)) if form == FORMS[1] else hit
        count = fd.ops.sum(fd.ops.cast(hit_reduced, dtype=DataType.Int), dims=[0, 1, 2], dtype=DataType.Int)
        share = fd.ops.div(fd.ops.mul(wide(coef), fd.ops.cast(hit, dtype=DataType.Float)),
                           fd.ops.cast(wide(count), dtype=DataType.Float))
        sign = fd.ops.where(fd.ops.gt(s, 0.0), 1.0, fd.ops.where(fd.ops.lt(s, 0.0), -1.0, 0.0))
        up = fd.ops.add(fd.ops.cast(g, dtype=DataType.Float), fd.ops.mul(share, sign))
        dx = fd.ops.mul(fd.ops.mul(up, sig), fd.ops.add(1.0, fd.ops.mul(xf, fd.ops.sub(1.0, sig))))
        fd.add_output(fd.ops.cast(dx, dtype=DataType.BFloat16))
    return fusion


def direct_definition(shape, form):
    """The form built with nvfuser_direct itself: eqsat's IR would merge the copied chain
    back into one (so its prediction is the same for both forms)."""
    from nvfuser_direct import DataType as NvDataType, FusionDefinition
    with FusionDefinition() as fd:
        definition(shape, form, NvDataType)(fd)
    return fd


def reference(x, amax, coef, g):
    """The same gradient in torch, independently of eqsat."""
    xf = x.float()
    sig = torch.sigmoid(xf)
    s = xf * sig
    hit = (s.abs() == amax).float()
    up = g.float() + coef * hit / hit.sum() * torch.sign(s)
    return (up * sig * (1 + xf * (1 - sig))).to(torch.bfloat16)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench/rematerialize.py needs a CUDA GPU and nvFuser", file=sys.stderr)
        return 2
    rows = []
    for shape in SHAPES:
        x = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
        g = torch.randn(shape, device="cuda", dtype=torch.bfloat16) * 1e-3
        amax = torch.nn.functional.silu(x.float()).abs().max()
        coef = torch.tensor(0.5, device="cuda")
        inputs = [x, amax, coef, g]
        want = [reference(*inputs)]
        print(f"\n{list(shape)}")
        for form in FORMS:
            predicted = eqsat.estimate_fusion(eqsat.from_function(definition(shape, form)), inputs)
            fd = direct_definition(shape, form)
            rows.append({"shape": list(shape), "form": form,
                         **timed_run(form, lambda fd=fd: fd.execute(inputs), want, args.runs),
                         "predicted_us": predicted.time_us, "predicted_kernels": len(predicted.kernels)})
            print(f"    predicted {predicted.time_us:.1f} us in {len(predicted.kernels)} kernels")
    if args.json:
        write_rows(args.json, rows)
    return 0 if all(r["agrees"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
