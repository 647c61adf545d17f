"""How a rule is written: one Python function, read two ways.

    @rule("distributive", reassociates=True)
    def sum_of_product_with_constant_factor(k, a, b, R):
        '''Sum_R(a*b) = Sum_R(a)*b when b lacks R ...'''
        return k.Sum(R, k.Mul(a, b)), k.Mul(k.Sum(R, a), b), [k.disjoint(k.labels(b), R)]

The function takes a namespace ``k`` and the rule's variables (lowercase: terms; uppercase:
i64 label masks; names starting with ``D``: dtype codes) and returns ``(lhs, rhs, conditions)``.
With :class:`EggNamespace` it builds the egglog rule; with the verifier's namespace
(:mod:`eqsat.verify`) it evaluates both sides on random tensors. One definition serves both,
so what is verified is what runs.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

from egglog import eq, i64, ne, union, var
from egglog import rule as egg_rule

from ..egraph import CONSTRUCTORS, Cast, Term, compute_dtype, dtype, floating, labels, nonneg, widens


@dataclass
class Rule:
    name: str
    family: str
    fn: Callable
    reassociates: bool = False
    doc: str = ""

    @property
    def variables(self) -> list[str]:
        return list(inspect.signature(self.fn).parameters)[1:]

    def egglog(self):
        k = EggNamespace()
        args = [var(n, i64 if n[0].isupper() else Term) for n in self.variables]
        lhs, rhs, conditions = self.fn(k, *args)
        return egg_rule(lhs, *k.facts, *conditions, name=self.name).then(union(lhs).with_(rhs))


    def rhs_shape(self):
        """The right-hand side's constructor tree, with variables as None: ("Mul", ("Sum", None), None)."""
        k = ShapeNamespace()
        _, rhs, _ = self.fn(k, *[_Mask() if n[0].isupper() else _Hole() for n in self.variables])
        return rhs.shape if isinstance(rhs, _Shape) else None


class _Hole:
    """A term variable while reading a rule's shape."""
    shape = None


class _Mask:
    """A mask, dtype or number while reading a rule's shape."""

    def __and__(self, other):
        return self
    __or__ = __xor__ = __sub__ = __rand__ = __ror__ = __rsub__ = __and__


class _Shape(_Hole):
    def __init__(self, shape):
        self.shape = shape


class ShapeNamespace:
    """Reads the constructor tree of a rule's sides (conditions and masks are ignored)."""

    def __getattr__(self, name):
        if name in CONSTRUCTORS:
            def build(*args):
                kids = tuple(a.shape for a in args if isinstance(a, _Hole))
                return _Shape((name,) + kids)
            return build
        if name == "acc":             # a cast that vanishes for full-precision operands
            return lambda t: t
        return lambda *args: _Mask()


RULES: dict[str, Rule] = {}


def rule(family: str, *, reassociates: bool = False):
    """Register a rule of ``family``; ``reassociates`` marks rules that change the order of a
    floating-point sum or product (a caller can turn them off)."""
    def register(fn):
        name = fn.__name__.replace("_", "-")
        if name in RULES:
            raise ValueError(f"two rules are named {name}")
        RULES[name] = Rule(name, family, fn, reassociates, inspect.getdoc(fn) or "")
        return fn
    return register


class EggNamespace:
    """Builds egglog patterns; analysis lookups are bound to fresh variables in the query."""

    def __init__(self):
        self.facts: list = []
        self._bound: dict[str, object] = {}
        for name, ctor in CONSTRUCTORS.items():
            setattr(self, name, ctor)

    def _bind(self, fn, t, prefix):
        key = f"{prefix}:{t}"
        if key not in self._bound:
            v = var(f"_{prefix}{len(self._bound)}", i64)
            self.facts.append(eq(v).to(fn(t)))
            self._bound[key] = v
        return self._bound[key]

    def labels(self, t):
        return self._bind(labels, t, "labels")

    def dtype(self, t):
        return self._bind(dtype, t, "dtype")

    def _compute(self, t):
        return self._bind(lambda x: compute_dtype(self.dtype(x)), t, "compute")

    def acc(self, t):
        """``t`` in its accumulation dtype (bf16/fp16 to Float; a no-op cast otherwise, which
        cast-to-own-dtype removes): what a rule reduces when it makes a new reduction, so that
        it accumulates in fp32 as the left side did."""
        return Cast(self._compute(t), t)

    def full_precision(self, t):
        """``t``'s dtype is its own accumulation dtype (not bf16/fp16)."""
        return eq(self.dtype(t)).to(self._compute(t))

    @staticmethod
    def floating(t):
        return floating(t)

    @staticmethod
    def nonneg(t):
        return nonneg(t)

    @staticmethod
    def widens(narrow, wide):
        return widens(narrow, wide)

    # label-mask arithmetic
    @staticmethod
    def disjoint(m1, m2):
        return eq(m1 & m2).to(i64(0))

    @staticmethod
    def nonzero(m):
        return ne(m).to(i64(0))

    @staticmethod
    def several(m):
        """More than one label."""
        return ne(m & (m - i64(1))).to(i64(0))

    @staticmethod
    def low(m):
        """The lowest label of ``m``."""
        return m & (i64(0) - m)

    @staticmethod
    def minus(m1, m2):
        return m1 ^ (m1 & m2)

    @staticmethod
    def same(x, y):
        return eq(x).to(y)
