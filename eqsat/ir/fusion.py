"""The Fusion IR: a straight-line list of nvFuser calls over numbered values.

A :class:`Fusion` is immutable and hashable. Each :class:`Node` is one call of nvFuser's
``FusionDefinition`` protocol (``define_tensor``, ``define_scalar``, ``define_vector``, an
``fd.ops`` op) with its arguments bound to the op's canonical parameter names; arguments are
:class:`Ref` (a value made earlier), constants, :class:`DataType`, or tuples of these. Value
ids are numbered in definition order, so two definitions that make the same calls are equal
whatever their variable names or source lines.

Types (dtype, positional dims, axis labels and extents) are derived from the nodes by
:mod:`eqsat.ir.axes` and cached on the fusion (``fusion.types``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from .axes import Types, infer_types
from .nodes import FRONTENDS, SCALAR, TENSOR, VECTOR, Node, Output, Ref, freeze, iter_refs
from .printing import format_fusion

__all__ = [
    "FRONTENDS",
    "SCALAR",
    "TENSOR",
    "VECTOR",
    "Fusion",
    "Node",
    "Output",
    "Ref",
    "freeze",
    "iter_refs",
]


@dataclass(frozen=True)
class Fusion:
    """``frontend`` names the nvFuser frontend the definition was written for (``nvfuser``,
    ``nvfuser_direct``, or None where that is unknown); lowering goes back to it. It is not
    part of the fusion's identity (equality and hash)."""

    nodes: tuple[Node, ...]
    outputs: tuple[Output, ...]
    frontend: str | None = field(default=None, compare=False)

    @functools.cached_property
    def inputs(self) -> tuple[int, ...]:
        """Value ids of the fusion's inputs, in the order ``execute`` takes them."""
        return tuple(n.outputs[0] for n in self.nodes if n.is_input)

    @functools.cached_property
    def producer(self) -> dict[int, Node]:
        return {v: n for n in self.nodes for v in n.outputs}

    @functools.cached_property
    def readers(self) -> dict[int, list[Node]]:
        """Value id -> the nodes that read it, in definition order."""
        out: dict[int, list[Node]] = {}
        for n in self.nodes:
            for ref in n.refs():
                out.setdefault(ref.id, []).append(n)
        return out

    @functools.cached_property
    def kind(self) -> dict[int, str]:
        return {v: k for n in self.nodes for v, k in zip(n.outputs, n.kinds)}

    @functools.cached_property
    def types(self) -> Types:
        """Per-value types (:class:`eqsat.ir.axes.TensorType` for tensors), derived from the nodes."""
        return infer_types(self)

    def ops(self) -> list[str]:
        return [n.op for n in self.nodes]

    def __str__(self) -> str:
        return format_fusion(self)

    def with_frontend(self, frontend: str | None) -> "Fusion":
        return self if frontend == self.frontend else Fusion(self.nodes, self.outputs, frontend)

    def __getstate__(self):
        return {"nodes": self.nodes, "outputs": self.outputs, "frontend": self.frontend}

    def __setstate__(self, state):
        object.__setattr__(self, "nodes", state["nodes"])
        object.__setattr__(self, "outputs", state["outputs"])
        object.__setattr__(self, "frontend", state.get("frontend"))
