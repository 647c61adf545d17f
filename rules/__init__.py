"""Rewrite-rule families for eqsat's e-graph (installed as ``eqsat.rules``).

Each module is one family; each rule is one function (see :mod:`eqsat.rules.rule`).
``RULES`` maps every rule's name to its :class:`~eqsat.rules.rule.Rule`.
"""
from . import algebra, distributive, normalization, split  # noqa: F401  (they register rules)
from .rule import RULES, Rule, rule

FAMILIES = sorted({r.family for r in RULES.values()})

__all__ = ["RULES", "Rule", "rule", "FAMILIES"]
