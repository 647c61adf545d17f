"""Special values drawn into a random fusion's inputs (``random_fusion(special=True)``): per
dtype (:func:`special_values`), at a random share of places (:func:`special_inputs`)."""

from __future__ import annotations

import math

import torch

# Double constants: a huge one overflows a Float product, a tiny one underflows it
SPECIAL_SCALARS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e300, 1e-300]


def special_values(dtype: torch.dtype) -> list[float]:
    """NaN, +-inf, +-0.0, the largest finite value and half of it (sums and products of them
    overflow), and the smallest normal (products of them underflow), of a float ``dtype``; of
    an integer one its limits, their neighbours, -1, 0 and the least square that overflows;
    of Bool none."""
    if dtype == torch.bool:
        return []
    if not dtype.is_floating_point:
        info = torch.iinfo(dtype)
        root = math.isqrt(info.max) + 1
        return [info.min, info.min + 1, info.max, info.max - 1, -1, 0, root, -root]
    info = torch.finfo(dtype)
    extremes = [info.max, info.max / 2, info.tiny]
    return [math.nan, math.inf, -math.inf, 0.0, -0.0] + extremes + [-v for v in extremes]


def special_inputs(inputs: list, g: torch.Generator) -> list:
    """``inputs`` with special values: in most tensors, one or two of their dtype's
    (:func:`special_values`) at a random share of places; the scalar input one of
    SPECIAL_SCALARS one time in three."""
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            out.append(_with_special_values(x, g))
        elif int(torch.randint(3, (), generator=g)) == 0:
            out.append(SPECIAL_SCALARS[int(torch.randint(len(SPECIAL_SCALARS), (), generator=g))])
        else:
            out.append(x)
    return out


def _with_special_values(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    if int(torch.randint(5, (), generator=g)) < 2:  # two in five: none
        return x
    pool = special_values(x.dtype)
    if not pool:
        return x
    few = torch.tensor([pool[int(i)] for i in torch.randint(len(pool), (2,), generator=g)], dtype=x.dtype)
    share = (0.05, 0.15, 0.4)[int(torch.randint(3, (), generator=g))]
    at = torch.rand(x.shape, generator=g) < share
    return torch.where(at, few[torch.randint(2, x.shape, generator=g)], x)
