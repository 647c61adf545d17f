"""Compact, readable text of a Fusion: one line per node, with each value's named axes."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .axes import ScalarType, TensorType, VectorType

if TYPE_CHECKING:  # annotations only: fusion.py imports this module
    from .fusion import Fusion


def type_text(t) -> str:
    """A value's type as the printed IR writes it: ``Float[a0 b1]``, ``Int``, ``?`` where unknown."""
    if isinstance(t, TensorType):
        if not t.known:
            return "?"
        dims = " ".join(repr(d) for d in t.dims)
        return f"{t.dtype.name}[{dims}]"
    if isinstance(t, ScalarType):
        return f"{t.dtype.name if t.dtype else '?'}" + (
            f"=|a{t.extent_of}|" if t.extent_of is not None else ""
        )
    if isinstance(t, VectorType):
        return "Vector" if t.items is None else "Vector[" + ", ".join(type_text(i) for i in t.items) + "]"
    return "?"


def literal(value: Any) -> str:
    """An argument as Python source writes it, in printed IR and emitted definitions alike:
    lists and tuples as lists, NaN and infinities as ``float("nan")``, ``float("-inf")``,
    anything else (numbers, ``DataType.X``, a value ``%N``) as its repr."""
    if isinstance(value, float):
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else 'float("-inf")'
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    return repr(value)


def format_fusion(fusion: Fusion) -> str:
    """e.g. ``%3 Float[a0 b1] = sum(%2, dims=[1], keepdim=True)``; ``aN`` is axis label N,
    ``bN`` a broadcast dim (constant along label N); extents follow at the end."""
    types = fusion.types
    lines = []
    for node in fusion.nodes:
        lhs = ", ".join(f"%{v} {type_text(types[v])}" for v in node.outputs)
        args = ", ".join(
            f"{k}={literal(v)}" if not k.startswith("_") else literal(v)
            for k, v in node.args
            if v is not None or k in ("value",)
        )
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


def fusion_summary(fusion: Fusion) -> dict:
    """The fusion as JSON-ready data: its frontend, inputs, ops and outputs (each with its
    definition line and type, as :func:`format_fusion` writes them) and the axes' extents."""
    types = fusion.types

    def node_of(node) -> dict:
        return {
            "line": node.line,
            "op": node.op,
            "opaque": node.opaque,
            "outputs": [{"value": v, "type": type_text(types[v])} for v in node.outputs],
        }

    return {
        "frontend": fusion.frontend,
        "inputs": [node_of(n) for n in fusion.nodes if n.is_input],
        "ops": [node_of(n) for n in fusion.nodes if not n.is_input],
        "outputs": [
            {
                "value": o.value,
                "type": type_text(types[o.value]),
                "alias_input": o.alias_input,
                "stride_order": list(o.stride_order) if o.stride_order else None,
            }
            for o in fusion.outputs
        ],
        "extents": {f"a{k}": v for k, v in sorted(types.extents.items())},
    }
