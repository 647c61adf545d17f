"""nvFuser's data types: their names, torch counterparts, categories, item sizes and promotion."""

from __future__ import annotations

import enum
from typing import Any, Sequence

import torch


class DataType(enum.Enum):
    """nvFuser's data types, spelled as nvFuser spells them (``DataType.Float``...)."""

    Double = "Double"
    Float = "Float"
    Half = "Half"
    BFloat16 = "BFloat16"
    Float8_e4m3fn = "Float8_e4m3fn"
    Float8_e5m2 = "Float8_e5m2"
    Float8_e8m0fnu = "Float8_e8m0fnu"
    Int = "Int"
    Int32 = "Int32"
    UInt64 = "UInt64"
    Index = "Index"
    Bool = "Bool"
    ComplexFloat = "ComplexFloat"
    ComplexDouble = "ComplexDouble"
    Null = "Null"

    def __repr__(self) -> str:
        return f"DataType.{self.name}"

    __str__ = __repr__


_TO_TORCH = {
    DataType.Double: torch.float64,
    DataType.Float: torch.float32,
    DataType.Half: torch.float16,
    DataType.BFloat16: torch.bfloat16,
    DataType.Int: torch.int64,
    DataType.Int32: torch.int32,
    DataType.Index: torch.int64,
    DataType.Bool: torch.bool,
    DataType.ComplexFloat: torch.complex64,
    DataType.ComplexDouble: torch.complex128,
}
for _name, _dt in (
    ("Float8_e4m3fn", "float8_e4m3fn"),
    ("Float8_e5m2", "float8_e5m2"),
    ("Float8_e8m0fnu", "float8_e8m0fnu"),
    ("UInt64", "uint64"),
):
    if hasattr(torch, _dt):
        _TO_TORCH[DataType[_name]] = getattr(torch, _dt)
_FROM_TORCH = {v: k for k, v in _TO_TORCH.items() if k is not DataType.Index}

FP8_TYPES = frozenset({DataType.Float8_e4m3fn, DataType.Float8_e5m2, DataType.Float8_e8m0fnu})
HALF_TYPES = frozenset({DataType.Half, DataType.BFloat16}) | FP8_TYPES
FLOAT_TYPES = HALF_TYPES | {DataType.Float, DataType.Double}
INT_TYPES = frozenset({DataType.Int, DataType.Int32, DataType.Index, DataType.UInt64})
COMPLEX_TYPES = frozenset({DataType.ComplexFloat, DataType.ComplexDouble})

ITEMSIZE = {
    DataType.Double: 8,
    DataType.Float: 4,
    DataType.Half: 2,
    DataType.BFloat16: 2,
    DataType.Float8_e4m3fn: 1,
    DataType.Float8_e5m2: 1,
    DataType.Float8_e8m0fnu: 1,
    DataType.Int: 8,
    DataType.Int32: 4,
    DataType.UInt64: 8,
    DataType.Index: 8,
    DataType.Bool: 1,
    DataType.ComplexFloat: 8,
    DataType.ComplexDouble: 16,
}


def to_torch(dtype: DataType) -> torch.dtype:
    try:
        return _TO_TORCH[dtype]
    except KeyError:
        raise ValueError(f"{dtype!r} has no torch dtype") from None


def torch_types(dtypes) -> frozenset:
    """The torch dtypes of those of ``dtypes`` this torch has."""
    return frozenset(_TO_TORCH[d] for d in dtypes if d in _TO_TORCH)


def from_torch(dtype: torch.dtype) -> DataType:
    try:
        return _FROM_TORCH[dtype]
    except KeyError:
        raise ValueError(f"torch dtype {dtype} has no nvFuser DataType") from None


def coerce(value, what: str = "dtype") -> DataType:
    """Accept eqsat's DataType, nvFuser's own DataType enum (by name) or a torch dtype."""
    if isinstance(value, DataType):
        return value
    if isinstance(value, torch.dtype):
        return from_torch(value)
    name = getattr(value, "name", None)
    if isinstance(name, str) and name in DataType.__members__:
        return DataType[name]
    text = str(value).rsplit(".", 1)[-1]
    if text in DataType.__members__:
        return DataType[text]
    raise ValueError(
        f"unknown {what} {value!r}; expected one of nvFuser's DataType names "
        f"({', '.join(DataType.__members__)})"
    )


def of_number(value) -> DataType:
    """The DataType nvFuser gives a Python number: Bool, Int (64-bit), Double, ComplexDouble."""
    if isinstance(value, bool):
        return DataType.Bool
    if isinstance(value, int):
        return DataType.Int
    if isinstance(value, complex):
        return DataType.ComplexDouble
    return DataType.Double


def is_float(dtype: DataType) -> bool:
    return dtype in FLOAT_TYPES


def is_inexact(dtype: DataType) -> bool:
    """Floating or complex: what float math keeps (integers and bools it turns into floats)."""
    return dtype in FLOAT_TYPES or dtype in COMPLEX_TYPES


def compute_type(dtype: DataType) -> DataType:
    """The dtype nvFuser's arithmetic ops produce for operands of ``dtype``: Float for
    reduced-precision floats, the dtype itself otherwise."""
    return DataType.Float if dtype in HALF_TYPES else dtype


def accumulation_type(dtype: DataType) -> DataType:
    """The dtype nvFuser reduces in: its arithmetic's (fp32 for half types)."""
    return compute_type(dtype)


def float_math_type(dtype: DataType, tensor: bool = True) -> DataType:
    """The dtype of float math (exp, rsqrt, true division...) on ``dtype``: its compute type
    where it is floating or complex; for integers and bools Float (a tensor) or Double (a
    scalar)."""
    if is_inexact(dtype):
        return compute_type(dtype)
    return DataType.Float if tensor else DataType.Double


def real_type(dtype: DataType) -> DataType:
    """A complex dtype's real counterpart (ComplexFloat: Float, ComplexDouble: Double); any other
    dtype itself. What ``abs``, ``real`` and ``imag`` of a complex value give (csrc/ops/arith.cpp
    abs: "The output of abs(complex_tensor) are real numbers")."""
    return {DataType.ComplexFloat: DataType.Float, DataType.ComplexDouble: DataType.Double}.get(dtype, dtype)


def sum_type(dtype: DataType) -> DataType:
    """The dtype of a sum or product with no dtype given: Int for integers and bools, the
    dtype itself otherwise."""
    return DataType.Int if dtype in INT_TYPES or dtype is DataType.Bool else dtype


# torch promotes no FP8 type; nvFuser promotes them as the reduced-precision floats they are
# (arithmetic in Float). Half stands in for them in torch's promotion, and is mapped back where
# one FP8 type is all the tensors hold.
_FP8_STAND_IN = DataType.Half
_EXAMPLE_NUMBER = {DataType.Bool: True, DataType.ComplexFloat: 1j, DataType.ComplexDouble: 1j}
_SCALAR_ORDER = (DataType.Bool, DataType.Int32, DataType.Int, DataType.Double, DataType.ComplexDouble)


def _example(dtype: DataType, tensor: bool) -> Any:
    """A torch operand that promotes like a tensor or a scalar of ``dtype`` (a one-element
    tensor, or a python number)."""
    if tensor:
        stand_in = (
            _FP8_STAND_IN if dtype in FP8_TYPES else DataType.Int if dtype is DataType.UInt64 else dtype
        )  # torch promotes no uint64
        return torch.empty((1,), dtype=to_torch(stand_in))
    if dtype in INT_TYPES:
        return 1
    return _EXAMPLE_NUMBER.get(dtype, 1.0)


def _scalar_rank(dtype: DataType) -> int:
    return _SCALAR_ORDER.index(dtype) if dtype in _SCALAR_ORDER else (3 if is_float(dtype) else 2)


def result_dtype(operands: Sequence[tuple[DataType, bool]], arithmetic: bool = False) -> DataType:
    """nvFuser's promotion (seen on nvFuser 0.2.35) of ``operands``, (dtype, is a tensor) pairs
    in argument order: PyTorch's, where scalars don't lift a tensor within its category, except
    that a floating scalar lifts integer and bool tensors to Double, FP8 tensors promote as the
    reduced-precision floats they are, and ``arithmetic`` ops compute reduced-precision floats
    (bf16, fp16, FP8) in Float. Scalars alone take the widest category among them. Raises
    ValueError for UInt64 with another integer type, whose promotion eqsat does not model."""
    tensors = [d for d, tensor in operands if tensor]
    if not tensors:
        out = DataType.Bool
        for d, _ in operands:
            out = out if _scalar_rank(out) >= _scalar_rank(d) else d
        return out
    args = [_example(d, tensor) for d, tensor in operands]
    result = args[0] if len(args) == 1 else torch.result_type(args[0], args[1])
    if isinstance(result, torch.Tensor):
        result = result.dtype
    for extra in args[2:]:
        result = torch.result_type(torch.empty((1,), dtype=result), extra)
    out = from_torch(result)
    if DataType.UInt64 in tensors:
        ints = {d for d in tensors if d in INT_TYPES or d is DataType.Bool}
        if ints != {DataType.UInt64}:
            raise ValueError(
                f"eqsat does not model nvFuser's promotion of UInt64 with "
                f"{', '.join(sorted(d.name for d in ints - {DataType.UInt64}))}"
            )
        if out is DataType.Int:
            out = DataType.UInt64
    fp8 = {d for d in tensors if d in FP8_TYPES}
    if out is _FP8_STAND_IN and len(fp8) == 1 and all(d in fp8 for d in tensors if d in HALF_TYPES):
        out = fp8.pop()
    if not any(is_inexact(d) for d in tensors) and any(is_float(d) for d, tensor in operands if not tensor):
        out = DataType.Double
    if arithmetic:
        out = compute_type(out)
    return out
