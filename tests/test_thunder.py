"""eqsat inside Lightning Thunder (``eqsat.thunder``).

Here, without Thunder or nvFuser: the options, the version check, the report, and the region
handling (``RegionHook``) driven by a stand-in for Thunder's ``FusionDefinitionWrapper`` whose
``get_fd`` returns a function of ``fd`` and whose call runs torch; eqsat's definition is run by
the torch executor instead of being compiled by nvFuser.

On a GPU with Thunder 0.2.6 and nvFuser 0.2.35 (marker ``gpu``; skipped elsewhere with the
reason): the transform on real Thunder (a region rewritten, the fallback), and a training step
of small Llama-, GPT-2- and BERT-like models (from ``transformers``, and in plain torch:
``eqsat.testing.thunder_models``) under Thunder + eqsat against eager PyTorch in float32 and against
Thunder alone (the comparison with eager is checked on CPU here). Run them with
``python3 -m pytest -m gpu tests/test_thunder.py -s`` (``-s`` shows the per-region reports).
"""

import copy
import json
import os
import re
import subprocess
import sys
import time
import warnings

import pytest
import torch

import eqsat
from eqsat.cost.profile import Profile
from eqsat.defaults import DEADLINE_S
from eqsat.egraph.saturate import Limits
from eqsat.ir.dtypes import DataType
from eqsat.reference.compare import mismatch
from eqsat.testing import seeds, thunder_models

try:
    import eqsat.thunder as et
except ImportError as err:  # Thunder installed but unusable here (its version, torch's): the reason
    pytest.skip(str(err), allow_module_level=True)
import eqsat.thunder.region as region_module
from eqsat.thunder import EqsatThunderWarning, Options, RegionHook, RegionRecord, ThunderReport
from eqsat.thunder.region import describe_inputs, no_regions, optimizer_inputs, region_ops, signature
from eqsat.thunder.versions import (
    TORCH_BELOW,
    TORCH_MIN,
    UnsupportedVersion,
    check_nvfuser,
    check_thunder,
    check_torch,
    release,
    unusable,
)
from helpers import load_bench
from thunder_stand_in import FakeThunderRegion

# seed 1 (DESIGN.md) at 1024^3: eqsat distributes the sum (one kernel of N*K*J multiply-adds ->
# two small ones), a 90% predicted saving, far beyond the cost model's error; at 64^3 it keeps it
BIG, SMALL = 1024, 64
REWRITE = "sum-of-product-factor-right"


class TorchDefinition:
    """What ``compile`` makes of eqsat's result here: its fusion run by the torch executor (a
    live nvFuser definition on the GPU)."""

    def __init__(self, optimized, thunder_fd):
        self.optimized, self.thunder_fd, self.calls = optimized, thunder_fd, []

    def execute(self, inputs, **kwargs):
        self.calls.append(kwargs)
        return eqsat.run_fusion(self.optimized.fusion, list(inputs))


class Compiler:
    """Records what it compiles (``made``); raises ``error`` where given."""

    def __init__(self, error=None, definition=TorchDefinition):
        self.error, self.definition, self.made = error, definition, []

    def __call__(self, optimized, thunder_fd):
        if self.error is not None:
            raise self.error
        self.made.append(self.definition(optimized, thunder_fd))
        return self.made[-1]


def seed_region():
    return FakeThunderRegion(
        seeds.reduction_broadcast_ref, lambda x, b: [seeds.reduction_broadcast_torch(x, b)]
    )


def hook_for(region, compiler=None, trace="forward", **options):
    report = ThunderReport()
    hook = RegionHook(
        region,
        name=region.name.split(":")[0],
        trace=trace,
        options=Options(**options),
        report=report,
        compile=compiler or Compiler(),
    )
    return hook, report


def meta(*shape):
    return torch.empty(*shape, device="meta")


# ---------------------------------------------------------------------------------------------
# the region: rewritten, unchanged, per shape, and the fallback


def test_a_rewritten_region_runs_eqsats_definition():
    region, compiler = seed_region(), Compiler()
    hook, report = hook_for(region, compiler)
    args = (meta(BIG, BIG), meta(BIG, BIG))
    (out,) = hook(*args)
    assert (out.shape, out.dtype) == ((BIG, BIG), torch.float32)
    assert region.calls == 0, "Thunder's own definition ran, not eqsat's"
    (made,) = compiler.made
    assert made.calls == [{"device": None, "_enable_options": ["fake_enable"], "_disable_options": []}]
    assert hook.last_used is made and all(a is b for a, b in zip(region.last_inputs, args, strict=True))
    (record,) = report.regions
    assert (record.region, record.trace, record.ops) == ("nvFusion0", "forward", "broadcast_in_dim, mul, sum")
    assert record.changed and record.status == "rewritten" and REWRITE in record.rules
    assert record.predicted_after_us < 0.5 * record.predicted_before_us
    assert record.kernels_before == 1 and record.kernels_after == 2
    assert record.measured_before_us is None and record.measured_gain is None and record.error is None
    assert record.inputs == f"float32[{BIG}, {BIG}], float32[{BIG}, {BIG}]"
    assert report.rewritten() == [record] and report.fallbacks() == []

    hook(*args)  # the same signature: nothing new
    assert len(report.regions) == 1 and len(region.descriptors) == 1 and len(made.calls) == 2
    # what ran is eqsat's rewrite of the region: sum over k of x, times b, as torch computes it
    x, b = seeds.reduction_broadcast_inputs(SMALL, SMALL, SMALL)
    (got,) = made.execute([x, b])
    assert mismatch(got, seeds.reduction_broadcast_torch(x, b)) is None


def test_an_unchanged_region_runs_thunders_own_definition():
    region = seed_region()
    nothing = Compiler(error=AssertionError("nothing is compiled where eqsat keeps the input"))
    hook, report = hook_for(region, nothing)
    x, b = seeds.reduction_broadcast_inputs(SMALL, SMALL, SMALL)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (out,) = hook(x, b)
    assert region.calls == 1 and hook.last_used is region.definition
    assert mismatch(out, seeds.reduction_broadcast_torch(x, b)) is None
    (record,) = report.regions
    assert not record.changed and record.status == "unchanged" and record.rules == ()
    assert record.predicted_after_us == record.predicted_before_us and record.predicted_gain == 0
    assert report.rewritten() == []


def test_each_new_input_signature_is_optimized_once(monkeypatch):
    """A symbolic definition called at two shapes with the same stride orders (one Thunder
    definition): optimized once (``eqsat.pipeline.driver.optimize``), then for the new shape
    through eqsat's per-shape cache (OptimizedFusion.for_inputs); a record per signature."""
    calls = []
    real = region_module.optimize
    monkeypatch.setattr(region_module, "optimize", lambda *a, **k: calls.append(a) or real(*a, **k))
    region = seed_region()
    hook, report = hook_for(region)
    for shape in [(BIG, BIG), (BIG, BIG), (SMALL, SMALL), (BIG, BIG)]:
        hook(meta(*shape), meta(*shape))
    assert len(calls) == 1
    assert [r.changed for r in report.regions] == [True, False]
    assert [r.inputs.split(",")[0] for r in report.regions] == [f"float32[{BIG}", f"float32[{SMALL}"]
    assert region.calls == 1  # the small shape, as Thunder built it


def test_a_region_eqsat_cannot_read_runs_as_thunder_built_it_with_a_warning():
    x, b = seeds.reduction_broadcast_inputs(SMALL, SMALL, SMALL)
    region = FakeThunderRegion(object(), lambda x, b: [x + b], name="nvFusion7: (add)")
    hook, report = hook_for(region, trace="backward")
    warning = r"backward region nvFusion7 runs as Thunder built it.*FusionError"
    with pytest.warns(EqsatThunderWarning, match=warning):
        (out,) = hook(x, b)
    assert torch.equal(out, x + b) and region.calls == 1
    (record,) = report.regions
    assert record.status == "fell back" and record.error.startswith("FusionError: cannot ingest")
    assert report.fallbacks() == [record] and not record.changed
    with warnings.catch_warnings():  # warned once per region and signature
        warnings.simplefilter("error")
        hook(x, b)
    assert region.calls == 2 and len(report.regions) == 1


def test_a_definition_that_fails_to_compile_falls_back():
    region = seed_region()
    hook, report = hook_for(region, Compiler(error=RuntimeError("nvFuser: cannot schedule")))
    with pytest.warns(
        EqsatThunderWarning, match=r"region nvFusion0 .*RuntimeError: nvFuser: cannot schedule"
    ):
        hook(meta(BIG, BIG), meta(BIG, BIG))
    (record,) = report.regions
    assert region.calls == 1 and not record.changed and record.rules == ()
    assert record.predicted_after_us == record.predicted_before_us and "cannot schedule" in record.error


def test_a_definition_that_fails_when_run_falls_back_for_good():
    class Broken(TorchDefinition):
        def execute(self, inputs, **kwargs):
            self.calls.append(kwargs)
            raise RuntimeError("CUDA error: an illegal memory access")

    region, compiler = seed_region(), Compiler(definition=Broken)
    hook, report = hook_for(region, compiler)
    args = (meta(BIG, BIG), meta(BIG, BIG))
    with pytest.warns(EqsatThunderWarning, match="illegal memory access"):
        (out,) = hook(*args)
    assert out.shape == (BIG, BIG) and region.calls == 1
    (record,) = report.regions
    assert record.status == "fell back" and not record.changed and report.rewritten() == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hook(*args)
    assert region.calls == 2 and len(compiler.made[0].calls) == 1 and hook.last_used is region.definition


def test_calls_with_other_arguments_are_left_to_thunder():
    class Sub(torch.Tensor):
        pass

    region = seed_region()
    hook, report = hook_for(region)
    x = torch.randn(4, 4).as_subclass(Sub)
    assert signature((x, 1.0)) is None
    hook(x, torch.randn(4, 4))
    assert region.calls == 1 and report.regions == [] and region.descriptors == []


def test_the_hook_passes_the_wrappers_other_attributes_through():
    region = seed_region()
    region.cache_info = lambda: "thunder's lru_cache"
    hook, _ = hook_for(region)
    assert hook.cache_info() == "thunder's lru_cache" and hook.get_fd == region.get_fd
    assert repr(hook) == "RegionHook(forward nvFusion0)"
    with pytest.raises(AttributeError):
        hook.no_such_attribute


class FakeRunner:
    """GPU verification's device (eqsat.verification.Runner), faked: the torch executor runs
    the fusions, ``times`` are their steady-state times (the input's first)."""

    device, versions = "Fake H200", {"nvfuser": "0.0.fake"}

    def __init__(self, times):
        self.times, self.seen, self.prepared = list(times), [], []

    def prepare(self, fusion, inputs):
        self.prepared.append(list(inputs))
        return list(inputs)

    def run(self, fusion, inputs):
        return eqsat.run_fusion(fusion, inputs)

    def steady_us(self, fusion, inputs):
        if fusion not in self.seen:
            self.seen.append(fusion)
        return self.times[self.seen.index(fusion)]


def test_verify_gpu_reports_the_measured_times(tmp_path):
    seed = seeds.SEEDS["layernorm_amax"]
    region = FakeThunderRegion(seed.model_ref, seed.torch_reference, name="nvFusion2: (var_mean, amax)")
    runner = FakeRunner([100.0, 80.0, 60.0, 90.0])
    hook, report = hook_for(region, verify="gpu", runner=runner, cache_dir=tmp_path, deadline_s=None)
    args = seed.make_inputs(2048, 1024)
    hook(*args)
    (record,) = report.regions
    assert record.changed and region.calls == 0
    assert record.measured_before_us == 100.0 and record.measured_after_us == 60.0
    assert record.measured_gain == pytest.approx(0.4)
    assert "100.0 -> 60.0 us measured (-40.0%)" in str(record)


def test_verification_runs_on_copies_where_the_region_writes_into_its_inputs():
    def accumulate(fd):
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        acc = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.add(acc, x), alias_input=acc)

    fusion = eqsat.from_function(accumulate)
    args = (torch.ones(4), torch.zeros(4))
    copied = optimizer_inputs(fusion, args, Options(verify="gpu"))
    assert all(c is not a and torch.equal(c, a) for c, a in zip(copied, args))
    assert all(c is a for c, a in zip(optimizer_inputs(fusion, args, Options()), args))
    plain = eqsat.from_function(seeds.reduction_broadcast_ref)
    assert all(c is a for c, a in zip(optimizer_inputs(plain, args, Options(verify="gpu")), args))


def test_region_names_and_inputs_read_as_thunder_prints_them():
    assert region_ops("nvFusion3: (add, mul, sum)") == "add, mul, sum"
    assert region_ops("nvFusion3") == ""
    described = describe_inputs([torch.zeros(2, 3, dtype=torch.bfloat16), 1.5, None])
    assert described == "bfloat16[2, 3], float, NoneType"


# ---------------------------------------------------------------------------------------------
# the report


def test_the_report_lists_each_region_with_its_gains():
    report = ThunderReport()
    rewritten = RegionRecord(
        "nvFusion0",
        "forward",
        "mul, sum",
        "float32[8, 8]",
        True,
        ("r1",),
        1,
        2,
        200.0,
        50.0,
        210.0,
        70.0,
        0.1,
    )
    unchanged = RegionRecord("nvFusion1", "forward", "add", "float32[8]", False, (), 1, 1, 30.0, 30.0)
    failed = RegionRecord("nvFusion0", "backward", "neg", "float32[8]")
    failed.fell_back(ValueError("no\nsecond line"))
    for r in (rewritten, unchanged, failed):
        report.add(r)
    assert rewritten.predicted_gain == pytest.approx(0.75) and rewritten.measured_gain == pytest.approx(2 / 3)
    assert unchanged.predicted_gain == 0 and unchanged.measured_gain is None and failed.predicted_gain is None
    assert failed.error == "ValueError: no"
    text = str(report)
    assert text.splitlines()[0] == (
        "eqsat over Thunder: 3 regions (2 forward, 1 backward), 1 rewritten, 1 fell back"
    )
    assert (
        "nvFusion0    rewritten  1 -> 2 kernels  200.0 -> 50.0 us predicted (-75.0%)  "
        "210.0 -> 70.0 us measured (-66.7%)  rules: r1" in text
    )
    assert "nvFusion1    unchanged  1 kernels  30.0 us predicted" in text
    assert "backward nvFusion0    fell back  ValueError: no" in text
    summary = json.loads(json.dumps(report.summary()))
    assert (summary["regions"], summary["rewritten"], summary["fell_back"]) == (3, 1, 1)
    assert summary["records"][0]["status"] == "rewritten" and summary["records"][0]["rules"] == ["r1"]
    report.clear()
    assert report.regions == [] and str(report).startswith("eqsat over Thunder: 0 regions, ")


def test_without_nvfuser_regions_the_report_says_so_and_warns_once():
    report = ThunderReport()
    with pytest.warns(
        EqsatThunderWarning,
        match=r"Thunder made no nvFuser regions \(no CUDA device\), so "
        r"eqsat has nothing to optimize",
    ) as caught:
        for _ in range(3):  # the forward trace, the backward trace, a new input shape
            no_regions(report, "no CUDA device")
    assert len(caught) == 1
    assert str(report).splitlines() == [
        "eqsat over Thunder: 0 regions, 0 rewritten, 0 fell back",
        "  note: Thunder made no nvFuser regions (no CUDA device), so eqsat has nothing to optimize",
    ]
    assert report.summary()["notes"] == report.notes and len(report.notes) == 1


# ---------------------------------------------------------------------------------------------
# options and versions


def test_the_options_are_eqsat_options_passed_to_each_region(tmp_path):
    runner = FakeRunner([1.0])
    o = Options(
        verify="gpu",
        min_gain=0.1,
        deadline_s=None,
        rules=["mul-commutes", REWRITE],
        reassociate=True,
        relower=True,
        limits=Limits(iterations=3),
        cache_dir=tmp_path,
        runner=runner,
        profile="h200_host_fit",
    )
    assert isinstance(o, eqsat.Options)
    assert o.rules == ("mul-commutes", REWRITE) and o.verify == "gpu" and o.runner is runner
    assert isinstance(o.loaded_profile, Profile) and o.limits.iterations == 3 and o.cache_dir == tmp_path
    assert Options().deadline_s == DEADLINE_S
    opt = region_module.optimize(seeds.reduction_broadcast_ref, [meta(BIG, BIG)] * 2, Options())
    assert opt.report.changed and opt.options == Options()


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"verify": "cpu"}, ValueError, "verify must be None .* or 'gpu'"),
        ({"verify": True}, ValueError, "verify must be"),
        ({"min_gain": 1.5}, ValueError, "min_gain must be a fraction"),
        ({"min_gain": True}, ValueError, "min_gain"),
        ({"deadline_s": -1}, ValueError, "deadline_s"),
        ({"deadline_s": "2"}, ValueError, "deadline_s"),
        ({"rules": ["no-such-rule"]}, ValueError, r"unknown rules \['no-such-rule'\]"),
        ({"rules": REWRITE}, TypeError, "collection of rule names"),
        ({"rules": []}, ValueError, "rules is empty"),
        ({"reassociate": "no"}, TypeError, "reassociate must be True or False"),
        ({"limits": {"iterations": 3}}, TypeError, "limits must be"),
        ({"profile": "/no/such/profile.json"}, ValueError, "profile '/no/such/profile.json' cannot be used"),
        ({"profile": {"kinds": {}}}, ValueError, "not a cost-model profile"),
        ({"cache_dir": "/tmp/x"}, ValueError, "cache_dir applies to verify='gpu' only"),
        ({"verify": "gpu", "runner": object()}, TypeError, "runner must be .* lacks device"),
        ({"verify": "gpu", "cache_dir": 3}, TypeError, "cache_dir must be a path"),
        ({"verfy": "gpu"}, TypeError, "verfy"),
    ],
)
def test_bad_options_are_clear_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        Options(**kwargs)


@pytest.mark.parametrize(
    "version, ok",
    [
        ("0.2.6", True),
        ("0.2.6.post1", True),
        ("0.2.6+cu130", True),
        ("v0.2.6", True),
        ("0.2.5", False),
        ("0.2.7", False),
        ("0.3.0", False),
        ("0.2.6.dev20250801", False),
        ("0.2.6rc1", False),
        ("0.2.6.1", False),
        ("nightly", False),
    ],
)
def test_the_thunder_version_check(version, ok):
    if ok:
        check_thunder(version)
    else:
        with pytest.raises(UnsupportedVersion, match=rf"supports Lightning Thunder 0\.2\.6, found {version}"):
            check_thunder(version)


def test_missing_thunder_is_an_import_error_naming_the_versions():
    with pytest.raises(
        ImportError,
        match=r"needs Lightning Thunder 0\.2\.6.*pip install 'eqsat\[thunder\]'"
        r".*nvFuser <= 0\.2\.35",
    ):
        check_thunder(None)


@pytest.mark.parametrize(
    "version, ok",
    [
        (None, True),
        ("0.2.35", True),
        ("0.2.35.dev20260215", True),
        ("0.2.35+git09559b6", True),
        ("0.2.34", True),
        ("0.2.8", True),
        ("0.2.36", False),
        ("0.2.36.dev20260301", False),
        ("0.3", False),
        ("1.0.0", False),
        ("unknown", False),
    ],
)
def test_the_nvfuser_version_check(version, ok):
    if ok:
        check_nvfuser(version)
    else:
        with pytest.raises(UnsupportedVersion, match=r"needs nvFuser <= 0\.2\.35"):
            check_nvfuser(version)


def test_versions_are_read_by_their_release():
    assert release("0.2.35.dev20260215") == ((0, 2, 35), True)
    assert release("0.2.6") == ((0, 2, 6), False) and release("0.2.6.post2") == ((0, 2, 6), False)
    with pytest.raises(ValueError):
        release("dev")


@pytest.mark.parametrize(
    "version, ok",
    [
        ("2.7.1", True),
        ("2.11.0", True),
        ("2.12.1+cu130", True),
        ("2.12.0a0+git1234", True),
        ("2.7.0", False),
        ("2.6.0+cpu", False),
        ("2.13.0", False),
        ("2.13.0+cpu", False),
        ("2.13.0.dev20260601", False),
        ("2.14.1", False),
        ("unknown", False),
    ],
)
def test_the_torch_version_check(version, ok):
    """Thunder 0.2.6 imports with torch >= 2.7.1 (its requirement) and < 2.13 (named tensors,
    which it reads when imported, are gone from 2.13)."""
    if ok:
        check_torch(version)
    else:
        with pytest.raises(UnsupportedVersion, match=r"needs torch >= 2\.7\.1 and < 2\.13"):
            check_torch(version)
    if version.startswith("2.13"):
        with pytest.raises(UnsupportedVersion, match=r"torch 2\.13 removed named tensors.*align_as"):
            check_torch(version)


def test_the_thunder_extra_installs_a_torch_thunder_imports_with():
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(os.path.dirname(__file__), "..", "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert sorted(extras["thunder"]) == sorted(
        [f"lightning-thunder=={et.SUPPORTED_THUNDER[-1]}", f"torch>={TORCH_MIN},<{TORCH_BELOW}"]
    )


def test_an_unusable_thunder_is_an_import_error_naming_the_versions():
    err = unusable(AttributeError("type object 'Tensor' has no attribute 'align_as'\nmore"), "2.12.1+cu130")
    assert isinstance(err, ImportError)
    text = str(err)
    assert (
        "importing Lightning Thunder raised AttributeError: type object 'Tensor' has no attribute "
        "'align_as'. Found Lightning Thunder "
        in text
        and "more" not in text
    )
    assert re.search(
        r"torch 2\.12\.1\+cu130, nvFuser \S.*; eqsat\.thunder needs Lightning Thunder 0\.2\.6, "
        r"torch >= 2\.7\.1 and < 2\.13, and for nvFuser regions CUDA with nvFuser <= 0\.2\.35 "
        r"\(pip install 'eqsat\[thunder\]'",
        text,
    )
    assert str(unusable(UnsupportedVersion("found torch 2.13.0"), "2.13.0")).startswith(
        "eqsat.thunder cannot use Lightning Thunder here: found torch 2.13.0. Found "
    )


BROKEN_THUNDER = """
import pathlib
pathlib.Path(__file__).with_name("imported").touch()
raise AttributeError("type object 'Tensor' has no attribute 'align_as'")
"""


def test_importing_eqsat_thunder_over_a_broken_thunder_raises_the_import_error(tmp_path):
    """A ``thunder`` whose import raises AttributeError (as Thunder 0.2.6's does with torch
    2.13): ``import eqsat.thunder`` raises the ImportError naming the versions, whatever torch
    is here (torch's version is set in the child: 2.13 is refused before Thunder is imported,
    2.12 lets Thunder's own error through)."""
    (tmp_path / "thunder").mkdir()
    (tmp_path / "thunder" / "__init__.py").write_text(BROKEN_THUNDER)
    code = """if True:
        import pathlib, sys, torch
        marker = pathlib.Path(sys.argv[1]) / "thunder" / "imported"
        for version in ("2.13.0+cpu", "2.12.1+cu130"):
            torch.__version__ = version
            try:
                import eqsat.thunder
            except ImportError as err:
                print(type(err).__name__, marker.exists(), err)
            else:
                print("imported")
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env, check=True
    ).stdout.splitlines()
    assert len(out) == 2, out
    assert (
        out[0].startswith(
            "UnsupportedVersion False eqsat.thunder cannot use Lightning Thunder here: "
            "Lightning Thunder 0.2.6 needs torch >= 2.7.1 and < 2.13 (torch 2.13 removed "
            "named tensors"
        )
        and "Found Lightning Thunder " in out[0]
    )
    assert out[1].startswith(
        "UnsupportedVersion True eqsat.thunder cannot use Lightning Thunder here: "
        "importing Lightning Thunder raised AttributeError: type object 'Tensor' has no "
        "attribute 'align_as'. Found Lightning Thunder "
    )
    assert "torch 2.12.1+cu130, nvFuser " in out[1] and "needs Lightning Thunder 0.2.6" in out[1]


def test_this_module_skips_with_the_reason_where_thunder_does_not_import(tmp_path):
    """Thunder installed but unusable: the tests here are skipped with the ImportError's text,
    not broken at collection."""
    (tmp_path / "thunder").mkdir()
    (tmp_path / "thunder" / "__init__.py").write_text(BROKEN_THUNDER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", __file__],
        capture_output=True,
        text=True,
        env=env,
        cwd=os.path.dirname(__file__),
    )
    assert run.returncode in (0, 5), run.stdout + run.stderr  # 5: pytest collected no test to run
    assert "1 skipped" in run.stdout and "eqsat.thunder cannot use Lightning Thunder here" in run.stdout
    assert "needs Lightning Thunder 0.2.6, torch >= 2.7.1 and < 2.13" in run.stdout


def test_without_thunder_optimize_is_an_import_error():
    if et.thunder_installed():
        pytest.skip("Thunder is installed here: eqsat.thunder.Optimize is its transform")
    with pytest.raises(ImportError, match=r"Lightning Thunder 0\.2\.6"):
        et.Optimize
    with pytest.raises(ImportError, match=r"Lightning Thunder 0\.2\.6"):
        et.executors
    with pytest.raises(AttributeError):
        et.no_such_name


def test_import_eqsat_imports_neither_eqsat_thunder_nor_thunder():
    code = (
        "import sys, eqsat; assert not {'eqsat.thunder', 'thunder'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------------------------------------
# on a GPU, with Thunder 0.2.6 and nvFuser 0.2.35


def _thunder():
    """Thunder and eqsat's transform, or a skip saying what is missing."""
    thunder = pytest.importorskip(
        "thunder", reason="needs Lightning Thunder 0.2.6 (pip install 'eqsat[thunder]')"
    )
    if not et.thunder_installed() or not hasattr(et, "Optimize"):
        pytest.skip("eqsat.thunder did not import Thunder")
    return thunder


def _cuda_thunder():
    thunder = _thunder()
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from thunder.executors.nvfuserex import nvfuserex  # Thunder's nvFuser executor, None without nvFuser

    if nvfuserex is None:
        pytest.skip("Thunder found no nvFuser (nvFuser <= 0.2.35 with CUDA)")
    return thunder


def test_without_nvfuser_the_transform_says_thunder_made_no_regions():
    """Thunder without CUDA or nvFuser (a CPU machine): no region reaches eqsat; the transform
    warns once, and its report says why."""
    thunder = _thunder()
    from thunder.executors.nvfuserex import nvfuserex  # Thunder's nvFuser executor, None without nvFuser

    if nvfuserex is not None:
        pytest.skip("Thunder has its nvFuser executor here: it makes nvFuser regions")
    opt = et.Optimize()
    jf = thunder.jit(seeds.reduction_broadcast_torch, transforms=[opt])
    with pytest.warns(
        EqsatThunderWarning,
        match=r"Thunder made no nvFuser regions \(.*\), so eqsat has "
        r"nothing to optimize",
    ) as caught:
        for n in (8, 8, 6):
            x, b = seeds.reduction_broadcast_inputs(n, n, n)
            assert mismatch(jf(x, b), seeds.reduction_broadcast_torch(x, b)) is None
    assert sum(issubclass(w.category, EqsatThunderWarning) for w in caught) == 1
    why = "no CUDA device here" if not torch.cuda.is_available() else "Thunder found no nvFuser it can use"
    assert opt.report.regions == [] and f"note: Thunder made no nvFuser regions ({why}" in str(opt.report)


@pytest.mark.gpu
@pytest.mark.parametrize("verify", [None, "gpu"])
def test_thunder_runs_the_seed_as_eqsat_rewrote_it(verify, tmp_path):
    """``sum_k(x[:, :, None] * b[:, None, :])`` under thunder.jit: one nvFuser region, which
    eqsat distributes (under verify="gpu", where the H200 runs it faster: measured)."""
    thunder = _cuda_thunder()
    options = {"verify": "gpu", "cache_dir": tmp_path} if verify else {}
    opt = et.Optimize(**options)
    jf = thunder.jit(seeds.reduction_broadcast_torch, transforms=[opt])
    x, b = seeds.reduction_broadcast_inputs(BIG, BIG, BIG, device="cuda")
    got = jf(x, b)
    print(f"\n{opt.report}")
    assert mismatch(got, seeds.reduction_broadcast_torch(x, b), rtol=1e-3) is None
    assert not opt.report.fallbacks(), str(opt.report)
    (record,) = opt.report.rewritten()
    assert REWRITE in record.rules
    if verify:
        assert record.measured_before_us > record.measured_after_us


@pytest.mark.gpu
def test_the_transform_hooks_a_fusion_executors_regions(monkeypatch):
    """The plumbing on real Thunder, without nvFuser: a stand-in fusion executor puts each
    region behind a ``FakeThunderRegion``-like wrapper, which the transform (told that it is
    Thunder's nvFuser executor) hooks, forward and backward. The seed's forward region (at
    1024^3) is rewritten and runs as eqsat's definition through the torch executor; the backward region's
    definition (deliberately the wrong one) makes eqsat fail: it runs as Thunder built it,
    with a warning naming it; the gradients are Thunder's."""
    thunder = _thunder()
    from thunder.core import utils
    from thunder.core.prims import PrimIDs
    from thunder.core.proxies import TensorProxy, unvariableify
    from thunder.core.trace import from_trace
    from thunder.executors.data_dependent_partition import fuse_bound_symbols
    from thunder.executors.torch_compile import make_compiled
    from thunder.executors.utils import Region
    from thunder.extend import FusionExecutor

    import eqsat.thunder.transform as transform_module  # imports Thunder: here, past the skip

    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: fn)  # make_compiled without inductor
    skip = {PrimIDs.RETURN, PrimIDs.UNPACK_TRIVIAL, PrimIDs.UNPACK_SEQUENCE, PrimIDs.DEL, PrimIDs.COMMENT}

    class Wrapper(FakeThunderRegion):
        def __init__(self, name, region, inputs, outputs):
            fn = make_compiled(list(region.bound_symbols), inputs, outputs)
            super().__init__(seeds.reduction_broadcast_ref, fn, name)

    class StandIn(FusionExecutor):
        def __init__(self):
            super().__init__("eqsat_test_fusion")

        def can_fuse(self, bsym):
            return (
                bsym.sym.id not in skip
                and "grad" not in bsym.sym.name
                and any(isinstance(o, TensorProxy) for o in bsym.flat_proxy_outs)
            )

        can_execute = can_fuse

        def fuse(self, region, counter):
            ins, outs = [unvariableify(x) for x in region.inputs], [unvariableify(x) for x in region.outputs]
            name = f"nvFusion{counter}"
            ops = ", ".join(b.sym.name for b in region.bound_symbols)
            return self.register_temporary_operation(
                name,
                Wrapper(f"{name}: ({ops})", region, ins, outs),
                inputs=ins,
                outputs=outs,
                bsyms=list(region.bound_symbols),
            )

        def fusion_pass(self, trace):
            fused = from_trace(trace)
            producers, consumers = utils.producers_and_consumers(trace)
            groups = fuse_bound_symbols(
                trace, lambda a, b: all(map(self.can_fuse, a.group_bsyms + b.group_bsyms))
            )
            fused.bound_symbols = []
            for bsyms in groups:
                if all(map(self.can_fuse, bsyms)):
                    region = Region(producers, consumers, bsyms)
                    fused.bound_symbols.append(self.fuse(region, len(fused.bound_symbols)))
                else:
                    fused.bound_symbols.extend(bsyms)
            return fused

    stand_in = StandIn()
    monkeypatch.setattr(transform_module, "nvfuserex", stand_in)
    monkeypatch.setattr(region_module, "compile_nvfuser", Compiler())
    executors = [stand_in, *thunder.get_default_executors()]
    x, b = seeds.reduction_broadcast_inputs(BIG, BIG, BIG)  # rewritten; Thunder's path would take 4 GB

    opt = et.Optimize()
    jf = thunder.jit(seeds.reduction_broadcast_torch, executors=executors, transforms=[opt])
    assert mismatch(jf(x, b), x.sum(1, keepdim=True) * b, rtol=1e-3) is None
    (record,) = opt.report.regions
    assert record.changed and record.trace == "forward" and REWRITE in record.rules, str(opt.report)
    assert any("eqsat.thunder.Optimize" in str(t.get_provenance()) for t in thunder.last_traces(jf))

    opt = et.Optimize()
    jg = thunder.jit(
        lambda x, b: seeds.reduction_broadcast_torch(x, b).sum(), executors=executors, transforms=[opt]
    )
    x, b = seeds.reduction_broadcast_inputs(SMALL, SMALL, SMALL)
    xg, xt = x.clone().requires_grad_(), x.clone().requires_grad_()
    with pytest.warns(EqsatThunderWarning, match=r"backward region nvFusion\d+ runs as Thunder built it"):
        jg(xg, b).backward()
    seeds.reduction_broadcast_torch(xt, b).sum().backward()
    assert mismatch(xg.grad, xt.grad) is None
    print(f"\n{opt.report}")
    assert {r.trace for r in opt.report.regions} == {"forward", "backward"}
    assert [r.trace for r in opt.report.fallbacks()] == ["backward"]


# small configurations of models from transformers (random weights, no dropout: a training step
# is deterministic), and their likes in plain torch (eqsat/testing/thunder_models.py), which Thunder 0.2.6
# traces whatever version of transformers is installed. One layer: a second adds regions of the
# same ops at the same shapes (and eqsat's time on each), nothing new to check
BATCH, SEQ, VOCAB, LAYERS = 2, 64, 512, 1
HF_MODELS = {
    "llama": (
        "LlamaConfig",
        "LlamaForCausalLM",
        dict(
            hidden_size=256,
            intermediate_size=512,
            num_hidden_layers=LAYERS,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=VOCAB,
            max_position_embeddings=SEQ,
        ),
    ),
    "gpt2": (
        "GPT2Config",
        "GPT2LMHeadModel",
        dict(
            n_embd=256,
            n_layer=LAYERS,
            n_head=4,
            vocab_size=VOCAB,
            n_positions=SEQ,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
        ),
    ),
    "bert": (
        "BertConfig",
        "BertForMaskedLM",
        dict(
            hidden_size=256,
            intermediate_size=512,
            num_hidden_layers=LAYERS,
            num_attention_heads=4,
            vocab_size=VOCAB,
            max_position_embeddings=SEQ,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        ),
    ),
}
TORCH_MODELS = {
    "llama-like": lambda: thunder_models.LlamaLike(VOCAB, layers=LAYERS),
    "gpt2-like": lambda: thunder_models.GPT2Like(VOCAB, SEQ, layers=LAYERS),
    "bert-like": lambda: thunder_models.BertLike(VOCAB, SEQ, layers=LAYERS),
}

# A run's loss and gradients against eager PyTorch's: the same step in float32 from the same
# weights (the bf16 ones, widened exactly) and token ids. A gradient deviates where
#   |g - e| > GRAD_RTOL * |e| + GRAD_FLOOR * rms * sqrt(numel)
# (|.|: the L2 norm over the tensor; e: eager's gradient; rms: the root mean square of every
# element of every eager gradient of the model). The first term is bf16's error relative to the
# tensor itself: bf16 runs (eager, and Thunder on CPU) are within 2% of float32 on these models
# (1.9% for the worst tensor over 3 seeds), so 5% is 2.5x that. The floor is 1% of what a tensor of
# that size would weigh at the model's typical gradient element, for tensors whose true gradient
# nearly cancels (the query biases: 3-4% of that), where bf16's error is relative to the
# gradients summed, not to their sum. A gradient that is garbage or zero is off by 100% of
# |e|, far beyond either. Measured on CPU (6 seeds, 1 and 2 layers, eager bf16 and Thunder's
# torch executor against eager float32): the worst error is 27% of what is allowed, and every
# tensor's |e| is at least twice it (the BERT-like's query bias), so a zeroed one is caught.
# (Relative to the largest value of the reference alone, as ``mismatch`` is, a reference that
# is wrongly ~0 fails any run and blames it: what Thunder alone did on the H200.)
GRAD_RTOL, GRAD_FLOOR, LOSS_RTOL = 0.05, 0.01, 1e-2


def _model(name, device="cuda"):
    """(the model on ``device`` in bf16, its loss as a function of the model)."""
    torch.manual_seed(0)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), device=device)
    if name in TORCH_MODELS:
        return TORCH_MODELS[name]().to(device, torch.bfloat16), lambda m: m(ids)
    transformers = pytest.importorskip(
        "transformers", reason="needs transformers for its Llama, GPT-2 and BERT"
    )
    config_cls, model_cls, kwargs = HF_MODELS[name]
    config = getattr(transformers, config_cls)(**kwargs)
    config._attn_implementation = "sdpa"
    model = getattr(transformers, model_cls)(config).to(device, torch.bfloat16)
    return model, lambda m: m(input_ids=ids, labels=ids).loss


def _grads(model) -> dict:
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def _eager_step(model, loss_fn):
    """(loss, {parameter: grad}) of one step of a float32 copy of ``model`` in eager PyTorch:
    the reference both Thunder runs are held to. ``model`` itself is left untouched."""
    wide = copy.deepcopy(model).float()
    loss = loss_fn(wide)
    loss.backward()
    return loss.detach(), _grads(wide)


def _training_step(thunder, model, loss_fn, transforms, how, save_as=None):
    """(loss, {parameter: grad}) of one step of ``model`` compiled by Thunder, ``how``:
    "jit" (thunder.jit) or "dynamo" (torch.compile with Thunder as its backend). Under jit,
    where $EQSAT_THUNDER_TRACES names a folder, Thunder's final forward and backward traces
    (the regions, and which one gives each gradient) go there as ``save_as``-forward.py and
    ``save_as``-backward.py."""
    if how == "jit":
        compiled = thunder.jit(model, transforms=transforms)
    else:
        from thunder.dynamo import ThunderCompiler  # only on this path, as thunder_capture.py uses it

        torch._dynamo.reset()
        compiled = torch.compile(model, backend=ThunderCompiler(transforms=transforms))
    loss = loss_fn(compiled)
    loss.backward()
    if loss.is_cuda:
        torch.cuda.synchronize()
    folder = os.environ.get("EQSAT_THUNDER_TRACES")
    if folder and save_as and how == "jit":
        os.makedirs(folder, exist_ok=True)
        for kind, traces in (("forward", thunder.last_traces), ("backward", thunder.last_backward_traces)):
            with open(os.path.join(folder, f"{save_as}-{kind}.py"), "w") as f:
                f.write(str(traces(compiled)[-1]))
    return loss.detach(), _grads(model)


def _arange_bytes(t: torch.Tensor) -> str:
    """Where the bytes of ``t`` begin with ``torch.arange(n)`` as int64 (n >= 8), a note
    saying so: a buffer that held such a tensor (the models' positions) and was never written
    as this one. Thunder alone on the H200 gave blocks.0.proj.bias of the GPT-2-like a gradient
    whose largest value was 5.79e-39, the bf16 of the bits 0x003F = 63: torch.arange(64)'s
    bytes read as bf16[256]."""
    raw = t.detach().contiguous().reshape(-1).view(torch.uint8)
    n = raw.numel() // 8
    if n < 8:
        return ""
    ints = raw[: 8 * n].view(torch.int64).cpu()
    prefix = int((ints == torch.arange(n)).long().cumprod(0).sum())
    return f"; its first {8 * prefix} bytes are torch.arange({prefix}) as int64" if prefix >= 8 else ""


def _off_eager(loss, grads: dict, eager_loss, eager_grads: dict) -> dict[str, str]:
    """Where a run's loss and gradients deviate from eager PyTorch's (GRAD_RTOL, GRAD_FLOOR,
    LOSS_RTOL above): {"loss" or parameter: why}; empty where they all agree."""
    off = {}
    got, want = float(loss), float(eager_loss)
    if not abs(got - want) <= LOSS_RTOL * abs(want):
        off["loss"] = f"{got:.6f}, eager {want:.6f}"
    rms = _rms(eager_grads)
    for name, e in eager_grads.items():
        g = grads.get(name)
        if g is None:
            off[name] = "no gradient, where eager has one"
            continue
        if g.shape != e.shape:
            off[name] = f"shape {tuple(g.shape)}, eager's {tuple(e.shape)}"
            continue
        e64, g64 = e.double(), g.double()
        error, norm = float((g64 - e64).norm()), float(e64.norm())
        allowed = GRAD_RTOL * norm + GRAD_FLOOR * rms * e.numel() ** 0.5
        if not error <= allowed:  # NaN too
            off[name] = (
                f"|difference| {error:.3g} exceeds {allowed:.3g} (|eager| {norm:.3g}; max |value| "
                f"{float(g64.abs().max()):.3g}, eager's {float(e64.abs().max()):.3g}){_arange_bytes(g)}"
            )
    for name in grads.keys() - eager_grads.keys():
        off[name] = "a gradient, where eager has none"
    return off


def _rms(eager_grads: dict) -> float:
    """The root mean square of every element of every eager gradient of the model."""
    squares = sum(float(e.double().pow(2).sum()) for e in eager_grads.values())
    return (squares / max(1, sum(e.numel() for e in eager_grads.values()))) ** 0.5


def _cancelling(eager_grads: dict) -> set[str]:
    """The gradients whose eager value is within the floor of zero (|e| <= GRAD_FLOOR * rms *
    sqrt(numel)): they cancel in exact arithmetic (a key bias under softmax: the score it adds
    is the same for every key), so what any run holds there is rounding noise, bounded by
    _off_eager's floor and by nothing element by element."""
    rms = _rms(eager_grads)
    return {
        n for n, e in eager_grads.items() if float(e.double().norm()) <= GRAD_FLOOR * rms * e.numel() ** 0.5
    }


# the gradient that differed between the two runs on the H200 (Thunder alone's held
# torch.arange(64)'s bytes); the llama-like had none, one of its norms' weights stands in
FAILED_ON_THE_H200 = {
    "llama-like": "blocks.0.norm1.weight",
    "gpt2-like": "blocks.0.proj.bias",
    "bert-like": "token_type.weight",
}


@pytest.mark.parametrize("name", [*TORCH_MODELS])
def test_the_comparison_with_eager_takes_bf16_and_catches_a_wrong_gradient(name):
    """On CPU, no Thunder: a bf16 eager step of each plain-torch model agrees with the float32
    one (its loss and every gradient within the tolerance above), and a gradient made zero,
    or holding torch.arange(64)'s bytes (what Thunder alone gave on the H200), is caught, also
    for the tensor whose true gradient is smallest relative to the model's."""
    model, loss_fn = _model(name, device="cpu")
    eager_loss, eager_grads = _eager_step(model, loss_fn)
    bf16 = copy.deepcopy(model)
    loss = loss_fn(bf16)
    loss.backward()
    loss, grads = loss.detach(), _grads(bf16)
    assert grads.keys() == eager_grads.keys() and loss.dtype == torch.float32
    assert _off_eager(loss, grads, eager_loss, eager_grads) == {}
    assert _cancelling(eager_grads) == set()  # each is also compared with Thunder alone's
    cancelled = {**eager_grads, "cancels": torch.full((64,), 1e-7)}
    assert _cancelling(cancelled) == {"cancels"}
    smallest = min(eager_grads, key=lambda n: float(eager_grads[n].norm()) / eager_grads[n].numel() ** 0.5)
    for victim in {smallest, FAILED_ON_THE_H200[name]}:
        for wrong in (
            torch.zeros_like(grads[victim]),
            torch.arange(grads[victim].numel() // 4).view(grads[victim].dtype).view(grads[victim].shape),
        ):
            off = _off_eager(loss, {**grads, victim: wrong}, eager_loss, eager_grads)
            assert list(off) == [victim], off
            if wrong.any():
                assert "are torch.arange" in off[victim]
    assert list(_off_eager(loss * 1.1, grads, eager_loss, eager_grads)) == ["loss"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", [*HF_MODELS, *TORCH_MODELS])
def test_a_training_step_under_eqsat_matches_eager_and_thunder_alone(name):
    """One training step (bf16, one layer, batch 2 x 64 tokens) three ways from the same
    weights and tokens: eager PyTorch in float32 (the reference), Thunder alone, and Thunder +
    eqsat. Thunder + eqsat must match eager (loss and every gradient: GRAD_RTOL, GRAD_FLOOR
    above) and, where Thunder alone matches eager, Thunder alone within bf16's tolerance (2% of
    the largest magnitude of each tensor), but for the gradients that cancel (``_cancelling``:
    on an H100, BERT's key biases held rounding noise of 1.9e-7 that differed by 3.3e-8 between
    two runs of Thunder's own definitions). Where Thunder alone deviates from eager and Thunder
    + eqsat does not (or deviates only where Thunder alone does, with no region rewritten, so
    that only Thunder's definitions ran), the test is an xfail naming Thunder: eqsat is not to
    blame for Thunder's result. eqsat runs with ``min_gain=0``: every rewrite the cost model
    predicts cheaper at all is made (by default a saving must exceed the model's measured
    error, which few regions of models this small do), so that the rewrites are what is
    checked; the regions rewritten are counted and listed (``-s``). No region may need the
    fallback. transformers' models are compiled through torch.compile with Thunder as its
    backend first (Thunder 0.2.6's own jit fails on transformers 5), then by thunder.jit; one
    that Thunder alone cannot compile either way is skipped with Thunder's errors."""
    thunder = _cuda_thunder()
    model, loss_fn = _model(name)
    clock = time.perf_counter()
    eager_loss, eager_grads = _eager_step(model, loss_fn)
    seconds = {"eager": time.perf_counter() - clock}
    reference = copy.deepcopy(model)
    how, errors = None, []
    clock = time.perf_counter()
    for attempt in ("jit",) if name in TORCH_MODELS else ("dynamo", "jit"):
        try:
            want_loss, want_grads = _training_step(
                thunder, reference, loss_fn, [], attempt, f"{name}-thunder"
            )
            how = attempt
            break
        except Exception as err:  # Thunder 0.2.6 itself fails on some transformers models under torch 2.11
            errors.append(f"{attempt}: {type(err).__name__}: {str(err).strip()[:200]}")
            reference.zero_grad(set_to_none=True)
    seconds["Thunder alone"] = time.perf_counter() - clock
    if how is None and name not in TORCH_MODELS:
        pytest.skip(f"Thunder 0.2.6 alone fails on transformers' {name}: {'; '.join(errors)}")
    assert how is not None, f"Thunder 0.2.6 alone fails on {name}: {errors}"
    opt = et.Optimize(min_gain=0.0)  # every rewrite predicted cheaper is made, and checked here
    clock = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", EqsatThunderWarning)
        got_loss, got_grads = _training_step(thunder, model, loss_fn, [opt], how, f"{name}-eqsat")
    seconds["Thunder + eqsat"] = time.perf_counter() - clock
    report = opt.report
    rewritten = report.rewritten()
    thunder_off = _off_eager(want_loss, want_grads, eager_loss, eager_grads)
    eqsat_off = _off_eager(got_loss, got_grads, eager_loss, eager_grads)
    print(
        f"\n{name} ({how}): loss {got_loss.item():.6f} (Thunder alone {want_loss.item():.6f}, eager "
        f"float32 {eager_loss.item():.6f}); {len(rewritten)} of {len(report.regions)} regions rewritten: "
        f"{', '.join(f'{r.trace} {r.region}' for r in rewritten) or 'none'}; against eager: Thunder alone "
        f"{thunder_off or 'agrees'}, Thunder + eqsat {eqsat_off or 'agrees'}; seconds: "
        f"{', '.join(f'{k} {v:.1f}' for k, v in seconds.items())}\n{report}"
    )
    assert report.regions, "no nvFuser region went through eqsat"
    if how == "jit":
        assert {r.trace for r in report.regions} == {"forward", "backward"}
    assert not report.fallbacks(), f"regions eqsat failed on: {[str(w.message) for w in caught]}"
    if eqsat_off:
        if not rewritten and eqsat_off.keys() <= thunder_off.keys():
            pytest.xfail(
                f"Thunder 0.2.6 deviates from eager PyTorch, alone and under eqsat, which rewrote no "
                f"region (only Thunder's definitions ran): alone {thunder_off}; under eqsat {eqsat_off}"
            )
        also = sorted(eqsat_off.keys() & thunder_off.keys())
        pytest.fail(
            f"Thunder + eqsat deviates from eager PyTorch: {eqsat_off}"
            + (f" (Thunder alone deviates too at {also})" if also else "")
            + f"; Thunder alone against eager: {thunder_off or 'agrees'}",
            pytrace=False,
        )
    # eqsat against Thunder alone, where Thunder alone is right: bf16's tolerance, element by element
    if "loss" not in thunder_off:
        problem = mismatch(got_loss.float(), want_loss.float(), rtol=2e-2)
        assert problem is None, f"loss against Thunder alone: {problem}"
    noise = _cancelling(eager_grads)  # checked against eager alone, above
    bad = {
        n: p
        for n in want_grads
        if n not in thunder_off and n not in noise and (p := mismatch(got_grads[n], want_grads[n], rtol=2e-2))
    }
    assert not bad, f"gradients differ from Thunder alone's (which agree with eager): {bad}"
    if thunder_off:
        pytest.xfail(
            f"Thunder 0.2.6 alone deviates from eager PyTorch where Thunder + eqsat agrees with it "
            f"(Thunder's result, not eqsat's): {thunder_off}"
        )


def test_the_benchmark_loads_its_timing_helpers_and_tabulates_each_measure(monkeypatch):
    """bench/thunder.py (run on the H200 only): it takes its own folder off the path (its name
    is Thunder's), so it loads gpu_timing by file, and that module's dataclass must work; the
    table shows steady state, speedup, eqsat's share of the first step, and device time."""
    bench = load_bench(monkeypatch, "thunder")
    timing = bench._gpu_timing()
    assert timing.KernelRun("nvfuser_pointwise_f0", 1.0).is_nvfuser and bench._gpu_timing() is timing
    rows = [
        {
            "model": "m",
            "variant": "Thunder",
            "steady_ms": 10.0,
            "first_call_s": 50.0,
            "latency_ms": 12.0,
            "device_ms": 5.0,
            "nvfuser_ms": 1.5,
        },
        {
            "model": "m",
            "variant": "Thunder+eqsat",
            "steady_ms": 8.0,
            "first_call_s": 40.0,
            "eqsat_s": 2.0,
            "regions": 4,
            "rewritten": 1,
            "latency_ms": 11.0,
            "device_ms": 4.0,
            "nvfuser_ms": 0.5,
        },
        {"model": "m", "variant": "eager", "error": "out of memory"},
    ]
    text = bench.table(rows)
    assert "1.250x" in text and "+4.0%" in text and "1/4" in text
    assert " 5.00 ( 1.50)  12.00" in text and "ERR" in text


def test_the_benchmark_compares_each_variants_gradients_with_eagers(monkeypatch):
    """bench/thunder.py's gradient fingerprints (a norm and a dot with a fixed +-1 pattern per
    parameter): equal gradients give no deviation, a changed one is found, and the table
    names the variant whose gradients are off."""
    bench = load_bench(monkeypatch, "thunder")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Linear(4, 1))
    x = torch.randn(16, 8)
    model(x).square().mean().backward()
    want = bench.grad_fingerprint(model)
    assert bench.grad_deviation(bench.grad_fingerprint(model), want) == 0.0
    with torch.no_grad():
        model[0].weight.grad[0, 0] += 0.5 * model[0].weight.grad.norm()
    assert bench.grad_deviation(bench.grad_fingerprint(model), want) > 0.1
    model[1].bias.grad = None
    assert bench.grad_deviation(bench.grad_fingerprint(model), want) >= 1.0
    rows = [
        {"model": "m", "variant": "Thunder", "steady_ms": 10.0, "first_call_s": 5.0, "grads_ok": False},
        {"model": "m", "variant": "eager", "steady_ms": 11.0, "first_call_s": 1.0},
    ]
    assert "GRADIENTS OFF: Thunder" in bench.table(rows)
