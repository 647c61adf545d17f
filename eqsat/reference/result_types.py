"""The torch executor's look at each node's results against the IR's types: by default cast to
the IR's dtypes (:func:`conform`); with ``run_fusion(strict=True)`` checked (:class:`TypeCheck`)."""

from __future__ import annotations

from typing import Any

import torch

from eqsat.errors import FusionError
from eqsat.ir import dtypes as dt
from eqsat.ir.axes import ScalarType, TensorType, Types
from eqsat.ir.fusion import Fusion, Node

from .torch_arithmetic import PY_TYPE, cast_tensor


def conform(types: Types, node: Node, results: list) -> list:
    """``results`` cast to the dtypes the IR gives ``node``'s outputs (run_fusion's default)."""
    out = []
    for vid, r in zip(node.outputs, results, strict=True):
        t = types[vid]
        if isinstance(t, TensorType) and t.known and isinstance(r, torch.Tensor):
            want = dt.to_torch(t.dtype)
            if r.dtype != want:
                r = cast_tensor(r, want)
        elif isinstance(t, ScalarType) and t.dtype in PY_TYPE and not isinstance(r, (torch.Tensor, list)):
            r = PY_TYPE[t.dtype](r)
        out.append(r)
    return out


class TypeCheck:
    """``run_fusion(strict=True)``'s look at each node's results: a tensor of the IR's dtype,
    rank and extents, a python number of the IR's scalar type. Raises FusionError at the node's
    line and op where they differ, and changes nothing.

    A dim's extent is its axis label's (an extent-1 broadcast has a label of its own, of
    extent 1): the static one, else the label's extent as first seen, in an input or a result."""

    def __init__(self, fusion: Fusion):
        self.types = fusion.types
        self.extents = {label: n for label, n in self.types.extents.items() if n is not None}

    def __call__(self, node: Node, results: list) -> list:
        """(replay places the error at the node's line and op)"""
        for i, (vid, r) in enumerate(zip(node.outputs, results, strict=True)):
            problem = self._problem(self.types[vid], r)
            if problem:
                which = f"result {i} (%{vid})" if len(node.outputs) > 1 else f"the result (%{vid})"
                raise FusionError(f"the torch executor disagrees with the IR: {which}: {problem}")
        return results

    def _problem(self, t: Any, r: Any) -> str | None:
        if isinstance(t, TensorType) and t.known:
            return self._tensor_problem(t, r)
        if isinstance(t, ScalarType) and t.dtype in PY_TYPE and not isinstance(r, (torch.Tensor, list)):
            want = PY_TYPE[t.dtype]
            if type(r) is not want:
                return f"a python {type(r).__name__} {r!r}, the IR has a {t.dtype.name} scalar"
        return None

    def _tensor_problem(self, t: TensorType, r: Any) -> str | None:
        if not isinstance(r, torch.Tensor):
            return f"a {type(r).__name__}, the IR has a {t.dtype.name} tensor"
        try:
            want = dt.to_torch(t.dtype)
        except ValueError:
            want = r.dtype
        if r.dtype != want:
            return f"dtype {r.dtype}, the IR has {t.dtype.name} ({want})"
        if r.dim() != t.rank:
            return f"rank {r.dim()} (shape {list(r.shape)}), the IR has rank {t.rank}"
        for j, (d, n) in enumerate(zip(t.dims, r.shape, strict=True)):
            expected = self.extents.setdefault(d.label, int(n))
            if int(n) != expected:
                return (
                    f"dim {j} has extent {int(n)} (shape {list(r.shape)}), the IR's axis "
                    f"{d!r} has extent {expected}"
                )
        return None
