"""The torch executor: nvFuser's FusionDefinition protocol evaluated eagerly with torch.

It is eqsat's reference: every numeric comparison in the project runs through it. It follows
nvFuser's semantics: PyTorch type promotion (scalars don't lift a tensor within its
category), integer ``div`` truncates, reductions of half types accumulate in fp32, a
reduction's ``dtype`` argument casts its input, integer sums give Int, expanded broadcasts
stay stride-0 views, and outputs aliased to an input are written into that input and not
returned. Integer division never traps (INT_MIN / -1 wraps, as on the GPU; by zero is refused:
:data:`INT_BY_ZERO`), casts to FP8 saturate, and no op's output shares memory with an operand
except the views nvFuser makes views (reshape, permute, broadcast...).

    run_fusion(fusion, inputs)             # outputs, as nvFuser's fd.execute returns them
"""
from __future__ import annotations

import math
import warnings
from functools import partial
from typing import Any, Sequence

import torch
import torch.nn.functional as F

from eqsat.errors import FusionError
from eqsat.ir import dtypes as dt
from eqsat.ir.axes import ScalarType, TensorType, Types
from eqsat.ir.dtypes import DataType
from eqsat.ir.fusion import Fusion, Node
from eqsat.ir.layout import with_stride_order
from eqsat.ir.opspec import OPS, bind_call
from eqsat.ir.replay import replay

from . import philox
from .inputs import check_count, check_tensor_input


def _row_major_copy(x: torch.Tensor) -> torch.Tensor:
    """``set``: a copy, allocated row-major as nvFuser allocates its outputs."""
    return x.clone(memory_format=torch.contiguous_format)


# the ops whose torch function is not torch's of their name (the others': ``_torch_function``)
_UNARY = {
    "erfcinv": lambda x: torch.erfinv(1 - x), "silu": F.silu,
    "set": _row_major_copy, "segment_set": _row_major_copy,
    "real": lambda x: torch.real(x) if x.is_complex() else _row_major_copy(x),
}
_BINARY = {"truediv": torch.true_divide}


def _torch_function(table: dict, name: str):
    """The torch function of elementwise op ``name``: ``table``'s, else torch's of that name."""
    return table.get(name) or getattr(torch, name)


_PY_TYPE = {DataType.Double: float, DataType.Float: float, DataType.Half: float,
            DataType.BFloat16: float, DataType.Int: int, DataType.Int32: int, DataType.Index: int,
            DataType.Bool: bool, DataType.ComplexFloat: complex, DataType.ComplexDouble: complex}


def _is_int(x) -> bool:
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
    return t.float() if t.dtype in (torch.bfloat16, torch.float16) or t.dtype.itemsize == 1 and \
        t.dtype.is_floating_point else t


def _arithmetic_operands(a, b):
    """Operands as nvFuser's arithmetic sees them: reduced-precision floats in fp32, and an
    integer or bool tensor with a floating scalar in float64."""
    tensors = [x for x in (a, b) if isinstance(x, torch.Tensor)]
    if not tensors:
        return a, b
    a = _upcast_half(a) if isinstance(a, torch.Tensor) else a
    b = _upcast_half(b) if isinstance(b, torch.Tensor) else b
    if all(_is_int(t) for t in tensors) and any(isinstance(x, float) for x in (a, b)):
        a = a.double() if isinstance(a, torch.Tensor) else a
        b = b.double() if isinstance(b, torch.Tensor) else b
    return a, b


def _dims(dims, rank: int) -> list[int]:
    """A dims argument as sorted non-negative ints (None: all dims)."""
    if dims is None:
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d % rank for d in dims}) if rank else []


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
_INT_DIVISION = {"div": partial(torch.div, rounding_mode="trunc"), "fmod": torch.fmod,
                 "remainder": torch.remainder}
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _by_zero(name: str, host: bool = False) -> FusionError:
    where = ("nvFuser evaluates scalar arithmetic on the host, which refuses it" if host else
             "nvFuser gives whatever the GPU's integer division gives there (PTX leaves it unspecified)")
    return FusionError(f"integer {name} by zero: {where}; a nonzero divisor was expected (or divide in "
                       f"floating point: truediv)")


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
    if dtype.is_signed:                       # INT_MIN / -1: by 1 instead gives INT_MIN, and 0
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
            raise FusionError("INT64_MIN / -1 overflows Int: nvFuser evaluates scalar arithmetic in "
                              "C++ on the host, where it is undefined (x86 traps); a quotient within "
                              "Int was expected")
        return q
    r = a - q * b                              # C's %: the sign of the dividend
    if name == "remainder" and r != 0 and (r < 0) != (b < 0):
        r += b                                 # runtime/helpers.cu remainder
    return r


def _int_pow(a, b):
    """``pow`` of two integer operands as runtime/helpers.cu ``pow<T>`` computes it: by squaring,
    wrapping around; a negative exponent gives 1 for a base of 1, +-1 (by the exponent's
    parity) for -1, and 0 for any other base (torch refuses a negative Python exponent)."""
    if not _tensors(a, b):
        if b < 0:
            return 1 if a == 1 else (-1 if b % 2 else 1) if a == -1 else 0
        r = pow(a, b, 1 << 64)                 # the product mod 2**64: what wrapping gives
        return r - (1 << 64) if r > _INT64_MAX else r
    ts = _tensors(a, b)
    dtype = torch.result_type(a, b)
    a, b = _lift(a, ts[0], dtype), _lift(b, ts[0], dtype)
    if dtype == torch.bool:
        return torch.pow(a, b)
    negative = b < 0
    out = torch.pow(a, torch.where(negative, torch.zeros_like(b), b))
    one, minus = torch.ones_like(out), -torch.ones_like(out)
    edge = torch.where(a == 1, one, torch.where(a == -1, torch.where(b % 2 != 0, minus, one),
                                                torch.zeros_like(out)))
    return torch.where(negative, edge, out)


def _shift_amount(a, b):
    """The amount a shift of ``a`` by ``b`` counts: PTX shifts (shl.b64, shr.s64: csrc/type.cpp
    prints `<<` and `>>`) take a 32-bit amount, so an Int amount counts by its low 32 bits, as
    an unsigned number; any amount of the width or more then shifts everything out (0, or the
    sign for a right shift), as torch's shifts give. An H100 gave 1 << 2**32 == 1."""
    wide = (isinstance(b, int) and not isinstance(b, bool)
            or isinstance(b, torch.Tensor) and b.dtype == torch.int64)
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


# -- outputs that share memory with an operand ----------------------------------------------------
# The ops whose result nvFuser may give as a view of their input (csrc/alias_analysis.cpp:
# reshape, permute, slice, broadcast, squeeze, expand; csrc/scheduler/mark_aliases.cpp makes an
# output of them an alias of the fusion input). Every other op computes a new tensor, where torch
# may give back its operand or a view of it: a cast to its own dtype, a reduction over no dims,
# real/imag of a complex tensor.
_VIEW_CATEGORIES = frozenset({"broadcast", "broadcast_in_dim", "expand", "squeeze", "permute", "reshape",
                              "slice", "stride_order", "size", "shape"})


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr() if t.device.type != "meta" else 0


def _unshared(result, operands: list):
    """``result`` (a tensor or a tuple of them), each tensor of it that shares memory with one of
    ``operands`` copied, keeping its strides (a stride-0 dim stays one)."""
    if isinstance(result, (tuple, list)):
        return type(result)(_unshared(r, operands) for r in result)
    if not isinstance(result, torch.Tensor) or not _storage(result):
        return result
    if _storage(result) not in {_storage(o) for o in operands}:
        return result
    zero = [d for d in range(result.dim()) if result.stride(d) == 0 and result.shape[d] > 1]
    if not zero:
        return result.clone()              # dense strides kept; others made row-major
    base = result[tuple(slice(0, 1) if d in zero else slice(None) for d in range(result.dim()))]
    return base.clone().expand(result.shape)


def _operand_tensors(bound: dict) -> list:
    out = []
    for v in bound.values():
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(x for x in v if isinstance(x, torch.Tensor))
    return out


# torch implements little for FP8 tensors; their values are exact in fp32, where these ops
# compute them (and give back the dtype nvFuser gives: :meth:`TorchOps._over_fp8`)
_FP8_IN_FLOAT = frozenset({"unary", "binary", "where", "clamp", "lerp", "reduction"})
_FP8 = dt.torch_types(dt.FP8_TYPES)
_FP8_STAND_IN = torch.float16


def _fp8_as_float(x):
    return x.float() if isinstance(x, torch.Tensor) and x.dtype in _FP8 else x


def _fp8_stand_in(x):
    """``x`` as the meta tensor that promotes as it does: an FP8 tensor as a Half one."""
    if not isinstance(x, torch.Tensor):
        return x
    return torch.empty(x.shape, dtype=_FP8_STAND_IN if x.dtype in _FP8 else x.dtype, device="meta")


class TorchOps:
    """``fd.ops`` of the torch executor. Arguments are torch tensors and python numbers."""

    def __init__(self, device: torch.device | str | None = None, generator: torch.Generator | None = None):
        self.device = device
        self.generator = generator

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        spec = OPS.get(name)
        if spec is None:
            raise FusionError(f"op {name!r} is not modelled by eqsat and has no torch implementation",
                              op=f"fd.ops.{name}")

        def op(*args, **kwargs):
            bound = bind_call(spec, args, kwargs)
            impl = getattr(self, f"_op_{name}", None) or getattr(self, f"_cat_{spec.category}")
            if spec.category in _FP8_IN_FLOAT and any(isinstance(v, torch.Tensor) and v.dtype in _FP8
                                                      for v in bound.values()):
                result = self._over_fp8(name, impl, bound)
            else:
                result = impl(name, **bound)
            if spec.category in _VIEW_CATEGORIES:
                return result
            return _unshared(result, _operand_tensors(bound))
        return op

    @staticmethod
    def _over_fp8(name, impl, bound: dict):
        """An op over FP8 tensors: computed in fp32, given back in nvFuser's dtype. nvFuser
        promotes the FP8 types as the reduced-precision floats they are: an op keeps its FP8
        operands' type where it keeps Half (where, clamp, abs, max...) and computes in Float
        where Half arithmetic does. Which one it is, the op run on Half stand-ins (meta tensors)
        tells; a Half result means the FP8 type where that is the only one among the operands."""
        result = impl(name, **{k: _fp8_as_float(v) for k, v in bound.items()})
        out = impl(name, **{k: _fp8_stand_in(v) for k, v in bound.items()}).dtype
        reduced = {v.dtype for v in bound.values()
                   if isinstance(v, torch.Tensor) and (v.dtype in _FP8 or v.dtype == _FP8_STAND_IN)}
        if out == _FP8_STAND_IN and len(reduced) == 1:
            out = reduced.pop()
        return cast_tensor(result, out)

    # -- elementwise --------------------------------------------------------------------------
    def _cat_unary(self, name, arg):
        fn = _torch_function(_UNARY, name)
        if not isinstance(arg, torch.Tensor):
            return _scalar_result(fn, arg)
        if name in _IN_FLOAT:
            arg = _upcast_half(arg)
        return fn(arg)

    def _cat_binary(self, name, arg1, arg2):
        if name not in _NOT_ARITHMETIC:
            arg1, arg2 = _arithmetic_operands(arg1, arg2)
        if _is_int(arg1) and _is_int(arg2):
            if name in _INT_DIVISION:
                if not _tensors(arg1, arg2) and not isinstance(arg1, bool) and not isinstance(arg2, bool):
                    return _scalar_int_division(name, arg1, arg2)
                if _tensors(arg1, arg2):
                    return _int_division(name, arg1, arg2)
            elif name == "pow" and not isinstance(arg1, bool) and not isinstance(arg2, bool):
                return _int_pow(arg1, arg2)
        if name in ("bitwise_left_shift", "bitwise_right_shift"):
            arg2 = _shift_amount(arg1, arg2)
        fn = _torch_function(_BINARY, name)
        if name == "div":
            fn = (lambda a, b: torch.div(a, b, rounding_mode="trunc")) if _is_int(arg1) and _is_int(arg2) \
                else torch.true_divide
        ts = _tensors(arg1, arg2)
        if not ts:
            return _scalar_result(fn, arg1, arg2)
        if len(ts) == 1 and name in ("maximum", "minimum", "atan2", "nextafter", "logical_and",
                                     "logical_or", "bitwise_left_shift", "bitwise_right_shift") \
                or not isinstance(arg1, torch.Tensor):
            out_dtype = torch.result_type(arg1, arg2)
            arg1, arg2 = _lift(arg1, ts[0], out_dtype), _lift(arg2, ts[0], out_dtype)
        return fn(arg1, arg2)

    def _cat_where(self, name, pred, arg1, arg2):
        ts = _tensors(pred, arg1, arg2)
        if not ts:
            return arg1 if pred else arg2
        dtype = torch.result_type(arg1, arg2) if _tensors(arg1, arg2) else \
            torch.tensor([arg1, arg2]).dtype if not isinstance(arg1, float) and not isinstance(arg2, float) \
            else torch.get_default_dtype()
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
        return _PY_TYPE.get(dtype, float)(arg)

    # -- reductions ----------------------------------------------------------------------------
    def _cat_reduction(self, name, arg, dims, keepdim, dtype):
        dtype = dt.coerce(dtype)
        dims = _dims(dims, arg.dim())
        if dtype is not DataType.Null:
            arg = cast_tensor(arg, dt.to_torch(dtype))
        elif name in ("sum", "prod") and _is_int(arg):
            arg = arg.to(torch.int64)
        out_dtype = arg.dtype
        acc = dt.to_torch(dt.accumulation_type(dt.from_torch(out_dtype)))
        x = arg.to(acc) if name in ("sum", "prod") else arg
        if not dims:
            return cast_tensor(x, out_dtype)
        if x.numel() == 0:
            shape = [1 if i in dims else s for i, s in enumerate(x.shape)]
            fill = {"sum": 0, "prod": 1, "max": -math.inf, "min": math.inf}[name]
            if _is_int(x) and name in ("max", "min"):
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
        dims = _dims(dims, x.dim())
        if not dims:        # over no dims: one element each (torch would reduce them all)
            x, dims, keepdim = x.unsqueeze(-1), [x.dim()], False
        # nvFuser divides by max(0, |R| - c), as torch does (csrc/ops/normalization.cpp variance:
        # the denominator clamped at 0, then its reciprocal): where |R| <= c, inf or NaN
        with warnings.catch_warnings():     # torch warns where |R| <= correction
            warnings.simplefilter("ignore")
            var, mean = torch.var_mean(x, dim=dims, correction=correction, keepdim=keepdim)
        return var.to(out), mean.to(out)

    def _cat_welford(self, name, arg, dims):
        x, out = self._as_float(arg)
        dims = _dims(dims, x.dim())
        count = math.prod(x.shape[d] for d in dims)
        var, mean = torch.var_mean(x, dim=dims, correction=0)
        n = torch.full(mean.shape, count, dtype=torch.int64, device=x.device)
        return mean.to(out), (var * count).to(out), n

    # -- shape ops ---------------------------------------------------------------------------------
    def _cat_broadcast(self, name, arg, is_broadcast_dim):
        for i, b in enumerate(is_broadcast_dim):
            if b:
                arg = arg.unsqueeze(i)
        return arg

    def _cat_broadcast_in_dim(self, name, arg, shape, broadcast_dims):
        shape = [int(s) for s in shape]
        view = [1] * len(shape)
        for i, b in enumerate(broadcast_dims):
            view[b] = arg.shape[i]
        target = [v if s == -1 else s for s, v in zip(shape, view)]
        return arg.reshape(view).expand(target)

    def _cat_expand(self, name, arg, shape):
        return arg.expand([int(s) for s in shape])

    def _cat_squeeze(self, name, arg, dims, squeeze_expanded):
        for d in reversed(_dims(dims, arg.dim())):
            if arg.shape[d] == 0:         # constant along an empty axis: any value will do
                arg = arg.new_zeros(arg.shape[:d] + arg.shape[d + 1:])
            else:
                arg = arg.squeeze(d) if arg.shape[d] == 1 else arg.select(d, 0)
        return arg

    def _cat_permute(self, name, arg, dims):
        return arg.permute(list(dims))

    def _cat_reshape(self, name, arg, new_shape):
        return arg.reshape([int(s) for s in new_shape])

    def _cat_stride_order(self, name, arg, stride_order):
        if not stride_order:                 # a plain copy, row-major
            return _row_major_copy(arg)
        return with_stride_order(arg, stride_order)

    def _cat_size(self, name, arg, dim):
        return int(arg.shape[dim])

    def _cat_shape(self, name, arg):
        return [int(s) for s in arg.shape]

    # -- factories -----------------------------------------------------------------------------------
    def _device(self, *xs):
        for x in xs:
            if isinstance(x, torch.Tensor):
                return x.device
        return self.device or "cpu"

    def _cat_full(self, name, shape, fill_value, dtype):
        dtype = dt.to_torch(dt.coerce(dtype))
        if dtype in FP8_MAX:
            values = torch.full([int(s) for s in shape], float(fill_value), device=self._device())
            return cast_tensor(values, dtype)
        return torch.full([int(s) for s in shape], fill_value, dtype=dtype, device=self._device())

    def _cat_iota(self, name, length, start, step, dtype):
        dtype = dt.to_torch(dt.coerce(dtype))
        start = 0 if start is None else start
        step = 1 if step is None else step
        steps = torch.arange(int(length), device=self._device(),
                             dtype=torch.float64 if dtype.is_floating_point else torch.int64)
        return cast_tensor(steps * step + start, dtype)

    def _cat_random(self, name, arg1, arg2, shape, rng_seed, rng_offset, dtype):
        """With ``rng_seed`` and ``rng_offset``: nvFuser's own numbers (:mod:`eqsat.reference.philox`).
        Without, nvFuser draws from the CUDA generator's state, which no other run
        reproduces: values from ``self.generator`` (seeded runs agree with each other)."""
        dtype = dt.to_torch(dt.coerce(dtype))
        shape = [int(s) for s in shape]
        device = self._device(arg1, arg2)
        if str(device) == "meta":
            return torch.empty(shape, dtype=dtype, device=device)
        if rng_seed is not None:
            draw = philox.uniform if name == "uniform" else philox.normal
            return draw(shape, int(rng_seed), int(rng_offset), dtype, float(arg1), float(arg2)).to(device)
        make = torch.rand if name == "uniform" else torch.randn
        r = make(shape, dtype=dtype, device=device, generator=self.generator)
        return r * (arg2 - arg1) + arg1 if name == "uniform" else r * arg2 + arg1

    # -- data movement ---------------------------------------------------------------------------------
    def _cat_slice(self, name, arg, start_indices, end_indices, strides, manual_normalization):
        steps = strides or [1] * arg.dim()
        index = tuple(slice(int(s), int(e), int(st)) for s, e, st in zip(start_indices, end_indices, steps))
        return arg[index]

    def _cat_cat(self, name, tensors, dim, manual_padding):
        if not manual_padding:
            return torch.cat(list(tensors), dim=dim)
        return combine_padded(list(tensors))

    def _cat_pad(self, name, arg, pad_widths, value):
        return F.pad(arg, [int(p) for p in pad_widths], value=0 if value is None else value)

    def _cat_gather(self, name, arg, index, dim):
        if name == "take_along_axis":
            return torch.take_along_dim(arg, index, dim)
        return torch.gather(arg, dim, index)

    def _cat_index_select(self, name, arg, index, dim):
        if index.dim() == 0:                 # one entry: the output keeps an extent-1 dim
            return torch.index_select(arg, dim, index.reshape(1))
        return torch.index_select(arg, dim, index.reshape(-1))    # other dims have extent 1

    def _cat_linear(self, name, arg1, arg2, bias):
        return F.linear(arg1, arg2, bias)

    def _cat_matmul(self, name, arg1, arg2):
        return torch.matmul(arg1, arg2)

    # -- ops kept as they are: sorts, scans, scatter, embedding, grouped matmul ------------------
    def _cat_topk(self, name, arg, k, dim, largest, sorted):
        """Sorted whatever ``sorted`` says: nvFuser's kernel always sorts (runtime/topk.cu),
        and sorted values are a valid answer either way."""
        if arg.dim() == 0:
            return arg.clone(), torch.zeros((), dtype=torch.int64, device=arg.device)
        return tuple(torch.topk(arg, int(k), dim=dim, largest=largest, sorted=True))

    def _cat_argsort(self, name, arg, dim, descending, stable):
        """Stable: nvFuser sorts by a radix sort (runtime/argsort.cu), which is."""
        if arg.dim() == 0:
            return torch.zeros((), dtype=torch.int64, device=arg.device)
        return torch.argsort(arg, dim=dim, descending=descending, stable=True)

    def _cat_scan(self, name, arg, dim, init):
        """In the input's dtype, as nvFuser's expression evaluator runs it (at::cumsum, cast
        back: an Int32 scan stays Int32)."""
        if name in ("cummin", "cummax"):
            return getattr(torch, name)(arg, dim).values
        return cast_tensor(getattr(torch, name)(arg, dim), arg.dtype)

    def _cat_scatter(self, name, arg, index, src, dim):
        if isinstance(src, torch.Tensor):
            return torch.scatter(arg, dim, index.long(), cast_tensor(src, arg.dtype))
        return torch.scatter(arg, dim, index.long(), src)

    def _cat_embedding(self, name, input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse):
        """F.embedding, as nvFuser runs it; with ``max_norm`` on a copy of the weight (torch
        renormalizes the rows it reads in place)."""
        return F.embedding(input.long(), weight if max_norm is None else weight.clone(),
                           None if padding_idx is None else int(padding_idx), max_norm,
                           2.0 if norm_type is None else float(norm_type), bool(scale_grad_by_freq),
                           bool(sparse))

    def _cat_grouped_mm(self, name, arg1, arg2, offsets):
        """Each group's matmul in float (the GPU's accumulation), cast to the first operand's
        dtype; ``offsets`` are the groups' ends; what no group covers is 0."""
        ends = [int(e) for e in offsets.tolist()]
        groups = list(zip([0] + ends[:-1], ends))
        a, b = arg1.float(), arg2.float()
        if arg1.dim() == 2 and arg2.dim() == 2:
            out = torch.zeros(len(groups), a.shape[0], b.shape[1], device=a.device)
            for i, (s, e) in enumerate(groups):
                out[i] = a[:, s:e] @ b[s:e]
        elif arg1.dim() == 3:
            out = torch.zeros(a.shape[1], b.shape[1], device=a.device)
            for i, (s, e) in enumerate(groups):
                out[:, s:e] = a[i] @ b[:, s:e]
        else:
            out = torch.zeros(a.shape[0], b.shape[2], device=a.device)
            for i, (s, e) in enumerate(groups):
                out[s:e] = a[s:e] @ b[i]
        return cast_tensor(out, arg1.dtype)


def combine_padded(padded: list[torch.Tensor]) -> torch.Tensor:
    """``cat(..., manual_padding=True)`` as nvFuser's kernel computes it: the padded inputs,
    each zero outside its own part, added up (OR-ed bit patterns for types of 16 bits or less,
    so a -0.0 stays -0.0; OR-ed for Bool). Over pads that tile the output, which is how
    nvfuser_direct prints a cat, that is the inputs concatenated."""
    out = padded[0]
    if out.dtype == torch.bool:
        for t in padded[1:]:
            out = out | t
        return out
    if out.dtype.is_floating_point and out.dtype.itemsize <= 2:
        bits = {1: torch.uint8, 2: torch.int16}[out.dtype.itemsize]
        acc = out.view(bits)
        for t in padded[1:]:
            acc = acc | t.view(bits)
        return acc.view(out.dtype)
    for t in padded[1:]:
        out = out + t
    return out


class TorchDefinition:
    """The FusionDefinition protocol, evaluated eagerly on ``inputs`` (in definition order)."""

    def __init__(self, inputs: Sequence[Any], device=None, generator=None):
        self.inputs = list(inputs)
        if device is None:
            device = next((t.device for t in self.inputs if isinstance(t, torch.Tensor) and t.dim()), None)
        self._next = 0
        self.outputs: list[Any] = []
        self.ops = TorchOps(device=device, generator=generator)

    def _take(self, what: str):
        if self._next >= len(self.inputs):
            raise FusionError(f"the definition takes more than the {len(self.inputs)} inputs given",
                              op=what)
        value = self.inputs[self._next]
        self._next += 1
        return self._next - 1, value

    def define_tensor(self, shape, contiguity=None, dtype=DataType.Float, is_cpu=False, stride_order=None):
        index, t = self._take("fd.define_tensor")
        check_tensor_input(index, t, shape, dt.coerce(dtype), contiguity, stride_order)
        return t

    def define_scalar(self, value=None, dtype=None):
        if value is None:
            index, value = self._take("fd.define_scalar")
            if isinstance(value, torch.Tensor) and value.numel() == 1:
                value = value.item()
            if not isinstance(value, (bool, int, float, complex)):
                raise FusionError(f"input {index} must be a python number for a scalar input, got "
                                  f"{type(value).__name__}", op="fd.define_scalar")
        dtype = dt.coerce(dtype) if dtype is not None else None
        return _PY_TYPE.get(dtype, lambda v: v)(value) if dtype else value

    def define_vector(self, values, dtype=DataType.Int):
        return [int(v) for v in values]

    def add_output(self, value, alias_input=None, stride_order=None):
        if alias_input is not None:
            if tuple(value.shape) != tuple(alias_input.shape):
                raise FusionError(f"an output of shape {list(value.shape)} cannot be written into its "
                                  f"alias_input of shape {list(alias_input.shape)}", op="fd.add_output")
            alias_input.copy_(value)
            return
        if stride_order is not None:
            value = with_stride_order(value, stride_order)
        self.outputs.append(value)


def run_fusion(fusion: Fusion, inputs: Sequence[Any], *, device=None, seed: int | None = None,
               generator: torch.Generator | None = None, strict: bool = False) -> list:
    """Execute ``fusion`` eagerly on ``inputs``; returns the (non-aliased) outputs.

    ``seed`` seeds the random ops (uniform, normal without rng_seed) so that two runs agree.
    Each node's results are held to the types the IR infers for them. By default they are cast
    to the IR's dtype, so that the executor and eqsat's types never disagree silently.
    ``strict=True`` (what the tests run) casts nothing: a result whose dtype, rank or extents
    differ from the IR's raises FusionError at the node's line and op, so that a wrong dtype in
    the executor is found rather than repaired.
    """
    if generator is None and seed is not None:
        dev = device or next((t.device for t in inputs if isinstance(t, torch.Tensor)), "cpu")
        if str(dev) != "meta":
            generator = torch.Generator(device=dev)
            generator.manual_seed(seed)
    check_count(fusion, inputs)
    fd = TorchDefinition(inputs, device=device, generator=generator)
    on_node = TypeCheck(fusion) if strict else partial(_conform, fusion.types)
    replay(fusion, fd, on_node=on_node)     # errors name the node's line and op
    return fd.outputs


def _conform(types: Types, node: Node, results: list) -> list:
    """``results`` cast to the dtypes the IR gives ``node``'s outputs (run_fusion's default)."""
    out = []
    for vid, r in zip(node.outputs, results, strict=True):
        t = types[vid]
        if isinstance(t, TensorType) and t.known and isinstance(r, torch.Tensor):
            want = dt.to_torch(t.dtype)
            if r.dtype != want:
                r = cast_tensor(r, want)
        elif isinstance(t, ScalarType) and t.dtype in _PY_TYPE and not isinstance(r, (torch.Tensor, list)):
            r = _PY_TYPE[t.dtype](r)
        out.append(r)
    return out


class TypeCheck:
    """``run_fusion(strict=True)``'s look at each node's results: a tensor of the IR's dtype,
    rank and extents, a python number of the IR's scalar type. Raises FusionError at the node's
    line and op where they differ, and changes nothing.

    A dim's extent is its axis label's (an extent-1 broadcast has a label of its own, of
    extent 1): the static one, else the label's extent as first seen, in an input or a result."""

    def __init__(self, fusion: Fusion):
        self.types = fusion.types
        self.extents = {label: n for label, n in self.types.extents.items() if n is not None}

    def __call__(self, node: Node, results: list) -> list:
        """(replay places the error at the node's line and op)"""
        for i, (vid, r) in enumerate(zip(node.outputs, results, strict=True)):
            problem = self._problem(self.types[vid], r)
            if problem:
                which = f"result {i} (%{vid})" if len(node.outputs) > 1 else f"the result (%{vid})"
                raise FusionError(f"the torch executor disagrees with the IR: {which}: {problem}")
        return results

    def _problem(self, t: Any, r: Any) -> str | None:
        if isinstance(t, TensorType) and t.known:
            return self._tensor_problem(t, r)
        if isinstance(t, ScalarType) and t.dtype in _PY_TYPE and not isinstance(r, (torch.Tensor, list)):
            want = _PY_TYPE[t.dtype]
            if type(r) is not want:
                return f"a python {type(r).__name__} {r!r}, the IR has a {t.dtype.name} scalar"
        return None

    def _tensor_problem(self, t: TensorType, r: Any) -> str | None:
        if not isinstance(r, torch.Tensor):
            return f"a {type(r).__name__}, the IR has a {t.dtype.name} tensor"
        try:
            want = dt.to_torch(t.dtype)
        except ValueError:
            want = r.dtype
        if r.dtype != want:
            return f"dtype {r.dtype}, the IR has {t.dtype.name} ({want})"
        if r.dim() != t.rank:
            return f"rank {r.dim()} (shape {list(r.shape)}), the IR has rank {t.rank}"
        for j, (d, n) in enumerate(zip(t.dims, r.shape, strict=True)):
            expected = self.extents.setdefault(d.label, int(n))
            if int(n) != expected:
                return (f"dim {j} has extent {int(n)} (shape {list(r.shape)}), the IR's axis "
                        f"{d!r} has extent {expected}")
        return None
