"""The table of nvFuser ops that eqsat models, one row per op (:data:`OPS`): its category,
which gives its parameter names, defaults and outputs (:data:`CATEGORY_SIGNATURES`); an
elementwise op's dtype rule (:data:`RESULTS`); and its :class:`Trait` s (how the encoding, and
nvFuser's segmenter where eqsat keeps the op, take it). Every set of ops the pipeline reads is
derived from the rows.

The recorder binds a user's call to these names (so ``sum(T, [1])`` and
``sum(T, dims=[1])`` record the same node), and every FusionDefinition implementation is
called back with them (``positional`` parameters by position, the rest by keyword, as
nvFuser's own printer writes them).
"""

from __future__ import annotations

import contextvars
import enum
from dataclasses import dataclass

from .dtypes import DataType
from .nodes import SCALAR, TENSOR, VECTOR

_REQUIRED = object()


class Trait(enum.Flag):
    """What the pipeline makes of an op beyond its category: how the encoding takes it, and how
    nvFuser's segmenter takes it where eqsat keeps it verbatim (the cost model's ``Kept`` nodes,
    :mod:`eqsat.cost.ops`). An op with none of them is, kept, a pointwise op on its inputs."""

    NONE = 0
    BARRIER = enum.auto()  # runs outside the fused kernels: its inputs are written, its output read
    REDUCES = enum.auto()  # a reduction (its output's missing labels are the reduced ones)
    RESIZES = enum.auto()  # resizes an axis: the resize scheduler's, or on a kernel input only
    INDEXES = enum.auto()  # indexes its first input, which must be a kernel input
    VIEW = enum.auto()  # no kernel where a kernel's worth of views is all there is
    REPOSITIONS = enum.auto()  # moves a value's dims only: the encoding takes its input for it
    SHAPE_QUERY = enum.auto()  # reads its input's extents, not its elements


@dataclass(frozen=True)
class CategorySignature:
    """The parameters of every op of a category (one row of :data:`CATEGORY_SIGNATURES`)."""

    params: tuple[str, ...]
    defaults: tuple[tuple[str, object], ...] = ()
    positional: int = 1  # how many leading parameters are passed by position
    outputs: tuple[str, ...] = (TENSOR,)
    # > 0: a call with arguments past ``params`` (a form of the op eqsat does not model)
    # records an opaque node of this many outputs instead of failing
    more_is_opaque: int = 0


@dataclass(frozen=True)
class OpSpec:
    """One op of :data:`OPS`: its name, its category (which gives its parameters, and selects
    the typing and torch rules of :mod:`eqsat.ir.axes` and :mod:`eqsat.reference.torch_executor`),
    how an elementwise op's dtype follows from its operands' (``result``: :data:`RESULTS`), and
    its :class:`Trait` s."""

    name: str
    category: str  # unary, binary, where, reduction, ... (CATEGORY_SIGNATURES)
    params: tuple[str, ...]
    defaults: tuple[tuple[str, object], ...] = ()
    positional: int = 1  # how many leading parameters are passed by position
    outputs: tuple[str, ...] = (TENSOR,)
    more_is_opaque: int = 0  # CategorySignature.more_is_opaque
    result: str | None = None  # unary and binary ops: their dtype rule (RESULTS)
    traits: Trait = Trait.NONE

    def default(self, param: str):
        return dict(self.defaults).get(param, _REQUIRED)

    def required(self, param: str) -> bool:
        return self.default(param) is _REQUIRED

    @property
    def elementwise(self) -> bool:
        """Each output element is computed from the operands' elements at its place."""
        return self.category in ELEMENTWISE_CATEGORIES

    @property
    def draws(self) -> bool:
        """The op draws random numbers (nvFuser's Philox, computed where they are used)."""
        return self.category == "random"


# How many tensors the op call being made returns where the table does not say (an op eqsat
# does not model): set by the reader to the names a file unpacks the call into, and by a
# replay to the node's outputs; None is one.
OPAQUE_OUTPUTS: contextvars.ContextVar[int | None] = contextvars.ContextVar("OPAQUE_OUTPUTS", default=None)


def _sig(params: str, defaults=(), positional=1, outputs=(TENSOR,), more_is_opaque=0) -> CategorySignature:
    """A row of :data:`CATEGORY_SIGNATURES`: ``params`` holds the parameters' names, space-separated."""
    return CategorySignature(tuple(params.split()), tuple(defaults), positional, outputs, more_is_opaque)


# category -> the parameters of its ops (nvfuser_direct's, python/python_direct/ops.cpp, for the
# ops after matmul: nvFuser 0.2.35 and 0.2.36)
CATEGORY_SIGNATURES: dict[str, CategorySignature] = {
    "unary": _sig("arg"),
    "binary": _sig("arg1 arg2", positional=2),
    "where": _sig("pred arg1 arg2", positional=3),
    "clamp": _sig("arg min max", positional=3),
    "lerp": _sig("start end weight", positional=3),
    "cast": _sig("arg dtype"),
    "reduction": _sig("arg dims keepdim dtype", (("keepdim", False), ("dtype", "Null"))),
    "var": _sig("arg dims correction keepdim", (("correction", 1), ("keepdim", False)), positional=4),
    "var_mean": _sig(
        "arg dims correction keepdim", (("correction", 1), ("keepdim", False)), outputs=(TENSOR, TENSOR)
    ),
    "welford": _sig("arg dims", positional=2, outputs=(TENSOR, TENSOR, TENSOR)),
    "broadcast": _sig("arg is_broadcast_dim"),
    "broadcast_in_dim": _sig("arg shape broadcast_dims"),
    "expand": _sig("arg shape"),
    "squeeze": _sig("arg dims squeeze_expanded", (("squeeze_expanded", False),)),
    "permute": _sig("arg dims"),
    "reshape": _sig("arg new_shape"),
    "stride_order": _sig("arg stride_order"),
    "size": _sig("arg dim", outputs=(SCALAR,)),
    "shape": _sig("arg", outputs=(VECTOR,)),
    "full": _sig("shape fill_value dtype", positional=0),
    "iota": _sig(
        "length start step dtype", (("start", None), ("step", None), ("dtype", "Int")), positional=3
    ),
    "random": _sig(
        "arg1 arg2 shape rng_seed rng_offset dtype",
        (("rng_seed", None), ("rng_offset", None), ("dtype", "Float")),
        positional=2,
    ),
    "slice": _sig(
        "arg start_indices end_indices strides manual_normalization",
        (("strides", None), ("manual_normalization", False)),
    ),
    "cat": _sig("tensors dim manual_padding", (("manual_padding", False),)),
    "pad": _sig("arg pad_widths value", (("value", None),), positional=3),
    "gather": _sig("arg index dim", positional=2),
    "index_select": _sig("arg index dim", positional=2),
    "linear": _sig("arg1 arg2 bias", (("bias", None),), positional=3),
    "matmul": _sig("arg1 arg2", positional=2),
    "topk": _sig(
        "arg k dim largest sorted",
        (("dim", -1), ("largest", True), ("sorted", False)),
        positional=2,
        outputs=(TENSOR, TENSOR),
    ),
    "argsort": _sig("arg dim descending stable", (("descending", False), ("stable", False))),
    "scan": _sig("arg dim init", (("init", None),)),
    "scatter": _sig("arg index src dim", positional=3),
    "embedding": _sig(
        "input weight padding_idx max_norm norm_type scale_grad_by_freq sparse",
        (
            ("padding_idx", None),
            ("max_norm", None),
            ("norm_type", None),
            ("scale_grad_by_freq", None),
            ("sparse", None),
        ),
        positional=2,
    ),
    # the plain form; the scaled one (scales, alpha, bias, beta, dtype, block scales) is opaque,
    # and returns (out, block scales or None, gamma or None)
    "grouped_mm": _sig("arg1 arg2 offsets", positional=3, more_is_opaque=3),
}
ELEMENTWISE_CATEGORIES = frozenset({"unary", "binary", "where", "clamp", "lerp", "cast"})

# how a unary or binary op's result dtype follows from its operands' (eqsat.ir.axes types it)
RESULTS = {
    "float": "float math: integers give Float, bf16/fp16 are computed (and kept) in Float",
    "compute": "its operand's computation dtype (bf16/fp16 give Float)",
    "abs": "its operand's, or a complex operand's real counterpart (|z| is real)",
    "same": "its operand's",
    "bool": "Bool",
    "complex part": "a complex operand's real counterpart (ComplexFloat -> Float); a real one's own",
    "promote": "its operands' promoted (nvFuser's arithmetic promotion)",
    "true division": "its operands' promoted, then float math's",
    "bitwise": "its operands' promoted as they are (no arithmetic lifting)",
    "comparison": "Bool; the operands meet as arithmetic's do",
    "logical": "Bool; the operands taken as they are",
    "complex": "ComplexFloat of two Floats, ComplexDouble of two Doubles",
}

_BARRIER, _REDUCES, _RESIZES, _INDEXES = Trait.BARRIER, Trait.REDUCES, Trait.RESIZES, Trait.INDEXES
_VIEW, _REPOSITIONS = Trait.VIEW, Trait.REPOSITIONS

# Every op eqsat models, one row each: a new op is a new row here (a new category also needs its
# row of CATEGORY_SIGNATURES, and its typing and torch rules where no generic one fits). Barriers
# are the ops nvFuser does not fuse into a pointwise or reduction kernel (eqsat.cost.segmenter).
# fmt: off
_ROWS = (
    # name                   category        result          traits
    ("exp",                  "unary",        "float"),
    ("exp2",                 "unary",        "float"),
    ("expm1",                "unary",        "float"),
    ("log",                  "unary",        "float"),
    ("log2",                 "unary",        "float"),
    ("log10",                "unary",        "float"),
    ("log1p",                "unary",        "float"),
    ("sqrt",                 "unary",        "float"),
    ("rsqrt",                "unary",        "float"),
    ("reciprocal",           "unary",        "float"),
    ("tanh",                 "unary",        "float"),
    ("sigmoid",              "unary",        "float"),
    ("sin",                  "unary",        "float"),
    ("cos",                  "unary",        "float"),
    ("tan",                  "unary",        "float"),
    ("asin",                 "unary",        "float"),
    ("acos",                 "unary",        "float"),
    ("atan",                 "unary",        "float"),
    ("sinh",                 "unary",        "float"),
    ("cosh",                 "unary",        "float"),
    ("asinh",                "unary",        "float"),
    ("acosh",                "unary",        "float"),
    ("atanh",                "unary",        "float"),
    ("erf",                  "unary",        "float"),
    ("erfc",                 "unary",        "float"),
    ("erfinv",               "unary",        "float"),
    ("erfcinv",              "unary",        "float"),
    ("lgamma",               "unary",        "float"),
    ("digamma",              "unary",        "float"),
    ("silu",                 "unary",        "float"),
    ("abs",                  "unary",        "abs"),
    ("neg",                  "unary",        "compute"),
    ("relu",                 "unary",        "same"),
    ("floor",                "unary",        "same"),
    ("ceil",                 "unary",        "same"),
    ("round",                "unary",        "same"),
    ("trunc",                "unary",        "same"),
    ("frac",                 "unary",        "same"),
    ("sign",                 "unary",        "same"),
    ("bitwise_not",          "unary",        "same"),
    ("set",                  "unary",        "same"),
    ("segment_set",          "unary",        "same",         _BARRIER),
    ("signbit",              "unary",        "bool"),
    ("isnan",                "unary",        "bool"),
    ("isinf",                "unary",        "bool"),
    ("isfinite",             "unary",        "bool"),
    ("isneginf",             "unary",        "bool"),
    ("isposinf",             "unary",        "bool"),
    ("logical_not",          "unary",        "bool"),
    ("isreal",               "unary",        "bool"),
    ("real",                 "unary",        "complex part"),
    ("imag",                 "unary",        "complex part"),
    ("add",                  "binary",       "promote"),
    ("sub",                  "binary",       "promote"),
    ("mul",                  "binary",       "promote"),
    ("div",                  "binary",       "promote"),
    ("truediv",              "binary",       "true division"),
    ("pow",                  "binary",       "promote"),
    ("maximum",              "binary",       "promote"),
    ("minimum",              "binary",       "promote"),
    ("fmod",                 "binary",       "promote"),
    ("remainder",            "binary",       "promote"),
    ("atan2",                "binary",       "promote"),
    ("bitwise_and",          "binary",       "bitwise"),
    ("bitwise_or",           "binary",       "bitwise"),
    ("bitwise_xor",          "binary",       "bitwise"),
    ("bitwise_left_shift",   "binary",       "bitwise"),
    ("bitwise_right_shift",  "binary",       "bitwise"),
    ("nextafter",            "binary",       "promote"),
    ("complex",              "binary",       "complex"),
    ("eq",                   "binary",       "comparison"),
    ("ne",                   "binary",       "comparison"),
    ("lt",                   "binary",       "comparison"),
    ("le",                   "binary",       "comparison"),
    ("gt",                   "binary",       "comparison"),
    ("ge",                   "binary",       "comparison"),
    ("logical_and",          "binary",       "logical"),
    ("logical_or",           "binary",       "logical"),
    ("where",                "where"),
    ("clamp",                "clamp"),
    ("lerp",                 "lerp"),
    ("cast",                 "cast"),
    ("sum",                  "reduction"),
    ("max",                  "reduction"),
    ("min",                  "reduction"),
    ("prod",                 "reduction"),
    ("var",                  "var"),
    ("var_mean",             "var_mean"),
    ("welford",              "welford",      None,           _REDUCES),
    ("broadcast",            "broadcast",    None,           _REPOSITIONS),
    ("broadcast_in_dim",     "broadcast_in_dim", None,       _REPOSITIONS),
    ("expand",               "expand",       None,           _REPOSITIONS),
    ("squeeze",              "squeeze",      None,           _REPOSITIONS),
    ("permute",              "permute",      None,           _REPOSITIONS),
    ("reshape",              "reshape",      None,           _VIEW),
    ("stride_order",         "stride_order", None,           _VIEW),
    ("size",                 "size"),
    ("shape",                "shape",        None,           Trait.SHAPE_QUERY),
    ("full",                 "full"),
    ("iota",                 "iota"),
    ("uniform",              "random"),
    ("normal",               "random"),
    ("slice",                "slice",        None,           _RESIZES | _VIEW),
    ("cat",                  "cat",          None,           _RESIZES),
    ("pad",                  "pad",          None,           _RESIZES),
    ("gather",               "gather",       None,           _INDEXES),
    ("take_along_axis",      "gather",       None,           _INDEXES),
    ("index_select",         "index_select", None,           _INDEXES),
    ("linear",               "linear",       None,           _BARRIER),
    ("matmul",               "matmul",       None,           _BARRIER),
    ("topk",                 "topk",         None,           _BARRIER),
    ("argsort",              "argsort",      None,           _BARRIER),
    ("cumsum",               "scan",         None,           _BARRIER),
    ("cumprod",              "scan",         None,           _BARRIER),
    ("cummin",               "scan",         None,           _BARRIER),
    ("cummax",               "scan",         None,           _BARRIER),
    ("scatter",              "scatter",      None,           _BARRIER),
    ("embedding_fwd",        "embedding",    None,           _BARRIER),
    ("grouped_mm",           "grouped_mm",   None,           _BARRIER),
)
# fmt: on


def _spec(name: str, category: str, result: str | None = None, traits: Trait = Trait.NONE) -> OpSpec:
    """The OpSpec of a row of the table: its category's parameters, checked facts."""
    elementwise_result = category in ("unary", "binary")
    if (
        category not in CATEGORY_SIGNATURES
        or (result is not None) != elementwise_result
        or result is not None
        and result not in RESULTS
    ):
        raise ValueError(f"op {name}: unknown category, or a result rule missing or unknown")
    s = CATEGORY_SIGNATURES[category]
    return OpSpec(
        name, category, s.params, s.defaults, s.positional, s.outputs, s.more_is_opaque, result, traits
    )


OPS: dict[str, OpSpec] = {row[0]: _spec(*row) for row in _ROWS}

# Names the encoding gives kept nodes that are no op of the table (encode.link_op), with their
# traits: an op eqsat does not model (a barrier), and a stride order that lays its input out
# anew (a copy, pointwise; one that keeps its input's layout is the stride_order view).
OPAQUE, COPY = "opaque", "copy"
KEPT_ONLY = {OPAQUE: Trait.BARRIER, COPY: Trait.NONE}


def _having(test) -> frozenset[str]:
    """The names of the ops whose rows pass ``test``."""
    return frozenset(op for op, spec in OPS.items() if test(spec))


# sets read from the table, in their readers' words
BINARY_BOOL = _having(lambda s: s.result in ("comparison", "logical"))  # binary ops giving Bool
RANDOM_OPS = _having(lambda s: s.draws)  # ops that draw random numbers
REPOSITIONING = _having(lambda s: Trait.REPOSITIONS in s.traits)  # the encoding skips them
SHAPE_QUERIES = _having(lambda s: Trait.SHAPE_QUERY in s.traits)  # read extents, not data


# Parameters that take a value (a tensor or a scalar) rather than an attribute (dims, flags):
# where a Python number stands there, nvfuser_direct makes it a constant scalar, and the
# classic frontend needs it defined first (``fd.define_scalar``).
OPERANDS = frozenset(
    "arg arg1 arg2 pred min max start end weight value fill_value length step rng_seed rng_offset".split()
)


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
        raise TypeError(
            f"takes at most {len(spec.params)} arguments, got {len(args)}; expected {signature(spec)}"
        )
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
    positional = [args[p] for p in spec.params[: spec.positional]]
    keywords = {}
    for p in spec.params[spec.positional :]:
        d = spec.default(p)
        if isinstance(d, str) and p == "dtype":
            d = DataType[d]
        if d is _REQUIRED or args[p] != d or type(args[p]) is not type(d):
            keywords[p] = args[p]
    return positional, keywords
