"""The table of nvFuser ops that eqsat models: parameter names, defaults, outputs.

The recorder binds a user's call to these names (so ``sum(T, [1])`` and
``sum(T, dims=[1])`` record the same node), and every FusionDefinition implementation is
called back with them (``positional`` parameters by position, the rest by keyword, as
nvFuser's own printer writes them).
"""
from __future__ import annotations

import contextvars
from dataclasses import dataclass

from .dtypes import DataType
from .nodes import SCALAR, TENSOR, VECTOR

_REQUIRED = object()


@dataclass(frozen=True)
class OpSpec:
    name: str
    category: str                 # unary, binary, ternary, reduction, ... (see below)
    params: tuple[str, ...]
    defaults: tuple[tuple[str, object], ...] = ()
    positional: int = 1           # how many leading parameters are passed by position
    outputs: tuple[str, ...] = (TENSOR,)
    # > 0: a call with arguments past ``params`` (a form of the op eqsat does not model)
    # records an opaque node of this many outputs instead of failing
    more_is_opaque: int = 0

    def default(self, param: str):
        return dict(self.defaults).get(param, _REQUIRED)

    def required(self, param: str) -> bool:
        return self.default(param) is _REQUIRED


OPS: dict[str, OpSpec] = {}

# How many tensors the op call being made returns where the table does not say (an op eqsat
# does not model): set by the reader to the names a file unpacks the call into, and by a
# replay to the node's outputs; None is one.
OPAQUE_OUTPUTS: contextvars.ContextVar[int | None] = contextvars.ContextVar("OPAQUE_OUTPUTS", default=None)


def _add(category, names, params, defaults=(), positional=1, outputs=(TENSOR,), more_is_opaque=0):
    for name in names.split():
        OPS[name] = OpSpec(name, category, tuple(params.split()), tuple(defaults), positional,
                           outputs, more_is_opaque)


UNARY_FLOAT = ("exp exp2 expm1 log log2 log10 log1p sqrt rsqrt reciprocal tanh sigmoid sin cos tan "
               "asin acos atan sinh cosh asinh acosh atanh erf erfc erfinv erfcinv lgamma digamma "
               "silu")
UNARY_SAME = "abs neg relu floor ceil round trunc frac sign bitwise_not set segment_set"
UNARY_BOOL = "signbit isnan isinf isfinite isneginf isposinf logical_not isreal"
UNARY_COMPLEX_PART = "real imag"      # ComplexFloat -> Float, ComplexDouble -> Double
BINARY_ARITH = ("add sub mul div truediv pow maximum minimum fmod remainder atan2 "
                "bitwise_and bitwise_or bitwise_xor bitwise_left_shift bitwise_right_shift "
                "nextafter complex")
BINARY_BOOL = "eq ne lt le gt ge logical_and logical_or"

_add("unary", " ".join((UNARY_FLOAT, UNARY_SAME, UNARY_BOOL, UNARY_COMPLEX_PART)), "arg")
_add("binary", BINARY_ARITH + " " + BINARY_BOOL, "arg1 arg2", positional=2)
_add("where", "where", "pred arg1 arg2", positional=3)
_add("clamp", "clamp", "arg min max", positional=3)
_add("lerp", "lerp", "start end weight", positional=3)
_add("cast", "cast", "arg dtype")
_add("reduction", "sum max min prod", "arg dims keepdim dtype",
     (("keepdim", False), ("dtype", "Null")))
_add("var", "var", "arg dims correction keepdim", (("correction", 1), ("keepdim", False)),
     positional=4)
_add("var_mean", "var_mean", "arg dims correction keepdim",
     (("correction", 1), ("keepdim", False)), outputs=(TENSOR, TENSOR))
_add("welford", "welford", "arg dims", positional=2, outputs=(TENSOR, TENSOR, TENSOR))
_add("broadcast", "broadcast", "arg is_broadcast_dim")
_add("broadcast_in_dim", "broadcast_in_dim", "arg shape broadcast_dims")
_add("expand", "expand", "arg shape")
_add("squeeze", "squeeze", "arg dims squeeze_expanded", (("squeeze_expanded", False),))
_add("permute", "permute", "arg dims")
_add("reshape", "reshape", "arg new_shape")
_add("stride_order", "stride_order", "arg stride_order")
_add("size", "size", "arg dim", outputs=(SCALAR,))
_add("shape", "shape", "arg", outputs=(VECTOR,))
_add("full", "full", "shape fill_value dtype", positional=0)
_add("iota", "iota", "length start step dtype",
     (("start", None), ("step", None), ("dtype", "Int")), positional=3)
_add("random", "uniform normal", "arg1 arg2 shape rng_seed rng_offset dtype",
     (("rng_seed", None), ("rng_offset", None), ("dtype", "Float")), positional=2)
_add("slice", "slice", "arg start_indices end_indices strides manual_normalization",
     (("strides", None), ("manual_normalization", False)))
_add("cat", "cat", "tensors dim manual_padding", (("manual_padding", False),))
_add("pad", "pad", "arg pad_widths value", (("value", None),), positional=3)
_add("gather", "gather take_along_axis", "arg index dim", positional=2)
_add("index_select", "index_select", "arg index dim", positional=2)
_add("linear", "linear", "arg1 arg2 bias", (("bias", None),), positional=3)
_add("matmul", "matmul", "arg1 arg2", positional=2)
# ops kept as they are, each its own segment in the cost model (eqsat.cost.segmenter.BARRIERS),
# with nvfuser_direct's parameters (python/python_direct/ops.cpp, nvFuser 0.2.35 and 0.2.36)
_add("topk", "topk", "arg k dim largest sorted", (("dim", -1), ("largest", True), ("sorted", False)),
     positional=2, outputs=(TENSOR, TENSOR))
_add("argsort", "argsort", "arg dim descending stable", (("descending", False), ("stable", False)))
_add("scan", "cumsum cumprod cummin cummax", "arg dim init", (("init", None),))
_add("scatter", "scatter", "arg index src dim", positional=3)
_add("embedding", "embedding_fwd", "input weight padding_idx max_norm norm_type scale_grad_by_freq sparse",
     (("padding_idx", None), ("max_norm", None), ("norm_type", None), ("scale_grad_by_freq", None),
      ("sparse", None)), positional=2)
# the plain form; the scaled one (scales, alpha, bias, beta, dtype, block scales) is opaque, and
# returns (out, block scales or None, gamma or None)
_add("grouped_mm", "grouped_mm", "arg1 arg2 offsets", positional=3, more_is_opaque=3)


# Parameters that take a value (a tensor or a scalar) rather than an attribute (dims, flags):
# where a Python number stands there, nvfuser_direct makes it a constant scalar, and the
# classic frontend needs it defined first (``fd.define_scalar``).
OPERANDS = frozenset("arg arg1 arg2 pred min max start end weight value fill_value length step "
                     "rng_seed rng_offset".split())


# Parameters that nvfuser_direct binds as ``Val*`` alone (no overload takes a Python number,
# as its arithmetic ops' ``ScalarVariant`` does): a number there is defined as a scalar first,
# in either frontend, of the number's own dtype (a bool stays a Bool).
VAL_ONLY = frozenset("k src padding_idx max_norm norm_type scale_grad_by_freq sparse".split())


def signature(spec: OpSpec) -> str:
    parts = []
    for p in spec.params:
        d = spec.default(p)
        parts.append(p if d is _REQUIRED else f"{p}=DataType.{d}" if isinstance(d, str) else f"{p}={d!r}")
    return f"fd.ops.{spec.name}({', '.join(parts)})"


def bind_call(spec: OpSpec, args: tuple, kwargs: dict) -> dict:
    """A call's arguments by parameter name, defaults filled in; TypeError if they don't fit.

    As in nvFuser, a reduction's ``dims`` may be left out (all dims), and
    ``sum(T, DataType.Float)`` passes the dtype in the place of the dims."""
    args = list(args)
    if spec.category == "reduction" and len(args) >= 2 and _looks_like_dtype(args[1]):
        if "dtype" in kwargs:
            raise TypeError(f"argument 'dtype' given twice; expected {signature(spec)}")
        kwargs = {**kwargs, "dtype": args.pop(1)}
    if len(args) > len(spec.params):
        raise TypeError(f"takes at most {len(spec.params)} arguments, got {len(args)}; "
                        f"expected {signature(spec)}")
    bound = dict(zip(spec.params, args))
    for name, value in kwargs.items():
        if name not in spec.params:
            raise TypeError(f"unexpected argument {name!r}; expected {signature(spec)}")
        if name in bound:
            raise TypeError(f"argument {name!r} given twice; expected {signature(spec)}")
        bound[name] = value
    out = {}
    for name in spec.params:
        if name in bound:
            out[name] = bound[name]
        elif name == "dims" and spec.category == "reduction":
            out[name] = None
        elif spec.required(name):
            raise TypeError(f"missing argument {name!r}; expected {signature(spec)}")
        else:
            d = spec.default(name)
            out[name] = DataType[d] if name == "dtype" and isinstance(d, str) else d
    return out


def _looks_like_dtype(value) -> bool:
    return type(value).__name__ == "DataType" or str(type(value)).endswith("DataType'>")


def call_form(spec: OpSpec, args: dict) -> tuple[list, dict]:
    """How an implementation is called back: leading parameters by position, the rest by
    keyword, leaving out those at their defaults."""
    positional = [args[p] for p in spec.params[:spec.positional]]
    keywords = {}
    for p in spec.params[spec.positional:]:
        d = spec.default(p)
        if isinstance(d, str) and p == "dtype":
            d = DataType[d]
        if d is _REQUIRED or args[p] != d or type(args[p]) is not type(d):
            keywords[p] = args[p]
    return positional, keywords
