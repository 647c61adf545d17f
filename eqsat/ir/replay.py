"""Replaying a Fusion's calls on any implementation of nvFuser's FusionDefinition protocol."""
from __future__ import annotations

from collections import ChainMap
from typing import Any, Callable

from eqsat.errors import FusionError

from .dtypes import of_number
from .fusion import Fusion, Node, Ref
from .opspec import OPAQUE_OUTPUTS, OPERANDS, OPS, VAL_ONLY, call_form


def _resolve(value: Any, env) -> Any:
    if isinstance(value, Ref):
        return env[value.id]
    if isinstance(value, tuple):
        return [_resolve(v, env) for v in value]
    return value


def node_call(node: Node) -> tuple[str, list, dict]:
    """The method (``define_tensor``, or an ``fd.ops`` name) and arguments that make ``node``."""
    if node.op == "define_tensor":
        kw = dict(node.args)
        if kw["stride_order"] is None:
            del kw["stride_order"]
        return "define_tensor", [], kw
    if node.op == "define_scalar":
        return "define_scalar", [node.arg("value")], {"dtype": node.arg("dtype")}
    if node.op == "define_vector":
        return "define_vector", [node.arg("values")], {"dtype": node.arg("dtype")}
    if node.opaque:
        positional = [v for k, v in node.args if k.startswith("_")]
        return node.op, positional, {k: v for k, v in node.args if not k.startswith("_")}
    positional, keywords = call_form(OPS[node.op], node.kwargs)
    return node.op, positional, keywords


def is_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float, complex))


def _for_frontend(node: Node, fd: Any, scalars: dict[int, Any], style: str | None) -> Node:
    """``node`` as ``style``'s frontend takes it: each Python number in an operand place
    (classic: its ops take no numbers) or in a place nvfuser_direct binds as a Val alone
    (``VAL_ONLY``: topk's k, scatter's scalar src) replaced by a scalar defined on ``fd``
    first, put in ``scalars`` under a negative id; for classic, an empty ``stride_order`` (a
    row-major copy) as ``set``."""
    if node.opaque or node.op.startswith("define_") or style is None:
        return node
    if style == "classic" and node.op == "stride_order" and not node.arg("stride_order"):
        return Node("set", (("arg", node.arg("arg")),), node.outputs, node.kinds, line=node.line)
    places = OPERANDS | VAL_ONLY if style == "classic" else VAL_ONLY
    changes = {}
    for k, v in node.args:
        if k in places and is_number(v):
            key = -1 - len(scalars)      # below every value id of the fusion
            scalars[key] = fd.define_scalar(v, dtype=of_number(v))
            changes[k] = Ref(key)
    return node.with_args(**changes) if changes else node


def _classic_clamp(fd: Any, x: Any, low: Any, high: Any, *, dtype) -> Any:
    """``clamp(x, low, high)`` for the classic frontend, whose ``clamp(Tensor, Scalar, Scalar)``
    binding checks ``!validUse()`` and so refuses every call (nvFuser 0.2.35,
    python_bindings.cpp). Written as nvFuser defines clamp (runtime/helpers.cu): ``min(max(x,
    low), high)``, NaN propagated by both, the bounds in ``x``'s dtype. ``maximum`` computes a
    half ``x`` in Float; rounding is monotone, so casting the result back gives clamp's value."""
    y = fd.ops.minimum(fd.ops.maximum(x, low), high)
    return fd.ops.cast(y, dtype=dtype)


def _last_uses(fusion: Fusion) -> dict[int, int]:
    """value id -> the index of the last node that reads it (past the end for outputs)."""
    last: dict[int, int] = {}
    for i, node in enumerate(fusion.nodes):
        for ref in node.refs():
            last[ref.id] = i
    for out in fusion.outputs:
        last[out.value] = len(fusion.nodes)
        if out.alias_input is not None:
            last[out.alias_input] = len(fusion.nodes)
    return last


def replay(fusion: Fusion, fd: Any, *, style: str | None = None,
           on_node: Callable[[Node, list], list] | None = None) -> list:
    """Make ``fusion``'s calls on ``fd`` and add its outputs; returns the output handles.

    ``style`` adapts the calls to one of nvFuser's frontends where the two differ:
    ``"direct"`` passes ``define_vector`` values as python lists of their entries
    (nvfuser_direct has no ``define_vector(list)``) and defines the numbers it takes only as
    scalars (``opspec.VAL_ONLY``); ``"classic"`` defines each Python number
    that stands as an operand (``mul(t, 2.0)``) with ``fd.define_scalar`` first and makes an
    empty ``stride_order`` a ``set`` (the classic frontend takes neither). ``on_node(node,
    results)`` sees (and may replace) each node's results. A call that fails raises
    FusionError naming the node's definition line and op.
    """
    if style not in (None, "classic", "direct"):
        raise ValueError(f"style must be None, 'classic' or 'direct', got {style!r}")
    env: dict[int, Any] = {}
    last_use = _last_uses(fusion)
    for i, node in enumerate(fusion.nodes):
        scalars: dict[int, Any] = {}
        call_node = _for_frontend(node, fd, scalars, style)
        name, args, kwargs = node_call(call_node)
        values = ChainMap(scalars, env) if scalars else env
        args, kwargs = _resolve(tuple(args), values), {k: _resolve(v, values) for k, v in kwargs.items()}
        label = f"fd.{name}" if name.startswith("define_") else f"fd.ops.{name}"
        try:
            if node.op == "define_vector" and style == "direct":
                result = list(args[0])
            elif node.op == "clamp" and style == "classic":
                result = _classic_clamp(fd, *args, dtype=fusion.types[node.outputs[0]].dtype)
            elif name.startswith("define_"):
                result = getattr(fd, name)(*args, **kwargs)
            else:
                token = OPAQUE_OUTPUTS.set(len(node.outputs) if node.opaque and len(node.outputs) > 1 else None)
                try:
                    result = getattr(fd.ops, name)(*args, **kwargs)
                finally:
                    OPAQUE_OUTPUTS.reset(token)
            results = list(result) if len(node.outputs) > 1 else [result]
            if len(results) != len(node.outputs):
                raise FusionError(f"gave {len(results)} results; the definition has {len(node.outputs)}")
            if on_node is not None:
                results = on_node(node, results)
        except Exception as err:  # placed at the node: its definition line and op
            if not isinstance(err, FusionError):
                raise FusionError(f"{type(err).__name__}: {err}", line=node.line, op=label) from err
            if err.line is None:
                raise FusionError(err.message, line=node.line, op=err.op or label) from err
            raise
        env.update(zip(node.outputs, results, strict=True))
        for vid in {r.id for r in node.refs()} | set(node.outputs):
            if last_use.get(vid, -1) <= i:        # dead from here on: free it (the torch
                env.pop(vid, None)                # executor's intermediates are large)
    handles = []
    for out in fusion.outputs:
        if out.alias_input is not None:
            fd.add_output(env[out.value], env[out.alias_input])
        elif out.stride_order is not None:
            fd.add_output(env[out.value], stride_order=list(out.stride_order))
        else:
            fd.add_output(env[out.value])
        handles.append(env[out.value])
    return handles
