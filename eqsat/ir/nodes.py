"""The IR's parts: :class:`Ref` (a value made earlier), :class:`Node` (one call),
:class:`Output`, and the kinds of value (tensor, scalar, vector)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterator

TENSOR, SCALAR, VECTOR = "T", "S", "V"
FRONTENDS = ("nvfuser", "nvfuser_direct")  # nvFuser's Python frontends: classic, direct


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


def freeze(value: Any) -> Any:
    """Lists to tuples, recursively, so that arguments are hashable."""
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value
