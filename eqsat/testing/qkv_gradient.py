"""The gradient of a fused qkv projection's output, the way Thunder's backward regions build it
for Phi-3: the query's, key's and value's gradients ([B, H, S, D], per head) after the rotary
embedding's backward for the query and key, each permuted to [B, S, H, D] and reshaped to
[B, S, H*D], then assembled into [B, S, 3*H*D].

In the H200 run of the Thunder corpus (``docs/step-profile.md``, "Inside the regions") such
regions ran in nvFuser's resize scheduler at 2.5 to 6x their bytes floor (``phi3_18``: 126.5 us
against 21.1). This family asks which form nvFuser runs fastest, so that a rule and the cost
model can follow what the GPU shows. ``form``:

- ``"thunder"``: as Thunder writes it. Each part is padded to the output's width at its
  offset, and the parts are added in fp32.
- ``"cat"``: the same parts joined with ``cat`` along the last dim.
- ``"apart"``: each part is first written in the output's order behind a ``segment_set``,
  in a kernel of its own (a transpose), and then padded and added as Thunder does.
- ``"heads"``: the three joined along the heads first (``cat`` on dim 1: [B, 3H, S, D], in the
  inputs' order), then permuted and reshaped once.

``layouts`` gives each input's memory order: "bhsd" is contiguous, and "bshd" is the permuted
layout some of Thunder's inputs arrive in (``stride_order=[3, 1, 2, 0]``). ``rope=False``
leaves the rotary backward out. The rotary backward of a gradient g is
``g * cos + R^T(g * sin)``, where ``R^T(y) = [y2, -y1]`` (the transpose of
``rotate_half``), written with slices, a neg and pads, as Thunder does. The math is in fp32,
and only the output is cast to bf16.

Inputs: ``dq``, ``dk``, ``dv`` (bf16, in ``layouts``), then with ``rope`` ``cos`` and ``sin``
([S, D], bf16). Output: [B, S, 3*H*D] bf16, contiguous.
"""

from __future__ import annotations

import torch

from eqsat.ir.dtypes import DataType

FORMS = ("thunder", "cat", "apart", "heads")
STRIDE_ORDER = {"bhsd": None, "bshd": [3, 1, 2, 0]}  # nvFuser's stride_order: dim -> its rank


def definition(shape, form: str = "thunder", rope: bool = True, layouts=("bhsd",) * 3, DataType=DataType):
    """The fusion at ``shape`` = (B, H, S, D), D even; ``DataType`` eqsat's or nvFuser's."""
    if form not in FORMS:
        raise ValueError(f"form is one of {FORMS}, not {form!r}")
    if len(layouts) != 3 or any(lay not in STRIDE_ORDER for lay in layouts):
        raise ValueError(f"layouts: three of {tuple(STRIDE_ORDER)}, not {layouts!r}")
    b, h, s, d = shape
    if d % 2:
        raise ValueError(f"the head size {d} is odd: the rotary embedding halves it")

    def fusion(fd):
        grads = [_define(fd, shape, layout, DataType) for layout in layouts]
        parts = [fd.ops.cast(g, dtype=DataType.Float) for g in grads]
        if rope:
            cos, sin = (_table(fd, shape, DataType) for _ in range(2))
            parts = [_rotary_backward(fd, p, cos, sin, shape) for p in parts[:2]] + parts[2:]
        if form == "heads":
            out = _heads_last(fd, fd.ops.cat(parts, dim=1), (b, 3 * h, s, d))  # joined: [B, 3H, S, D]
        else:
            rows = [_heads_last(fd, p, shape) for p in parts]
            if form == "apart":
                rows = [fd.ops.segment_set(r) for r in rows]
            if form == "cat":
                out = fd.ops.cat(rows, dim=2)
            else:
                width = h * d
                padded = [
                    fd.ops.pad(r, pad_widths=[i * width, (2 - i) * width, 0, 0, 0, 0], value=0.0)
                    for i, r in enumerate(rows)
                ]
                out = fd.ops.add(fd.ops.add(padded[0], padded[1]), padded[2])
        fd.add_output(fd.ops.cast(out, dtype=DataType.BFloat16))

    return fusion


def _heads_last(fd, part, shape):
    """[B, H, S, D] -> [B, S, H*D]."""
    b, h, s, d = shape
    return fd.ops.reshape(fd.ops.permute(part, dims=[0, 2, 1, 3]), new_shape=[b, s, h * d])


def _define(fd, shape, layout: str, DataType):
    order = STRIDE_ORDER[layout]
    kwargs = {} if order is None else {"stride_order": order}
    return fd.define_tensor(shape=list(shape), contiguity=[True] * 4, dtype=DataType.BFloat16, **kwargs)


def _table(fd, shape, DataType):
    """A [S, D] rotary table, broadcast to [B, H, S, D], in fp32."""
    b, h, s, d = shape
    t = fd.define_tensor(shape=[s, d], contiguity=[True, True], dtype=DataType.BFloat16)
    t = fd.ops.broadcast(t, is_broadcast_dim=[True, True, False, False])
    return fd.ops.cast(fd.ops.expand(t, shape=list(shape)), dtype=DataType.Float)


def _rotary_backward(fd, g, cos, sin, shape):
    """g * cos + R^T(g * sin), with R^T(y) = [y2, -y1] written as slices, a neg and pads."""
    b, h, s, d = shape
    half = d // 2
    y = fd.ops.mul(g, sin)
    first = fd.ops.slice(y, start_indices=[0, 0, 0, 0], end_indices=[b, h, s, half], strides=[1, 1, 1, 1])
    second = fd.ops.slice(y, start_indices=[0, 0, 0, half], end_indices=[b, h, s, d], strides=[1, 1, 1, 1])
    moved = fd.ops.add(
        fd.ops.pad(second, pad_widths=[0, half, 0, 0, 0, 0, 0, 0], value=0.0),
        fd.ops.pad(fd.ops.neg(first), pad_widths=[half, 0, 0, 0, 0, 0, 0, 0], value=0.0),
    )
    return fd.ops.add(fd.ops.mul(g, cos), moved)


def make_inputs(shape, rope: bool = True, layouts=("bhsd",) * 3, device="cpu", seed: int = 0) -> list:
    """dq, dk, dv (standard normal, bf16) in ``layouts``, then with ``rope`` cos and sin of the
    positions, as a rotary embedding's tables (bf16)."""
    gen = torch.Generator().manual_seed(seed)
    b, h, s, d = shape
    grads = []
    for layout in layouts:
        g = torch.randn(shape, generator=gen).to(torch.bfloat16)
        if layout == "bshd":  # the same values, stored [B, S, H, D]
            g = g.permute(0, 2, 1, 3).contiguous().permute(0, 2, 1, 3)
        grads.append(g.to(device))
    if not rope:
        return grads
    angles = torch.arange(s, dtype=torch.float32)[:, None] * (
        1e-2 * torch.arange(d // 2, dtype=torch.float32)
    )
    angles = torch.cat([angles, angles], dim=1)
    return grads + [angles.cos().to(torch.bfloat16).to(device), angles.sin().to(torch.bfloat16).to(device)]


def torch_reference(dq, dk, dv, cos=None, sin=None) -> list:
    """The output in torch, written independently of the definition."""
    b, h, s, d = dq.shape

    def rotary_backward(g):
        y = g * sin.float()
        return g * cos.float() + torch.cat([y[..., d // 2 :], -y[..., : d // 2]], dim=-1)

    parts = [t.float() for t in (dq, dk, dv)]
    if cos is not None:
        parts = [rotary_backward(p) for p in parts[:2]] + parts[2:]
    rows = [p.permute(0, 2, 1, 3).reshape(b, s, h * d) for p in parts]
    return [torch.cat(rows, dim=2).to(torch.bfloat16)]
