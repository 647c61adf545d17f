"""The torch executor: nvFuser's FusionDefinition protocol evaluated eagerly with torch.

It is eqsat's reference: every numeric comparison in the project runs through it. It follows
nvFuser's semantics: PyTorch type promotion (scalars don't lift a tensor within its
category), integer ``div`` truncates, reductions of half types accumulate in fp32, a
reduction's ``dtype`` argument casts its input, integer sums give Int, expanded broadcasts
stay stride-0 views, and outputs aliased to an input are written into that input and not
returned. Integer division never traps (INT_MIN / -1 wraps, as on the GPU; by zero is refused:
:data:`eqsat.reference.torch_arithmetic.INT_BY_ZERO`), casts to FP8 saturate, and no op's output shares memory
with an operand except the views nvFuser makes views (reshape, permute, broadcast...).

    run_fusion(fusion, inputs)             # outputs, as nvFuser's fd.execute returns them
"""

from __future__ import annotations

from functools import partial
from typing import Any, Sequence

import torch
import torch.nn.functional as F

from eqsat.errors import FusionError
from eqsat.ir import dtypes as dt
from eqsat.ir.dtypes import DataType
from eqsat.ir.fusion import Fusion
from eqsat.ir.layout import with_stride_order
from eqsat.ir.opspec import OPS, bind_call
from eqsat.ir.replay import replay

from . import philox
from .inputs import check_count, check_tensor_input
from .result_types import TypeCheck, conform

# cast_tensor: the package reads it from here too
from .torch_arithmetic import (
    FP8_MAX,
    PY_TYPE,
    ArithmeticOps,
    cast_tensor,
    row_major_copy,
    sorted_dims,
)


# -- outputs that share memory with an operand ----------------------------------------------------
# The ops whose result nvFuser may give as a view of their input (csrc/alias_analysis.cpp:
# reshape, permute, slice, broadcast, squeeze, expand; csrc/scheduler/mark_aliases.cpp makes an
# output of them an alias of the fusion input). Every other op computes a new tensor, where torch
# may give back its operand or a view of it: a cast to its own dtype, a reduction over no dims,
# real/imag of a complex tensor.
_VIEW_CATEGORIES = frozenset(
    {
        "broadcast",
        "broadcast_in_dim",
        "expand",
        "squeeze",
        "permute",
        "reshape",
        "slice",
        "stride_order",
        "size",
        "shape",
    }
)


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
        return result.clone()  # dense strides kept; others made row-major
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


class TorchOps(ArithmeticOps):
    """``fd.ops`` of the torch executor. Arguments are torch tensors and python numbers."""

    def __init__(self, device: torch.device | str | None = None, generator: torch.Generator | None = None):
        self.device = device
        self.generator = generator

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        spec = OPS.get(name)
        if spec is None:
            raise FusionError(
                f"op {name!r} is not modelled by eqsat and has no torch implementation", op=f"fd.ops.{name}"
            )

        def op(*args, **kwargs):
            bound = bind_call(spec, args, kwargs)
            impl = getattr(self, f"_op_{name}", None) or getattr(self, f"_cat_{spec.category}")
            if spec.category in _FP8_IN_FLOAT and any(
                isinstance(v, torch.Tensor) and v.dtype in _FP8 for v in bound.values()
            ):
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
        reduced = {
            v.dtype
            for v in bound.values()
            if isinstance(v, torch.Tensor) and (v.dtype in _FP8 or v.dtype == _FP8_STAND_IN)
        }
        if out == _FP8_STAND_IN and len(reduced) == 1:
            out = reduced.pop()
        return cast_tensor(result, out)

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
        for d in reversed(sorted_dims(dims, arg.dim())):
            if arg.shape[d] == 0:  # constant along an empty axis: any value will do
                arg = arg.new_zeros(arg.shape[:d] + arg.shape[d + 1 :])
            else:
                arg = arg.squeeze(d) if arg.shape[d] == 1 else arg.select(d, 0)
        return arg

    def _cat_permute(self, name, arg, dims):
        return arg.permute(list(dims))

    def _cat_reshape(self, name, arg, new_shape):
        return arg.reshape([int(s) for s in new_shape])

    def _cat_stride_order(self, name, arg, stride_order):
        if not stride_order:  # a plain copy, row-major
            return row_major_copy(arg)
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
        steps = torch.arange(
            int(length),
            device=self._device(),
            dtype=torch.float64 if dtype.is_floating_point else torch.int64,
        )
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
        if index.dim() == 0:  # one entry: the output keeps an extent-1 dim
            return torch.index_select(arg, dim, index.reshape(1))
        return torch.index_select(arg, dim, index.reshape(-1))  # other dims have extent 1

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

    def _cat_embedding(
        self, name, input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse
    ):
        """F.embedding, as nvFuser runs it; with ``max_norm`` on a copy of the weight (torch
        renormalizes the rows it reads in place)."""
        return F.embedding(
            input.long(),
            weight if max_norm is None else weight.clone(),
            None if padding_idx is None else int(padding_idx),
            max_norm,
            2.0 if norm_type is None else float(norm_type),
            bool(scale_grad_by_freq),
            bool(sparse),
        )

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
            raise FusionError(f"the definition takes more than the {len(self.inputs)} inputs given", op=what)
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
                raise FusionError(
                    f"input {index} must be a python number for a scalar input, got {type(value).__name__}",
                    op="fd.define_scalar",
                )
        dtype = dt.coerce(dtype) if dtype is not None else None
        return PY_TYPE.get(dtype, lambda v: v)(value) if dtype else value

    def define_vector(self, values, dtype=DataType.Int):
        return [int(v) for v in values]

    def add_output(self, value, alias_input=None, stride_order=None):
        if alias_input is not None:
            if tuple(value.shape) != tuple(alias_input.shape):
                raise FusionError(
                    f"an output of shape {list(value.shape)} cannot be written into its "
                    f"alias_input of shape {list(alias_input.shape)}",
                    op="fd.add_output",
                )
            alias_input.copy_(value)
            return
        if stride_order is not None:
            value = with_stride_order(value, stride_order)
        self.outputs.append(value)


def run_fusion(
    fusion: Fusion,
    inputs: Sequence[Any],
    *,
    device=None,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    strict: bool = False,
) -> list:
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
    on_node = TypeCheck(fusion) if strict else partial(conform, fusion.types)
    replay(fusion, fd, on_node=on_node)  # errors name the node's line and op
    return fd.outputs
