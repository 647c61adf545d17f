"""Moving a fusion's inputs between devices with their strides kept.

``t.cuda()`` copies an expanded tensor (stride 0 along a broadcast dimension of size > 1) into
ordinary strides, and nvFuser then rejects it; these copy the storage and re-apply the strides.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from eqsat.ir.fusion import Fusion


def copy_strided(t: torch.Tensor, device) -> torch.Tensor:
    """A copy of ``t`` on ``device`` with the same sizes, strides and storage offset."""
    storage = t.untyped_storage()
    base = t.new_empty(0).set_(storage, 0, (storage.nbytes() // t.element_size(),), (1,))
    return base.to(device, copy=True).as_strided(t.shape, t.stride(), t.storage_offset())


def to_device(values: Sequence[Any], device="cuda", fusion: Fusion | None = None) -> list:
    """Tensors of ``values`` copied to ``device`` (strides kept); inputs that ``fusion`` defines
    with ``is_cpu=True`` (CPU scalars) stay on the CPU; other values pass through."""
    cpu = set()
    if fusion is not None:
        cpu = {i for i, v in enumerate(fusion.inputs) if fusion.producer[v].arg("is_cpu")}
    return [
        copy_strided(t, "cpu" if i in cpu else device) if isinstance(t, torch.Tensor) else t
        for i, t in enumerate(values)
    ]


def fresh_copies(values: Sequence[Any]) -> list:
    """Copies on the same devices (for fusions that write into an aliased input)."""
    return [copy_strided(t, t.device) if isinstance(t, torch.Tensor) else t for t in values]
