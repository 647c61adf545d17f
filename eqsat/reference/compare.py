"""Comparing outputs within dtype tolerance: what ``eqsat check`` and the tests call equal."""

from __future__ import annotations

import torch

from eqsat.ir.axes import ScalarType, TensorType
from eqsat.ir.dtypes import DataType, from_torch
from eqsat.ir.layout import memory_order

# relative tolerance per dtype, the one table of them; absolute tolerance is the same times the
# reference's scale
RTOL = {
    DataType.Double: 1e-7,
    DataType.Float: 1e-4,
    DataType.BFloat16: 2e-2,
    DataType.Half: 4e-3,
    DataType.Float8_e4m3fn: 0.125,
    DataType.Float8_e5m2: 0.25,
    DataType.Float8_e8m0fnu: 1.0,
}


def rtol_of(dtype: DataType | torch.dtype, default: float = 1e-4) -> float:
    """The relative tolerance of ``dtype`` (eqsat's DataType or a torch dtype) in :data:`RTOL`;
    ``default`` for a dtype it does not list (integers, complex)."""
    if isinstance(dtype, torch.dtype):
        try:
            dtype = from_torch(dtype)
        except ValueError:
            return default
    return RTOL.get(dtype, default)


def output_rtols(fusion) -> list[float]:
    """Per output of ``fusion``: the tolerance of the least precise floating dtype its value is
    computed through. Two implementations that round differently (nvFuser contracts
    ``a * b + c`` to one FMA) can differ by one ulp of that dtype in an intermediate, and a sum
    over such values moves by that much relative to its summands, not to its own (perhaps
    cancelled) magnitude."""
    types = fusion.types
    worst: dict[int, float] = {}
    for node in fusion.nodes:
        inherited = max((worst.get(r.id, 0.0) for r in node.refs()), default=0.0)
        for v in node.outputs:
            t = types[v]
            own = rtol_of(t.dtype, 0.0) if isinstance(t, (TensorType, ScalarType)) else 0.0
            worst[v] = max(inherited, own)
    return [worst.get(o.value) or RTOL[DataType.Float] for o in fusion.outputs]


def reduction_rtol(dtype: torch.dtype, reduction_size: int = 1) -> float:
    """The relative tolerance for a result of ``dtype`` whose sums combine up to
    ``reduction_size`` elements: reordering such a sum moves it by about sqrt(n) roundings
    (random-walk growth), so the dtype's tolerance grows as sqrt(n) past 16 elements."""
    return rtol_of(dtype) * max(1.0, (max(reduction_size, 1) / 16) ** 0.5)


def mismatch(got, want, rtol: float | None = None, atol: float | torch.Tensor = 0.0) -> str | None:
    """None if ``got`` matches ``want`` (shape, dtype, NaNs in the same places, the same
    infinities, finite values within ``rtol`` of the largest magnitude, by default the dtype's
    tolerance, plus ``atol``: a number, or a tensor of ``want``'s shape giving each element's
    own absolute floor), else why not."""
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
    if isinstance(atol, torch.Tensor):
        atol = atol.cpu().to(torch.float64).expand(want.shape)
    if got.stride() == want.stride():  # walk both in memory order (a transposed output)
        order = memory_order(want.stride())
        got, want = got.permute(order), want.permute(order)
        atol = atol.permute(order) if isinstance(atol, torch.Tensor) else atol
    if not (want.dtype.is_floating_point or want.dtype.is_complex):
        return None if torch.equal(got, want) else "integer values differ"
    # in a type that holds every value exactly (fp32 for 16 bits or less), without boolean
    # indexing: outputs of Thunder's fusions hold hundreds of millions of elements
    wide = torch.float32 if want.dtype.itemsize <= 2 and want.dtype.is_floating_point else torch.float64
    g, w = got.to(wide), want.to(wide)
    if want.dtype.is_complex:
        g, w = torch.view_as_real(got.to(torch.complex128)), torch.view_as_real(want.to(torch.complex128))
    rtol = rtol_of(want.dtype) if rtol is None else rtol
    if isinstance(atol, torch.Tensor) and atol.shape != g.shape:  # complex: real and imaginary
        atol = float(atol.nan_to_num(0.0).max())
    if isinstance(atol, torch.Tensor):
        return _special_mismatch(g, w) or _beyond_floors(g, w, rtol, atol)
    largest = (g - w).abs().max()
    if bool(largest.isfinite()):  # no NaN or infinity on either side: the fast path
        return _beyond(float(largest), float(w.abs().max()), rtol, atol)
    problem = _special_mismatch(g, w)
    if problem:
        return problem
    finite = torch.isfinite(w) & torch.isfinite(g)
    if not bool(finite.any()):
        return None
    zero = torch.zeros((), dtype=w.dtype)
    return _beyond(
        float(torch.where(finite, (g - w).abs(), zero).max()),
        float(torch.where(finite, w.abs(), zero).max()),
        rtol,
        atol,
    )


def _special_mismatch(g: torch.Tensor, w: torch.Tensor) -> str | None:
    """Where ``g`` and ``w`` differ in NaN places or infinities, why."""
    g_nan, w_nan = g.isnan(), w.isnan()
    if not torch.equal(g_nan, w_nan):
        return "NaNs in different places"
    if bool(((g.isinf() | w.isinf()) & (g != w)).any()):
        return "infinities differ"
    return None


def _beyond_floors(g: torch.Tensor, w: torch.Tensor, rtol: float, floors: torch.Tensor) -> str | None:
    """Finite values differing by more than ``rtol`` times the largest finite ``w`` plus each
    element's own floor: the worst one, or None."""
    finite = torch.isfinite(w) & torch.isfinite(g)
    zero = torch.zeros((), dtype=torch.float64)
    diff = torch.where(finite, (g - w).abs().to(torch.float64), zero)
    scale = float(torch.where(finite, w.abs().to(torch.float64), zero).max())
    floors = torch.where(floors.isnan(), zero, floors)
    excess = diff - floors - rtol * max(scale, 1e-30) - 1e-30
    if not bool((excess > 0).any()):
        return None
    i = int(excess.flatten().argmax())
    return (
        f"max |difference| {float(diff.flatten()[i]):.3g} exceeds {rtol:g} x max |value| {scale:.3g} "
        f"plus its floor {float(floors.flatten()[i]):.3g}"
    )


def _beyond(err: float, scale: float, rtol: float, atol: float) -> str | None:
    if err > rtol * max(scale, 1e-30) + atol + 1e-30:
        return f"max |difference| {err:.3g} exceeds {rtol:g} x max |value| {scale:.3g}"
    return None
