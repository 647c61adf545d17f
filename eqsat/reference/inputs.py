"""Checking inputs against the definition they are given to, in one place.

A tensor input must have the rank, static extents and dtype its ``define_tensor`` declares, and
strides that its ``contiguity`` and ``stride_order`` allow; a definition takes as many inputs
as it defines; input dims that the fusion uses as one axis must have one extent (torch would
broadcast such inputs silently, and nvFuser rejects them at run time). ``optimize_fusion``
checks all of it before it begins (:func:`check_inputs`); the torch and eager executors check
each tensor as its ``define_tensor`` is run (:func:`check_tensor_input`).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from eqsat.errors import FusionError
from eqsat.ir import dtypes as dt
from eqsat.ir import layout
from eqsat.ir.dtypes import DataType
from eqsat.ir.fusion import Fusion


def check_count(fusion: Fusion, inputs: Sequence[Any]) -> None:
    """Raises FusionError unless ``inputs`` holds one value per input of ``fusion``."""
    if len(inputs) != len(fusion.inputs):
        raise FusionError(f"the definition takes {len(fusion.inputs)} inputs, got {len(inputs)}")


def check_tensor_input(
    index: int,
    t: Any,
    shape: Sequence[int],
    dtype: DataType,
    contiguity: Sequence[Any] | bool | None = None,
    stride_order: Sequence[int] | None = None,
) -> None:
    """Raises FusionError (op ``fd.define_tensor``) where input ``index``, ``t``, is no tensor
    of ``define_tensor(shape, contiguity, dtype, stride_order)``: naming each of its rank, static
    extents and dtype that differ, else the first dim whose stride breaks the declared layout
    (:func:`eqsat.ir.layout.stride_problem`)."""
    where = f"input {index}"
    if not isinstance(t, torch.Tensor):
        raise FusionError(
            f"{where}: expected a {dtype.name} tensor of rank {len(shape)}, got {type(t).__name__}",
            op="fd.define_tensor",
        )
    problems = []
    if t.dim() != len(shape):
        problems.append(f"rank {len(shape)} (got {t.dim()})")
    elif any(s not in (-1, n) for s, n in zip(shape, t.shape)):
        problems.append(f"shape {list(shape)} (got {list(t.shape)})")
    try:
        if t.dtype != dt.to_torch(dtype):
            problems.append(f"dtype {dtype.name} (got {t.dtype})")
    except ValueError:
        pass
    if problems:
        raise FusionError(f"{where}: expected " + ", ".join(problems), op="fd.define_tensor")
    problem = layout.stride_problem(list(t.shape), list(t.stride()), contiguity, stride_order)
    if problem:
        raise FusionError(f"{where}: {problem}", op="fd.define_tensor")


def check_inputs(fusion: Fusion, inputs: Sequence[Any]) -> dict[int, int]:
    """Every check of ``inputs`` against ``fusion``: their number, each tensor against its
    ``define_tensor`` (the error at that definition line), and the extents of dims used as one
    axis. Returns the extents the inputs bind, by axis label, with the static ones
    (:meth:`eqsat.ir.axes.Types.bind`, which makes the last check)."""
    check_count(fusion, inputs)
    for i, (vid, value) in enumerate(zip(fusion.inputs, inputs)):
        node = fusion.producer[vid]
        if node.op == "define_tensor":
            try:
                check_tensor_input(
                    i,
                    value,
                    node.arg("shape"),
                    node.arg("dtype"),
                    node.arg("contiguity"),
                    node.arg("stride_order"),
                )
            except FusionError as err:
                raise FusionError(err.message, line=node.line, op="fd.define_tensor") from None
    return fusion.types.bind(fusion, inputs)
