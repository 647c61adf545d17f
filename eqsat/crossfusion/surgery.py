"""Fusion surgery for passing values between fusions: a value made an extra output of one
fusion, and read as an extra input by another instead of being computed there."""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from eqsat.errors import FusionError
from eqsat.ir.axes import TensorType
from eqsat.ir.fusion import TENSOR, Fusion, Node, Output, Ref


def with_outputs(fusion: Fusion, values: Sequence[int]) -> tuple[Fusion, list[int]]:
    """``fusion`` with each of ``values`` an output (appended, unless it is one already), and
    the output index of each."""
    outputs = list(fusion.outputs)
    where = []
    for v in values:
        found = next((i for i, o in enumerate(outputs) if o.value == v and o.alias_input is None), None)
        if found is None:
            outputs.append(Output(v))
            found = len(outputs) - 1
        where.append(found)
    return Fusion(fusion.nodes, tuple(outputs), fusion.frontend), where


def input_definition(t: Any, what: str) -> tuple[tuple, tuple, Any]:
    """(shape, contiguity, dtype) of the ``define_tensor`` that reads a value of type ``t``
    written contiguously by another fusion: symbolic extents, broadcast dims of extent 1."""
    if not (isinstance(t, TensorType) and t.known):
        raise FusionError(f"{what} is not a tensor of known dtype and rank; it cannot be read as an input")
    shape = tuple(1 if d.broadcast else -1 for d in t.dims)
    contiguity = tuple(None if d.broadcast else True for d in t.dims)
    return shape, contiguity, t.dtype


def with_inputs(fusion: Fusion, values: Sequence[int]) -> Fusion:
    """``fusion`` reading each of ``values`` from a new input (after the existing inputs, in
    the order given) instead of computing it; the nodes that only fed them are dropped and the
    values renumbered in definition order."""
    values = list(dict.fromkeys(values))
    placeholder = {v: -1 - i for i, v in enumerate(values)}
    new_inputs = []
    for v in values:
        node = fusion.producer.get(v)
        if node is None or node.is_input:
            raise FusionError(
                f"value %{v} is {'an input' if node else 'not a value'} of the fusion; "
                "only a computed value can be replaced by an input"
            )
        shape, contiguity, dtype = input_definition(fusion.types[v], f"value %{v} (made by fd.ops.{node.op})")
        args = (
            ("shape", shape),
            ("contiguity", contiguity),
            ("dtype", dtype),
            ("is_cpu", False),
            ("stride_order", None),
        )
        new_inputs.append(Node("define_tensor", args, (placeholder[v],), (TENSOR,)))
    nodes = [_rename(n, placeholder) for n in fusion.nodes]
    outputs = [dataclasses.replace(o, value=placeholder.get(o.value, o.value)) for o in fusion.outputs]
    last_input = max((i for i, n in enumerate(nodes) if n.is_input), default=-1)
    nodes[last_input + 1 : last_input + 1] = new_inputs
    return _renumbered(_live(nodes, outputs), outputs, fusion.frontend)


def _rename(node: Node, names: dict[int, int]) -> Node:
    args = tuple((k, _renamed(v, names)) for k, v in node.args)
    return dataclasses.replace(node, args=args)


def _renamed(value: Any, names: dict[int, int]) -> Any:
    if isinstance(value, Ref):
        return Ref(names.get(value.id, value.id))
    if isinstance(value, tuple):
        return tuple(_renamed(v, names) for v in value)
    return value


def _live(nodes: list[Node], outputs: list[Output]) -> list[Node]:
    """The nodes an output depends on, and every input (an input stays in the signature)."""
    needed = {o.value for o in outputs} | {o.alias_input for o in outputs if o.alias_input is not None}
    kept = []
    for node in reversed(nodes):
        if node.is_input or needed.intersection(node.outputs):
            kept.append(node)
            needed.update(r.id for r in node.refs())
    return kept[::-1]


def _renumbered(nodes: list[Node], outputs: list[Output], frontend) -> Fusion:
    ids: dict[int, int] = {}
    for node in nodes:
        for v in node.outputs:
            ids[v] = len(ids)
    nodes = [dataclasses.replace(_rename(n, ids), outputs=tuple(ids[v] for v in n.outputs)) for n in nodes]
    outputs = [
        dataclasses.replace(
            o, value=ids[o.value], alias_input=None if o.alias_input is None else ids[o.alias_input]
        )
        for o in outputs
    ]
    return Fusion(tuple(nodes), tuple(outputs), frontend)
