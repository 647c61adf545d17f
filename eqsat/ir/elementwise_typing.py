"""The typing rules of definitions, elementwise ops and reductions: the part of
:class:`eqsat.ir.axes.AxisInference` that gives each such op's output types (one method per
category of :data:`eqsat.ir.opspec.OPS`, ``_cat_<category>``; an elementwise op's dtype by its
row's dtype rule)."""

from __future__ import annotations


from . import dtypes as dt
from . import layout
from .dtypes import DataType
from .opspec import OPS
from .value_types import Dim, ScalarType, TensorType, VectorType, result_dtype


class ElementwiseTyping:
    """Typing rules of :class:`~eqsat.ir.axes.AxisInference` (which calls them with the node and
    its bound arguments): definitions, elementwise ops, reductions. They read its ``t``,
    ``tensor``, ``elementwise``, ``new_label``, ``shape_items``, ``union``, ``fail``..."""

    # -- definitions -----------------------------------------------------------------------
    def _op_define_tensor(self, node, shape, contiguity, dtype, is_cpu, stride_order):
        dims = []
        for s, contig in zip(shape, layout.dim_contiguity(contiguity, stride_order, len(shape))):
            if s == 1:
                dims.append(Dim(self.new_label(1), broadcast=True))
            elif contig is None:  # an expanded broadcast: stride 0
                dims.append(Dim(self.new_label(None if s == -1 else s), broadcast=True))
            else:
                dims.append(Dim(self.new_label(None if s == -1 else s)))
        return TensorType(dtype, tuple(dims))

    def _op_define_scalar(self, node, value, dtype):
        return ScalarType(dtype, const=value)

    def _op_define_vector(self, node, values, dtype):
        return VectorType(tuple(self.shape_items(values, casting=True)))

    # -- elementwise -------------------------------------------------------------------------
    def _cat_unary(self, node, arg):
        t = self.t(arg)
        result = OPS[node.op].result  # the op's dtype rule (opspec.RESULTS)
        if result == "bool":
            dtype = DataType.Bool
        elif result == "complex part":
            dtype = self.complex_part(node, t.dtype)
        elif result == "float":
            dtype = dt.float_math_type(t.dtype, isinstance(t, TensorType))
        elif result == "compute":
            dtype = dt.compute_type(t.dtype)  # bf16/fp16 math is done (and kept) in Float
        elif result == "abs":
            dtype = dt.real_type(t.dtype)  # |complex| is real (csrc/ops/arith.cpp abs)
        else:
            dtype = t.dtype
        return self.elementwise([t], dtype)

    def complex_part(self, node, dtype: DataType) -> DataType:
        """The dtype of ``real``/``imag``: a complex dtype's real counterpart; ``real`` of a real
        value is the value (nvFuser: ``set``), ``imag`` of one is an error there."""
        if dtype in dt.COMPLEX_TYPES:
            return dt.real_type(dtype)
        if node.op == "imag":
            self.fail(f"imag takes a complex value, not {dtype.name}")
        return dtype

    def complex_of(self, real: DataType, imag: DataType) -> DataType:
        """``complex(real, imag)``: both Float (ComplexFloat) or both Double (ComplexDouble)."""
        if real is not imag or real not in (DataType.Float, DataType.Double):
            self.fail(f"complex takes two Float or two Double values, not {real.name} and {imag.name}")
        return DataType.ComplexFloat if real is DataType.Float else DataType.ComplexDouble

    def _cat_binary(self, node, arg1, arg2):
        a, b = self.t(arg1), self.t(arg2)
        result = OPS[node.op].result  # the op's dtype rule (opspec.RESULTS)
        if result in ("comparison", "logical"):
            dtype = DataType.Bool
        elif result == "complex":
            dtype = self.complex_of(a.dtype, b.dtype)
        else:
            dtype = result_dtype(a, b, arithmetic=result != "bitwise")
            if result == "true division":
                dtype = dt.float_math_type(dtype, any(isinstance(x, TensorType) for x in (a, b)))
        if dtype in dt.INT_TYPES and node.op in _INT_FOLD and _is_int_const(a) and _is_int_const(b):
            return ScalarType(dtype, const=_INT_FOLD[node.op](a.const, b.const))
        return self.elementwise([a, b], dtype)

    def _cat_where(self, node, pred, arg1, arg2):
        p, a, b = self.t(pred), self.t(arg1), self.t(arg2)
        return self.elementwise([p, a, b], result_dtype(a, b))

    def _cat_clamp(self, node, arg, min, max):
        ts = [self.t(arg), self.t(min), self.t(max)]
        return self.elementwise(ts, ts[0].dtype)

    def _cat_lerp(self, node, start, end, weight):
        ts = [self.t(start), self.t(end), self.t(weight)]
        return self.elementwise(ts, result_dtype(*ts, arithmetic=True))

    def _cat_cast(self, node, arg, dtype):
        t = self.t(arg)
        if isinstance(t, TensorType):
            return TensorType(dtype, t.dims)
        if dtype in (DataType.Int, DataType.Index) and _is_int_const(t):
            return ScalarType(dtype, const=t.const)
        return ScalarType(dtype)

    # -- reductions --------------------------------------------------------------------------
    def reduced(self, t: TensorType, dims, keepdim: bool) -> tuple[Dim, ...]:
        out = []
        for i, d in enumerate(t.dims):
            if i in dims:
                if keepdim:
                    out.append(Dim(self.new_label(1), broadcast=True))
            else:
                out.append(d)
        return tuple(out)

    def _cat_reduction(self, node, arg, dims, keepdim, dtype):
        t = self.tensor(arg)
        if dtype is DataType.Null:
            dtype = t.dtype
            if node.op in ("sum", "prod"):
                dtype = dt.sum_type(t.dtype)
        return TensorType(dtype, self.reduced(t, dims, keepdim))

    def _float_of(self, t: TensorType) -> DataType:
        """var/welford's dtype: a float input's own; Double for integers and bools (nvFuser)."""
        return t.dtype if dt.is_inexact(t.dtype) else DataType.Double

    def _cat_var(self, node, arg, dims, correction, keepdim):
        t = self.tensor(arg)
        return TensorType(self._float_of(t), self.reduced(t, dims, keepdim))

    def _cat_var_mean(self, node, arg, dims, correction, keepdim):
        t = self.tensor(arg)
        if t.dtype in dt.HALF_TYPES:
            self.fail(
                f"var_mean of {t.dtype.name} is not supported by nvFuser; cast the input to "
                f"Float first (fd.ops.cast(x, dtype=DataType.Float))"
            )
        out = self._cat_var(node, arg, dims, correction, keepdim)
        return [out, out]

    def _cat_welford(self, node, arg, dims):
        """(mean, M2 = the sum of squared deviations, count); the count is of nvFuser's Index type."""
        t = self.tensor(arg)
        dims_out = self.reduced(t, dims, False)
        f = TensorType(self._float_of(t), dims_out)
        return [f, f, TensorType(DataType.Index, dims_out)]


# integer scalar arithmetic on constants, folded so that a pad width or an extent written as
# ``fd.ops.add(0, 32)`` (nvfuser_direct prints them so) is known while recording; int64 as in nvFuser
def _wrap64(x: int) -> int:
    return (x + (1 << 63)) % (1 << 64) - (1 << 63)


_INT_FOLD = {
    "add": lambda a, b: _wrap64(a + b),
    "sub": lambda a, b: _wrap64(a - b),
    "mul": lambda a, b: _wrap64(a * b),
}


def _is_int_const(t) -> bool:
    return isinstance(t, ScalarType) and isinstance(t.const, int) and not isinstance(t.const, bool)
