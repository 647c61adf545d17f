"""Inputs that keep index ops in range.

A repro's inputs are captured one tensor at a time, so how they relate is lost: in T5's
relative-position buckets a mask chooses between two index tensors, one of which is in range
only where the mask picks the other. Random or captured integers may then index out of range:
torch refuses, and nvFuser reads out of bounds (on a GPU, a device-side assert or an illegal
address that ends the process). Tests and benchmarks that run such a repro use
:func:`in_range_inputs`.
"""

from __future__ import annotations

from typing import Sequence

import torch

from eqsat.errors import FusionError
from eqsat.ir.fusion import Fusion

from .devices import fresh_copies
from .torch_executor import run_fusion

INDEX_OPS = frozenset({"index_select", "gather", "take_along_axis"})


def has_index_ops(fusion: Fusion) -> bool:
    return any(n.op in INDEX_OPS for n in fusion.nodes)


def in_range_inputs(fusion: Fusion, inputs: Sequence) -> list:
    """``inputs``, or where an index op would read out of range with them (checked by running
    the torch executor), the same inputs with every integer tensor replaced by zeros, which are
    in range for every index op."""
    if not has_index_ops(fusion):
        return list(inputs)
    try:
        run_fusion(fusion, fresh_copies(inputs), seed=0)
        return list(inputs)
    except FusionError as err:
        if "index out of range" not in str(err):
            raise
    return [
        torch.zeros_like(x)
        if isinstance(x, torch.Tensor) and not x.dtype.is_floating_point and x.dtype != torch.bool
        else x
        for x in inputs
    ]
