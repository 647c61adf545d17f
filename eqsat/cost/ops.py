"""The ops of the cost model's nodes, and the sets of them its rules read.

A node of a candidate (``eqsat.cost.estimate.GNode``) is a term of the e-graph, named by its
constructor (a row of ``eqsat.egraph.terms.TERMS``), or an op eqsat keeps verbatim, linked to
its inputs: a :class:`Kept` member, one per op of ``eqsat.ir.opspec.OPS`` and per name the
encoding gives kept nodes besides (``opspec.KEPT_ONLY``: ``opaque``, ``copy``). Its value is the
name the model prints (``Kept:reshape``); its facts are its op's row. Every set below is read
from the two tables; none is written out by hand.
"""

from __future__ import annotations

import enum

from eqsat.egraph.terms import INDEXING_TERMS, REDUCTIONS
from eqsat.ir.opspec import KEPT_ONLY, OPS, OpSpec, Trait


class KeptOp(enum.StrEnum):
    """What every :class:`Kept` member knows of its op (the members are made from the table)."""

    @property
    def op(self) -> str:
        """The op's name: an IR op's, or one of ``opspec.KEPT_ONLY``."""
        return self.name

    @property
    def spec(self) -> OpSpec | None:
        """The op's row of ``opspec.OPS`` (None for ``opaque`` and ``copy``)."""
        return OPS.get(self.name)

    @property
    def traits(self) -> Trait:
        """How nvFuser's segmenter takes the op: its row's traits (``opspec.KEPT_ONLY``'s for
        ``opaque`` and ``copy``)."""
        spec = self.spec
        return spec.traits if spec is not None else KEPT_ONLY[self.name]

    @property
    def elementwise(self) -> bool:
        """The op is elementwise (its row's category)."""
        spec = self.spec
        return spec is not None and spec.elementwise

    @property
    def draws(self) -> bool:
        """The op draws random numbers (``uniform``, ``normal``)."""
        spec = self.spec
        return spec is not None and spec.draws


# an op kept verbatim, as a node of the cost model: Kept.reshape, Kept["matmul"], ...
Kept = KeptOp("Kept", [(op, f"Kept:{op}") for op in (*OPS, *KEPT_ONLY)], module=__name__)


def _kept(trait: Trait) -> frozenset:
    return frozenset(k for k in Kept if trait in k.traits)


# kept ops that nvFuser does not fuse into a pointwise/reduction kernel (or that are not its kernels)
BARRIERS = _kept(Trait.BARRIER)
# reductions: the e-graph's, and welford (kept verbatim: its outputs link to its input, and its
# attrs are the reduced labels, as a reduction term's are)
REDUCING = REDUCTIONS | _kept(Trait.REDUCES)
# kept ops that resize an axis: nvFuser's pointwise and reduction schedulers take them only on a
# kernel's inputs; its resize scheduler takes them anywhere in a kernel without reductions
RESIZES = _kept(Trait.RESIZES)
# ops that index a tensor (kept ones, and the e-graph's Take, IndexSelect and TakePad): their
# indexed input (first kid) must be a kernel input: nvFuser 0.2.35 takes them in any scheduler as
# a consumer of a fusion (segment) input, whose gathered elements alone are read, but on no value
# computed in the same kernel, which another kernel must write in full
INDEXERS = _kept(Trait.INDEXES) | INDEXING_TERMS
# kept ops that nvFuser runs without a kernel where a kernel's worth of them is all there is (its
# expression evaluator aliases the result to the tensor it views); a permute is no op of the
# e-graph (its labels say it), and Thunder writes the stride_order it asks for only where the
# permuted tensor is laid out so already
VIEWS = _kept(Trait.VIEW)
# random draws: the kernel kind's draw_ps per element
DRAWS = frozenset(k for k in Kept if k.draws)
