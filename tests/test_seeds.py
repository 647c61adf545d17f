"""The seed fusions ingest, print, run through the torch executor and agree with torch."""
import pytest
import torch

import eqsat
from eqsat.lowering import fusion_source
from eqsat.testing.seeds import SEEDS


@pytest.mark.parametrize("name", sorted(SEEDS))
@pytest.mark.parametrize("form", ["model_ref", "model"])
def test_seed_agrees_with_plain_torch(name, form):
    seed = SEEDS[name]
    fusion = eqsat.from_function(getattr(seed, form))
    text = str(fusion)
    assert "outputs:" in text and "extents:" in text
    inputs = seed.make_inputs()
    got = eqsat.run_fusion(fusion, inputs)
    want = seed.torch_reference(*inputs)
    want = want if isinstance(want, list) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g.float(), w.float(), rtol=1e-4, atol=1e-4)   # fp8: compared in fp32
    # the direct style writes every op as recorded; the classic one writes clamp as max then
    # min (its frontend refuses clamp), which computes the same values
    assert eqsat.from_source(fusion_source(fusion, "direct"), inputs=False).fusion == fusion
    classic = eqsat.from_source(fusion_source(fusion, "classic"), inputs=False).fusion
    assert classic == fusion or name == "rmsnorm_fp8"
    for g, c in zip(got, eqsat.run_fusion(classic, inputs), strict=True):
        assert g.dtype == c.dtype and torch.equal(g.float(), c.float())


def test_the_two_forms_of_each_seed_agree():
    for seed in SEEDS.values():
        inputs = seed.make_inputs()
        a = eqsat.run_fusion(eqsat.from_function(seed.model_ref), inputs)
        b = eqsat.run_fusion(eqsat.from_function(seed.model), inputs)
        for x, y in zip(a, b):
            torch.testing.assert_close(x.float(), y.float(), rtol=1e-4, atol=1e-4)
