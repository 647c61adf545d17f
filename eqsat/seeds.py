"""The two fusions that started eqsat (DESIGN.md, first section), each as given (``model_ref``)
and rewritten by hand (``model``), with input makers and a plain-torch reference."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .dtypes import DataType


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
    return [torch.randn(n, k, generator=g, dtype=dtype).to(device),
            torch.randn(n, j, generator=g, dtype=dtype).to(device)]


def _layernorm(fd, split: bool) -> None:
    eps = 1e-5
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
    bias = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
    residual = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
    weight = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
    beta = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
    shape = fd.ops.shape(x)
    h = fd.ops.add(fd.ops.cast(x, dtype=DataType.Float),
                   fd.ops.broadcast_in_dim(fd.ops.cast(bias, dtype=DataType.Float), shape=shape,
                                           broadcast_dims=[1]))
    h = fd.ops.add(h, fd.ops.cast(residual, dtype=DataType.Float))
    var, mean = fd.ops.var_mean(h, dims=[1], correction=0, keepdim=False)
    rstd = fd.ops.rsqrt(fd.ops.add(var, fd.define_scalar(eps, dtype=DataType.Double)))
    centered = fd.ops.sub(h, fd.ops.broadcast_in_dim(mean, shape=shape, broadcast_dims=[0]))
    y = fd.ops.mul(centered, fd.ops.broadcast_in_dim(rstd, shape=shape, broadcast_dims=[0]))
    y = fd.ops.mul(y, fd.ops.broadcast_in_dim(fd.ops.cast(weight, dtype=DataType.Float), shape=shape,
                                              broadcast_dims=[1]))
    y = fd.ops.add(y, fd.ops.broadcast_in_dim(fd.ops.cast(beta, dtype=DataType.Float), shape=shape,
                                              broadcast_dims=[1]))
    a = fd.ops.abs(y)
    if split:
        amax = fd.ops.max(fd.ops.max(a, dims=[1], keepdim=False, dtype=DataType.Null), dims=[0],
                          keepdim=False, dtype=DataType.Null)
    else:
        amax = fd.ops.max(a, dims=[0, 1], keepdim=False, dtype=DataType.Null)
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


@dataclass(frozen=True)
class Seed:
    name: str
    model_ref: Callable       # as a user writes it
    model: Callable           # rewritten by hand
    torch_reference: Callable
    make_inputs: Callable
    summary: str


SEEDS = {
    "reduction_broadcast": Seed("reduction_broadcast", reduction_broadcast_ref, reduction_broadcast,
                                reduction_broadcast_torch, reduction_broadcast_inputs,
                                "sum over k of x[i,k] * b[i,j] (b constant along k)"),
    "layernorm_amax": Seed("layernorm_amax", layernorm_amax_ref, layernorm_amax,
                           layernorm_amax_torch, layernorm_amax_inputs,
                           "amax(abs(layer_norm(x + bias + residual))) for FP8 scaling"),
}
