"""Recomputing elementwise chains (``optimize_fusion(recompute=True)``): where nvFuser would pass
a kernel fp32 intermediates of a bf16 input through global memory, eqsat's lowering gives the
kernel its own copy of the chain. Checked on SiLU's backward through an FP8 amax count
(eqsat.testing.silu_amax_backward), against torch written by hand."""

import pytest
import torch
from helpers import assert_outputs_match, returned_rtols

import eqsat
from eqsat.ir.dtypes import DataType
from eqsat.reference.devices import fresh_copies
from eqsat.testing.silu_amax_backward import definition, make_inputs, torch_reference

SHAPE = (4, 2048, 5632)  # Phi-3's MLP at batch 4 x seq 2048


def _ops(fusion: eqsat.Fusion, name: str) -> int:
    return sum(n.op == name for n in fusion.nodes)


@pytest.fixture(scope="module")
def optimized():
    return eqsat.optimize_fusion(definition(), make_inputs(SHAPE, "meta"))


def test_the_tail_recomputes_the_chain_and_reads_half_the_bytes(optimized):
    """One chain as written: the tail kernel reads four fp32 intermediates (16 bytes an
    element); recomputing them from x (2 bytes) is credited, and lowers the chain twice. The
    count (a full sum, compute-bound: the chain's exp and reciprocal) is split too, its first
    stage over the innermost axis (a compute-bound grid reduction ran 1.9x longer than an inner
    one on an H100: bench/results/h100_calibration_silu_bf16_035_s32.json)."""
    before, after = optimized.report.before, optimized.report.after
    assert set(optimized.report.rules) == {
        "recompute_chains",
        "split-sum-lowest-axis-first",
        "split-sum-lowest-axis-last",
    }
    assert [k.kind for k in before.kernels] == ["grid_reduction", "pointwise"]
    assert sorted(k.kind for k in after.kernels) == ["pointwise", "reduction", "reduction"]
    assert after.bytes < 0.7 * before.bytes
    assert after.time_us < 0.6 * before.time_us
    assert _ops(optimized.fusion, "exp") == 2 * _ops(eqsat.ingest(definition()), "exp") == 2


def test_the_lowered_copy_is_what_the_estimate_priced(optimized):
    """Read back, the lowered definition (two chains) is estimated as it was extracted."""
    again = eqsat.estimate_fusion(optimized.fusion, make_inputs(SHAPE, "meta"))
    assert again.time_us == pytest.approx(optimized.report.after.time_us, rel=0.02)


def test_results_match_torch_with_special_values(optimized):
    """Exact: both copies compute the same ops. The fusion optimized at SHAPE runs at a small
    shape (its shapes are symbolic), x holding inf, -inf and NaN, and the amax hit twice."""
    inputs = make_inputs((2, 8, 16))
    x = inputs[0]
    x[0, 0, :3] = torch.tensor([float("inf"), float("-inf"), float("nan")])
    x[1, 1, 1] = x[1, 1, 2] = 8.0
    inputs[1] = torch.nn.functional.silu(torch.tensor(8.0))
    want = torch_reference(*fresh_copies(inputs))
    assert want.isnan().any() and want.isfinite().any()
    for fusion, what in ((eqsat.ingest(definition()), "as read"), (optimized.fusion, "optimized")):
        got = eqsat.run_fusion(fusion, fresh_copies(inputs), strict=True)
        assert_outputs_match(got, [want], returned_rtols(fusion), what)


def test_recompute_false_lowers_each_value_once():
    off = eqsat.optimize_fusion(definition(), make_inputs(SHAPE, "meta"), recompute=False)
    assert "recompute_chains" not in off.report.rules
    assert _ops(off.fusion, "exp") == 1


def test_the_definition_as_written_is_estimated_without_copies(optimized):
    """``estimate_fusion`` prices the user's definition as nvFuser runs it: no recomputation."""
    as_written = eqsat.estimate_fusion(definition(), make_inputs(SHAPE, "meta"))
    assert as_written.time_us == pytest.approx(optimized.report.before.time_us)
    assert not as_written.recomputed


def test_the_hand_written_copy_is_priced_like_eqsats(optimized):
    """The fusion with the copy written by hand: the estimate reads the copy as a chain of its
    own (the encoding merges equal terms; the estimate separates them again), as nvFuser runs
    it: its tail kernel and the bytes its count reads are eqsat's. Optimized, it reaches
    eqsat's result (the count split, the copy kept)."""
    after = optimized.report.after
    by_hand = eqsat.estimate_fusion(definition(recomputed=True), make_inputs(SHAPE, "meta"))
    assert by_hand.time_us < 0.6 * optimized.report.before.time_us
    tail = [k for k in by_hand.kernels if k.kind == "pointwise"]
    assert len(tail) == 1 and tail[0].bytes == pytest.approx(
        sum(k.bytes for k in after.kernels if k.kind == "pointwise"), rel=0.01
    )
    assert by_hand.bytes == pytest.approx(after.bytes, rel=0.01)
    again = eqsat.optimize_fusion(definition(recomputed=True), make_inputs(SHAPE, "meta"))
    assert again.report.after.time_us == pytest.approx(after.time_us, rel=0.02)
    assert _ops(again.fusion, "exp") == 2


def test_a_partial_copy_as_thunder_writes_it_is_read_as_written():
    """Thunder's SiLU backward computes sigmoid's exp twice from one negation: the tail's copy
    of the sigmoid still reads the widened input's negation from the reduction's kernel, so
    the definition is priced near the one-chain form, and eqsat's copy of the whole chain
    still pays."""

    def thunder_like(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        amax = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float)
        n, h = fd.ops.size(x, dim=0), fd.ops.size(x, dim=1)
        xf = fd.ops.cast(x, dtype=DataType.Float)
        minus = fd.ops.neg(xf)
        s = fd.ops.mul(xf, fd.ops.reciprocal(fd.ops.add(1.0, fd.ops.exp(minus))))
        hit = fd.ops.eq(fd.ops.abs(s), fd.ops.broadcast_in_dim(amax, shape=[n, h], broadcast_dims=[]))
        count = fd.ops.sum(fd.ops.cast(hit, dtype=DataType.Float), dims=[0, 1])
        sig = fd.ops.reciprocal(fd.ops.add(1.0, fd.ops.exp(minus)))  # the copy
        share = fd.ops.div(
            fd.ops.cast(hit, dtype=DataType.Float),
            fd.ops.broadcast_in_dim(count, shape=[n, h], broadcast_dims=[]),
        )
        dx = fd.ops.mul(fd.ops.add(share, fd.ops.sign(s)), fd.ops.mul(sig, fd.ops.sub(1.0, sig)))
        fd.add_output(fd.ops.cast(dx, dtype=DataType.BFloat16))

    inputs = [torch.empty(16384, 5632, dtype=torch.bfloat16, device="meta"), torch.empty((), device="meta")]
    as_written = eqsat.estimate_fusion(thunder_like, inputs)
    assert not as_written.recomputed
    opt = eqsat.optimize_fusion(thunder_like, inputs)
    assert "recompute_chains" in opt.report.rules
    assert opt.report.after.time_us < 0.75 * as_written.time_us
