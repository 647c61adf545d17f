"""The fusions that started eqsat (DESIGN.md, first section), and FP8 current scaling (amax ->
scale -> cast to e4m3), each as given (``model_ref``) and rewritten by hand (``model``), with
input makers and a plain-torch reference."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from eqsat.ir.dtypes import DataType


def reduction_broadcast_ref(fd) -> None:
    """``sum_k(x[i,k,1] * b[i,1,j])``: one kernel doing N*K*J multiply-adds."""
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    n, k, j = fd.ops.size(x, dim=0), fd.ops.size(x, dim=1), fd.ops.size(b, dim=1)
    xb = fd.ops.broadcast_in_dim(x, shape=[n, k, j], broadcast_dims=[0, 1])
    bb = fd.ops.broadcast_in_dim(b, shape=[n, k, j], broadcast_dims=[0, 2])
    fd.add_output(fd.ops.sum(fd.ops.mul(xb, bb), dims=[1], keepdim=False, dtype=DataType.Null))


def reduction_broadcast(fd) -> None:
    """The same, with the sum distributed over the factor that is constant along k."""
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    s = fd.ops.sum(x, dims=[1], keepdim=False, dtype=DataType.Null)
    sb = fd.ops.broadcast_in_dim(s, shape=fd.ops.shape(b), broadcast_dims=[0])
    fd.add_output(fd.ops.mul(sb, b))


def reduction_broadcast_torch(x, b):
    return (x[:, :, None] * b[:, None, :]).sum(1)


def reduction_broadcast_inputs(n=256, k=256, j=256, device="cpu", dtype=torch.float32):
    g = torch.Generator(device="cpu").manual_seed(0)
    return [
        torch.randn(n, k, generator=g, dtype=dtype).to(device),
        torch.randn(n, j, generator=g, dtype=dtype).to(device),
    ]


def _amax(fd, y, split: bool):
    """max |y| over both axes of a 2-D ``y``: at once, or (``split``) over axis 1, then 0."""
    a = fd.ops.abs(y)
    if split:
        return fd.ops.max(
            fd.ops.max(a, dims=[1], keepdim=False, dtype=DataType.Null),
            dims=[0],
            keepdim=False,
            dtype=DataType.Null,
        )
    return fd.ops.max(a, dims=[0, 1], keepdim=False, dtype=DataType.Null)


def _layernorm(fd, split: bool) -> None:
    eps = 1e-5
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
    bias = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
    residual = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
    weight = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
    beta = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
    shape = fd.ops.shape(x)
    h = fd.ops.add(
        fd.ops.cast(x, dtype=DataType.Float),
        fd.ops.broadcast_in_dim(fd.ops.cast(bias, dtype=DataType.Float), shape=shape, broadcast_dims=[1]),
    )
    h = fd.ops.add(h, fd.ops.cast(residual, dtype=DataType.Float))
    var, mean = fd.ops.var_mean(h, dims=[1], correction=0, keepdim=False)
    rstd = fd.ops.rsqrt(fd.ops.add(var, fd.define_scalar(eps, dtype=DataType.Double)))
    centered = fd.ops.sub(h, fd.ops.broadcast_in_dim(mean, shape=shape, broadcast_dims=[0]))
    y = fd.ops.mul(centered, fd.ops.broadcast_in_dim(rstd, shape=shape, broadcast_dims=[0]))
    y = fd.ops.mul(
        y, fd.ops.broadcast_in_dim(fd.ops.cast(weight, dtype=DataType.Float), shape=shape, broadcast_dims=[1])
    )
    y = fd.ops.add(
        y, fd.ops.broadcast_in_dim(fd.ops.cast(beta, dtype=DataType.Float), shape=shape, broadcast_dims=[1])
    )
    amax = _amax(fd, y, split)
    fd.add_output(fd.ops.cast(y, dtype=DataType.BFloat16))
    fd.add_output(amax)


def layernorm_amax_ref(fd) -> None:
    """``amax(abs(layer_norm((x + bias) + residual)))`` for FP8 scaling, amax over both axes."""
    _layernorm(fd, split=False)


def layernorm_amax(fd) -> None:
    """The same with the full max split: over the hidden axis (fuses into the layer norm's
    kernel), then over the rows."""
    _layernorm(fd, split=True)


def layernorm_amax_torch(x, bias, residual, weight, beta):
    h = x.float() + bias.float() + residual.float()
    y = torch.nn.functional.layer_norm(h, (h.shape[-1],), weight.float(), beta.float(), eps=1e-5)
    return [y.to(torch.bfloat16), y.abs().amax()]


def layernorm_amax_inputs(n=64, h=96, device="cpu", dtype=torch.bfloat16):
    g = torch.Generator(device="cpu").manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g).to(dtype).to(device)  # noqa: E731
    return [r(n, h), r(h), r(n, h), r(h), r(h)]


E4M3_MAX = 448.0  # the largest finite float8_e4m3fn


def _rmsnorm_fp8(fd, split: bool) -> None:
    eps = 1e-6
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
    weight = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
    shape = fd.ops.shape(x)
    xf = fd.ops.cast(x, dtype=DataType.Float)
    mean_square = fd.ops.div(
        fd.ops.sum(fd.ops.mul(xf, xf), dims=[1], keepdim=False, dtype=DataType.Null),
        fd.ops.cast(fd.ops.size(x, dim=1), dtype=DataType.Float),
    )
    rstd = fd.ops.rsqrt(fd.ops.add(mean_square, fd.define_scalar(eps, dtype=DataType.Double)))
    y = fd.ops.mul(
        fd.ops.mul(xf, fd.ops.broadcast_in_dim(rstd, shape=shape, broadcast_dims=[0])),
        fd.ops.broadcast_in_dim(fd.ops.cast(weight, dtype=DataType.Float), shape=shape, broadcast_dims=[1]),
    )
    amax = _amax(fd, y, split)
    scale = fd.ops.div(
        fd.define_scalar(E4M3_MAX, dtype=DataType.Double),
        fd.ops.maximum(amax, fd.define_scalar(1e-12, dtype=DataType.Double)),
    )
    q = fd.ops.mul(y, fd.ops.broadcast_in_dim(scale, shape=shape, broadcast_dims=[]))
    q = fd.ops.clamp(
        q,
        fd.define_scalar(-E4M3_MAX, dtype=DataType.Double),
        fd.define_scalar(E4M3_MAX, dtype=DataType.Double),
    )
    fd.add_output(fd.ops.cast(q, dtype=DataType.Float8_e4m3fn))
    fd.add_output(scale)


def rmsnorm_fp8_ref(fd) -> None:
    """FP8 current scaling: ``y = rms_norm(x) * w``, ``scale = 448 / amax(|y|)``, and ``y * scale``
    cast to e4m3, with the amax over both axes."""
    _rmsnorm_fp8(fd, split=False)


def rmsnorm_fp8(fd) -> None:
    """The same with the amax split: over the hidden axis (fuses into the norm's kernel), then
    over the rows."""
    _rmsnorm_fp8(fd, split=True)


def rmsnorm_fp8_torch(x, weight):
    xf = x.float()
    y = xf * torch.rsqrt((xf * xf).mean(1, keepdim=True) + 1e-6) * weight.float()
    scale = E4M3_MAX / y.abs().amax().clamp_min(1e-12)
    return [(y * scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn), scale]


def rmsnorm_fp8_inputs(n=64, h=96, device="cpu", dtype=torch.bfloat16):
    g = torch.Generator(device="cpu").manual_seed(0)
    return [
        torch.randn(n, h, generator=g).to(dtype).to(device),
        torch.randn(h, generator=g).to(dtype).to(device),
    ]


@dataclass(frozen=True)
class Seed:
    name: str
    model_ref: Callable  # as a user writes it
    model: Callable  # rewritten by hand
    torch_reference: Callable
    make_inputs: Callable
    summary: str
    demo_shape: tuple[int, ...]  # where the demo optimizes it (the cost model's extents)
    check_shape: tuple[int, ...]  # where the demo runs it against plain torch


SEEDS = {
    "reduction_broadcast": Seed(
        "reduction_broadcast",
        reduction_broadcast_ref,
        reduction_broadcast,
        reduction_broadcast_torch,
        reduction_broadcast_inputs,
        "sum over k of x[i,k] * b[i,j] (b constant along k)",
        (4096, 2048, 1024),
        (32, 24, 16),
    ),
    "layernorm_amax": Seed(
        "layernorm_amax",
        layernorm_amax_ref,
        layernorm_amax,
        layernorm_amax_torch,
        layernorm_amax_inputs,
        "amax(abs(layer_norm(x + bias + residual))) for FP8 scaling",
        (16384, 4096),
        (64, 96),
    ),
    "rmsnorm_fp8": Seed(
        "rmsnorm_fp8",
        rmsnorm_fp8_ref,
        rmsnorm_fp8,
        rmsnorm_fp8_torch,
        rmsnorm_fp8_inputs,
        "FP8 current scaling: rms_norm(x) * w scaled by 448 / amax, cast to e4m3",
        (16384, 4096),
        (64, 96),
    ),
}
