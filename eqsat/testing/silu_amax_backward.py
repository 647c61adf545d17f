"""SiLU's backward with the gradient of an FP8 amax flowing in, the way Thunder writes it for
a SwiGLU whose output scales the next Linear's FP8 input: the amax's gradient is shared among
the elements that hit it (a count over every axis), and that count needs the whole SiLU chain
before the tail can use it.

As written (``recomputed=False``) one chain of fp32 intermediates of the bf16 input feeds both
the count's reduction kernel and the tail kernel, and nvFuser passes the tail every
intermediate it reads through global memory; by hand (``recomputed=True``) the count's branch
has its own copy of the chain, which the tail then never reads. Shapes are symbolic: the
definition runs at any [B, S, H].

Inputs: ``x`` [B, S, H] bf16, ``amax`` and ``coef`` 0-dim fp32, ``g`` [B, S, H] bf16; output
``dx`` [B, S, H] bf16.
"""

from __future__ import annotations

import torch

from eqsat.ir.dtypes import DataType


def silu_parts(fd, x, DataType=DataType):
    """(widened x, sigmoid(x), silu(x)) of a bf16 tensor."""
    xf = fd.ops.cast(x, dtype=DataType.Float)
    sig = fd.ops.reciprocal(fd.ops.add(1.0, fd.ops.exp(fd.ops.neg(xf))))
    return xf, sig, fd.ops.mul(xf, sig)


def definition(recomputed: bool = False, DataType=DataType):
    """The fusion (a function of ``fd``); ``DataType`` eqsat's or nvFuser's (the same names)."""

    def fusion(fd):
        x = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=DataType.BFloat16)
        amax = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float)
        coef = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float)
        g = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=DataType.BFloat16)
        shape = [fd.ops.size(x, dim=i) for i in range(3)]
        wide = lambda v: fd.ops.broadcast_in_dim(v, shape=shape, broadcast_dims=[])  # noqa: E731
        xf, sig, s = silu_parts(fd, x, DataType)
        s_counted = silu_parts(fd, x, DataType)[2] if recomputed else s
        hit = fd.ops.eq(fd.ops.abs(s), wide(amax))
        hit_counted = fd.ops.eq(fd.ops.abs(s_counted), wide(amax)) if recomputed else hit
        count = fd.ops.sum(fd.ops.cast(hit_counted, dtype=DataType.Int), dims=[0, 1, 2], dtype=DataType.Int)
        share = fd.ops.div(
            fd.ops.mul(wide(coef), fd.ops.cast(hit, dtype=DataType.Float)),
            fd.ops.cast(wide(count), dtype=DataType.Float),
        )
        up = fd.ops.add(fd.ops.cast(g, dtype=DataType.Float), fd.ops.mul(share, fd.ops.sign(s)))
        dx = fd.ops.mul(fd.ops.mul(up, sig), fd.ops.add(1.0, fd.ops.mul(xf, fd.ops.sub(1.0, sig))))
        fd.add_output(fd.ops.cast(dx, dtype=DataType.BFloat16))

    return fusion


def make_inputs(shape, device="cpu") -> list:
    """x, amax (the true amax of silu(x), so the count is at least one), coef, g; on "meta"
    devices, shapes and dtypes alone."""
    if device == "meta":
        return [
            torch.empty(shape, dtype=torch.bfloat16, device="meta"),
            torch.empty((), device="meta"),
            torch.empty((), device="meta"),
            torch.empty(shape, dtype=torch.bfloat16, device="meta"),
        ]
    x = torch.randn(shape, dtype=torch.bfloat16)
    amax = torch.nn.functional.silu(x.float()).abs().max()
    g = torch.randn(shape, dtype=torch.bfloat16) * 1e-3
    return [t.to(device) for t in (x, amax, torch.tensor(0.5), g)]


def torch_reference(x, amax, coef, g):
    """The same gradient in torch, written independently of eqsat."""
    xf = x.float()
    sig = torch.sigmoid(xf)
    s = xf * sig
    hit = (s.abs() == amax).float()
    up = g.float() + coef * hit / hit.sum() * torch.sign(s)
    return (up * sig * (1 + xf * (1 - sig))).to(torch.bfloat16)
