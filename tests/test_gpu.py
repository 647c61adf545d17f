"""On a GPU with nvFuser: optimized fusions execute on nvFuser, through both frontends, and
match the torch executor and the original definition run on nvFuser."""
import importlib

import pytest
import torch

import eqsat
from eqsat.compare import mismatch
from eqsat.devices import fresh_copies as _fresh, to_device
from eqsat.lowering.nvfuser import to_nvfuser
from eqsat.seeds import SEEDS

from conftest import corpus_files

pytestmark = pytest.mark.gpu


def _frontend_available(name):
    if not torch.cuda.is_available():
        return False
    try:
        importlib.import_module(name)
        return True
    except Exception:
        return False


FRONTENDS = [pytest.param(name, marks=pytest.mark.skipif(not _frontend_available(name),
                                                          reason=f"needs CUDA and {name}"))
             for name in ("nvfuser", "nvfuser_direct")]
RANDOM_OPS = {"uniform", "normal"}


def _check(fusion, inputs, frontend, opt):
    cuda = to_device(inputs, "cuda", fusion)
    original = to_nvfuser(fusion, frontend).execute(_fresh(cuda))
    optimized = opt.for_inputs(cuda)
    got = optimized.to_nvfuser(frontend).execute(_fresh(cuda))
    reference = eqsat.run_fusion(fusion, _fresh(cuda), seed=0)
    assert len(got) == len(original) == len(reference)
    random = any(n.op in RANDOM_OPS for n in fusion.nodes)
    for i, (g, o, r) in enumerate(zip(got, original, reference)):
        assert (g.shape, g.dtype) == (o.shape, o.dtype), f"output {i}"
        if not random:
            assert mismatch(g, o) is None, f"output {i} vs nvFuser as given: {mismatch(g, o)}"
            assert mismatch(g, r) is None, f"output {i} vs the torch executor: {mismatch(g, r)}"


@pytest.mark.parametrize("frontend", FRONTENDS)
@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seed_on_nvfuser(name, frontend):
    seed = SEEDS[name]
    fusion = eqsat.from_function(seed.model_ref)
    inputs = seed.make_inputs()
    opt = eqsat.optimize_fusion(fusion, inputs)
    _check(fusion, inputs, frontend, opt)
    got = opt.execute(to_device(inputs)) if frontend == "nvfuser" else None
    if got is not None:
        want = seed.torch_reference(*to_device(inputs))
        want = want if isinstance(want, list) else [want]
        for g, w in zip(got, want):
            assert mismatch(g, w) is None


@pytest.mark.parametrize("frontend", FRONTENDS)
@pytest.mark.parametrize("path", corpus_files(), ids=[p.name for p in corpus_files()])
def test_corpus_on_nvfuser(path, frontend):
    repro = eqsat.from_file(path)
    opt = eqsat.optimize_fusion(repro.fusion, repro.inputs)
    _check(repro.fusion, repro.inputs, frontend, opt)
