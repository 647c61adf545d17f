"""Causal attention masks known by how they were made, so that attention can run causal
instead of masked.

transformers materializes a boolean causal mask and passes it to ``scaled_dot_product_attention``;
under Thunder an nvFuser region computes it from ``iota``, ``broadcast``, ``le`` and ``expand``
alone. Attention with a causal mask given as a tensor reads the mask (or a bias made from it)
and visits every block of the scores; told ``is_causal``, cuDNN's and flash's kernels skip the
blocks above the diagonal and read no mask. On an H100, Phi-3's attention at 4x2048 took 3.38
ms masked on cuDNN and 1.91 ms causal on flash (``docs/step-profile.md``).

How a mask becomes known causal, exactly:

1. eqsat's IR says which of a region's outputs are call-invariant
   (:mod:`eqsat.ir.call_invariant`: computed from no input, no random draw, no opaque op), so
   equal at every call of the definition Thunder made for the inputs' signature.
2. At the region's first call with that signature, :class:`eqsat.thunder.region.RegionHook`
   compares each boolean call-invariant output with the lower triangle on the device
   (:func:`is_causal_pattern`, one synchronization, once per region and signature).
3. At that call and every later one, the hook marks those outputs (:func:`mark`).
4. eqsat's cuDNN attention executor runs a marked mask over square scores as ``is_causal``
   with no mask (:func:`eqsat.thunder.cudnn_attention.mask_arguments`).

A mark names the mask's storage (a weak reference: the mark goes when the storage is freed),
its layout (offset, shape, strides, dtype) and its version counter at the time. A tensor is
marked where it views a marked storage with that layout and that version: the mask itself, or
an alias of it that shares its version counter. Thunder saves the forward's tensors for the
backward as ``detach()``-ed aliases (``thunder/executors/torch_autograd.py``), so the backward's
attention finds the forward's mark. A write through the mask or such an alias bumps the version
and the mark no longer holds. (A write through an alias with a counter of its own, as
``tensor.data`` makes, is not seen; Thunder's traces write into no region output.) A view that
is the marked mask's top-left square corner with the same strides (``mask[..., :n, :n]``) is
itself the lower triangle, and is marked too. Any other mask runs as a mask.
"""

from __future__ import annotations

import threading

import torch
from torch.multiprocessing.reductions import StorageWeakRef

_MARKS: dict[StorageWeakRef, list[tuple]] = {}  # per live storage: (offset, shape, strides, dtype, version)
_LOCK = threading.Lock()


def is_causal_pattern(mask: torch.Tensor) -> bool:
    """Whether ``mask`` is boolean, square in its last two dims (n x n, n >= 1), and at every
    leading index the lower triangle with its diagonal (True where column <= row), as
    ``torch.ones(n, n).tril()``. On a GPU this synchronizes once."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.dim() < 2:
        return False
    n = mask.shape[-1]
    if n == 0 or mask.shape[-2] != n or mask.numel() == 0:
        return False
    lower = torch.ones(n, n, dtype=torch.bool, device=mask.device).tril()
    return bool(torch.equal(mask, lower.expand_as(mask)))


def _layout(t: torch.Tensor) -> tuple:
    return (t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype, t._version)


def mark(mask: torch.Tensor) -> None:
    """Record that ``mask``, as it is now, is a causal mask (:func:`is_causal_pattern`). Marks
    of freed storages are dropped here."""
    ref = StorageWeakRef(mask.untyped_storage())
    with _LOCK:
        for gone in [r for r in _MARKS if r.expired()]:
            del _MARKS[gone]
        marks = _MARKS.setdefault(ref, [])
        layout = _layout(mask)
        if layout not in marks:
            marks.append(layout)


def live_marks() -> int:
    """How many marks are held (those of storages not yet freed, and of freed ones until the
    next :func:`mark`)."""
    with _LOCK:
        return sum(len(m) for m in _MARKS.values())


def is_marked(mask) -> bool:
    """Whether ``mask`` views a marked mask's storage with its layout and version (the mask,
    or an alias sharing its version counter), or is the top-left square corner of one, viewed
    with the same strides."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.dim() < 2:
        return False
    with _LOCK:
        marks = _MARKS.get(StorageWeakRef(mask.untyped_storage()))
        marks = list(marks) if marks else []
    offset, shape, strides, dtype, version = _layout(mask)
    return any(
        (offset, strides, dtype, version) == (m_offset, m_strides, m_dtype, m_version)
        and (shape == m_shape or _top_left_square(shape, m_shape))
        for m_offset, m_shape, m_strides, m_dtype, m_version in marks
    )


def _top_left_square(shape: tuple, marked: tuple) -> bool:
    return len(shape) == len(marked) and shape[-1] == shape[-2] and all(v <= b for v, b in zip(shape, marked))
