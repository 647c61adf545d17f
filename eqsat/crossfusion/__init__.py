"""Optimizations across fusions: a forward and a backward fusion optimized together
(``optimize_pair``), passing the backward values the forward already computes."""
from .pair import OptimizedPair, PairReport, SavedValue, optimize_pair

__all__ = ["OptimizedPair", "PairReport", "SavedValue", "optimize_pair"]
