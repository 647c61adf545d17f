"""On a GPU with nvFuser, against nvFuser itself, for every file of both corpora
(../shared/corpus, ../shared/corpus_thunder; EQSAT_CORPUS and EQSAT_CORPUS_THUNDER elsewhere):

- the torch executor's outputs for the definition *as eqsat read it* equal nvFuser's outputs for
  the file's own definition function, run on a real FusionDefinition ("as given");
- eqsat's optimized fusion, lowered to the file's own frontend and to the other one where it
  is installed, equals that original on nvFuser too.

Tolerance by dtype (eqsat.compare.mismatch). Random ops with ``rng_seed``/``rng_offset`` are
compared by value (eqsat reproduces nvFuser's Philox numbers); without them nvFuser draws from
the CUDA generator, so only shapes and dtypes are compared. Outputs written into inputs
(``alias_input``) are compared through those inputs.
"""

import functools
import importlib

import pytest
import torch
from conftest import corpus_files, indexable_inputs, thunder_files
from helpers import returned_rtols

import eqsat
from eqsat.ir.fusion import FRONTENDS
from eqsat.lowering.nvfuser import as_given, to_nvfuser
from eqsat.reference.compare import mismatch
from eqsat.reference.devices import fresh_copies, to_device
from eqsat.reference.index_inputs import has_index_ops
from eqsat.testing.seeds import SEEDS

pytestmark = pytest.mark.gpu


@functools.cache
def _installed(name) -> bool:
    if not torch.cuda.is_available():
        return False
    try:
        importlib.import_module(name)
        return True
    except Exception:
        return False


def _skip_without_nvfuser():
    if not any(_installed(f) for f in FRONTENDS):
        pytest.skip("needs a CUDA device and nvFuser (nvfuser or nvfuser_direct)")


# one xdist group per file (pytest -n N --dist loadgroup): its tests share one as-given run
FILES = [
    pytest.param(p, id=p.name, marks=pytest.mark.xdist_group(p.name))
    for p in corpus_files() + thunder_files()
]


def _unseeded_random(fusion) -> bool:
    return any(n.op in ("uniform", "normal") and n.arg("rng_seed") is None for n in fusion.nodes)


def _run(fd_or_fusion, inputs):
    """Outputs, then the tensor inputs as the run left them (aliased outputs land there)."""
    inputs = fresh_copies(inputs)
    if isinstance(fd_or_fusion, eqsat.Fusion):
        outs = eqsat.run_fusion(fd_or_fusion, inputs, seed=0, strict=True)
    else:
        outs = fd_or_fusion.execute(inputs)
    return list(outs), [x for x in inputs if isinstance(x, torch.Tensor)]


def _agree(got, want, values: bool, what: str, fusion=None):
    """Shapes and dtypes equal; values (where ``values``) within the tolerance of the least
    precise dtype each output is computed through (``output_rtols``; nvFuser's FMAs round
    differently from torch)."""
    (gout, gin), (wout, win) = got, want
    assert len(gout) == len(wout), f"{what}: {len(gout)} outputs instead of {len(wout)}"
    assert len(gin) == len(win), f"{what}: {len(gin)} tensor inputs instead of {len(win)}"
    rtols = returned_rtols(fusion) if fusion is not None else [None] * len(wout)
    for kind, gs, ws, tols in (
        ("output", gout, wout, rtols),
        ("input after the run", gin, win, [None] * len(win)),
    ):
        for i, (g, w, rtol) in enumerate(zip(gs, ws, tols, strict=True)):
            assert (tuple(g.shape), g.dtype) == (tuple(w.shape), w.dtype), f"{what}: {kind} {i}"
            if values:
                problem = mismatch(g, w, rtol=rtol)
                assert problem is None, f"{what}: {kind} {i}: {problem}"


@functools.lru_cache(maxsize=4)  # the as-given run is shared by the tests of one file
def _case(path):
    """(repro, CUDA inputs, as-given results or the reason they are missing)."""
    # inputs drawn on the GPU (fast), except where an index op may need them checked on the
    # CPU first (an index out of range on the GPU is a device-side assert that ends the process)
    indexing = has_index_ops(eqsat.from_file(path, inputs=False).fusion)
    repro = eqsat.from_file(path, device=None if indexing else "cuda")
    cuda = to_device(indexable_inputs(repro), "cuda", repro.fusion)
    try:
        given = _run(as_given(repro), cuda)
    except Exception as err:  # the file's own definition does not run on this nvFuser
        given = f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"
    return repro, cuda, given


@pytest.mark.parametrize("path", FILES)
def test_as_read_equals_as_given(path):
    """eqsat's reading of the file, run by the torch executor, against nvFuser running the file."""
    _skip_without_nvfuser()
    repro, cuda, given = _case(path)
    if isinstance(given, str):
        pytest.skip(f"the file's own definition does not run on the nvFuser installed: {given}")
    reference = _run(repro.fusion, cuda)
    _agree(
        reference,
        given,
        not _unseeded_random(repro.fusion),
        "torch executor vs nvFuser as given",
        repro.fusion,
    )


@pytest.mark.parametrize("frontend", ["own", "other"])
@pytest.mark.parametrize("path", FILES)
def test_optimized_equals_as_given(path, frontend):
    """eqsat's optimized fusion on nvFuser against nvFuser running the file (where the file's
    own definition does not run on the nvFuser installed, against the torch executor)."""
    _skip_without_nvfuser()
    repro, cuda, given = _case(path)
    own = repro.frontend or next(f for f in FRONTENDS if _installed(f))
    target = own if frontend == "own" else next(f for f in FRONTENDS if f != own)
    if not _installed(target):
        pytest.skip(f"{target} is not installed")
    opt = eqsat.optimize_fusion(repro.fusion, cuda)
    got = _run(opt.to_nvfuser(target), cuda)
    want = given if not isinstance(given, str) else _run(repro.fusion, cuda)
    _agree(got, want, not _unseeded_random(repro.fusion), f"optimized on {target}", repro.fusion)


@pytest.mark.parametrize("frontend", FRONTENDS)
@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seed_on_nvfuser(name, frontend):
    if not _installed(frontend):
        pytest.skip(f"needs CUDA and {frontend}")
    seed = SEEDS[name]
    fusion = eqsat.from_function(seed.model_ref)
    inputs = to_device(seed.make_inputs())
    opt = eqsat.optimize_fusion(fusion, inputs)
    original = _run(to_nvfuser(fusion, frontend), inputs)
    _agree(_run(opt.to_nvfuser(frontend), inputs), original, True, "optimized vs as given")
    got = opt.execute(inputs, frontend=frontend)
    want = seed.torch_reference(*inputs)
    want = want if isinstance(want, list) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert mismatch(g, w) is None, mismatch(g, w)


def test_verify_on_gpu_times_the_seed_keeps_the_faster_and_caches_the_decision(tmp_path):
    """verify="gpu" on the device: seed 2 at its DESIGN.md shape (301 us as given, 119-128 us
    split by hand on the H200) is kept rewritten, every candidate agrees with the input, and a
    second call reads the decision from the cache instead of timing again."""
    _skip_without_nvfuser()
    seed = SEEDS["layernorm_amax"]
    inputs = to_device(seed.make_inputs(16384, 4096))
    opt = eqsat.optimize_fusion(seed.model_ref, inputs, verify="gpu", cache_dir=tmp_path)
    v = opt.report.verification
    assert v is not None and not v.cached, str(opt.report)
    assert not any(m.problem and not m.problem.startswith(("slower", "not more")) for m in v.measurements), (
        str(v)
    )
    assert all(m.measured_us > 0 for m in v.measurements), str(v)
    assert opt.report.changed and v.kept >= 0, str(opt.report)
    assert v.measurements[v.kept + 1].measured_us < 0.99 * v.measurements[0].measured_us
    got = opt.execute(inputs)
    want = seed.torch_reference(*inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert mismatch(g, w) is None, mismatch(g, w)
    again = eqsat.optimize_fusion(seed.model_ref, inputs, verify="gpu", cache_dir=tmp_path)
    assert again.report.verification.cached and again.fusion == opt.fusion, str(again.report)
