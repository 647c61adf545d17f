"""nvFuser's DataType names, and their torch counterparts."""
from __future__ import annotations

import enum

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
for _name, _dt in (("Float8_e4m3fn", "float8_e4m3fn"), ("Float8_e5m2", "float8_e5m2"),
                   ("Float8_e8m0fnu", "float8_e8m0fnu"), ("UInt64", "uint64")):
    if hasattr(torch, _dt):
        _TO_TORCH[DataType[_name]] = getattr(torch, _dt)
_FROM_TORCH = {v: k for k, v in _TO_TORCH.items() if k is not DataType.Index}

FP8_TYPES = frozenset({DataType.Float8_e4m3fn, DataType.Float8_e5m2, DataType.Float8_e8m0fnu})
HALF_TYPES = frozenset({DataType.Half, DataType.BFloat16}) | FP8_TYPES
FLOAT_TYPES = HALF_TYPES | {DataType.Float, DataType.Double}
INT_TYPES = frozenset({DataType.Int, DataType.Int32, DataType.Index, DataType.UInt64})
COMPLEX_TYPES = frozenset({DataType.ComplexFloat, DataType.ComplexDouble})

ITEMSIZE = {DataType.Double: 8, DataType.Float: 4, DataType.Half: 2, DataType.BFloat16: 2,
            DataType.Float8_e4m3fn: 1, DataType.Float8_e5m2: 1, DataType.Float8_e8m0fnu: 1,
            DataType.Int: 8, DataType.Int32: 4, DataType.UInt64: 8, DataType.Index: 8,
            DataType.Bool: 1, DataType.ComplexFloat: 8, DataType.ComplexDouble: 16}


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
    raise ValueError(f"unknown {what} {value!r}; expected one of nvFuser's DataType names "
                     f"({', '.join(DataType.__members__)})")


def of_number(value) -> DataType:
    """The DataType nvFuser gives a Python number: Bool, Int (64-bit), Double, ComplexDouble."""
    if isinstance(value, bool):
        return DataType.Bool
    if isinstance(value, int):
        return DataType.Int
    if isinstance(value, complex):
        return DataType.ComplexDouble
    return DataType.Double


def promote(a: DataType, b: DataType) -> DataType:
    """Type promotion between two tensors, as nvFuser (and PyTorch) do it."""
    return from_torch(torch.promote_types(to_torch(a), to_torch(b)))


def is_float(dtype: DataType) -> bool:
    return dtype in FLOAT_TYPES


def compute_type(dtype: DataType) -> DataType:
    """The dtype nvFuser's arithmetic ops produce for operands of ``dtype``: Float for
    reduced-precision floats, the dtype itself otherwise."""
    return DataType.Float if dtype in HALF_TYPES else dtype


def accumulation_type(dtype: DataType) -> DataType:
    """The dtype nvFuser reduces in: fp32 for half types, the dtype itself otherwise."""
    return DataType.Float if dtype in HALF_TYPES else dtype
