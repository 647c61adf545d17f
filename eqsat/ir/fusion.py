"""The Fusion IR: a straight-line list of nvFuser calls over numbered values.

A :class:`Fusion` is immutable and hashable. Each :class:`Node` is one call of nvFuser's
``FusionDefinition`` protocol (``define_tensor``, ``define_scalar``, ``define_vector``, an
``fd.ops`` op) with its arguments bound to the op's canonical parameter names; arguments are
:class:`Ref` (a value made earlier), constants, :class:`DataType`, or tuples of these. Value
ids are numbered in definition order, so two definitions that make the same calls are equal
whatever their variable names or source lines.

Types (dtype, positional dims, axis labels and extents) are derived from the nodes by
:mod:`eqsat.axes` and cached on the fusion (``fusion.types``).
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Iterator

from .dtypes import DataType

TENSOR, SCALAR, VECTOR = "T", "S", "V"
FRONTENDS = ("nvfuser", "nvfuser_direct")     # nvFuser's Python frontends: classic, direct


@dataclass(frozen=True)
class Ref:
    """A value made by an earlier node (``id`` is its number in the fusion)."""

    id: int

    def __repr__(self) -> str:
        return f"%{self.id}"


@dataclass(frozen=True)
class Node:
    """One call: ``op`` is ``define_tensor``, ``define_scalar``, ``define_vector`` or an
    ``fd.ops`` name; ``args`` are (parameter, value) pairs in the op's canonical order."""

    op: str
    args: tuple[tuple[str, Any], ...]
    outputs: tuple[int, ...]
    kinds: tuple[str, ...]
    opaque: bool = False
    line: int | None = field(default=None, compare=False, hash=False)

    def arg(self, name: str, default: Any = None) -> Any:
        for key, value in self.args:
            if key == name:
                return value
        return default

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.args)

    def refs(self) -> Iterator[Ref]:
        """Every value this node reads, in argument order."""
        for _, value in self.args:
            yield from iter_refs(value)

    @property
    def is_input(self) -> bool:
        return self.op == "define_tensor" or (self.op == "define_scalar" and self.arg("value") is None)

    def with_args(self, **changes: Any) -> "Node":
        args = tuple((k, changes.pop(k)) if k in changes else (k, v) for k, v in self.args)
        if changes:
            raise KeyError(f"{self.op} has no parameters {sorted(changes)}")
        return dataclasses.replace(self, args=args)


def iter_refs(value: Any) -> Iterator[Ref]:
    if isinstance(value, Ref):
        yield value
    elif isinstance(value, tuple):
        for item in value:
            yield from iter_refs(item)


@dataclass(frozen=True)
class Output:
    """A fusion output: the value, and optionally the input it is written into (alias) or
    the stride order it is written in."""

    value: int
    alias_input: int | None = None
    stride_order: tuple[int, ...] | None = None


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
    def kind(self) -> dict[int, str]:
        return {v: k for n in self.nodes for v, k in zip(n.outputs, n.kinds)}

    @functools.cached_property
    def types(self):
        """Per-value types (:class:`eqsat.axes.TensorType` for tensors), derived from the nodes."""
        from .axes import infer_types

        return infer_types(self)

    @property
    def num_values(self) -> int:
        return sum(len(n.outputs) for n in self.nodes)

    def ops(self) -> list[str]:
        return [n.op for n in self.nodes]

    def __str__(self) -> str:
        from .printing import format_fusion

        return format_fusion(self)

    def with_frontend(self, frontend: str | None) -> "Fusion":
        return self if frontend == self.frontend else Fusion(self.nodes, self.outputs, frontend)

    def __getstate__(self):
        return {"nodes": self.nodes, "outputs": self.outputs, "frontend": self.frontend}

    def __setstate__(self, state):
        object.__setattr__(self, "nodes", state["nodes"])
        object.__setattr__(self, "outputs", state["outputs"])
        object.__setattr__(self, "frontend", state.get("frontend"))


def freeze(value: Any) -> Any:
    """Lists to tuples, recursively, so that arguments are hashable."""
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value
