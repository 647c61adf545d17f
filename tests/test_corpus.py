"""Every corpus file ingests, re-emits source that re-ingests to an equal IR, and that source
gives the same outputs through the torch executor as the original definition function run
straight on torch (no IR in between); so do the fusion rebuilt from its terms (named axes
and back) and the optimized fusion, whose estimated cost is never higher (what `eqsat check`
checks). Files marked `meta` in INDEX.md run on meta tensors."""
import ast

import pytest
import torch

import eqsat
from eqsat.compare import mismatch
from eqsat.encode import encode
from eqsat.lowering import fusion_source
from eqsat.lowering.from_terms import lower_encoding
from eqsat.torch_executor import EagerDefinition

from conftest import corpus_files, corpus_meta_files, require_corpus

FILES = corpus_files()
META = corpus_meta_files()


def _clone(values):
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            base = v.new_empty(0).set_(v.untyped_storage().__copy__() if v.device.type != "meta"
                                       else v.untyped_storage(), 0,
                                       (v.untyped_storage().nbytes() // max(v.element_size(), 1),), (1,))
            v = base.as_strided(v.shape, v.stride(), v.storage_offset())
        out.append(v)
    return out


def _run_original(repro, inputs, seed):
    tree = ast.parse(repro.source)
    fn = next(s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == repro.function)
    namespace = {"DataType": eqsat.DataType}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), repro.filename, "exec"), namespace)
    gen = None
    if not any(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in inputs):
        gen = torch.Generator().manual_seed(seed)
    fd = EagerDefinition(inputs, generator=gen)
    namespace[repro.function](fd)
    return fd.outputs


def test_corpus_is_present_or_skipped_with_a_reason():
    require_corpus()
    assert len(FILES) >= 90


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_corpus_file(path):
    meta = path.name in META
    torch.manual_seed(0)                          # the files draw their inputs at random
    repro = eqsat.from_file(path, device="meta" if meta else None)
    assert repro.inputs is not None
    source = fusion_source(repro.fusion)
    again = eqsat.ingest(source)
    assert again == repro.fusion, "re-emitted source re-ingests to a different IR"
    inputs_a, inputs_b = _clone(repro.inputs), _clone(repro.inputs)
    want = _run_original(repro, inputs_a, seed=0)
    got = eqsat.run_fusion(again, inputs_b, seed=0)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert (g.shape, g.dtype) == (w.shape, w.dtype), f"output {i}"
        if not meta:
            torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True, msg=f"output {i}")
    for a, b in zip(inputs_a, inputs_b):        # outputs aliased into inputs
        if isinstance(a, torch.Tensor) and not meta:
            torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)

    # through terms and back: named axes to positions again, same outputs (within dtype
    # tolerance: a reduction may sum in another order once layouts change)
    lowered = lower_encoding(encode(repro.fusion))
    again = eqsat.run_fusion(lowered, _clone(repro.inputs), seed=0)
    for i, (g, w) in enumerate(zip(again, want)):
        assert (g.shape, g.dtype) == (w.shape, w.dtype), f"output {i} through terms"
        problem = mismatch(g, w)
        assert problem is None, f"output {i} through terms: {problem}"


    # optimized: never a worse estimate, and the same outputs within dtype tolerance
    opt = eqsat.optimize_fusion(repro.fusion, repro.inputs)
    assert opt.report.after.time_us <= opt.report.before.time_us
    optimized = eqsat.run_fusion(opt.fusion, _clone(repro.inputs), seed=0)
    assert len(optimized) == len(want)
    for i, (g, w) in enumerate(zip(optimized, want)):
        problem = mismatch(g, w)
        assert problem is None, f"output {i} optimized: {problem}"


