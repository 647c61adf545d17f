"""Large fusions and rule sets that explode still give a valid result, inside the limits, and
the report says where saturation stopped. (How long it takes is measured in bench/large.py.)"""

import torch
from helpers import long_sum

import eqsat
from eqsat import DataType
from eqsat.egraph.saturate import Limits
from eqsat.reference.compare import mismatch


def _agrees(opt, fusion, inputs):
    want = eqsat.run_fusion(fusion, inputs, strict=True)
    got = opt.run_reference(inputs, strict=True)
    return [p for p in (mismatch(g, w) for g, w in zip(got, want, strict=True)) if p] == []


def _normalizing_chain(ops):
    """A pointwise chain over [M, N] with a row sum broadcast back every 40 ops."""

    def definition(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        y = x
        for i in range(ops // 2):
            if i % 20 == 19:
                s = fd.ops.sum(y, dims=[1])
                y = fd.ops.sub(y, fd.ops.broadcast_in_dim(s, shape=x.shape(), broadcast_dims=[0]))
            else:
                y = fd.ops.tanh(fd.ops.add(y, x))
        fd.add_output(y)

    return definition


def _weighted_sums(blocks):
    """acc = sum over blocks of Sum_j(x[i, j] * (w[i] * c_b)): each weight factors out of its sum,
    and the sums chain into one deep term."""

    def definition(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        acc = None
        for b in range(blocks):
            wb = fd.ops.broadcast_in_dim(
                fd.ops.mul(w, fd.define_scalar(1.0 + b, dtype=DataType.Double)),
                shape=x.shape(),
                broadcast_dims=[0],
            )
            s = fd.ops.sum(fd.ops.mul(x, wb), dims=[1])
            acc = s if acc is None else fd.ops.add(acc, s)
        fd.add_output(acc)

    return definition


def test_a_fusion_of_two_thousand_ops_is_optimized_and_still_agrees():
    fusion = eqsat.ingest(_normalizing_chain(2000))
    assert len(fusion.nodes) > 1900
    opt = eqsat.optimize_fusion(fusion, [torch.empty(4096, 4096, device="meta")])
    r = opt.report
    # the one rewrite this chain admits is commuting its adds: one iteration makes them, the
    # next finds nothing new, long before any limit
    assert r.saturation.stop == "saturated" and r.saturation.e_nodes < Limits().nodes
    # every row sum reads the chain above it: the whole chain is one normalization kernel,
    # as nvFuser's segmenter makes it (no merge is refused for want of search)
    assert len(r.before.kernels) == 1
    assert _agrees(opt, fusion, [torch.randn(8, 16)])


def test_a_deep_term_is_lowered_without_recursion():
    """A chain of 600 sums added together is one term 1200 levels deep once rewritten;
    lowering it must not hit Python's recursion limit. No deadline: on a loaded machine the
    default one may cut the run before the rewrite, and the subject here is the lowering."""
    fusion = eqsat.ingest(_weighted_sums(600))
    opt = eqsat.optimize_fusion(
        fusion,
        [torch.empty(4096, 4096, device="meta"), torch.empty(4096, device="meta")],
        min_gain=0,
        deadline_s=None,
    )
    assert opt.report.changed
    assert _agrees(opt, fusion, [torch.randn(8, 16), torch.randn(8)])


def test_an_exploding_rule_set_stops_near_the_node_limit_and_says_so(exploding_rule):
    inputs = [torch.randn(16, 16) for _ in range(3)]
    limits = Limits(nodes=5000)
    opt = eqsat.optimize_fusion(long_sum, inputs, limits=limits)
    r = opt.report
    assert r.rules_fired.get(exploding_rule, 0) > 0
    assert r.saturation.stop == "node limit"
    assert r.saturation.e_nodes < 2 * limits.nodes, "an iteration overshot the node limit twice over"
    assert any("node limit (5000 e-nodes)" in n for n in r.notes)
    assert _agrees(opt, eqsat.ingest(long_sum), inputs)


def test_a_time_limit_of_zero_still_gives_a_valid_result(exploding_rule):
    inputs = [torch.randn(16, 16) for _ in range(3)]
    opt = eqsat.optimize_fusion(long_sum, inputs, limits=Limits(seconds=0.0))
    assert (opt.report.saturation.stop, opt.report.saturation.iterations) == ("time limit", 1)
    assert any("time limit (0 s)" in n for n in opt.report.notes)
    assert _agrees(opt, eqsat.ingest(long_sum), inputs)
