"""Rewrite-rule families for eqsat's e-graph (installed as ``eqsat.rules``).

Each module is one family; each rule is one function whose variables are annotated with
their kinds, ``Term``, ``Axes``, ``DType``, ``Correction`` or ``Index`` (see :mod:`eqsat.rules.rule`).
``RULES`` maps every rule's name to its :class:`~eqsat.rules.rule.Rule`; ``select_rules``
(from :mod:`eqsat.egraph.saturate`, where the optimizer reads it) picks names by their flags:
``select_rules(special_values=False)`` leaves out the rules flagged ``[special values]``,
``select_rules(reassociate=False)`` those and the ``[reassociates]`` ones too.
"""

from eqsat.egraph.saturate import select_rules

from . import algebra, distributive, indexing, normalization, placement, split  # noqa: F401  (they register rules)
from .rule import RULES, Axes, Correction, DType, Index, Rule, Term, rule

FAMILIES = sorted({r.family for r in RULES.values()})

__all__ = [
    "RULES",
    "Rule",
    "rule",
    "FAMILIES",
    "Term",
    "Axes",
    "DType",
    "Correction",
    "Index",
    "select_rules",
]
