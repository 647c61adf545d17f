"""How a rule is written: one Python function, read two ways.

    @rule("distributive", reassociates=True)
    def sum_of_product_with_constant_factor(k, a, b, R):
        '''Sum_R(a*b) = Sum_R(a)*b when b lacks R ...'''
        return k.Sum(R, k.Mul(a, b)), k.Mul(k.Sum(R, a), b), [k.disjoint(k.labels(b), R)]

The function takes a namespace ``k`` and the rule's variables (lowercase: terms; uppercase:
i64 label masks; names starting with ``D``: dtype codes) and returns ``(lhs, rhs, conditions)``.

Every rule says how it treats special values: ``reassociates=True`` where it changes the order
of a floating-point sum or product (rounding, and where a partial sum overflows);
``special_values="why"`` where its sides differ on NaN, +-inf or overflow (the reason says
which inputs); ``signed_zeros=True`` where it also keeps the sign of zero results. Rules with
either of the first two are left out by ``reassociate=False`` (``--no-reassociate``).
With :class:`EggNamespace` it builds the egglog rule; with the verifier's namespace
(:mod:`eqsat.verify`) it evaluates both sides on random tensors. One definition serves both,
so what is verified is what runs.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

from egglog import eq, i64, ne
from egglog import rule as egg_rule
from egglog import union, var

from eqsat.egraph.vocabulary import (CONSTRUCTORS, Cast, Term, compute_dtype, dtype, floating, labels,
                                     nonempty_labels, nonneg, widens)


@dataclass
class Rule:
    name: str
    family: str
    fn: Callable
    reassociates: bool = False
    doc: str = ""
    special_values: str = ""      # why the sides may differ on NaN, +-inf or overflow; "" if they don't
    signed_zeros: bool = False    # the sides also agree on the sign of zero results

    @property
    def exact_on_special_values(self) -> bool:
        """Both sides give the same NaNs and infinities for every input, overflow included."""
        return not (self.reassociates or self.special_values)

    @property
    def flags(self) -> list[str]:
        """What ``eqsat rules list`` shows after the rule's name."""
        return [f for f, on in (("reassociates", self.reassociates),
                                ("special values", bool(self.special_values)),
                                ("signed zeros", self.signed_zeros)) if on]

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

    @property
    def creditable(self) -> bool:
        """A report can credit the rule with a result: its right side has two constructor
        levels or more, a shape to find there (an identity's or a one-level right side is a
        node the input may already have)."""
        shape = self.rhs_shape()
        return shape is not None and any(isinstance(k, tuple) for k in shape[1:])


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


def rule(family: str, *, reassociates: bool = False, special_values: str = "",
         signed_zeros: bool = False):
    """Register a rule of ``family``. ``reassociates`` marks rules that change the order of a
    floating-point sum or product; ``special_values`` says why a rule's sides may differ on NaN,
    +-inf or overflow (a caller can turn both kinds off); ``signed_zeros`` claims that the sides
    also agree on the sign of zeros (the verifier then checks it)."""
    def register(fn):
        name = fn.__name__.replace("_", "-")
        if name in RULES:
            raise ValueError(f"two rules are named {name}")
        RULES[name] = Rule(name, family, fn, reassociates, inspect.getdoc(fn) or "",
                           special_values, signed_zeros)
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
    def nonempty(m):
        """Every label of ``m`` has a static extent of at least 1 (see ``nonempty_labels``)."""
        return eq(m & nonempty_labels()).to(m)

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
