"""How a rule is written: one Python function, read three ways.

    @rule("distributive", reassociates=True, special_values="...")
    def sum_of_product_factor_right(k, a: Term, b: Term, R: Axes):
        '''Sum_R(a*b) = Sum_R(a)*b when b lacks R ...'''
        return (k.Sum(R, k.Mul(a, b)), k.Mul(k.Sum(R, k.acc(a)), b),
                [k.constant_along(b, R), k.floating(a), k.floating(b)])

The function takes a namespace ``k`` and the rule's variables, each annotated with its kind
(:data:`VARIABLE_KINDS`: ``Term``, a term; ``Axes``, a set of axis labels; ``DType``, a dtype code;
``Correction``, a variance's correction; ``Index``, a term of indices; ``Axis``, one axis
label), and returns ``(lhs, rhs, conditions)``. A variable
without a kind is an error when the rule is registered. :meth:`Rule.variables` reads the
kinds, once, for every reader.

Every rule says how it treats special values: ``reassociates=True`` where it changes the order
of a floating-point sum or product (rounding, and where a partial sum overflows);
``special_values="why"`` where its sides differ on NaN, +-inf or overflow (the reason says
which inputs); ``signed_zeros=True`` where it also keeps the sign of zero results. Rules with
either of the first two are left out by ``reassociate=False`` (``--no-reassociate``).
With :class:`EggNamespace` it builds the egglog rule; with :class:`ShapeNamespace` it gives
the shape of its right side; with the verifier's namespace (:mod:`eqsat.rules.verify`) it
evaluates both sides on random tensors. One definition serves all three, so what is verified
is what runs. The conditions a rule states in its domain's words (:class:`Conditions`) are
written once, over the few primitives each namespace gives.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

from egglog import eq, i64, ne
from egglog import rule as egg_rule
from egglog import union, var

from eqsat.egraph.registry import RULES as REGISTRY
from eqsat.egraph.vocabulary import (
    CONSTRUCTORS,
    Cast,
    Term,
    compute_dtype,
    drawn,
    dtype,
    floating,
    labels,
    nonempty_labels,
    nonneg,
    widens,
)


class Axes:
    """The kind of a rule variable that is a set of axis labels (an i64 bit mask): what a
    reduction reduces over, what an Extent multiplies."""


class DType:
    """The kind of a rule variable that is a dtype code (:mod:`eqsat.egraph.terms`)."""


class Correction:
    """The kind of a rule variable that is a variance's correction (an integer)."""


class Index:
    """The kind of a rule variable that is a term holding indices (an integer tensor) along
    the axis an indexing term indexes (``Take``, ``IndexSelect``). In the e-graph it is a
    Term like any other; the verifier draws it as integers and takes them in range (the
    rules assume indices in range: out of range, nvFuser's result is undefined)."""


class Axis:
    """The kind of a rule variable that is one axis label (a bit mask of one bit): the axis an
    indexing term indexes."""


# the kinds of rule variables (``Term`` is the e-graph's Term sort itself)
VARIABLE_KINDS = (Term, Axes, DType, Correction, Index, Axis)
TERM_VARIABLE_KINDS = (Term, Index)  # the kinds of variables that are terms


def rule_variables(name: str, fn: Callable) -> list[tuple[str, type]]:
    """The variables of the rule ``name`` that ``fn`` defines, with their kinds: its
    parameters after the namespace, each annotated with one of :data:`VARIABLE_KINDS`."""
    try:
        params = list(inspect.signature(fn, eval_str=True).parameters.values())[1:]
    except NameError as err:
        raise ValueError(f"rule {name}: a variable's kind is not known here ({err})") from None
    out = []
    for p in params:
        if p.annotation not in VARIABLE_KINDS:
            said = "has no kind" if p.annotation is p.empty else f"has the kind {p.annotation!r}"
            raise ValueError(
                f"rule {name}: variable {p.name} {said}; annotate it with one of "
                f"{', '.join(k.__name__ for k in VARIABLE_KINDS)} "
                f"(def {fn.__name__}(k, {p.name}: Term, ...))"
            )
        out.append((p.name, p.annotation))
    return out


@dataclass
class Rule:
    name: str
    family: str
    fn: Callable
    reassociates: bool = False
    doc: str = ""
    special_values: str = ""  # why the sides may differ on NaN, +-inf or overflow; "" if they don't
    signed_zeros: bool = False  # the sides also agree on the sign of zero results

    def __post_init__(self):
        rule_variables(self.name, self.fn)  # every variable has a kind, or the rule is refused

    @property
    def exact_on_special_values(self) -> bool:
        """Both sides give the same NaNs and infinities for every input, overflow included."""
        return not (self.reassociates or self.special_values)

    @property
    def flags(self) -> list[str]:
        """What ``eqsat rules list`` shows after the rule's name."""
        return [
            f
            for f, on in (
                ("reassociates", self.reassociates),
                ("special values", bool(self.special_values)),
                ("signed zeros", self.signed_zeros),
            )
            if on
        ]

    @property
    def variables(self) -> list[tuple[str, type]]:
        """The rule's variables, in order, with their kinds (:data:`VARIABLE_KINDS`)."""
        return rule_variables(self.name, self.fn)

    def egglog(self):
        k = EggNamespace()
        args = [var(name, Term if kind in TERM_VARIABLE_KINDS else i64) for name, kind in self.variables]
        lhs, rhs, conditions = self.fn(k, *args)
        return egg_rule(lhs, *k.facts, *conditions, name=self.name).then(union(lhs).with_(rhs))

    def rhs_shape(self):
        """The right-hand side's constructor tree, with variables as None: ("Mul", ("Sum", None), None)."""
        k = ShapeNamespace()
        holes = [_Hole() if kind in TERM_VARIABLE_KINDS else _Mask() for _, kind in self.variables]
        _, rhs, _ = self.fn(k, *holes)
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
        if name == "acc":  # a cast that vanishes for full-precision operands
            return lambda t: t
        return lambda *args: _Mask()


RULES: dict[str, Rule] = REGISTRY  # every rule, by name (the e-graph's registry)


def rule(family: str, *, reassociates: bool = False, special_values: str = "", signed_zeros: bool = False):
    """Register a rule of ``family``. ``reassociates`` marks rules that change the order of a
    floating-point sum or product; ``special_values`` says why a rule's sides may differ on NaN,
    +-inf or overflow (a caller can turn both kinds off); ``signed_zeros`` claims that the sides
    also agree on the sign of zeros (the verifier then checks it)."""

    def register(fn):
        name = fn.__name__.replace("_", "-")
        if name in RULES:
            raise ValueError(f"two rules are named {name}")
        RULES[name] = Rule(
            name, family, fn, reassociates, inspect.getdoc(fn) or "", special_values, signed_zeros
        )  # refused if a variable has no kind
        return fn

    return register


class Conditions:
    """The conditions rules state, in the words of their domain, written once over the
    primitives every namespace gives (``labels``, ``dtype``, ``disjoint``, ``minus``,
    ``same``): in egglog they are the same query facts the primitives make."""

    def constant_along(self, x, R):
        """``x`` is constant along every label of ``R`` (it varies along none of them)."""
        return self.disjoint(self.labels(x), R)

    def constant_axes(self, x, R):
        """The labels of ``R`` that ``x`` is constant along (an Axes value)."""
        return self.minus(R, self.labels(x))

    def varying_axes(self, x, R):
        """The labels of ``R`` that ``x`` varies along (an Axes value)."""
        return R & self.labels(x)

    def has_dtype(self, x, D):
        """``x``'s dtype is the code ``D``."""
        return self.same(self.dtype(x), D)

    def zero_or_one(self, C):
        """The integer ``C`` is 0 or 1 (no bit but the lowest)."""
        return self.disjoint(C, -2)

    def at_most_one(self, R):
        """``R`` holds one label or none (no two bits)."""
        return self.disjoint(R, R - 1)

    def within(self, m1, m2):
        """Every label of ``m1`` is in ``m2``."""
        return self.same(self.minus(m1, m2), 0)


class EggNamespace(Conditions):
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
        """The labels ``t`` varies along (an Axes value)."""
        return self._bind(labels, t, "labels")

    def dtype(self, t):
        """``t``'s dtype code."""
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
        """``t``'s dtype is a floating-point one."""
        return floating(t)

    @staticmethod
    def nonneg(t):
        """Every element of ``t`` is >= 0 (-0.0 included) or NaN."""
        return nonneg(t)

    @staticmethod
    def widens(narrow, wide):
        """A cast from dtype ``narrow`` to ``wide`` and back is exact."""
        return widens(narrow, wide)

    @staticmethod
    def drawn(t):
        """``t`` is a function of random draws and scalars alone (no tensor the fusion reads)."""
        return drawn(t)

    # sets of labels (Axes values): & and | as for sets
    @staticmethod
    def disjoint(m1, m2):
        """No label is in both."""
        return eq(m1 & m2).to(i64(0))

    @staticmethod
    def has_axes(m):
        """At least one label."""
        return ne(m).to(i64(0))

    @staticmethod
    def several(m):
        """More than one label."""
        return ne(m & (m - i64(1))).to(i64(0))

    @staticmethod
    def never_empty(m):
        """Every label of ``m`` has a static extent of at least 1, so that no axis of them is
        empty at run time (see ``nonempty_labels``)."""
        return eq(m & nonempty_labels()).to(m)

    @staticmethod
    def low(m):
        """The lowest label of ``m``."""
        return m & (i64(0) - m)

    @staticmethod
    def minus(m1, m2):
        """The labels of ``m1`` not in ``m2``."""
        return m1 ^ (m1 & m2)

    @staticmethod
    def same(x, y):
        """Two analysis values (dtype codes) are equal."""
        return eq(x).to(y)
