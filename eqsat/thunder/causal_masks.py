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

A mark is an attribute of the tensor holding the tensor's version counter, so a mask written
in place after it was marked is no longer marked. A view of a marked mask is marked where it is
its top-left square corner with the same strides (``mask[..., :n, :n]``), which is itself the
lower triangle. Any other mask runs as a mask.
"""

from __future__ import annotations

import torch

_MARK = "_eqsat_causal_version"


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


def mark(mask: torch.Tensor) -> None:
    """Record that ``mask``, as it is now, is a causal mask (:func:`is_causal_pattern`)."""
    setattr(mask, _MARK, mask._version)


def is_marked(mask) -> bool:
    """Whether ``mask`` was marked causal and not written since, or is the top-left square
    corner of such a mask, viewed with the same strides."""
    if not isinstance(mask, torch.Tensor):
        return False
    if getattr(mask, _MARK, None) == mask._version:
        return True
    base = mask._base
    return base is not None and getattr(base, _MARK, None) == base._version and _top_left_square(mask, base)


def _top_left_square(view: torch.Tensor, base: torch.Tensor) -> bool:
    return (
        view.dim() == base.dim()
        and view.stride() == base.stride()
        and view.storage_offset() == base.storage_offset()
        and view.shape[-1] == view.shape[-2]
        and all(v <= b for v, b in zip(view.shape, base.shape))
    )
