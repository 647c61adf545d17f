"""The torch executor's arithmetic (:mod:`eqsat.reference.torch_executor`): its elementwise ops
and reductions, as nvFuser computes them: each op's torch function (torch's of its name, unless
:data:`_TORCH_UNARY` or :data:`_TORCH_BINARY` says otherwise), nvFuser's promotion of operands
(bf16/fp16 arithmetic in fp32), integer division that never traps (:data:`INT_BY_ZERO`), PTX's
shift amounts, casts that saturate to FP8 (:func:`cast_tensor`), and reductions that accumulate in
nvFuser's accumulation dtype."""

from __future__ import annotations

import math
import warnings
from functools import partial

import torch
import torch.nn.functional as F

from eqsat.errors import FusionError
from eqsat.ir import dtypes as dt
from eqsat.ir.dtypes import DataType
from eqsat.ir.opspec import OPS


def row_major_copy(x: torch.Tensor) -> torch.Tensor:
    """``set``: a copy, allocated row-major as nvFuser allocates its outputs."""
    return x.clone(memory_format=torch.contiguous_format)


# the ops whose torch function is not torch's of their name (the others': ``_torch_function``)
_TORCH_UNARY = {
    "erfcinv": lambda x: torch.erfinv(1 - x),
    "silu": F.silu,
    "set": row_major_copy,
    "segment_set": row_major_copy,
    "real": lambda x: torch.real(x) if x.is_complex() else row_major_copy(x),
}
_TORCH_BINARY = {"truediv": torch.true_divide}


def _torch_function(table: dict, name: str):
    """The torch function of elementwise op ``name``: ``table``'s, else torch's of that name."""
    return table.get(name) or getattr(torch, name)


PY_TYPE = {
    DataType.Double: float,
    DataType.Float: float,
    DataType.Half: float,
    DataType.BFloat16: float,
    DataType.Int: int,
    DataType.Int32: int,
    DataType.Index: int,
    DataType.Bool: bool,
    DataType.ComplexFloat: complex,
    DataType.ComplexDouble: complex,
}


def is_int(x) -> bool:
    if isinstance(x, torch.Tensor):
        return not x.dtype.is_floating_point and not x.dtype.is_complex
    return isinstance(x, (int, bool))


# unary ops computed in fp32 for bf16/fp16 operands (float math, and neg)
_IN_FLOAT = frozenset(op for op, spec in OPS.items() if spec.result in ("float", "compute"))
# comparisons promote as arithmetic does (a half operand and a float scalar meet in fp32);
# logical and bitwise ops take integer or bool operands as they are
_NOT_ARITHMETIC = frozenset(op for op, spec in OPS.items() if spec.result in ("logical", "bitwise"))


def _upcast_half(t: torch.Tensor) -> torch.Tensor:
    """nvFuser does bf16/fp16 arithmetic in (and returns) fp32."""
    return (
        t.float()
        if t.dtype in (torch.bfloat16, torch.float16) or t.dtype.itemsize == 1 and t.dtype.is_floating_point
        else t
    )


def _arithmetic_operands(a, b):
    """Operands as nvFuser's arithmetic sees them: reduced-precision floats in fp32, and an
    integer or bool tensor with a floating scalar in float64."""
    tensors = [x for x in (a, b) if isinstance(x, torch.Tensor)]
    if not tensors:
        return a, b
    a = _upcast_half(a) if isinstance(a, torch.Tensor) else a
    b = _upcast_half(b) if isinstance(b, torch.Tensor) else b
    if all(is_int(t) for t in tensors) and any(isinstance(x, float) for x in (a, b)):
        a = a.double() if isinstance(a, torch.Tensor) else a
        b = b.double() if isinstance(b, torch.Tensor) else b
    return a, b


def _tensors(*xs):
    return [x for x in xs if isinstance(x, torch.Tensor)]


def _scalar_result(fn, *xs):
    """Scalar-only arithmetic: evaluate on 0-dim float64/int64 tensors, give back a number."""
    ts = [torch.tensor(x) for x in xs]
    return fn(*ts).item()


def _lift(x, like: torch.Tensor, dtype: torch.dtype):
    return x if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=dtype, device=like.device)


# -- integer division and powers, as nvFuser's kernels compute them -------------------------------
# nvFuser divides integers with CUDA's `/` and `%` (csrc/codegen.cpp genBinaryOp: Div inline;
# runtime/helpers.cu fmod, remainder), which do not trap: INT_MIN / -1 wraps to INT_MIN and
# INT_MIN % -1 is 0. Torch's CPU division traps there (SIGFPE), so the divisor is taken as 1,
# which gives just those values. By zero the GPU's value is machine-specific (PTX ISA, div.s:
# "unspecified"), and nvFuser's host evaluator refuses scalars (csrc/ir/internal_nodes.cpp
# BinaryOp::evaluate, "Integer division by zero detected"). What happens by zero is set here,
# in one place (bench/semantics_probe.py reads the GPU's values): None refuses it with a
# FusionError at the line; a function (op, dividend tensor) -> result tensor gives values
# instead. On an H100 (nvcc 13.0) x / 0 gave -1 in Int32, and in Int 4294967295 for 0 <= x <
# 2**32, else -1; x % 0 gave -1 (Int32) or the same as x / 0 (Int) alone (torch's CUDA fmod),
# but x itself in a kernel that also divided: the value depends on the code around it.
INT_BY_ZERO = {"div": None, "fmod": None, "remainder": None}
_INT_DIVISION = {
    "div": partial(torch.div, rounding_mode="trunc"),
    "fmod": torch.fmod,
    "remainder": torch.remainder,
}
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _by_zero(name: str, host: bool = False) -> FusionError:
    where = (
        "nvFuser evaluates scalar arithmetic on the host, which refuses it"
        if host
        else "nvFuser gives whatever the GPU's integer division gives there (PTX leaves it unspecified)"
    )
    return FusionError(
        f"integer {name} by zero: {where}; a nonzero divisor was expected (or divide in "
        f"floating point: truediv)"
    )


def _int_division(name: str, a, b):
    """Integer ``div`` (truncating), ``fmod`` or ``remainder`` of two integer operands, at least
    one a tensor, as nvFuser's kernel computes them, never trapping (see :data:`INT_BY_ZERO`)."""
    ts = _tensors(a, b)
    dtype = torch.result_type(a, b)
    a, b = _lift(a, ts[0], dtype), _lift(b, ts[0], dtype)
    fn = _INT_DIVISION[name]
    if dtype == torch.bool or a.device.type == "meta":
        return fn(a, b)
    zero = b == 0
    if bool(zero.any()) and INT_BY_ZERO[name] is None:
        raise _by_zero(name)
    bad = zero
    if dtype.is_signed:  # INT_MIN / -1: by 1 instead gives INT_MIN, and 0
        bad = bad | ((a == torch.iinfo(dtype).min) & (b == -1))
    out = fn(a, torch.where(bad, torch.ones_like(b), b))
    if INT_BY_ZERO[name] is not None and bool(zero.any()):
        out = torch.where(zero, INT_BY_ZERO[name](name, a.expand_as(out)).to(out.dtype), out)
    return out


def _scalar_int_division(name: str, a: int, b: int) -> int:
    """``div``/``fmod``/``remainder`` of two Python ints as C++ computes them in Int (int64):
    truncating; by zero, and INT64_MIN / -1 (undefined in C++: x86 traps), a FusionError."""
    if b == 0:
        raise _by_zero(name, host=True)
    q = abs(a) // abs(b)
    q = q if (a < 0) == (b < 0) else -q
    if name == "div":
        if q > _INT64_MAX:
            raise FusionError(
                "INT64_MIN / -1 overflows Int: nvFuser evaluates scalar arithmetic in "
                "C++ on the host, where it is undefined (x86 traps); a quotient within "
                "Int was expected"
            )
        return q
    r = a - q * b  # C's %: the sign of the dividend
    if name == "remainder" and r != 0 and (r < 0) != (b < 0):
        r += b  # runtime/helpers.cu remainder
    return r


def _int_pow(a, b):
    """``pow`` of two integer operands as runtime/helpers.cu ``pow<T>`` computes it: by squaring,
    wrapping around; a negative exponent gives 1 for a base of 1, +-1 (by the exponent's
    parity) for -1, and 0 for any other base (torch refuses a negative Python exponent)."""
    if not _tensors(a, b):
        if b < 0:
            return 1 if a == 1 else (-1 if b % 2 else 1) if a == -1 else 0
        r = pow(a, b, 1 << 64)  # the product mod 2**64: what wrapping gives
        return r - (1 << 64) if r > _INT64_MAX else r
    ts = _tensors(a, b)
    dtype = torch.result_type(a, b)
    a, b = _lift(a, ts[0], dtype), _lift(b, ts[0], dtype)
    if dtype == torch.bool:
        return torch.pow(a, b)
    negative = b < 0
    out = torch.pow(a, torch.where(negative, torch.zeros_like(b), b))
    one, minus = torch.ones_like(out), -torch.ones_like(out)
    edge = torch.where(
        a == 1, one, torch.where(a == -1, torch.where(b % 2 != 0, minus, one), torch.zeros_like(out))
    )
    return torch.where(negative, edge, out)


def _shift_amount(a, b):
    """The amount a shift of ``a`` by ``b`` counts: PTX shifts (shl.b64, shr.s64: csrc/type.cpp
    prints `<<` and `>>`) take a 32-bit amount, so an Int amount counts by its low 32 bits, as
    an unsigned number; any amount of the width or more then shifts everything out (0, or the
    sign for a right shift), as torch's shifts give. An H100 gave 1 << 2**32 == 1."""
    wide = (
        isinstance(b, int)
        and not isinstance(b, bool)
        or isinstance(b, torch.Tensor)
        and b.dtype == torch.int64
    )
    if not wide or torch.result_type(a, b) not in (torch.int64, torch.uint64):
        return b
    return b & 0xFFFFFFFF


# -- casts to FP8 ---------------------------------------------------------------------------------
# nvFuser converts to FP8 with cvt.rn.satfinite (runtime/casts.cu __float2e4m3, __float2e5m2 and
# their f16x2 forms; a double is made a float first, __double2e5m2): rounded to nearest even,
# anything beyond the largest finite value, +-inf among them, gives +-that value; NaN stays NaN.
# Rounding after clamping to +-max gives the same, and torch's own casts do not saturate.
FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}


def cast_tensor(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t`` converted to ``dtype`` as nvFuser's cast converts it (``t`` itself where it has that
    dtype): to FP8 saturating (:data:`FP8_MAX`), else as torch converts."""
    if dtype in FP8_MAX and t.dtype != dtype:
        top = FP8_MAX[dtype]
        return (t.real if t.is_complex() else t).float().clamp(-top, top).to(dtype)
    return t.to(dtype)


def sorted_dims(dims, rank: int) -> list[int]:
    """A dims argument as sorted non-negative ints (None: all dims)."""
    if dims is None:
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d % rank for d in dims}) if rank else []


class ArithmeticOps:
    """The elementwise and reduction categories of :class:`~eqsat.reference.torch_executor.TorchOps`
    (``_cat_<category>``, called with the op's name and its bound arguments)."""

    # -- elementwise --------------------------------------------------------------------------
    def _cat_unary(self, name, arg):
        fn = _torch_function(_TORCH_UNARY, name)
        if not isinstance(arg, torch.Tensor):
            return _scalar_result(fn, arg)
        if name in _IN_FLOAT:
            arg = _upcast_half(arg)
        return fn(arg)

    def _cat_binary(self, name, arg1, arg2):
        if name not in _NOT_ARITHMETIC:
            arg1, arg2 = _arithmetic_operands(arg1, arg2)
        if is_int(arg1) and is_int(arg2):
            if name in _INT_DIVISION:
                if not _tensors(arg1, arg2) and not isinstance(arg1, bool) and not isinstance(arg2, bool):
                    return _scalar_int_division(name, arg1, arg2)
                if _tensors(arg1, arg2):
                    return _int_division(name, arg1, arg2)
            elif name == "pow" and not isinstance(arg1, bool) and not isinstance(arg2, bool):
                return _int_pow(arg1, arg2)
        if name in ("bitwise_left_shift", "bitwise_right_shift"):
            arg2 = _shift_amount(arg1, arg2)
        fn = _torch_function(_TORCH_BINARY, name)
        if name == "div":
            fn = (
                (lambda a, b: torch.div(a, b, rounding_mode="trunc"))
                if is_int(arg1) and is_int(arg2)
                else torch.true_divide
            )
        ts = _tensors(arg1, arg2)
        if not ts:
            return _scalar_result(fn, arg1, arg2)
        if (
            len(ts) == 1
            and name
            in (
                "maximum",
                "minimum",
                "atan2",
                "nextafter",
                "logical_and",
                "logical_or",
                "bitwise_left_shift",
                "bitwise_right_shift",
            )
            or not isinstance(arg1, torch.Tensor)
        ):
            out_dtype = torch.result_type(arg1, arg2)
            arg1, arg2 = _lift(arg1, ts[0], out_dtype), _lift(arg2, ts[0], out_dtype)
        return fn(arg1, arg2)

    def _cat_where(self, name, pred, arg1, arg2):
        ts = _tensors(pred, arg1, arg2)
        if not ts:
            return arg1 if pred else arg2
        dtype = (
            torch.result_type(arg1, arg2)
            if _tensors(arg1, arg2)
            else torch.tensor([arg1, arg2]).dtype
            if not isinstance(arg1, float) and not isinstance(arg2, float)
            else torch.get_default_dtype()
        )
        pred = _lift(pred, ts[0], torch.bool)
        return torch.where(pred, _lift(arg1, ts[0], dtype), _lift(arg2, ts[0], dtype))

    def _cat_clamp(self, name, arg, min, max):
        return torch.clamp(arg, min, max)

    def _cat_lerp(self, name, start, end, weight):
        start, end = _arithmetic_operands(start, end)
        weight = _upcast_half(weight) if isinstance(weight, torch.Tensor) else weight
        return torch.lerp(start, end, weight.to(start.dtype) if isinstance(weight, torch.Tensor) else weight)

    def _cat_cast(self, name, arg, dtype):
        if isinstance(arg, torch.Tensor):
            return cast_tensor(arg, dt.to_torch(dtype))
        if dt.coerce(dtype) in dt.FP8_TYPES and not isinstance(arg, complex):
            return cast_tensor(torch.tensor(float(arg)), dt.to_torch(dtype)).float().item()
        return PY_TYPE.get(dtype, float)(arg)

    # -- reductions ----------------------------------------------------------------------------
    def _cat_reduction(self, name, arg, dims, keepdim, dtype):
        dtype = dt.coerce(dtype)
        dims = sorted_dims(dims, arg.dim())
        if dtype is not DataType.Null:
            arg = cast_tensor(arg, dt.to_torch(dtype))
        elif name in ("sum", "prod") and is_int(arg):
            arg = arg.to(torch.int64)
        out_dtype = arg.dtype
        acc = dt.to_torch(dt.accumulation_type(dt.from_torch(out_dtype)))
        x = arg.to(acc) if name in ("sum", "prod") else arg
        if not dims:
            return cast_tensor(x, out_dtype)
        if x.numel() == 0:
            shape = [1 if i in dims else s for i, s in enumerate(x.shape)]
            fill = {"sum": 0, "prod": 1, "max": -math.inf, "min": math.inf}[name]
            if is_int(x) and name in ("max", "min"):
                info = torch.iinfo(x.dtype) if x.dtype != torch.bool else None
                fill = (info.min if name == "max" else info.max) if info else name == "min"
            out = torch.full(shape, fill, dtype=x.dtype, device=x.device)
            kept = out if keepdim else out.reshape([s for i, s in enumerate(shape) if i not in dims])
            return cast_tensor(kept, out_dtype)
        if name == "sum":
            out = torch.sum(x, dim=dims, keepdim=keepdim)
        elif name == "max":
            out = torch.amax(x, dim=dims, keepdim=keepdim)
        elif name == "min":
            out = torch.amin(x, dim=dims, keepdim=keepdim)
        else:
            out = x
            for d in reversed(dims):
                out = torch.prod(out, dim=d, keepdim=keepdim)
        return cast_tensor(out, out_dtype)

    @staticmethod
    def _as_float(arg):
        """A var/welford input in its accumulation dtype, and the dtype of the result."""
        out = arg.dtype if arg.dtype.is_floating_point or arg.dtype.is_complex else torch.float64
        acc = dt.to_torch(dt.accumulation_type(dt.from_torch(out))) if not out.is_complex else out
        return arg.to(acc), out

    def _cat_var(self, name, arg, dims, correction, keepdim):
        return self._cat_var_mean(name, arg, dims, correction, keepdim)[0]

    def _cat_var_mean(self, name, arg, dims, correction, keepdim):
        x, out = self._as_float(arg)
        dims = sorted_dims(dims, x.dim())
        if not dims:  # over no dims: one element each (torch would reduce them all)
            x, dims, keepdim = x.unsqueeze(-1), [x.dim()], False
        # nvFuser divides by max(0, |R| - c), as torch does (csrc/ops/normalization.cpp variance:
        # the denominator clamped at 0, then its reciprocal): where |R| <= c, inf or NaN
        with warnings.catch_warnings():  # torch warns where |R| <= correction
            warnings.simplefilter("ignore")
            var, mean = torch.var_mean(x, dim=dims, correction=correction, keepdim=keepdim)
        return var.to(out), mean.to(out)

    def _cat_welford(self, name, arg, dims):
        x, out = self._as_float(arg)
        dims = sorted_dims(dims, x.dim())
        count = math.prod(x.shape[d] for d in dims)
        var, mean = torch.var_mean(x, dim=dims, correction=0)
        n = torch.full(mean.shape, count, dtype=torch.int64, device=x.device)
        return mean.to(out), (var * count).to(out), n
