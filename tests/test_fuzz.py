"""Semantic preservation on random fusions (eqsat.random_fusion): optimizing never changes
results beyond the dtype and reduction-size tolerance and never raises the estimated cost.
The CI profile runs a few hundred examples; bench/fuzz.py runs thousands."""
import os

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import eqsat
from eqsat import DataType, FusionError
from eqsat.compare import mismatch
from eqsat.fuzz import check_case
from eqsat.random_fusion import HypothesisChooser, RandomChooser, random_fusion

EXAMPLES = int(os.environ.get("EQSAT_FUZZ_EXAMPLES", "250"))


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_optimizing_a_random_fusion_keeps_its_results_and_never_raises_its_cost(data):
    case = random_fusion(HypothesisChooser(data))
    result = check_case(case)
    assert result.problem is None, f"{result.problem}\n{case!r}"


@pytest.mark.parametrize("seed", range(0, 400, 7))
def test_random_fusions_without_reassociation(seed):
    result = check_case(random_fusion(RandomChooser(seed)), reassociate=False)
    assert result.problem is None


def test_the_generator_reaches_the_rewrites():
    """Not a vacuous property: a good share of random fusions is actually rewritten."""
    changed = sum(check_case(random_fusion(RandomChooser(s))).changed for s in range(120))
    assert changed >= 6


# -- regressions found by fuzzing ------------------------------------------------------------

def test_var_mean_of_bf16_is_rejected_as_nvfuser_does():
    """Found by the fuzzer: mean-as-sum rewrote a bf16 var_mean's mean into an fp32 sum, which
    changed its rounding. nvFuser rejects var_mean of half types at definition; so does eqsat."""
    def fusion(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        var, mean = fd.ops.var_mean(x, dims=[1], correction=0)
        fd.add_output(mean)

    with pytest.raises(FusionError, match=r"var_mean of BFloat16 is not supported.*cast the input"):
        eqsat.from_function(fusion)


def test_a_factored_sum_of_a_bf16_operand_accumulates_in_fp32():
    """sum_k(a[i,k] * b[i,j]) with a bf16: the left side multiplies in fp32 and sums fp32; the
    rewrite must sum a cast to fp32 (nvFuser cannot sum bf16, and a bf16 sum would round)."""
    def fusion(fd):
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        n, k, j = fd.ops.size(a, dim=0), fd.ops.size(a, dim=1), fd.ops.size(b, dim=1)
        prod = fd.ops.mul(fd.ops.broadcast_in_dim(a, shape=[n, k, j], broadcast_dims=[0, 1]),
                          fd.ops.broadcast_in_dim(b, shape=[n, k, j], broadcast_dims=[0, 2]))
        fd.add_output(fd.ops.sum(prod, dims=[1]))

    import torch
    big = [torch.empty(512, 512, dtype=torch.bfloat16, device="meta"), torch.empty(512, 512, device="meta")]
    opt = eqsat.optimize_fusion(fusion, big)
    assert opt.report.changed
    sums = [n for n in opt.fusion.nodes if n.op == "sum"]
    assert len(sums) == 1
    assert opt.fusion.types[sums[0].arg("arg").id].dtype is DataType.Float
    g = torch.Generator().manual_seed(0)
    small = [torch.randn(4, 300, generator=g).bfloat16(), torch.randn(4, 5, generator=g)]
    want = eqsat.run_fusion(opt.original, small)[0]
    assert mismatch(eqsat.run_fusion(opt.fusion, small)[0], want, 2e-6) is None


def test_rounding_noise_that_the_original_amplifies_is_judged_against_float64():
    """Found by the fuzzer (seed 1674): the column sums of a column-normalized tensor are 0 in
    exact arithmetic, so a layer norm of them normalizes rounding noise, and any reordering of
    the sums changes the output by ~100%. The check then asks whether the optimized fusion is as
    close to the float64 result as the original is, instead of how close the two are."""
    import dataclasses
    import torch
    from eqsat.fuzz import widened
    from eqsat.random_fusion import RandomCase

    def fusion(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        var, mean = fd.ops.var_mean(x, dims=[0], correction=0)
        shape = fd.ops.shape(x)
        y = fd.ops.mul(fd.ops.sub(x, fd.ops.broadcast_in_dim(mean, shape=shape, broadcast_dims=[1])),
                       fd.ops.broadcast_in_dim(fd.ops.rsqrt(fd.ops.add(var, fd.define_scalar(1e-5))),
                                               shape=shape, broadcast_dims=[1]))
        noise = fd.ops.sum(y, dims=[0])                     # exactly 0 in real arithmetic
        v2, m2 = fd.ops.var_mean(noise, dims=[0], correction=0)
        n = fd.ops.shape(noise)
        z = fd.ops.mul(fd.ops.sub(noise, fd.ops.broadcast_in_dim(m2, shape=n, broadcast_dims=[])),
                       fd.ops.broadcast_in_dim(fd.ops.rsqrt(fd.ops.add(v2, fd.define_scalar(1e-5))),
                                               shape=n, broadcast_dims=[]))
        fd.add_output(fd.ops.max(fd.ops.abs(z), dims=[0]))

    f = eqsat.ingest(fusion)
    wide = widened(f)
    assert {n.arg("dtype") for n in wide.nodes if n.op == "define_tensor"} == {DataType.Double}
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 48, generator=g)
    exact = eqsat.run_fusion(wide, [x.double()])[0]
    assert exact.dtype == torch.float64 and float(exact) < 1e-3       # noise at float64 level
    case = RandomCase(fusion=f, inputs=[x], planning_inputs=[torch.empty(4096, 4096, device="meta")],
                      ops=["layer_norm", "sum", "layer_norm", "amax"], reduction_size=4096)
    result = check_case(case, min_gain=0)
    assert result.changed, "the sum is rewritten (otherwise nothing differs to judge)"
    assert result.problem is None
