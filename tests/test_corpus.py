"""Every file of both corpora (../shared/corpus, and ../shared/corpus_thunder: what Thunder
generated, as nvfuser_direct prints it) ingests, re-emits source that re-ingests to an equal IR, and that
source gives the same outputs through the torch executor as the original definition function run
straight on torch (no IR in between); so do the fusion rebuilt from its terms (named axes
and back) and the optimized fusion, whose estimated cost is never higher (what `eqsat check`
checks). Files marked `meta` in INDEX.md run on meta tensors."""

import pytest
import torch
from conftest import (
    CORPUS_THUNDER,
    corpus_files,
    corpus_meta_files,
    indexable_inputs,
    require_corpus,
    thunder_files,
)

import eqsat
from eqsat.lowering.from_terms import lower_encoding
from eqsat.egraph.encode import encode
from eqsat.frontend.ingest import define_on
from eqsat.lowering import fusion_source
from eqsat.reference.compare import mismatch
from eqsat.reference.devices import fresh_copies
from eqsat.reference.eager import EagerDefinition

FILES = corpus_files()
THUNDER = thunder_files()
META = corpus_meta_files()


def _run_original(repro, inputs, seed):
    gen = None
    if not any(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in inputs):
        gen = torch.Generator().manual_seed(seed)
    fd = EagerDefinition(inputs, generator=gen)
    define_on(repro, fd, eqsat.DataType)
    return fd.outputs


def test_corpus_is_present_or_skipped_with_a_reason():
    require_corpus()
    assert len(FILES) >= 90


def test_thunder_corpus_is_present_or_skipped_with_a_reason():
    require_corpus(CORPUS_THUNDER)
    assert len(THUNDER) >= 76
    assert all(eqsat.from_file(p, inputs=False).frontend == "nvfuser_direct" for p in THUNDER[:3])


def _same_outputs(got, want, what, exact=False):
    assert len(got) == len(want), f"{what}: {len(got)} outputs instead of {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert (g.shape, g.dtype) == (w.shape, w.dtype), f"{what}: output {i}"
        if exact:
            torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True, msg=f"{what}: output {i}")
        else:
            problem = mismatch(g, w)
            assert problem is None, f"{what}: output {i}: {problem}"


@pytest.mark.parametrize("path", FILES + THUNDER, ids=[p.name for p in FILES + THUNDER])
def test_corpus_file(path):
    meta = path.name in META
    torch.manual_seed(0)  # the files draw their inputs at random
    repro = eqsat.from_file(path, device="meta" if meta else None)
    assert repro.inputs is not None
    source = fusion_source(repro.fusion)  # in the print style of the file's frontend
    again = eqsat.ingest(source)
    assert again == repro.fusion, "re-emitted source re-ingests to a different IR"
    inputs = repro.inputs if meta else indexable_inputs(repro)
    inputs_a, inputs_b = fresh_copies(inputs), fresh_copies(inputs)
    want = _run_original(repro, inputs_a, seed=0)
    got = eqsat.run_fusion(again, inputs_b, seed=0, strict=True)
    if meta:
        _same_outputs([g.to("meta") for g in got], want, "as read")
    else:
        _same_outputs(got, want, "as read", exact=True)
        _same_outputs(
            [a for a in inputs_a if isinstance(a, torch.Tensor)],  # outputs
            [b for b in inputs_b if isinstance(b, torch.Tensor)],  # aliased
            "inputs after the run",
            exact=True,
        )  # into inputs

    # through terms and back: named axes to positions again, same outputs (within dtype
    # tolerance: a reduction may sum in another order once layouts change)
    lowered = lower_encoding(encode(repro.fusion))
    _same_outputs(eqsat.run_fusion(lowered, fresh_copies(inputs), seed=0, strict=True), want, "through terms")

    # optimized: never a worse estimate, and the same outputs within dtype tolerance
    opt = eqsat.optimize_fusion(repro.fusion, inputs)
    assert opt.report.after.time_us <= opt.report.before.time_us
    assert opt.frontend == repro.frontend
    if opt.report.changed:  # else it is the fusion run above
        _same_outputs(
            eqsat.run_fusion(opt.fusion, fresh_copies(inputs), seed=0, strict=True), want, "optimized"
        )
    else:
        assert opt.fusion == repro.fusion
