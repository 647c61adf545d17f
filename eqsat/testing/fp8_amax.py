"""The FP8 amax families (issue 17): the amax over every axis of an activation scaled for
FP8, after RMSNorm, LayerNorm, GELU (tanh and erf forms) and SwiGLU, each written the way a
user or Thunder writes it (the naive decomposition: bf16 inputs cast to Float, the math in
Float), with the split written by hand, a plain-torch reference and an input maker.

Each fusion takes the family's bf16 inputs and a Float scale ``s`` (0-dim, > 0) and returns

    q    = cast(clamp(y * s, -448, 448), Float8_e4m3fn)      the FP8 tensor
    amax = max over both axes of |y * s|                     (``scaled_amax=False``: of |y|)

``definition(family)`` is the fusion as given, ``definition(family, split=True)`` the anchor:
the max over the hidden axis first (it fuses into the kernel that makes y), then over the
rows. ``scaled_amax=False`` is the delayed-scaling form (TransformerEngine: the amax of the
unscaled y is recorded, y * s is cast).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from eqsat.ir.dtypes import DataType

E4M3_MAX = 448.0  # the largest finite float8_e4m3fn
DEMO_SHAPE = (16384, 4096)
RMS_EPS, LN_EPS = 1e-6, 1e-5


def _tensor(fd, rank: int):
    return fd.define_tensor(shape=[-1] * rank, contiguity=[True] * rank, dtype=DataType.BFloat16)


def _row(fd, v, like):
    """A per-row value [N] broadcast to ``like``'s [N, H]."""
    return fd.ops.broadcast_in_dim(v, shape=fd.ops.shape(like), broadcast_dims=[0])


def _column(fd, v, like):
    """A per-column bf16 value [H] as Float, broadcast to ``like``'s [N, H]."""
    return fd.ops.broadcast_in_dim(
        fd.ops.cast(v, dtype=DataType.Float), shape=fd.ops.shape(like), broadcast_dims=[1]
    )


def _rmsnorm(fd):
    x, w = _tensor(fd, 2), _tensor(fd, 1)
    xf = fd.ops.cast(x, dtype=DataType.Float)
    mean_square = fd.ops.div(
        fd.ops.sum(fd.ops.mul(xf, xf), dims=[1]), fd.ops.cast(fd.ops.size(x, dim=1), dtype=DataType.Float)
    )
    rstd = fd.ops.rsqrt(fd.ops.add(mean_square, RMS_EPS))
    return fd.ops.mul(fd.ops.mul(xf, _row(fd, rstd, x)), _column(fd, w, x))


def _layernorm(fd):
    x, w, b = _tensor(fd, 2), _tensor(fd, 1), _tensor(fd, 1)
    xf = fd.ops.cast(x, dtype=DataType.Float)
    var, mean = fd.ops.var_mean(xf, dims=[1], correction=0)
    rstd = fd.ops.rsqrt(fd.ops.add(var, LN_EPS))
    y = fd.ops.mul(fd.ops.sub(xf, _row(fd, mean, x)), _row(fd, rstd, x))
    return fd.ops.add(fd.ops.mul(y, _column(fd, w, x)), _column(fd, b, x))


def _gelu_tanh(fd):
    """Thunder's gelu(approximate='tanh'): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    xf = fd.ops.cast(_tensor(fd, 2), dtype=DataType.Float)
    cube = fd.ops.mul(fd.ops.mul(xf, xf), xf)
    inner = fd.ops.mul(fd.ops.add(xf, fd.ops.mul(cube, 0.044715)), math.sqrt(2 / math.pi))
    return fd.ops.mul(fd.ops.mul(xf, 0.5), fd.ops.add(fd.ops.tanh(inner), 1.0))


def _gelu_erf(fd):
    """Thunder's gelu: 0.5 x (1 + erf(x / sqrt(2)))."""
    xf = fd.ops.cast(_tensor(fd, 2), dtype=DataType.Float)
    return fd.ops.mul(fd.ops.mul(xf, 0.5), fd.ops.add(fd.ops.erf(fd.ops.mul(xf, 1 / math.sqrt(2))), 1.0))


def _swiglu(fd):
    """silu(a) * b, silu(a) = a * sigmoid(a)."""
    a, b = (fd.ops.cast(_tensor(fd, 2), dtype=DataType.Float) for _ in range(2))
    return fd.ops.mul(fd.ops.mul(a, fd.ops.sigmoid(a)), b)


def _rmsnorm_torch(x, w):
    return F.rms_norm(x.float(), (x.shape[-1],), w.float(), eps=RMS_EPS)


def _layernorm_torch(x, w, b):
    return F.layer_norm(x.float(), (x.shape[-1],), w.float(), b.float(), eps=LN_EPS)


@dataclass(frozen=True)
class Family:
    name: str
    summary: str
    body: Callable  # fd -> y (Float [N, H]), defining the family's inputs
    torch_body: Callable  # the family's input tensors -> y (Float), in plain torch
    inputs: str  # one letter per input: "n" an [N, H] tensor, "h" an [H] one


AMAX_FAMILIES = {
    f.name: f
    for f in (
        Family("rmsnorm", "rms_norm(x) * w", _rmsnorm, _rmsnorm_torch, "nh"),
        Family("layernorm", "layer_norm(x) * w + b", _layernorm, _layernorm_torch, "nhh"),
        Family(
            "gelu_tanh",
            "gelu(x), tanh form",
            _gelu_tanh,
            lambda x: F.gelu(x.float(), approximate="tanh"),
            "n",
        ),
        Family("gelu_erf", "gelu(x), erf form", _gelu_erf, lambda x: F.gelu(x.float()), "n"),
        Family("swiglu", "silu(a) * b", _swiglu, lambda a, b: F.silu(a.float()) * b.float(), "nn"),
    )
}


def definition(family: str, *, split: bool = False, scaled_amax: bool = True) -> Callable:
    """The fusion of ``family`` (a function of ``fd``): as a user writes it, or (``split``)
    with the amax split by hand, over the hidden axis and then over the rows."""
    body = AMAX_FAMILIES[family].body

    def define(fd) -> None:
        y = body(fd)
        s = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float)
        ys = fd.ops.mul(y, s)
        a = fd.ops.abs(ys if scaled_amax else y)
        amax = fd.ops.max(fd.ops.max(a, dims=[1]), dims=[0]) if split else fd.ops.max(a, dims=[0, 1])
        fd.add_output(fd.ops.cast(fd.ops.clamp(ys, -E4M3_MAX, E4M3_MAX), dtype=DataType.Float8_e4m3fn))
        fd.add_output(amax)

    define.__name__ = f"{family}_fp8_amax{'_split' if split else ''}"
    define.__doc__ = (
        f"FP8 amax after {AMAX_FAMILIES[family].summary}: q = e4m3(clamp(y * s)), amax = "
        f"max |{'y * s' if scaled_amax else 'y'}| over both axes"
        f"{', split by hand' if split else ''}."
    )
    return define


def torch_reference(family: str, *, scaled_amax: bool = True) -> Callable:
    """``family``'s outputs [q, amax] in plain torch (``torch.nn.functional``)."""
    fam = AMAX_FAMILIES[family]

    def reference(*inputs):
        *tensors, s = inputs
        y = fam.torch_body(*tensors)
        ys = y * s
        amax = (ys if scaled_amax else y).abs().amax()
        return [ys.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn), amax]

    reference.__name__ = f"{family}_fp8_amax_torch"
    return reference


def make_inputs(
    family: str, n: int = 64, h: int = 96, device="cpu", scale: float = 2.5, dtype=torch.bfloat16
) -> list[torch.Tensor]:
    """Random inputs of ``family`` at [N, H] = [n, h] in ``dtype``, then the Float scale."""
    g = torch.Generator(device="cpu").manual_seed(0)
    shapes = {"n": (n, h), "h": (h,)}
    out = [torch.randn(*shapes[c], generator=g).to(dtype).to(device) for c in AMAX_FAMILIES[family].inputs]
    return out + [torch.tensor(scale, dtype=torch.float32, device=device)]
