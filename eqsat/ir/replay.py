"""Replaying a Fusion's calls on any implementation of nvFuser's FusionDefinition protocol."""

from __future__ import annotations

from collections import ChainMap
from typing import Any, Callable

from eqsat.errors import FusionError

from .fusion import Fusion, Node, Ref
from .opspec import OPAQUE_OUTPUTS, OPS, call_form


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


class Calls:
    """How :func:`replay` makes a node's calls: as the IR has them. A frontend's cases
    (``eqsat.lowering.frontends``) override :meth:`adapt` and :meth:`call` where that frontend
    takes a call in another form."""

    def adapt(self, node: Node, fd: Any, scalars: dict[int, Any]) -> Node:
        """``node`` as the frontend takes it; values it defines on ``fd`` first go in
        ``scalars`` under negative ids."""
        return node

    def call(self, node: Node, fd: Any, args: list, fusion: Fusion) -> Any:
        """The node's result made some other way than its own call, or :data:`GENERIC`."""
        return GENERIC


GENERIC = object()  # Calls.call: make the node's own call
AS_WRITTEN = Calls()


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


def replay(
    fusion: Fusion, fd: Any, *, calls: Calls = AS_WRITTEN, on_node: Callable[[Node, list], list] | None = None
) -> list:
    """Make ``fusion``'s calls on ``fd`` and add its outputs; returns the output handles.

    ``calls`` adapts them to one of nvFuser's frontends where the two differ
    (``eqsat.lowering.frontends``). ``on_node(node, results)`` sees (and may replace) each
    node's results. A call that fails raises FusionError naming the node's definition line
    and op.
    """
    env: dict[int, Any] = {}
    last_use = _last_uses(fusion)
    for i, node in enumerate(fusion.nodes):
        results = _node_results(fusion, node, fd, env, calls, on_node)
        env.update(zip(node.outputs, results, strict=True))
        for vid in {r.id for r in node.refs()} | set(node.outputs):
            if last_use.get(vid, -1) <= i:  # dead from here on: free it (the torch
                env.pop(vid, None)  # executor's intermediates are large)
    return _add_outputs(fusion, fd, env)


def _node_results(
    fusion: Fusion,
    node: Node,
    fd: Any,
    env: dict[int, Any],
    calls: Calls,
    on_node: Callable[[Node, list], list] | None,
) -> list:
    """The results of ``node``'s call on ``fd``, its operands looked up in ``env``."""
    scalars: dict[int, Any] = {}
    call_node = calls.adapt(node, fd, scalars)
    name, args, kwargs = node_call(call_node)
    values = ChainMap(scalars, env) if scalars else env
    args, kwargs = _resolve(tuple(args), values), {k: _resolve(v, values) for k, v in kwargs.items()}

    def make() -> list:
        result = calls.call(node, fd, args, fusion)
        if result is GENERIC:
            result = _generic_call(node, fd, name, args, kwargs)
        results = list(result) if len(node.outputs) > 1 else [result]
        if len(results) != len(node.outputs):
            raise FusionError(f"gave {len(results)} results; the definition has {len(node.outputs)}")
        return results if on_node is None else on_node(node, results)

    return _at_node(node, make, f"fd.{name}" if name.startswith("define_") else f"fd.ops.{name}")


def _generic_call(node: Node, fd: Any, name: str, args: list, kwargs: dict) -> Any:
    if name.startswith("define_"):
        return getattr(fd, name)(*args, **kwargs)
    token = OPAQUE_OUTPUTS.set(len(node.outputs) if node.opaque and len(node.outputs) > 1 else None)
    try:
        return getattr(fd.ops, name)(*args, **kwargs)
    finally:
        OPAQUE_OUTPUTS.reset(token)


def _at_node(node: Node, work: Callable[[], list], label: str) -> list:
    """``work()``, an error it raises placed at the node: its definition line and op."""
    try:
        return work()
    except Exception as err:  # placed at the node: its definition line and op
        if not isinstance(err, FusionError):
            raise FusionError(f"{type(err).__name__}: {err}", line=node.line, op=label) from err
        if err.line is None:
            raise FusionError(err.message, line=node.line, op=err.op or label) from err
        raise


def _add_outputs(fusion: Fusion, fd: Any, env: dict[int, Any]) -> list:
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
