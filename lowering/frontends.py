"""The calls each of nvFuser's frontends takes in another form than the IR records them:
:class:`Classic` (``nvfuser``, up to 0.2.35) and :class:`Direct` (``nvfuser_direct``),
handed to :func:`eqsat.ir.replay.replay` as its ``calls``."""

from __future__ import annotations

from typing import Any

from eqsat.ir.dtypes import of_number
from eqsat.ir.fusion import Fusion, Node, Ref
from eqsat.ir.opspec import OPERANDS, VAL_ONLY
from eqsat.ir.replay import AS_WRITTEN, GENERIC, Calls, replay


def is_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float, complex))


class _ScalarOperands(Calls):
    """A frontend that binds the Python numbers in some argument places (``places``) only as
    scalars: each is defined with ``fd.define_scalar`` first."""

    places: frozenset = frozenset()

    def adapt(self, node: Node, fd: Any, scalars: dict[int, Any]) -> Node:
        if node.opaque or node.op.startswith("define_"):
            return node
        changes = {}
        for k, v in node.args:
            if k in self.places and is_number(v):
                key = -1 - len(scalars)  # below every value id of the fusion
                scalars[key] = fd.define_scalar(v, dtype=of_number(v))
                changes[k] = Ref(key)
        return node.with_args(**changes) if changes else node


class Direct(_ScalarOperands):
    """nvfuser_direct: ``define_vector`` values as python lists of their entries (it has no
    ``define_vector(list)``); the numbers it binds as a Val alone (``opspec.VAL_ONLY``: topk's
    k, scatter's scalar src) defined as scalars first."""

    places = VAL_ONLY

    def call(self, node: Node, fd: Any, args: list, fusion: Fusion) -> Any:
        return list(args[0]) if node.op == "define_vector" else GENERIC


class Classic(_ScalarOperands):
    """The classic frontend: its ops take no Python numbers as operands (each is defined with
    ``fd.define_scalar`` first); an empty ``stride_order`` (a row-major copy) is a ``set``;
    ``clamp`` as nvFuser defines it (:meth:`clamp`)."""

    places = OPERANDS | VAL_ONLY

    def adapt(self, node: Node, fd: Any, scalars: dict[int, Any]) -> Node:
        if node.op == "stride_order" and not node.opaque and not node.arg("stride_order"):
            return Node("set", (("arg", node.arg("arg")),), node.outputs, node.kinds, line=node.line)
        return super().adapt(node, fd, scalars)

    def call(self, node: Node, fd: Any, args: list, fusion: Fusion) -> Any:
        if node.op == "clamp":
            return self.clamp(fd, *args, dtype=fusion.types[node.outputs[0]].dtype)
        return GENERIC

    @staticmethod
    def clamp(fd: Any, x: Any, low: Any, high: Any, *, dtype) -> Any:
        """``clamp(x, low, high)`` for the classic frontend, whose ``clamp(Tensor, Scalar,
        Scalar)`` binding checks ``!validUse()`` and so refuses every call (nvFuser 0.2.35,
        python_bindings.cpp). Written as nvFuser defines clamp (runtime/helpers.cu):
        ``min(max(x, low), high)``, NaN propagated by both, the bounds in ``x``'s dtype.
        ``maximum`` computes a half ``x`` in Float; rounding is monotone, so casting the result
        back gives clamp's value."""
        y = fd.ops.minimum(fd.ops.maximum(x, low), high)
        return fd.ops.cast(y, dtype=dtype)


FRONTEND_CALLS: dict[str | None, Calls] = {None: AS_WRITTEN, "classic": Classic(), "direct": Direct()}


def replay_for(fusion: Fusion, fd: Any, style: str | None) -> list:
    """:func:`eqsat.ir.replay.replay` with the calls of frontend ``style`` ("classic", "direct",
    or None: as the IR records them)."""
    if style not in FRONTEND_CALLS:
        raise ValueError(f"style must be None, 'classic' or 'direct', got {style!r}")
    return replay(fusion, fd, calls=FRONTEND_CALLS[style])
