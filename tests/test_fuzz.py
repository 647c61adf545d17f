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
