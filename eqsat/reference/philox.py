"""nvFuser's random ops given ``rng_seed`` and ``rng_offset``, reproduced on the CPU.

nvFuser draws ``fd.ops.uniform``/``normal`` with Philox4x32-10 (``runtime/random_numbers.cu``):
element ``i`` of the op's own shape (row-major linear index) takes word ``i % m`` of
``philox(seed, subsequence=i // m, offset)``, with ``m`` = 2 for Double and 4 otherwise; the
offset is used as given, as the first two counter words. Each value therefore depends on the
seed, the offset, its index and the dtype alone, not on how nvFuser schedules or segments the
kernel, which is what lets the torch executor give nvFuser's numbers.

Uniform values are bit-exact: a word becomes ``float(x) * 2**-32 + 2**-33`` in fp32 (two
words, 53 bits, in fp64), a result of exactly 1 becomes 0 (for bf16/fp16 after rounding,
nearest-even), and a range is applied as ``fma(high - low, u, low)`` (nvFuser compiles with
``--fmad=true``). Normal values use Box-Muller with CUDA's ``logf``/``sinf``/``cosf``, which are
not correctly rounded; here they are computed in fp32 with torch's, so they may differ from the
GPU's in the last bit or two.
"""

from __future__ import annotations

import math

import numpy as np
import torch

_U64 = np.uint64
_MASK = _U64(0xFFFFFFFF)


def philox(seed: int, subsequence: np.ndarray, offset: int) -> np.ndarray:
    """Philox4x32-10 as nvFuser (and cuRAND) run it: uint32 words, shape ``subsequence.shape
    + (4,)``. ``seed`` and ``offset`` are taken modulo 2**64 (Thunder passes signed int64)."""
    seed &= (1 << 64) - 1
    offset &= (1 << 64) - 1
    sub = subsequence.astype(_U64)
    k0, k1 = _U64(seed & 0xFFFFFFFF), _U64(seed >> 32)
    c0 = np.full(sub.shape, offset & 0xFFFFFFFF, dtype=_U64)
    c1 = np.full(sub.shape, offset >> 32, dtype=_U64)
    c2, c3 = sub & _MASK, sub >> _U64(32)
    with np.errstate(over="ignore"):
        for round_ in range(10):
            p0 = _U64(0xD2511F53) * c0  # 32 x 32 bits: exact in 64
            p1 = _U64(0xCD9E8D57) * c2
            c0, c1, c2, c3 = (p1 >> _U64(32)) ^ c1 ^ k0, p1 & _MASK, (p0 >> _U64(32)) ^ c3 ^ k1, p0 & _MASK
            if round_ < 9:
                k0 = (k0 + _U64(0x9E3779B9)) & _MASK
                k1 = (k1 + _U64(0xBB67AE85)) & _MASK
    return np.stack([c0, c1, c2, c3], axis=-1).astype(np.uint32)


def _words(numel: int, seed: int, offset: int, per_call: int) -> np.ndarray:
    """Each element's Philox words: [numel, 4 // per_call] (one word, or two for Double)."""
    i = np.arange(numel, dtype=np.int64)
    block = philox(seed, i // per_call, offset)
    take = 4 // per_call
    component = (i % per_call) * take
    return np.stack([block[np.arange(numel), component + k] for k in range(take)], axis=-1)


def _raw_float(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) * np.float32(2.0**-32) + np.float32(2.0**-33)


def _raw_double(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    z = x.astype(_U64) ^ (y.astype(_U64) << _U64(21))
    return z.astype(np.float64) * 2.0**-53 + 2.0**-54


def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a * b + c`` rounded once to fp32, as CUDA's ``fma.rn.f32``: the product of two fp32
    numbers is exact in fp64, and the fp64 sum is rounded to odd before the fp32 rounding, so
    the two roundings make one."""
    p = a.astype(np.float64) * b.astype(np.float64)
    c = np.broadcast_to(c.astype(np.float64), p.shape)
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)  # s + err == p + c exactly (TwoSum)
    bits = s.view(np.int64)
    odd = (bits & 1) == 1
    nudge = (err != 0) & ~odd & np.isfinite(s)
    s = np.where(nudge, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)


def fma64(a: np.ndarray, b: np.ndarray, c: float) -> np.ndarray:
    """``a * b + c`` in fp64 with the product kept exact (Dekker's TwoProduct): within one
    rounding of CUDA's ``fma.rn.f64`` (equal but in rare ties)."""
    split = 134217729.0  # 2**27 + 1

    def halves(x):
        t = split * x
        hi = t - (t - x)
        return hi, x - hi

    ah, al = halves(a)
    bh, bl = halves(np.broadcast_to(b, a.shape))
    p = a * b
    perr = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    s = p + c
    bb = s - p
    serr = (p - (s - bb)) + (c - bb)
    return s + (serr + perr)


def _to_torch(values: np.ndarray, shape, dtype: torch.dtype) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(values)).reshape(shape).to(dtype)


def uniform(shape, seed: int, offset: int, dtype: torch.dtype, low=0.0, high=1.0) -> torch.Tensor:
    """nvFuser's ``fd.ops.uniform(low, high, shape, rng_seed=seed, rng_offset=offset, dtype)``."""
    numel = math.prod(shape)
    if dtype == torch.float64:
        w = _words(numel, seed, offset, 2)
        u = _raw_double(w[:, 0], w[:, 1])
        u = np.where(u == 1.0, 0.0, u)
        if (low, high) != (0.0, 1.0):
            u = fma64(np.full(numel, float(high) - float(low)), u, float(low))
        return _to_torch(u, shape, dtype)
    if dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise ValueError(f"uniform of {dtype} is not a floating type nvFuser draws")
    raw = _raw_float(_words(numel, seed, offset, 4)[:, 0])
    lo, hi = np.float32(low), np.float32(high)
    plain = (low, high) == (0.0, 1.0)
    if dtype == torch.float32:
        u = np.where(raw == np.float32(1.0), np.float32(0.0), raw)
        if not plain:
            u = fma32(np.full(numel, np.float32(hi - lo)), u, np.full(numel, lo))
        return _to_torch(u, shape, dtype)
    # bf16 / fp16: computed in fp32, rounded to nearest-even; a value that rounds to the top
    # of the range becomes its bottom
    if plain:
        out = _to_torch(raw, shape, dtype)
        return torch.where(out == 1.0, torch.zeros((), dtype=dtype), out)
    v = fma32(np.full(numel, np.float32(hi - lo)), raw, np.full(numel, lo))
    out = _to_torch(v, shape, dtype)
    top, bottom = torch.tensor(float(hi), dtype=dtype), torch.tensor(float(lo), dtype=dtype)
    return torch.where(out == top, bottom, out)


def normal(shape, seed: int, offset: int, dtype: torch.dtype, mean=0.0, std=1.0) -> torch.Tensor:
    """nvFuser's ``fd.ops.normal(mean, std, shape, rng_seed=seed, rng_offset=offset, dtype)``:
    Box-Muller on the Philox words (see the module docstring for its exactness)."""
    numel = math.prod(shape)
    i = np.arange(numel, dtype=np.int64)
    if dtype == torch.float64:
        block = philox(seed, i // 2, offset)
        u = _raw_double(block[:, 0], block[:, 1])
        v = _raw_double(block[:, 2], block[:, 3])
        u, v = np.where(u == 1.0, 0.0, u), np.where(v == 1.0, 0.0, v) * 6.2831853071795860
        with np.errstate(divide="ignore"):
            r = np.sqrt(-2.0 * np.log(u))
        z = r * np.where(i % 2 == 0, np.sin(v), np.cos(v))
        if (mean, std) != (0.0, 1.0):
            z = fma64(z, np.float64(std), float(mean))
        return _to_torch(z, shape, dtype)
    block = philox(seed, i // 4, offset)
    first = (i % 4) // 2 * 2
    rows = np.arange(numel)
    u = _raw_float(block[rows, first])
    v = _raw_float(block[rows, first + 1])
    u = np.where(u == np.float32(1.0), np.float32(0.0), u)
    v = np.where(v == np.float32(1.0), np.float32(0.0), v) * np.float32(6.2831855)
    tu, tv = torch.from_numpy(u), torch.from_numpy(v)
    r = torch.sqrt(torch.tensor(-2.0, dtype=torch.float32) * torch.log(tu))
    z = (r * torch.where(torch.from_numpy(i % 2 == 0), torch.sin(tv), torch.cos(tv))).numpy()
    if (mean, std) != (0.0, 1.0):
        z = fma32(z, np.full(numel, np.float32(std)), np.full(numel, np.float32(mean)))
    return _to_torch(z, shape, dtype)
