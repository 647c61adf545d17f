"""Dropout's backward the way Thunder writes it: the keep mask drawn again from the forward's
seed and offset (``uniform`` then ``lt``: Thunder saves the two integers, not the mask), the
incoming gradient masked and scaled, and, where a Linear's bias (or a norm) follows, a sum of
the masked gradient in fp32 in the same fusion.

``reduce``: None (the masked gradient alone: a pointwise kernel), ``"rows"`` (the sum over
the rows, a Linear bias's gradient: an outer reduction; OPT's backward fusions hold it) or
``"cols"`` (the sum along each row: an inner reduction). ``split=True`` is the form written
by hand with the mask behind a ``segment_set``: its own pointwise kernel draws it and writes it
as bool, and the reduction's kernel reads it.

Inputs: ``g`` [N, H] bf16, ``seed`` and ``offset`` (Int scalars); outputs ``dx`` [N, H] bf16
and, with a reduction, its sum in bf16.
"""

from __future__ import annotations

import torch

from eqsat.ir.dtypes import DataType

KEEP = 0.9  # the probability of keeping an element (dropout p = 0.1, as OPT's)
REDUCED_DIM = {"rows": 0, "cols": 1}


def definition(shape, reduce: str | None = "rows", split: bool = False, DataType=DataType):
    """The fusion at ``shape`` ([N, H]: the draw's shape is literal, as Thunder prints it);
    ``DataType`` eqsat's or nvFuser's (the same names)."""
    if reduce is not None and reduce not in REDUCED_DIM:
        raise ValueError(f"reduce is None, 'rows' or 'cols', not {reduce!r}")

    def fusion(fd):
        g = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        seed = fd.define_scalar(None, dtype=DataType.Int)
        offset = fd.define_scalar(None, dtype=DataType.Int)
        u = fd.ops.uniform(0, 1, list(shape), rng_seed=seed, rng_offset=offset, dtype=DataType.BFloat16)
        keep = fd.ops.lt(fd.ops.cast(u, dtype=DataType.Float), KEEP)
        if split:
            keep = fd.ops.segment_set(keep)
        masked = fd.ops.mul(
            fd.ops.mul(fd.ops.cast(keep, dtype=DataType.Float), fd.ops.cast(g, dtype=DataType.Float)),
            1 / KEEP,
        )
        fd.add_output(fd.ops.cast(masked, dtype=DataType.BFloat16))
        if reduce is not None:
            total = fd.ops.sum(masked, dims=[REDUCED_DIM[reduce]], dtype=DataType.Float)
            fd.add_output(fd.ops.cast(total, dtype=DataType.BFloat16))

    return fusion


def make_inputs(shape, device="cpu", seed: int = 4, offset: int = 12) -> list:
    """g (standard normal, bf16), the seed and the offset."""
    return [torch.randn(shape, dtype=torch.bfloat16).to(device), seed, offset]


def torch_reference(g: torch.Tensor, dx: torch.Tensor, reduce: str | None = "rows") -> list:
    """The outputs in torch, given the mask a run drew (the elements of ``dx`` that are not
    zero, where ``g`` is not): nvFuser's Philox numbers are not torch's, so the mask is read
    from a run and everything else computed here, independently of eqsat."""
    keep = (dx != 0) | (g == 0)
    masked = g.float() * keep.float() / KEEP
    out = [masked.to(torch.bfloat16)]
    if reduce is not None:
        out.append(masked.sum(REDUCED_DIM[reduce]).to(torch.bfloat16))
    return out
