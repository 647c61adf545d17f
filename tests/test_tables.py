"""The tables every fact about an op, a term and a kernel kind is read from: the IR's ops
(``eqsat.ir.opspec.OPS``), the e-graph's terms (``eqsat.egraph.terms.TERMS``) and the kernel
kinds (``eqsat.cost.profile.KernelKind``). A new row of each is all a new op, term or kind
takes; these tests hold what a row must make true (an elementwise op's row alone is recorded,
typed, run and written back; a kind prices in every packaged profile) and pin the sets that
later stages read from the rows."""

import pytest
import torch

import eqsat
from eqsat.cost.ops import BARRIERS, DRAWS, INDEXERS, REDUCING, RESIZES, VIEWS, Kept
from eqsat.cost.profile import PACKAGED, KernelKind, Profile, load_profile
from eqsat.lowering.from_terms import lower_encoding
from eqsat.egraph.encode import encode
from eqsat.egraph.terms import (
    ELEMENTWISE_TERMS,
    FREE_TERMS,
    INDEXING_TERMS,
    SCALAR_TERMS,
    SPECIAL_TERMS,
    TERMS,
)
from eqsat.frontend.nvfuser_ops import ANY_FRONTEND_OPS
from eqsat.ir.dtypes import to_torch
from eqsat.ir.opspec import KEPT_ONLY, OPS, Trait
from eqsat.lowering.source import fusion_source

DataType = eqsat.DataType
# the unary and binary ops of the table that a frontend of nvFuser has (the recorder refuses others)
ELEMENTWISE_OPS = [
    op for op, spec in OPS.items() if spec.category in ("unary", "binary") and op in ANY_FRONTEND_OPS
]


def _operand_dtype(op: str) -> DataType:
    """A dtype the op takes: integers for bitwise ops, complex for real and imag, else Float."""
    if op.startswith("bitwise"):
        return DataType.Int
    return DataType.ComplexFloat if OPS[op].result == "complex part" else DataType.Float


@pytest.mark.parametrize("op", ELEMENTWISE_OPS)
def test_an_elementwise_ops_row_is_all_it_takes(op):
    """Recorded, typed by its dtype rule, run by the torch executor in the dtype it was typed
    (torch's function of its name, or the executor's own), encoded (its term, or a generic
    one) and lowered back to a definition that calls it."""
    dtype, arity = _operand_dtype(op), 1 if OPS[op].category == "unary" else 2

    def definition(fd):
        xs = [fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype) for _ in range(arity)]
        fd.add_output(getattr(fd.ops, op)(*xs))

    fusion = eqsat.ingest(definition)
    inputs = [(torch.rand(3, 4) * 4 + 1).to(to_torch(dtype)) for _ in range(arity)]
    (out,) = eqsat.run_fusion(fusion, inputs, strict=True)
    typed = fusion.types[fusion.outputs[0].value].dtype
    assert out.shape == (3, 4) and out.dtype == to_torch(typed), (op, typed, out.dtype)
    assert f"fd.ops.{op}(" in fusion_source(lower_encoding(encode(fusion)))


def test_every_op_is_a_kept_op_with_its_rows_facts():
    assert [k.op for k in Kept] == [*OPS, *KEPT_ONLY]
    for k in Kept:
        assert k == f"Kept:{k.op}" and f"{k}" == f"Kept:{k.op}" and Kept[k.op] is k
        assert k.traits == (OPS[k.op].traits if k.op in OPS else KEPT_ONLY[k.op])


def test_the_cost_models_sets_are_read_from_the_rows():
    def ops(kept):
        return {k.op if isinstance(k, Kept) else k for k in kept}

    assert ops(BARRIERS) == {
        "matmul",
        "linear",
        "segment_set",
        "opaque",
        "topk",
        "argsort",
        "cumsum",
        "cumprod",
        "cummin",
        "cummax",
        "scatter",
        "embedding_fwd",
        "grouped_mm",
    }
    assert ops(RESIZES) == {"slice", "pad", "cat"} and ops(VIEWS) == {"reshape", "slice", "stride_order"}
    assert ops(DRAWS) == {"uniform", "normal"}
    assert ops(REDUCING) == {"welford", "Sum", "Max", "Min", "Prod", "Mean", "Var"}
    assert ops(INDEXERS) == {"index_select", "gather", "take_along_axis", "Take", "IndexSelect", "TakePad"}
    assert INDEXING_TERMS == {"Take", "IndexSelect", "TakePad"}
    assert SPECIAL_TERMS == {"Exp", "Log", "Sqrt", "Rsqrt", "Recip", "Tanh", "Sigmoid", "Pow", "Un", "Tern"}
    assert FREE_TERMS == {"Cast"} and SCALAR_TERMS == {"Num", "Int", "Extent"}
    assert "SegmentSet" not in ELEMENTWISE_TERMS and {"Cast", "Un", "Bin", "Tern"} <= ELEMENTWISE_TERMS
    assert all(TERMS[t].kind in ("pointwise", "generic") for t in ELEMENTWISE_TERMS)
    elementwise_barriers = [op for op, s in OPS.items() if s.elementwise and Trait.BARRIER in s.traits]
    assert elementwise_barriers == ["segment_set"]


@pytest.mark.parametrize("name", PACKAGED)
def test_every_kernel_kind_prices_in_every_packaged_profile(name):
    profile = load_profile(name)
    assert set(profile.kinds) == set(KernelKind) and all(isinstance(k, KernelKind) for k in profile.kinds)


def test_a_kind_a_profile_leaves_out_takes_its_fallbacks_constants():
    constants = {"launch_us": 2.0, "bandwidth_GBps": 3000.0, "gflops": 40000.0}
    given = {
        k.value: dict(constants, launch_us=float(i)) for i, k in enumerate(KernelKind) if k.fallback is None
    }
    profile = Profile.from_dict({"host_us": 5.0, "kinds": given})
    for kind in KernelKind:
        assert profile.kinds[kind] == profile.kinds[kind.fallback or kind]
        assert kind.fallback is None or kind.fallback.fallback is None  # one step: no chains
    assert len({k.color for k in KernelKind}) == len(KernelKind)
    assert [k for k in KernelKind if k.grid] == [KernelKind.GRID_REDUCTION]
