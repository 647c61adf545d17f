"""``eqsat rules verify``: every rule's two sides, instantiated on random shapes, extents and
values, evaluated through the torch executor's ops, and compared.

Each value carries its dtype code, computed as the e-graph's dtype analysis does
(:mod:`eqsat.dtype_codes`: bf16/fp16 arithmetic gives Float, sums keep a float dtype...), and
is rounded to that dtype after every op: a rule whose sides differ in dtype fails, and one
that moves a rounding (a half-type sum where fp32 was accumulated) fails on its error.

A rule's function is called with :class:`EvalNamespace`: its constructors evaluate
named-axis tensors (a torch tensor and the labels of its dims) with the torch executor's
op implementations, aligning operands by label; conditions evaluate to booleans. Variables
are drawn at random (tensors over random label subsets, in random dim orders, with extents
1 to 5; label masks; dtypes), cases whose conditions fail are drawn again, and a rule whose
conditions never held fails rather than passing vacuously.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch

from .dtype_codes import (FLOAT_UNARY, SAME_DTYPE_UNARY, WEAK, compute_code, exact_widenings,
                          floatify_code, promote_code, sum_code)
from .dtypes import DataType
from .terms import DTYPE_CODE, DTYPES, IR_OP, WEAK_FLOAT, WEAK_INT, bits
from .torch_executor import TorchOps

_OPS = TorchOps()
_FLOAT_CODES = [DTYPE_CODE[d] for d in (DataType.Double, DataType.Float, DataType.BFloat16, DataType.Half)]
_WIDENS = set(exact_widenings())
_SAME_DTYPE = {*SAME_DTYPE_UNARY, "Max", "Min"}             # as the analysis sets them
_FLOAT_MATH = {*FLOAT_UNARY, "Mean", "Var"}


def _rounded(t: torch.Tensor, code: int) -> torch.Tensor:
    """``t`` (float64) rounded to the dtype of ``code`` (weak scalars stay float64)."""
    if code in WEAK or DTYPES[code] in (DataType.Double,):
        return t
    return t.to(_torch_dtype(DTYPES[code])).to(torch.float64)


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


class EvalNamespace:
    """Evaluates rule sides; the constructors mirror :mod:`eqsat.terms`."""

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
        return Named(_rounded(out, code), order, code)

    def Num(self, f):
        return Named(torch.tensor(float(f), dtype=torch.float64), (), WEAK_FLOAT)

    def Int(self, i):
        return Named(torch.tensor(float(i), dtype=torch.float64), (), WEAK_INT)

    def Extent(self, mask):
        return self.Int(math.prod(self.extents[b] for b in bits(mask)))

    def Cast(self, code, a: Named):
        d = DTYPES[code]
        t = a.t.to(_torch_dtype(d)).to(torch.float64)
        return Named(t, a.labels, code)

    def _reduce(self, op, mask, a: Named, correction=None) -> Named:
        out = self._reduce_values(op, mask, a, correction)
        code = a.dtype if op in _SAME_DTYPE else floatify_code(a.dtype) if op in _FLOAT_MATH else sum_code(a.dtype)
        return Named(_rounded(out.t, code), out.labels, code)

    def _reduce_values(self, op, mask, a: Named, correction=None) -> Named:
        present = [l for l in bits(mask) if l in a.labels]
        absent = [l for l in bits(mask) if l not in a.labels]
        dims = [a.labels.index(l) for l in present]
        rest = tuple(l for l in a.labels if l not in present)
        t = a.t
        if op == "Var":
            if absent:
                raise ValueError("var over an axis its input lacks")
            # over no labels: one element, (x - x)^2 / (1 - c)
            t = _OPS.var(t, dims, correction) if dims else torch.zeros_like(t) / (1 - correction)
            return Named(t, rest, a.dtype)
        if op == "Mean":
            return Named(torch.mean(t, dim=dims) if dims else t, rest, a.dtype)
        if dims:
            t = getattr(_OPS, op.lower())(t, dims)
        n = math.prod(self.extents[l] for l in absent)
        if op == "Sum":
            t = t * n
        elif op == "Prod":
            t = t ** n
        return Named(t, rest, a.dtype)

    def __getattr__(self, name):
        if name in ("Sum", "Max", "Min", "Prod", "Mean"):
            return lambda mask, a: self._reduce(name, mask, a)
        if name == "Var":
            return lambda mask, c, a: self._reduce("Var", mask, a, c)
        if name in IR_OP:
            op = getattr(_OPS, IR_OP[name])
            return lambda *xs: self._pointwise(op, *xs, dtype=_result_code(name, [x.dtype for x in xs]))
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
        return x.dtype in _FLOAT_CODES or x.dtype == WEAK_FLOAT

    @staticmethod
    def full_precision(x: Named) -> bool:
        return x.dtype in WEAK or compute_code(x.dtype) == x.dtype

    @staticmethod
    def nonneg(x: Named) -> bool:
        return bool((x.t >= 0).all())

    @staticmethod
    def widens(narrow: int, wide: int) -> bool:
        return (narrow, wide) in _WIDENS

    @staticmethod
    def disjoint(m1, m2):
        return m1 & m2 == 0

    @staticmethod
    def nonzero(m):
        return m != 0

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


def _torch_dtype(d: DataType) -> torch.dtype:
    from .dtypes import to_torch

    return to_torch(d)


def _result_code(name: str, codes: list[int]) -> int:
    """The dtype code of a pointwise constructor's result, as the e-graph's analysis gives it."""
    if name in _SAME_DTYPE:
        return codes[0]
    if name in _FLOAT_MATH:
        return floatify_code(codes[0])
    if len(codes) == 1:            # Neg
        return compute_code(codes[0])
    out = codes[0]
    for c in codes[1:]:
        out = promote_code(out, c)
    return out


@dataclass
class Verdict:
    rule: str
    cases: int
    worst_error: float
    passed: bool
    problem: str = ""


_TOLERANCE = {DataType.Double: 1e-9, DataType.Float: 1e-4, DataType.BFloat16: 2e-2, DataType.Half: 2e-3}


def verify_rule(rule, *, cases: int = 60, seed: int = 0, max_draws: int = 4000) -> Verdict:
    rng = random.Random(f"{seed}:{rule.name}")
    done, worst, draws = 0, 0.0, 0
    while done < cases and draws < max_draws:
        draws += 1
        n_labels = rng.randint(1, 4)
        extents = {l: rng.choice([1, 2, 3, 5]) for l in range(n_labels)}
        k = EvalNamespace(extents)
        env = []
        for name in rule.variables:
            if name[0].isupper() and name[0] in "DE":
                env.append(rng.choice(_FLOAT_CODES))
            elif name[0] == "C":                       # a var correction
                env.append(rng.choice([0, 1, 2, 3]))
            elif name[0].isupper():
                env.append(rng.randrange(1 << n_labels) if rng.random() < 0.9 else 0)
            else:
                env.append(_random_tensor(rng, extents, nonneg=rng.random() < 0.5,
                                          dtype=rng.choice(_FLOAT_CODES) if rng.random() < 0.25 else None))
        try:
            lhs, rhs, conditions = rule.fn(k, *env)
        except ValueError:
            continue
        if not all(bool(c) for c in conditions):
            continue
        done += 1
        problem = _compare(lhs, rhs, [v.dtype for v in env if isinstance(v, Named)])
        if isinstance(problem, str):
            return Verdict(rule.name, done, math.inf, False, problem)
        worst = max(worst, problem[0])
        if problem[0] > problem[1]:
            return Verdict(rule.name, done, worst, False,
                           f"sides differ by {problem[0]:.3g} (tolerance {problem[1]:.1g})")
    if done == 0:
        return Verdict(rule.name, 0, 0.0, False, "its conditions never held on random cases")
    return Verdict(rule.name, done, worst, True)


def _random_tensor(rng: random.Random, extents, nonneg: bool, dtype) -> Named:
    labels = [l for l in extents if rng.random() < 0.6]
    rng.shuffle(labels)
    g = torch.Generator().manual_seed(rng.randrange(1 << 30))
    t = torch.randn([extents[l] for l in labels], generator=g, dtype=torch.float64)
    if nonneg:
        t = t.abs()
    code = dtype if dtype is not None else DTYPE_CODE[DataType.Double]
    t = t.to(_torch_dtype(DTYPES[code])).to(torch.float64)
    return Named(t, tuple(labels), code)


def _compare(lhs: Named, rhs: Named, leaf_codes=()):
    """(relative error, tolerance), or a message when the sides cannot be compared. NaNs and
    infinities must sit in the same places (the same signed infinity); finite values are
    compared relative to the largest of them, within the tolerance of the least precise dtype
    among the sides and the variables."""
    if sorted(lhs.labels) != sorted(rhs.labels):
        return f"the sides vary along different axes: {sorted(lhs.labels)} vs {sorted(rhs.labels)}"
    if lhs.dtype != rhs.dtype:
        name = lambda c: "weak scalar" if c in WEAK else DTYPES[c].name  # noqa: E731
        return f"the sides have different dtypes: {name(lhs.dtype)} vs {name(rhs.dtype)}"
    a, b = lhs.t, rhs.aligned(lhs.labels).reshape(lhs.t.shape)
    dtypes = [DTYPES[c] for c in (lhs.dtype, rhs.dtype, *leaf_codes) if c not in WEAK]
    tol = max((_TOLERANCE.get(d, 1e-9) for d in dtypes), default=1e-9)
    if not torch.equal(a.isnan(), b.isnan()):
        return math.inf, tol
    inf = a.isinf() | b.isinf()
    if not torch.equal(a[inf], b[inf]):
        return math.inf, tol
    finite = ~(a.isnan() | inf)
    if not finite.any():
        return 0.0, tol
    fa, fb = a[finite], b[finite]
    scale = max(1.0, float(fa.abs().max()))
    return float((fa - fb).abs().max()) / scale, tol


def verify(names=None, *, cases: int = 60, seed: int = 0) -> list[Verdict]:
    from .rules import RULES

    names = list(RULES) if not names else list(names)
    unknown = [n for n in names if n not in RULES]
    if unknown:
        raise ValueError(f"unknown rules {unknown}; known: {', '.join(sorted(RULES))}")
    return [verify_rule(RULES[n], cases=cases, seed=seed) for n in names]
