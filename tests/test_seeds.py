"""The seed fusions ingest, print, run through the torch executor and agree with torch."""
import pytest
import torch
from helpers import check

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
    check(fusion, inputs, seed.torch_reference)           # as read and optimized, against torch
    # the direct style writes every op as recorded; the classic one writes clamp as max then
    # min (its frontend refuses clamp), which computes the same values
    assert eqsat.from_source(fusion_source(fusion, "direct"), inputs=False).fusion == fusion
    classic = eqsat.from_source(fusion_source(fusion, "classic"), inputs=False).fusion
    assert classic == fusion or name == "rmsnorm_fp8"
    got = eqsat.run_fusion(fusion, inputs, strict=True)
    for g, c in zip(got, eqsat.run_fusion(classic, inputs, strict=True), strict=True):
        assert g.dtype == c.dtype and torch.equal(g.float(), c.float())
