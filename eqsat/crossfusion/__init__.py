"""Optimizations across fusions: a forward and a backward fusion optimized together
(``optimize_pair``), passing the backward values the forward already computes."""

from .pair import LinkError, OptimizedPair, PairReport, SavedValue, optimize_pair

__all__ = ["LinkError", "OptimizedPair", "PairReport", "SavedValue", "optimize_pair"]
