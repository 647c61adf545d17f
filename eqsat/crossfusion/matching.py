"""Values two fusions both compute: value numbering across a forward and a backward fusion.

Each value gets a key built from its op, its arguments (other values by their keys, constants
as written) and which of the op's outputs it is, so two values have the same key exactly when
they are made by the same calls from the same inputs. The fusions' inputs are keyed by
``links``: a backward input linked to a forward input (the same tensor at run time: the
logits both read, say) gets that forward input's key; an unlinked input gets a key of its own.

This is what Thunder's rematerialization leaves behind: the backward recomputes from a saved
input what the forward computed from it, by the same calls (the logsumexp of a
cross-entropy's logits, a norm's statistics), and the two appear here as one key.
"""

from __future__ import annotations

from typing import Any, Mapping

from eqsat.ir.fusion import Fusion, Ref
from eqsat.ir.opspec import OPS

_CONSTANT_OPS = ("define_scalar", "define_vector")


class ValueNumbering:
    """Keys of values (hash-consed to small ints) shared by the fusions numbered with it."""

    def __init__(self):
        self._ids: dict[tuple, int] = {}

    def _intern(self, key: tuple) -> int:
        return self._ids.setdefault(key, len(self._ids))

    def number(self, fusion: Fusion, input_keys: Mapping[int, Any]) -> dict[int, int]:
        """value id -> key for every value of ``fusion``; ``input_keys``: input position ->
        a hashable token naming what that input is (inputs with equal tokens are one value)."""
        keys: dict[int, int] = {}
        position = {vid: i for i, vid in enumerate(fusion.inputs)}
        for node in fusion.nodes:
            if node.is_input:
                vid = node.outputs[0]
                keys[vid] = self._intern(("input", input_keys[position[vid]]))
                continue
            args = tuple((name, _keyed(value, keys)) for name, value in node.args)
            if not deterministic(node):  # a value of its own, equal to nothing else
                args = (("unique", len(self._ids)),)
            for i, vid in enumerate(node.outputs):
                keys[vid] = self._intern((node.op, node.opaque, args, i))
        return keys


def deterministic(node) -> bool:
    """Whether two calls of ``node`` on equal arguments make equal values: not for an op eqsat
    does not model (``opaque``), nor for a random op without a seed (nvFuser draws a fresh
    one per call); a random op given its seed and offset draws the same numbers each time."""
    if node.opaque:
        return False
    spec = OPS.get(node.op)
    return not (spec is not None and spec.category == "random" and node.arg("rng_seed") is None)


def _keyed(value: Any, keys: Mapping[int, int]) -> Any:
    if isinstance(value, Ref):
        return ("ref", keys[value.id])
    if isinstance(value, tuple):
        return tuple(_keyed(v, keys) for v in value)
    if isinstance(value, float) and value != value:  # NaN: equal to itself as a constant
        return ("nan",)
    return (type(value).__name__, value)  # 1 and 1.0 and True are different constants


def common_values(forward: Fusion, backward: Fusion, links: Mapping[int, int]) -> dict[int, int]:
    """backward value id -> the forward value id computed by the same calls from the same
    inputs (``links``: backward input position -> forward input position). Inputs and
    constants are left out: only computed values are worth passing between the two."""
    numbering = ValueNumbering()
    fwd = numbering.number(forward, {i: ("forward", i) for i in range(len(forward.inputs))})
    bwd = numbering.number(
        backward,
        {i: ("forward", links[i]) if i in links else ("backward", i) for i in range(len(backward.inputs))},
    )
    first: dict[int, int] = {}
    for vid, key in fwd.items():
        first.setdefault(key, vid)
    out = {}
    for node in backward.nodes:
        if node.is_input or node.op in _CONSTANT_OPS:
            continue
        for vid in node.outputs:
            if bwd[vid] in first:
                out[vid] = first[bwd[vid]]
    return out
