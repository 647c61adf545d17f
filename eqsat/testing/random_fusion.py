"""Random fusions for property tests and fuzzing: the supported ops over named axes.

A fusion is built step by step from choices: inputs over random subsets of a few axes
(fp32/bf16/fp16), then ops on earlier values (so subterms are shared): unary functions (kept
in their domains: ``exp(tanh x)``, ``sqrt(abs x)``, ``1 / (1 + abs x)``...), binary ops with
broadcasts to the union of axes, scalar constants and a scalar input, casts, reductions
(sum/max/min/prod/mean/var over random axis sets, keepdim or not), normalizations (softmax,
layer norm), the patterns eqsat rewrites (a sum of a product over axes one factor lacks; a
full amax of a normalization; with ``draws``, a dropout mask drawn from a seed and an offset),
ops eqsat does not model (``erf``, ``where``, ``reshape``), which it keeps verbatim, and
``segment_set`` (a kernel boundary). One to three outputs.

``special=True`` draws special values too: into the inputs, per dtype (NaN, +-inf, +-0.0, the
largest finite value and half of it, the smallest normal; see :mod:`eqsat.testing.special_inputs`), into the
scalar input, and into scalar constants (``special_inputs.SPECIAL_SCALARS``); and one more kind of step,
a max or min of a sum or product with a term constant along the reduced axes (where +inf in
one meets -inf in the other). With ``mixed`` too, integer inputs get their dtype's limits
(INT_MIN, INT_MAX, their neighbours, -1, 0, the least square that overflows).

``edges=True`` runs the fusion, optimized for large shapes, at extents 0 and 1 as well: each
axis is empty, or of size 1, about one time in six (an optimized definition keeps symbolic
extents symbolic, so it must hold at every extent). ``mixed=True`` makes about half the
inputs of one dtype, Int32, Int64 or Bool (integers of magnitude about 50000, so that Int32
products wrap), adds integer scalar constants (1, -1, 46341: 46341**2 overflows Int32), casts
to those dtypes and an integer division (by max(|y|, 1): never by 0 or -1, which nvFuser
leaves undefined), so integer, float and bool operands meet (an Int32 product wraps where an
Int64 one does not; an integer max over an empty axis is the dtype's least value, not -inf).
Ops torch refuses on bools (negation, subtraction, abs, relu, pow) read them cast to Int32.
With both off, the chooser makes the choices it made before they existed: a seed gives the
same fusion and inputs (the run-time extents are drawn last, after the definition).

The choices come from a :class:`Chooser`: :class:`RandomChooser` (a seed; ``bench/fuzz.py``)
or :class:`HypothesisChooser` (``data.draw``; the tests, which then shrink failures)::

    from hypothesis import given, strategies as st
    @given(st.data())
    def test(data):
        case = random_fusion(HypothesisChooser(data))
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from eqsat.frontend.recorder import FusionDefinition
from eqsat.ir.dtypes import DataType, to_torch
from eqsat.ir.fusion import Fusion
from eqsat.lowering.source import fusion_source

from .choosers import Chooser
from .special_inputs import SPECIAL_SCALARS, special_inputs

FUZZ_DTYPES = (DataType.Float, DataType.BFloat16, DataType.Half)  # of the inputs, and casts
MIXED_DTYPES = (DataType.Int32, DataType.Int, DataType.Bool)  # with ``mixed``
INT_SCALARS = [1, -1, 2, 46341]  # with ``mixed``: Int constants (46341**2 > INT32_MAX)
D = DataType.Double
STEPS = [
    "unary",
    "binary",
    "binary",
    "scalar",
    "cast",
    "reduction",
    "reduction",
    "normalization",
    "boundary",
    "factored_sum",
    "normalized_amax",
]
SPECIAL_STEPS = ["shifted_extremum"]  # the max/min rules' pattern, where inf meets -inf
DRAW_STEPS = ["dropout"]  # random draws (``draws=True``: other seeds' fusions stay as they were)
SCALARS = [0.5, 2.0, -1.5, 3.0, 1e-3]


@dataclass
class Value:
    ref: Any
    dims: tuple  # axis ids, or None for a broadcast (keepdim) dim of extent 1


@dataclass
class RandomCase:
    """A random fusion, small inputs to run it on, and large ``planning_inputs`` (meta tensors
    of the same ranks and dtypes) to optimize it for: the fusion is shape-generic, and at the
    small sizes launch cost hides every rewrite."""

    fusion: Fusion
    inputs: list
    planning_inputs: list
    reduction_size: int  # the most elements any one reduction combines (small inputs)
    ops: list[str] = field(default_factory=list)
    special: bool = False  # special values drawn into the inputs and constants
    edges: bool = False  # run-time extents 0 and 1 drawn too
    mixed: bool = False  # integer and bool inputs, constants and casts

    def __repr__(self) -> str:  # hypothesis prints this for a failing example
        return f"RandomCase(ops={self.ops}):\n{fusion_source(self.fusion)}"


class _Builder:
    def __init__(
        self,
        ch: Chooser,
        fd: FusionDefinition,
        extents: list[int],
        special: bool = False,
        mixed: bool = False,
    ):
        self.ch, self.fd, self.extents, self.special, self.mixed = ch, fd, extents, special, mixed
        self.sizes: dict[int, Any] = {}  # axis -> a symbolic size of it (fd.ops.size)
        self.values: list[Value] = []
        self.reduction_size = 1
        self.ops: list[str] = []

    # -- shapes ------------------------------------------------------------------------------
    def plain(self, v: Value) -> Value:
        """``v`` with its keepdim broadcast dims squeezed out."""
        if None not in v.dims:
            return v
        keep = tuple(d for d in v.dims if d is not None)
        ref = self.fd.ops.squeeze(v.ref, dims=[i for i, d in enumerate(v.dims) if d is None])
        return Value(ref, keep)

    def to_axes(self, v: Value, axes: tuple) -> Any:
        """``v`` broadcast to ``axes`` (a sorted superset of its own)."""
        v = self.plain(v)
        if v.dims == axes:
            return v.ref
        return self.fd.ops.broadcast_in_dim(
            v.ref, shape=[self.sizes[a] for a in axes], broadcast_dims=[axes.index(d) for d in v.dims]
        )

    def arith(self, v: Value) -> Value:
        """``v`` cast to Int32 where it is Bool: torch negates, subtracts, takes abs, relu and
        pow of no bool (nvFuser's arithmetic on bools is its integer one)."""
        if v.ref.dtype is DataType.Bool:
            return Value(self.fd.ops.cast(v.ref, dtype=DataType.Int32), v.dims)
        return v

    def floating(self, v: Value) -> Value:
        """``v`` cast to Float where it is an integer or a bool (a mean divides by an extent,
        which may be 0: an integer division by zero is undefined)."""
        if not _is_float(v.ref.dtype):
            return Value(self.fd.ops.cast(v.ref, dtype=DataType.Float), v.dims)
        return v

    def upcast(self, v: Value) -> Value:
        """``v`` cast to Float where it is bf16/fp16: nvFuser sums, var_means and normalizes
        those only after an upcast (a bf16 sum does not compile in 0.2.35)."""
        if v.ref.dtype in (DataType.BFloat16, DataType.Half):
            return Value(self.fd.ops.cast(v.ref, dtype=DataType.Float), v.dims)
        return v

    def add(self, ref, dims, op: str) -> Value:
        v = Value(ref, tuple(dims))
        self.values.append(v)
        self.ops.append(op)
        return v

    def scalar(self, v: Value | None = None) -> Any:
        """A Double constant: one of SCALARS, or (special, one time in four) SPECIAL_SCALARS;
        with ``mixed``, for an integer or bool ``v`` half the time an Int one of INT_SCALARS."""
        special = self.special and self.ch.int(0, 3) == 0
        value = self.ch.pick(SPECIAL_SCALARS if special else SCALARS)
        if self.mixed and v is not None and not _is_float(v.ref.dtype) and self.ch.int(0, 1):
            return self.fd.define_scalar(self.ch.pick(INT_SCALARS), dtype=DataType.Int)
        return self.fd.define_scalar(value, dtype=D)

    # -- steps -------------------------------------------------------------------------------
    def unary(self, v: Value):
        ops = self.fd.ops
        kind = self.ch.pick(
            [
                "neg",
                "abs",
                "tanh",
                "sigmoid",
                "relu",
                "exp_tanh",
                "sqrt_abs",
                "recip_1p_abs",
                "rsqrt_1p_abs",
                "log_1p_abs",
                "erf",
                "square",
            ]
        )
        x = self.arith(v).ref
        one = self.fd.define_scalar(1.0, dtype=D)
        out = {
            "neg": lambda: ops.neg(x),
            "abs": lambda: ops.abs(x),
            "tanh": lambda: ops.tanh(x),
            "sigmoid": lambda: ops.sigmoid(x),
            "relu": lambda: ops.relu(x),
            "exp_tanh": lambda: ops.exp(ops.tanh(x)),
            "sqrt_abs": lambda: ops.sqrt(ops.abs(x)),
            "recip_1p_abs": lambda: ops.reciprocal(ops.add(ops.abs(x), one)),
            "rsqrt_1p_abs": lambda: ops.rsqrt(ops.add(one, ops.abs(x))),
            "log_1p_abs": lambda: ops.log(ops.add(ops.abs(x), one)),
            "erf": lambda: ops.erf(x),
            "square": lambda: ops.pow(x, self.fd.define_scalar(2.0, dtype=D)),
        }[kind]()
        self.add(out, v.dims, kind)

    def binary(self, a: Value, b: Value):
        a, b = self.plain(a), self.plain(b)
        axes = tuple(sorted(set(a.dims) | set(b.dims)))
        ops = self.fd.ops
        kinds = ["add", "sub", "mul", "mul", "div_1p_abs", "maximum", "minimum", "where_lt"]
        kind = self.ch.pick(kinds + (["div_int"] if self.mixed else []))
        if kind in ("sub", "div_1p_abs", "div_int"):
            a, b = self.arith(a), self.arith(b)
        x, y = self.to_axes(a, axes), self.to_axes(b, axes)
        if kind == "div_int":  # truncating where both are integers; never by 0 or -1
            out = ops.div(x, ops.maximum(ops.abs(y), self.fd.define_scalar(1, dtype=DataType.Int)))
        elif kind == "div_1p_abs":
            out = ops.div(x, ops.add(ops.abs(y), self.fd.define_scalar(1.0, dtype=D)))
        elif kind == "where_lt":
            out = ops.where(ops.lt(x, y), x, y)
        else:
            out = getattr(ops, kind)(x, y)
        self.add(out, axes, kind)

    def with_scalar(self, v: Value, scalar_input):
        s = scalar_input if scalar_input is not None and self.ch.int(0, 1) else self.scalar(v)
        kind = self.ch.pick(["mul", "add", "sub", "mul_left"])
        if kind == "sub":
            v = self.arith(v)
        ops = self.fd.ops
        out = ops.mul(s, v.ref) if kind == "mul_left" else getattr(ops, kind)(v.ref, s)
        self.add(out, v.dims, f"scalar_{kind}")

    def cast(self, v: Value):
        """A cast to a float dtype; with ``mixed``, an integer or bool value to an integer
        dtype too, and any value to Bool (a float to an integer is undefined past its range)."""
        dtypes = FUZZ_DTYPES
        if self.mixed:
            dtypes = FUZZ_DTYPES + ((DataType.Bool,) if _is_float(v.ref.dtype) else MIXED_DTYPES)
        self.add(self.fd.ops.cast(v.ref, dtype=self.ch.pick(dtypes)), v.dims, "cast")

    def reduce_over(self, v: Value, among: Sequence[int]) -> tuple[list[int], list[int]]:
        """A nonempty random set of axes ``among`` those of ``v`` to reduce (and their dim
        positions in ``v``); the largest reduction so far is remembered for the tolerance."""
        reduced = self.ch.subset(among, min_size=1)
        self.reduction_size = max(self.reduction_size, math.prod(self.extents[d] for d in reduced))
        return reduced, [v.dims.index(d) for d in reduced]

    def reduction(self, v: Value):
        v = self.plain(v)
        if not v.dims:
            return self.unary(v)
        reduced, dims = self.reduce_over(v, v.dims)
        keepdim = bool(self.ch.int(0, 1))
        kind = self.ch.pick(["sum", "sum", "max", "min", "prod", "mean", "var"])
        ops = self.fd.ops
        if kind not in ("max", "min"):
            v = self.upcast(v)
        if kind == "mean":
            v = self.floating(v)
            out = ops.sum(v.ref, dims=dims, keepdim=keepdim)
            n = self.sizes[reduced[0]]
            for d in reduced[1:]:
                n = ops.mul(n, self.sizes[d])
            out = ops.div(out, n)
        elif kind == "var":
            out = ops.var(v.ref, dims=dims, correction=self.ch.int(0, 1), keepdim=keepdim)
        else:
            out = getattr(ops, kind)(v.ref, dims=dims, keepdim=keepdim)
        kept = (
            tuple(None if d in reduced else d for d in v.dims)
            if keepdim
            else tuple(d for d in v.dims if d not in reduced)
        )
        self.add(out, kept, f"{kind}{'_keepdim' if keepdim else ''}")

    def normalization(self, v: Value):
        v = self.plain(v)
        if not v.dims:
            return self.unary(v)
        reduced, dims = self.reduce_over(v, v.dims)
        rest = tuple(d for d in v.dims if d not in reduced)
        ops = self.fd.ops
        v = self.upcast(self.arith(v))
        if self.ch.int(0, 1):
            m = self.to_axes(Value(ops.max(v.ref, dims=dims), rest), v.dims)
            e = ops.exp(ops.sub(v.ref, m))
            s = self.to_axes(Value(ops.sum(e, dims=dims), rest), v.dims)
            self.add(ops.div(e, s), v.dims, "softmax")
        else:
            var, mean = ops.var_mean(v.ref, dims=dims, correction=0)
            rstd = ops.rsqrt(ops.add(var, self.fd.define_scalar(1e-5, dtype=D)))
            y = ops.mul(
                ops.sub(v.ref, self.to_axes(Value(mean, rest), v.dims)),
                self.to_axes(Value(rstd, rest), v.dims),
            )
            self.add(y, v.dims, "layer_norm")

    def factored_sum(self, v: Value, w: Value):
        """sum over axes that one factor lacks of a product (the distributive pattern)."""
        v, w = self.upcast(self.plain(v)), self.plain(w)
        axes = tuple(sorted(set(v.dims) | set(w.dims)))
        if not axes:
            return self.unary(v)
        product = self.fd.ops.mul(self.to_axes(v, axes), self.to_axes(w, axes))
        lacking = [d for d in axes if d not in w.dims] or list(axes)
        reduced, dims = self.reduce_over(Value(product, axes), lacking)
        out = self.fd.ops.sum(product, dims=dims)
        self.add(out, tuple(d for d in axes if d not in reduced), "factored_sum")

    def shifted_extremum(self, v: Value, w: Value):
        """max or min over axes of v of v + b, v - b or v * exp(b), where b (w, maxed over
        those axes) is constant along them: the distributive max/min rules' pattern."""
        v, w = self.plain(v), self.plain(w)
        if not v.dims:
            return self.unary(v)
        reduced, _ = self.reduce_over(v, v.dims)
        gone = [i for i, d in enumerate(w.dims) if d in reduced]
        b = (
            Value(self.fd.ops.max(w.ref, dims=gone), tuple(d for d in w.dims if d not in reduced))
            if gone
            else w
        )
        axes = tuple(sorted(set(v.dims) | set(b.dims)))
        kind, extremum = self.ch.pick(["add", "sub", "mul_exp"]), self.ch.pick(["max", "min"])
        if kind == "sub":
            v, b = self.arith(v), self.arith(b)
        x, y, ops = self.to_axes(v, axes), self.to_axes(b, axes), self.fd.ops
        inner = ops.mul(x, ops.exp(y)) if kind == "mul_exp" else getattr(ops, kind)(x, y)
        out = getattr(ops, extremum)(inner, dims=[axes.index(d) for d in reduced])
        self.add(out, tuple(d for d in axes if d not in reduced), f"{extremum}_of_{kind}")

    def normalized_amax(self, v: Value):
        """amax(abs(normalize(v))) over every axis (the split-reduction pattern)."""
        self.normalization(v)
        y = self.values[-1]
        a = self.fd.ops.abs(y.ref)
        self.add(self.fd.ops.max(a, dims=list(range(len(y.dims)))), (), "amax")

    def dropout(self, v: Value):
        """``v`` through dropout as Thunder's backward writes it: a keep mask drawn from a
        constant seed and offset (nvFuser's Philox numbers, in the torch executor too),
        ``v * mask / 0.9`` (the placement rule's pattern)."""
        v = self.upcast(self.plain(v))
        ops, Int = self.fd.ops, DataType.Int
        u = ops.uniform(
            self.fd.define_scalar(0.0, dtype=D),
            self.fd.define_scalar(1.0, dtype=D),
            [self.sizes[d] for d in v.dims],
            rng_seed=self.fd.define_scalar(self.ch.int(0, 99), dtype=Int),
            rng_offset=self.fd.define_scalar(4 * self.ch.int(0, 9), dtype=Int),
            dtype=DataType.Float,
        )
        keep = ops.cast(ops.lt(u, self.fd.define_scalar(0.9, dtype=D)), dtype=DataType.Float)
        self.add(ops.mul(ops.mul(v.ref, keep), self.fd.define_scalar(1 / 0.9, dtype=D)), v.dims, "dropout")

    def boundary(self, v: Value):
        """An op the e-graph keeps as it is: a reshape, a segment_set, or a scan (cumsum or
        cummax) along one of the value's axes."""
        kind = self.ch.int(0, 2) if v.dims else 1
        if kind == 2 and (v.ref.dtype is DataType.Bool or None in v.dims):
            kind = 1  # a scan of bools has no torch counterpart of its dtype; keepdim dims: none
        if kind == 0:
            v = self.plain(v)
            out = self.fd.ops.reshape(v.ref, new_shape=[self.sizes[d] for d in v.dims])
            self.add(out, v.dims, "reshape")
        elif kind == 1:
            self.add(self.fd.ops.segment_set(v.ref), v.dims, "segment_set")
        else:
            v = self.plain(v)
            scan = self.ch.pick(["cumsum", "cummax"])
            out = getattr(self.fd.ops, scan)(v.ref, dim=self.ch.int(0, len(v.dims) - 1))
            self.add(out, v.dims, scan)


def _input_spec(ch: Chooser, n_inputs: int, n_axes: int, mixed: bool) -> list[tuple[tuple[int, ...], Any]]:
    """Each input's axes and dtype; with ``mixed``, some of them of the fusion's one integer or
    bool dtype."""
    spec = []
    other = None
    for _ in range(n_inputs):
        dims = tuple(ch.subset(range(n_axes), min_size=1))
        dtype = ch.pick(FUZZ_DTYPES)
        if mixed:
            other = other or ch.pick(MIXED_DTYPES)
            dtype = other if ch.int(0, 1) else dtype
        spec.append((dims, dtype))
    return spec


def _inputs(spec, extents, planning, seed: int, with_scalar_input: bool, special: bool) -> tuple[list, list]:
    """The inputs to run at ``extents`` (values from ``seed``) and to plan at ``planning`` (meta
    tensors), a scalar input last where the fusion has one."""
    g = torch.Generator().manual_seed(seed)
    inputs: list[Any] = [
        _values(torch.randn(*[extents[d] for d in dims], generator=g), dtype) for dims, dtype in spec
    ]
    big = [
        torch.empty(*[planning[d] for d in dims], dtype=to_torch(dtype), device="meta")
        for dims, dtype in spec
    ]
    if with_scalar_input:
        inputs.append(float(torch.randn(1, generator=g)))
        big.append(inputs[-1])
    if special:
        inputs = special_inputs(inputs, g)
        big = big[: len(spec)] + inputs[len(spec) :]
    return inputs, big


def random_fusion(
    ch: Chooser,
    max_steps: int = 8,
    max_axes: int = 3,
    max_extent: int = 8,
    special: bool = False,
    draws: bool = False,
    edges: bool = False,
    mixed: bool = False,
) -> RandomCase:
    """A random fusion and inputs for it (seeded through the chooser); ``special`` draws
    special values into inputs and constants (the same fusion otherwise, but for constants);
    ``draws`` adds dropout steps (a mask drawn from a constant seed and offset); ``edges``
    runs it at extents 0 and 1 too, ``mixed`` with integer and bool inputs, constants and
    casts (see the module)."""
    n_axes = ch.int(1, max_axes)
    extents = [ch.int(2, max_extent) for _ in range(n_axes)]
    planning = [ch.pick([16, 256, 1024, 8192]) for _ in range(n_axes)]
    n_inputs = ch.int(1, 3)
    seed = ch.int(0, 2**16)
    spec = _input_spec(ch, n_inputs, n_axes, mixed)
    with_scalar_input = bool(ch.int(0, 1))
    steps = ch.int(1, max_steps)
    holder: dict[str, _Builder] = {}

    def definition(fd):
        b = _Builder(ch, fd, extents, special, mixed)
        holder["b"] = b
        for dims, dtype in spec:
            t = fd.define_tensor(shape=[-1] * len(dims), contiguity=[True] * len(dims), dtype=dtype)
            b.add(t, dims, f"input_{dtype.name}")
            for i, d in enumerate(dims):
                b.sizes.setdefault(d, fd.ops.size(t, dim=i))
        scalar_input = fd.define_scalar(dtype=D) if with_scalar_input else None
        for _ in range(steps):
            recent = b.values[-3:]
            v = ch.pick(recent) if ch.int(0, 2) else ch.pick(b.values)
            kind = ch.pick(STEPS + (SPECIAL_STEPS if special else []) + (DRAW_STEPS if draws else []))
            if kind in ("binary", "factored_sum", "shifted_extremum"):
                getattr(b, kind)(v, ch.pick(b.values))
            elif kind == "scalar":
                b.with_scalar(v, scalar_input)
            else:
                getattr(b, kind)(v)
        produced = b.values[len(spec) :]
        outputs = [produced[-1]] + [x for x in ch.subset(produced[:-1]) if ch.int(0, 2) == 0][:2]
        for v in outputs:
            fd.add_output(v.ref)

    with FusionDefinition() as fd:
        definition(fd)
    b = holder["b"]
    if edges:  # each axis empty, or of size 1, about one time in six at run time
        extents = [ch.pick([0, 1] + [e] * 4) for e in extents]
    inputs, big = _inputs(spec, extents, planning, seed, with_scalar_input, special)
    return RandomCase(fd.fusion, inputs, big, b.reduction_size, b.ops[len(spec) :], special, edges, mixed)


def _is_float(dtype: DataType) -> bool:
    return dtype in (DataType.Double, DataType.Float, DataType.BFloat16, DataType.Half)


def _values(normal: torch.Tensor, dtype: DataType) -> torch.Tensor:
    """Standard normal values as ``dtype`` holds them: rounded floats; integers scaled by
    50000 (a product of two of them passes INT32_MAX about one time in five: Int32 products
    wrap); bools True where positive."""
    if dtype is DataType.Bool:
        return normal > 0
    if not _is_float(dtype):
        return (normal * 50000).round().to(to_torch(dtype))
    return normal.to(to_torch(dtype))
