"""Comparing outputs within dtype tolerance: what ``eqsat check`` and the tests call equal."""
from __future__ import annotations

import torch

# relative tolerance per dtype; absolute tolerance is the same times the reference's scale
RTOL = {torch.float64: 1e-7, torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 4e-3}


def reduction_rtol(dtype: torch.dtype, reduction_size: int = 1) -> float:
    """The relative tolerance for a result of ``dtype`` whose sums combine up to
    ``reduction_size`` elements: reordering such a sum moves it by about sqrt(n) roundings
    (random-walk growth), so the dtype's tolerance grows as sqrt(n) past 16 elements."""
    return RTOL.get(dtype, 1e-4) * max(1.0, (max(reduction_size, 1) / 16) ** 0.5)


def mismatch(got, want, rtol: float | None = None, atol: float = 0.0) -> str | None:
    """None if ``got`` matches ``want`` (shape, dtype, values within ``rtol`` of the largest
    magnitude, by default the dtype's tolerance, plus ``atol``), else why not."""
    if not isinstance(want, torch.Tensor):
        return None if got == want else f"{got!r} != {want!r}"
    if not isinstance(got, torch.Tensor):
        return f"expected a tensor, got {type(got).__name__}"
    if got.shape != want.shape:
        return f"shape {tuple(got.shape)} != {tuple(want.shape)}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} != {want.dtype}"
    if got.device.type == "meta" or want.numel() == 0:
        return None
    got, want = got.cpu(), want.cpu()
    if not (want.dtype.is_floating_point or want.dtype.is_complex):
        return None if torch.equal(got, want) else "integer values differ"
    g, w = got.double(), want.double()
    if not torch.equal(g.isnan(), w.isnan()):
        return "NaNs in different places"
    finite = torch.isfinite(w) & torch.isfinite(g)
    if not torch.equal(g[~finite & ~w.isnan()], w[~finite & ~w.isnan()]):
        return "infinities differ"
    if not finite.any():
        return None
    rtol = RTOL.get(want.dtype, 1e-4) if rtol is None else rtol
    scale = float(w[finite].abs().max())
    err = float((g[finite] - w[finite]).abs().max())
    if err > rtol * max(scale, 1e-30) + atol + 1e-30:
        return f"max |difference| {err:.3g} exceeds {rtol:g} x max |value| {scale:.3g}"
    return None
