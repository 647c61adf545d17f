"""A rule's two sides evaluated on torch tensors: :class:`EvalNamespace` is what a rule's
function is called with in ``eqsat rules verify`` (:mod:`eqsat.rules.verify`). Its constructors
evaluate named-axis tensors (:class:`Named`: a torch tensor and the labels of its dims) with
the torch executor's op implementations, aligning operands by label, each value rounded to
the dtype the e-graph's dtype analysis gives it (floats held in float64, integers in their
own dtype, wrapping as nvFuser's do); its conditions evaluate to booleans."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch

from eqsat.egraph.dtype_codes import WEAK, compute_code, exact_widenings, result_code
from eqsat.egraph.terms import BOOLEAN_BINARY, DTYPE_CODE, DTYPES, IR_OP, TERMS, WEAK_FLOAT, WEAK_INT, bits
from eqsat.ir.dtypes import DataType, to_torch
from eqsat.reference.torch_executor import TorchOps, cast_tensor

from .rule import Conditions

_OPS = TorchOps()
FLOAT_CODES = [DTYPE_CODE[d] for d in (DataType.Double, DataType.Float, DataType.BFloat16, DataType.Half)]
INT_CODES = [DTYPE_CODE[d] for d in (DataType.Int32, DataType.Int)]
BOOL_CODE = DTYPE_CODE[DataType.Bool]
DOUBLE_CODE = DTYPE_CODE[DataType.Double]
WIDENS = set(exact_widenings())


def rounded(t: torch.Tensor, code: int) -> torch.Tensor:
    """``t`` as a value of ``code`` holds it: floats rounded to the dtype (as nvFuser's cast
    rounds: to FP8 saturating) and held in float64 (weak float scalars as float64), integers in
    their own dtype (weak ones in int64)."""
    if code == WEAK_INT:
        return t.to(torch.int64)
    if code in WEAK:
        return t.to(torch.float64)
    d = torch_dtype(DTYPES[code])
    return cast_tensor(t, d) if not d.is_floating_point else cast_tensor(t, d).to(torch.float64)


def is_float_code(code: int) -> bool:
    return code in FLOAT_CODES or code == WEAK_FLOAT


@dataclass
class Named:
    """A named-axis value: ``t`` has one dim per label in ``labels``."""

    t: torch.Tensor
    labels: tuple[int, ...]
    dtype: int = DTYPE_CODE[DataType.Double]

    @property
    def mask(self) -> int:
        m = 0
        for label in self.labels:
            m |= 1 << label
        return m

    def aligned(self, order: tuple[int, ...]) -> torch.Tensor:
        """``t`` permuted to ``order``'s relative order, with size-1 dims for missing labels."""
        mine = [l for l in order if l in self.labels]
        t = self.t.permute([self.labels.index(l) for l in mine]) if mine else self.t
        shape, it = [], iter(t.shape)
        for l in order:
            shape.append(next(it) if l in self.labels else 1)
        return t.reshape(shape)


class EvalNamespace(Conditions):
    """Evaluates rule sides; the constructors are the table of terms' (:data:`TERMS`), the
    conditions booleans."""

    def __init__(self, extents: dict[int, int]):
        self.extents = extents

    # -- values --------------------------------------------------------------------------
    def _pointwise(self, fn, *xs: Named, dtype=None) -> Named:
        order: list[int] = []
        for x in xs:
            order += [l for l in x.labels if l not in order]
        order = tuple(order)
        out = fn(*(x.aligned(order) for x in xs))
        code = dtype if dtype is not None else xs[0].dtype
        return Named(rounded(out, code), order, code)

    def Num(self, f):
        return Named(torch.tensor(float(f), dtype=torch.float64), (), WEAK_FLOAT)

    def Int(self, i):
        return Named(torch.tensor(int(i), dtype=torch.int64), (), WEAK_INT)

    def Extent(self, mask):
        return self.Int(math.prod(self.extents[b] for b in bits(mask)))

    def _pointwise_checked(self, fn, *xs: Named, dtype=None) -> Named:
        """``_pointwise``, where an op the torch executor refuses on these dtypes (negating or
        subtracting bools) is no case (ValueError: drawn again)."""
        try:
            return self._pointwise(fn, *xs, dtype=dtype)
        except RuntimeError as err:
            raise ValueError(f"not defined on these dtypes: {err}") from None

    def Cast(self, code, a: Named):
        return Named(rounded(a.t, code), a.labels, code)

    def _reduce(self, op, mask, a: Named, correction=None) -> Named:
        out = self._reduce_values(op, mask, a, correction)
        code = result_code(TERMS[op].dtype, [a.dtype])
        return Named(rounded(out.t, code), out.labels, code)

    def _reduce_values(self, op, mask, a: Named, correction=None) -> Named:
        present = [l for l in bits(mask) if l in a.labels]
        absent = [l for l in bits(mask) if l not in a.labels]
        dims = [a.labels.index(l) for l in present]
        rest = tuple(l for l in a.labels if l not in present)
        t = a.t
        if op in ("Var", "Mean") and not t.is_floating_point():
            t = t.to(torch.float64)  # float math on integers (floatify)
        if op == "Var":
            if absent:
                raise ValueError("var over an axis its input lacks")
            # over no labels: one element, (x - x)^2 / (1 - c) (NaN for an infinite x)
            with warnings.catch_warnings():  # a correction of the extent or more: inf/NaN
                warnings.simplefilter("ignore")
                t = _OPS.var(t, dims, correction) if dims else (t - t) ** 2 / (1 - correction)
            return Named(t, rest, a.dtype)
        n = math.prod(self.extents[l] for l in absent)
        if op == "Mean":  # over an empty axis, NaN (0/0), whether a lacks it or not
            t = torch.mean(t, dim=dims) if dims else t
            return Named(torch.full_like(t, math.nan) if n == 0 else t, rest, a.dtype)
        if op in ("Sum", "Prod") and not t.is_floating_point():
            t = t.to(torch.int64)  # integers accumulate in Int64
        if dims:
            t = getattr(_OPS, IR_OP[op])(t, dims)
        if n == 0:  # over an empty axis it lacks: the torch executor's empty reduction
            t = getattr(_OPS, IR_OP[op])(t.unsqueeze(-1).expand(*t.shape, 0), [t.dim()])
        elif op == "Sum":
            t = t * n
        elif op == "Prod":
            t = t**n
        return Named(t, rest, a.dtype)

    def _index(self, mask, a: Named, i: Named) -> tuple[int, torch.Tensor]:
        """The indexed label, and ``i``'s values taken in range along it (the rules assume
        indices in range); ValueError where the term would not be one the encoding makes."""
        if len(bits(mask)) != 1 or bits(mask)[0] not in a.labels:
            raise ValueError("an indexing term needs one label its operand varies along")
        if i.t.is_floating_point() or i.dtype in WEAK:
            raise ValueError("an index is an integer tensor")
        (v,) = bits(mask)
        if self.extents[v] == 0:
            raise ValueError("no index is in range along an empty axis")
        return v, i.t.to(torch.int64) % self.extents[v]

    def Take(self, mask, a: Named, i: Named) -> Named:
        """take_along_axis along ``mask``'s label: the index varies along labels of ``a`` only."""
        v, idx = self._index(mask, a, i)
        if not set(i.labels) <= set(a.labels) - {v}:
            raise ValueError("take_along_axis's index varies along labels its input lacks")
        order = tuple(l for l in a.labels if l != v)
        x = a.t.permute([a.labels.index(l) for l in order + (v,)])
        idx = Named(idx, i.labels).aligned(order).expand(x.shape[:-1])
        return Named(torch.gather(x, -1, idx.unsqueeze(-1)).squeeze(-1), order, a.dtype)

    def TakePad(self, mask, a: Named, i: Named) -> Named:
        """take_along_axis of ``a`` padded with one +0.0 after the end of ``mask``'s label:
        the zero where the index is |V|, else ``Take``'s element (taken in range there as
        ``Take`` takes it; the rules assume indices in [0, |V|])."""
        v, _ = self._index(mask, a, i)
        picked = self.Take(mask, a, i)
        last = Named(i.t.to(torch.int64) == self.extents[v], i.labels).aligned(picked.labels)
        return Named(torch.where(last, torch.zeros_like(picked.t), picked.t), picked.labels, a.dtype)

    def IndexSelect(self, mask, a: Named, i: Named) -> Named:
        """index_select along ``mask``'s label: a 1-D index along a label ``a`` lacks."""
        v, idx = self._index(mask, a, i)
        if len(i.labels) != 1 or i.labels[0] in a.labels:
            raise ValueError("index_select's index is 1-D along a label of its own")
        dim = a.labels.index(v)
        out = torch.index_select(a.t, dim, idx)
        return Named(out, a.labels[:dim] + i.labels + a.labels[dim + 1 :], a.dtype)

    def Iota(self, mask) -> Named:
        """0, 1, ..., |V| - 1 along the one label of ``mask`` (Int)."""
        if len(bits(mask)) != 1:
            raise ValueError("an iota is along one label")
        (v,) = bits(mask)
        return Named(torch.arange(self.extents[v], dtype=torch.int64), (v,), DTYPE_CODE[DataType.Int])

    def Bin(self, op, a: Named, b: Named) -> Named:
        """A generic binary op (the torch executor's): comparisons and logical ops give Bool."""
        code = (
            DTYPE_CODE[DataType.Bool] if op in BOOLEAN_BINARY else result_code("promote", [a.dtype, b.dtype])
        )
        return self._pointwise_checked(getattr(_OPS, op), a, b, dtype=code)

    def Tern(self, op, p: Named, a: Named, b: Named) -> Named:
        """where(p, a, b), in a's and b's promoted dtype."""
        if op != "where":
            raise ValueError(f"the verifier evaluates no {op}")
        code = result_code("promote", [a.dtype, b.dtype])
        return self._pointwise(lambda c, x, y: torch.where(c.to(torch.bool), x, y), p, a, b, dtype=code)

    def __getattr__(self, name):
        """The table's reductions, and its pointwise terms that are one IR op (the torch
        executor's); the other terms are methods above."""
        spec = TERMS.get(name)
        if spec is not None and spec.kind == "reduction":  # (labels, [correction,] a)
            return lambda mask, *rest: self._reduce(name, mask, rest[-1], *rest[:-1])
        if spec is not None and spec.kind == "pointwise" and spec.ir_op:
            op = getattr(_OPS, spec.ir_op)
            return lambda *xs: self._pointwise_checked(
                _defined(name, op), *xs, dtype=result_code(spec.dtype, [x.dtype for x in xs])
            )
        raise AttributeError(name)

    def acc(self, a: Named) -> Named:
        """``a`` in its accumulation dtype (bf16/fp16 to Float), as rules write a new reduction's operand."""
        return self.Cast(compute_code(a.dtype), a) if a.dtype not in WEAK else a

    # -- conditions ----------------------------------------------------------------------
    @staticmethod
    def labels(x: Named) -> int:
        return x.mask

    @staticmethod
    def dtype(x: Named) -> int:
        return x.dtype

    @staticmethod
    def floating(x: Named) -> bool:
        return is_float_code(x.dtype)

    @staticmethod
    def full_precision(x: Named) -> bool:
        return x.dtype in WEAK or compute_code(x.dtype) == x.dtype

    @staticmethod
    def nonneg(x: Named) -> bool:
        """As the sign analysis states it: every element >= 0 (-0.0 included) or NaN."""
        return bool(((x.t >= 0) | x.t.isnan()).all()) if x.t.is_floating_point() else bool((x.t >= 0).all())

    @staticmethod
    def widens(narrow: int, wide: int) -> bool:
        return (narrow, wide) in WIDENS

    @staticmethod
    def drawn(x) -> bool:
        """Where a value comes from is no part of a rule's soundness (``drawn`` only says where
        a rule is worth trying): every value the verifier draws passes."""
        return True

    @staticmethod
    def disjoint(m1, m2):
        return m1 & m2 == 0

    @staticmethod
    def has_axes(m):
        return m != 0

    def never_empty(self, m):
        """Every axis of ``m`` has an extent of 1 or more here (the verifier draws 0 too)."""
        return all(self.extents[l] >= 1 for l in bits(m))

    @staticmethod
    def several(m):
        return m & (m - 1) != 0

    @staticmethod
    def low(m):
        return m & -m

    @staticmethod
    def minus(m1, m2):
        return m1 & ~m2

    @staticmethod
    def same(x, y):
        return x == y


def torch_dtype(d: DataType) -> torch.dtype:
    return to_torch(d)


def _defined(name: str, op):
    """``op``, refusing an integer division by zero (undefined in nvFuser; the executor raises)
    or of the least integer by -1 (undefined in C++; nvFuser's kernel wraps it): the case is
    drawn again."""
    if name != "Div":
        return op

    def div(a, b):
        if not a.is_floating_point() and not b.is_floating_point():
            if bool((b == 0).any()):
                raise ValueError("integer division by zero")
            if a.dtype != torch.bool and bool(((b == -1) & (a == torch.iinfo(a.dtype).min)).any()):
                raise ValueError("integer division overflows (the least integer by -1)")
        return op(a, b)

    return div
