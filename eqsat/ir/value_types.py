"""The types of a fusion's values (:mod:`eqsat.ir.axes` infers them): a tensor's dims, each
carrying an axis label; a scalar; a vector of scalars; and nvFuser's promotion of operands."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import dtypes as dt
from .dtypes import DataType


@dataclass(frozen=True)
class Dim:
    label: int
    broadcast: bool = False

    def __repr__(self) -> str:
        return f"b{self.label}" if self.broadcast else f"a{self.label}"


@dataclass(frozen=True)
class TensorType:
    dtype: DataType | None
    dims: tuple[Dim, ...] | None  # None: unknown (made by, or downstream of, an opaque op)

    @property
    def known(self) -> bool:
        return self.dims is not None and self.dtype is not None

    @property
    def rank(self) -> int | None:
        return None if self.dims is None else len(self.dims)

    @property
    def labels(self) -> frozenset[int]:
        """The axes this tensor varies along."""
        return frozenset(d.label for d in self.dims or () if not d.broadcast)

    @property
    def layout(self) -> tuple[int, ...]:
        return tuple(d.label for d in self.dims or ())


@dataclass(frozen=True)
class ScalarType:
    dtype: DataType | None
    const: Any = None  # the value, where it is a constant
    extent_of: int | None = None  # the label whose extent this scalar is (fd.ops.size)


@dataclass(frozen=True)
class VectorType:
    items: tuple[ScalarType, ...] | None


UNKNOWN_TENSOR = TensorType(None, None)


def result_dtype(*operands, arithmetic: bool = False) -> DataType:
    """nvFuser's promotion of ``operands`` (TensorType and ScalarType values):
    :func:`eqsat.ir.dtypes.result_dtype`."""
    return dt.result_dtype([(o.dtype, isinstance(o, TensorType)) for o in operands], arithmetic=arithmetic)
