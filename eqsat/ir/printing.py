"""Compact, readable text of a Fusion: one line per node, with each value's named axes."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .axes import ScalarType, TensorType, VectorType
from .nodes import Ref

if TYPE_CHECKING:                   # annotations only: fusion.py imports this module
    from .fusion import Fusion


def _type(t) -> str:
    if isinstance(t, TensorType):
        if not t.known:
            return "?"
        dims = " ".join(repr(d) for d in t.dims)
        return f"{t.dtype.name}[{dims}]"
    if isinstance(t, ScalarType):
        return f"{t.dtype.name if t.dtype else '?'}" + (f"=|a{t.extent_of}|" if t.extent_of is not None else "")
    if isinstance(t, VectorType):
        return "Vector" if t.items is None else "Vector[" + ", ".join(_type(i) for i in t.items) + "]"
    return "?"


def _arg(value) -> str:
    if isinstance(value, Ref):
        return repr(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(_arg(v) for v in value) + "]"
    return repr(value)


def format_fusion(fusion: Fusion) -> str:
    """e.g. ``%3 Float[a0 b1] = sum(%2, dims=[1], keepdim=True)``; ``aN`` is axis label N,
    ``bN`` a broadcast dim (constant along label N); extents follow at the end."""
    types = fusion.types
    lines = []
    for node in fusion.nodes:
        lhs = ", ".join(f"%{v} {_type(types[v])}" for v in node.outputs)
        args = ", ".join(f"{k}={_arg(v)}" if not k.startswith("_") else _arg(v) for k, v in node.args
                         if v is not None or k in ("value",))
        tag = " (opaque)" if node.opaque else ""
        lines.append(f"{lhs} = {node.op}({args}){tag}")
    outs = []
    for o in fusion.outputs:
        extra = f" -> %{o.alias_input}" if o.alias_input is not None else ""
        extra += f" stride_order={list(o.stride_order)}" if o.stride_order else ""
        outs.append(f"%{o.value}{extra}")
    lines.append("outputs: " + ", ".join(outs))
    ext = ", ".join(f"a{k}={'?' if v is None else v}" for k, v in sorted(types.extents.items()))
    lines.append(f"extents: {ext}")
    return "\n".join(lines)
