"""Outputs that are the same at every call: values a fusion computes from no input.

A value is *call-invariant* where nothing it is computed from varies between two calls of the
same definition: no input (``define_tensor``, an input ``define_scalar``), no op that draws
random numbers (each call draws anew), and no opaque op (eqsat does not know what it reads).
Constants, ``iota``, ``full`` and the ops over them are call-invariant: Thunder's regions make
a causal attention mask that way (``iota``, ``broadcast``, ``le``, ``expand``), and the rotary
tables of some models.

The definition is fixed for given input shapes, so a call-invariant output's value at one call
is its value at every call with those shapes. :mod:`eqsat.thunder.causal_masks` uses that: it
checks such an output once, at the region's first call, and trusts the check after.
"""

from __future__ import annotations

from .fusion import Fusion
from .opspec import RANDOM_OPS


def call_invariant_values(fusion: Fusion) -> frozenset[int]:
    """The value ids of ``fusion`` computed from no input, no random draw and no opaque op."""
    varying: set[int] = set()
    for node in fusion.nodes:
        if (
            node.is_input
            or node.opaque
            or node.op in RANDOM_OPS
            or any(ref.id in varying for ref in node.refs())
        ):
            varying.update(node.outputs)
    return frozenset(v for n in fusion.nodes for v in n.outputs if v not in varying)


def call_invariant_outputs(fusion: Fusion) -> tuple[int, ...]:
    """The positions (in ``fusion.outputs``) of the outputs that are call-invariant and not
    written into an input."""
    invariant = call_invariant_values(fusion)
    return tuple(
        i for i, out in enumerate(fusion.outputs) if out.value in invariant and out.alias_input is None
    )
