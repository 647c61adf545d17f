"""GPU verification's decisions (``optimize_fusion(..., verify="gpu")``), on a fake device: the
runner that would compile, run and time on nvFuser is replaced by one that runs the torch
executor and reports the times a test gives it. The real device is tested in test_gpu.py."""

import json
import re

import pytest
import torch

import eqsat
from eqsat import FusionError, optimize_fusion
from eqsat.cli import main
from eqsat.lowering import repro_source
from eqsat.testing.seeds import SEEDS
from eqsat.verification import VerificationCache
from eqsat.verification import cache as cache_module
from eqsat.verification.cache import cache_key, cache_root

SEED = SEEDS["layernorm_amax"]
SHAPE = (2048, 1024)  # four distinct candidates predicted cheaper than the input, or near it


class FakeRunner:
    """Runs fusions through the torch executor. ``times[i]`` is the steady-state time of the
    i-th distinct fusion it is given (the input is run first, then the candidates in order);
    those in ``wrong`` give outputs off by 50%, those in ``fail`` raise."""

    def __init__(
        self, times=(100.0, 80.0, 60.0, 90.0, 95.0), wrong=(), fail=(), device="Fake H200", versions=None
    ):
        self.times, self.wrong, self.fail = list(times), set(wrong), set(fail)
        self.device = device
        self.versions = versions or {"nvfuser": "0.0.fake"}
        self.seen: list = []
        self.timed: list[int] = []

    def _index(self, fusion) -> int:
        if fusion not in self.seen:
            self.seen.append(fusion)
        return self.seen.index(fusion)

    def prepare(self, fusion, inputs):
        return list(inputs)

    def run(self, fusion, inputs):
        i = self._index(fusion)
        if i in self.fail:
            raise RuntimeError("nvFuser: segmentation failed")
        outputs = eqsat.run_fusion(fusion, inputs)
        return [o * 1.5 for o in outputs] if i in self.wrong else outputs

    def steady_us(self, fusion, inputs):
        i = self._index(fusion)
        self.timed.append(i)
        return self.times[i]


def _optimize(runner, tmp_path, **options):
    return optimize_fusion(
        SEED.model_ref,
        SEED.make_inputs(*SHAPE),
        verify="gpu",
        runner=runner,
        cache_dir=tmp_path,
        deadline_s=None,
        **options,
    )


def test_the_fastest_candidate_is_kept_and_the_report_gives_every_measurement(tmp_path):
    runner = FakeRunner(times=(100.0, 80.0, 60.0, 90.0, 95.0))
    opt = _optimize(runner, tmp_path)
    v = opt.report.verification
    assert [m.label for m in v.measurements] == [
        "input",
        "candidate 1",
        "candidate 2",
        "candidate 3",
        "candidate 4",
    ]
    assert [m.measured_us for m in v.measurements] == [100.0, 80.0, 60.0, 90.0, 95.0]
    assert v.kept == 1 and [m.kept for m in v.measurements] == [False, False, True, False, False]
    assert opt.report.changed and opt.fusion == runner.seen[2].with_frontend(opt.original.frontend)
    assert opt.report.after.time_us == v.measurements[2].predicted_us
    assert not v.cached and v.device == "Fake H200" and v.seconds > 0
    assert opt.report.phases["verify"] == v.seconds
    # each fusion timed twice (alternating order), the input first
    assert sorted(runner.timed) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4] and runner.timed[0] == 0
    assert [(r.measured_us, r.reason) for r in opt.report.rejected] == [
        (80.0, "on the GPU: slower than candidate 2 (60.0 us)"),
        (90.0, "on the GPU: slower than candidate 2 (60.0 us)"),
        (95.0, "on the GPU: slower than candidate 2 (60.0 us)"),
    ]
    text = str(opt.report)
    assert "verified on Fake H200" in text and "candidate 2: " in text and "60.0 us measured (kept)" in text
    summary = opt.report.summary()["verification"]
    assert summary["kept"] == "candidate 2" and summary["cached"] is False
    assert [m["measured_us"] for m in summary["measurements"]] == [100.0, 80.0, 60.0, 90.0, 95.0]


def test_the_input_wins_ties_and_candidates_within_one_percent(tmp_path):
    runner = FakeRunner(times=(100.0, 99.5, 99.2, 100.0, 99.9))
    opt = _optimize(runner, tmp_path)
    assert not opt.report.changed and opt.fusion == opt.original
    assert opt.report.after is opt.report.before
    assert opt.report.verification.kept == -1 and opt.report.verification.measurements[0].kept
    assert len(opt.report.rejected) == 4
    assert all("not more than 1% faster than the input (100.0 us)" in r.reason for r in opt.report.rejected)


def test_a_candidate_whose_outputs_disagree_is_rejected_and_not_timed(tmp_path):
    runner = FakeRunner(times=(100.0, 50.0, 60.0, 90.0, 95.0), wrong={1})
    opt = _optimize(runner, tmp_path)
    v = opt.report.verification
    assert 1 not in runner.timed
    assert v.measurements[1].measured_us is None
    assert v.measurements[1].problem.startswith("outputs disagree with the input's: output ")
    assert v.kept == 1 and opt.fusion == runner.seen[2].with_frontend(opt.original.frontend)
    assert any(
        r.reason.startswith("on the GPU: outputs disagree") and r.measured_us is None
        for r in opt.report.rejected
    )


def test_a_candidate_that_fails_on_the_device_is_rejected(tmp_path):
    runner = FakeRunner(times=(100.0, 50.0, 60.0, 90.0, 95.0), fail={1})
    opt = _optimize(runner, tmp_path)
    problem = opt.report.verification.measurements[1].problem
    assert problem == "failed on the GPU: RuntimeError: nvFuser: segmentation failed"
    assert opt.report.verification.kept == 1


def test_the_input_failing_on_the_device_is_an_error(tmp_path):
    with pytest.raises(FusionError, match="the input as given failed on the GPU: RuntimeError"):
        _optimize(FakeRunner(fail={0}), tmp_path)


def test_a_cached_decision_is_not_timed_again(tmp_path):
    first = _optimize(FakeRunner(times=(100.0, 80.0, 60.0, 90.0, 95.0)), tmp_path)
    runner = FakeRunner(times=(1.0, 1.0, 1.0, 1.0, 1.0))  # would keep the input if it timed
    again = _optimize(runner, tmp_path)
    v = again.report.verification
    assert v.cached and runner.timed == [] and runner.seen == []
    assert [m.measured_us for m in v.measurements] == [100.0, 80.0, 60.0, 90.0, 95.0]
    assert again.fusion == first.fusion and again.report.changed
    assert v.cache_file == first.report.verification.cache_file
    assert "from the cache" in str(again.report)


def _valid_entry(tmp_path) -> tuple:
    opt = _optimize(FakeRunner(), tmp_path)
    path = opt.report.verification.cache_file
    with open(path) as f:
        return path, json.load(f)


@pytest.mark.parametrize(
    "damage", ["not json", "another schema", "another key", "kept out of range", "a negative time"]
)
def test_a_damaged_cache_file_is_ignored_with_a_warning_and_overwritten(tmp_path, damage):
    path, data = _valid_entry(tmp_path)
    if damage == "not json":
        text = '{"schema": "eqsat-gpu-verification/1", '
    else:
        if damage == "another schema":
            data["schema"] = "something else/1"
        elif damage == "another key":
            data["key"]["device"] = "another GPU"
        elif damage == "kept out of range":
            data["kept"] = 7
        else:
            data["records"][0]["measured_us"] = -3
        text = json.dumps(data)
    with open(path, "w") as f:
        f.write(text)
    runner = FakeRunner(times=(100.0, 80.0, 60.0, 90.0, 95.0))
    with pytest.warns(UserWarning, match=re.escape(path)):
        opt = _optimize(runner, tmp_path)
    assert not opt.report.verification.cached and runner.timed  # measured afresh
    with open(path) as f:
        assert json.load(f)["kept"] == 1  # and written again


def test_an_entry_about_other_candidates_is_not_used(tmp_path):
    path, data = _valid_entry(tmp_path)
    cache = VerificationCache(tmp_path)
    assert cache.load(data["key"], data["candidates"]) is not None
    assert cache.load(data["key"], data["candidates"][:1]) is None  # no warning: not damaged


def test_the_key_changes_with_shape_dtype_strides_gpu_and_versions(monkeypatch):
    x = torch.empty(4, 6)
    source = "def nvfuser_fusion(fd): ..."
    base = cache_key(source, [x, 2.0], "NVIDIA H200", {"nvfuser": "0.2.35"})
    changed = [
        cache_key(source + " ", [x, 2.0], "NVIDIA H200", {"nvfuser": "0.2.35"}),
        cache_key(source, [torch.empty(4, 7), 2.0], "NVIDIA H200", {"nvfuser": "0.2.35"}),
        cache_key(
            source, [torch.empty(4, 6, dtype=torch.bfloat16), 2.0], "NVIDIA H200", {"nvfuser": "0.2.35"}
        ),
        cache_key(source, [torch.empty(6, 4).t(), 2.0], "NVIDIA H200", {"nvfuser": "0.2.35"}),
        cache_key(source, [x, 2], "NVIDIA H200", {"nvfuser": "0.2.35"}),
        cache_key(source, [x, 2.0], "NVIDIA H100", {"nvfuser": "0.2.35"}),
        cache_key(source, [x, 2.0], "NVIDIA H200", {"nvfuser": "0.2.36"}),
    ]
    monkeypatch.setattr(cache_module, "eqsat_version", lambda: "99.0")
    changed.append(cache_key(source, [x, 2.0], "NVIDIA H200", {"nvfuser": "0.2.35"}))
    cache = VerificationCache("/nowhere")
    paths = {cache.path(k) for k in [base, *changed]}
    assert len(paths) == len(changed) + 1
    monkeypatch.undo()
    assert cache.path(
        cache_key(source, [torch.zeros(4, 6), 5.0], "NVIDIA H200", {"nvfuser": "0.2.35"})
    ) == cache.path(base)  # values are not part of the key


def test_another_gpu_or_nvfuser_is_timed_again(tmp_path):
    _optimize(FakeRunner(), tmp_path)
    for runner in (FakeRunner(device="Fake B200"), FakeRunner(versions={"nvfuser": "0.0.other"})):
        opt = _optimize(runner, tmp_path)
        assert not opt.report.verification.cached and runner.timed
    assert _optimize(FakeRunner(), tmp_path).report.verification.cached
    assert len(list((tmp_path / "verify").glob("*.json"))) == 3
    assert not list((tmp_path / "verify").glob("*.tmp"))  # written through a temporary file


def test_the_cache_folder_comes_from_the_argument_the_environment_or_home(tmp_path, monkeypatch):
    monkeypatch.setenv("EQSAT_CACHE_DIR", str(tmp_path / "env"))
    opt = optimize_fusion(SEED.model_ref, SEED.make_inputs(*SHAPE), verify="gpu", runner=FakeRunner())
    assert opt.report.verification.cache_file.startswith(str(tmp_path / "env" / "verify") + "/")
    assert cache_root(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv("EQSAT_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "eqsat"


def test_nothing_is_timed_where_no_candidate_is_predicted_cheaper_or_near_the_input(tmp_path):
    seed = SEEDS["reduction_broadcast"]
    runner = FakeRunner()
    opt = optimize_fusion(
        seed.model_ref, seed.make_inputs(8, 8, 8), verify="gpu", runner=runner, cache_dir=tmp_path
    )
    assert opt.report.verification is None and runner.seen == [] and not opt.report.changed
    assert any("nothing to time" in n for n in opt.report.notes)


def test_a_candidate_predicted_a_little_dearer_is_timed_and_kept_where_the_gpu_says_faster(tmp_path):
    """SwiGLU's FP8 amax at [2048, 2048]: no candidate is predicted cheaper than the input, but
    candidates within VERIFY_WINDOW of it are timed, and the GPU's fastest is kept."""
    from eqsat.optimize import VERIFY_WINDOW
    from eqsat.testing import fp8_amax

    runner = FakeRunner(times=(100.0, 95.0, 70.0, 99.0))
    opt = optimize_fusion(
        fp8_amax.definition("swiglu"),
        fp8_amax.make_inputs("swiglu", 2048, 2048),
        verify="gpu",
        runner=runner,
        cache_dir=tmp_path,
        deadline_s=None,
    )
    v = opt.report.verification
    given, *candidates = v.measurements
    assert all(c.predicted_us >= given.predicted_us for c in candidates)
    assert any(c.predicted_us > given.predicted_us for c in candidates)
    assert all(c.predicted_us < given.predicted_us * (1 + VERIFY_WINDOW) for c in candidates)
    assert opt.report.changed and v.measurements[v.kept + 1].measured_us == 70.0


def test_verification_needs_inputs_with_values_and_says_so(tmp_path):
    with pytest.raises(FusionError, match="input 0 is a meta tensor"):
        optimize_fusion(
            SEED.model_ref,
            SEED.make_inputs(*SHAPE, device="meta"),
            verify="gpu",
            runner=FakeRunner(),
            cache_dir=tmp_path,
        )
    with pytest.raises(FusionError, match="none were given"):
        optimize_fusion(SEED.model_ref, verify="gpu", runner=FakeRunner(), cache_dir=tmp_path)
    with pytest.raises(ValueError, match="verify must be None or 'gpu'"):
        optimize_fusion(SEED.model_ref, SEED.make_inputs(*SHAPE), verify="cpu")


def test_without_a_gpu_verification_is_refused_with_the_reason():
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here; test_gpu.py verifies on it")
    with pytest.raises(FusionError, match="needs a CUDA device and nvFuser"):
        optimize_fusion(SEED.model_ref, SEED.make_inputs(*SHAPE), verify="gpu")


def test_cli_verify_on_gpu_without_a_gpu_says_why(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    path = tmp_path / "seed.py"
    path.write_text(repro_source(eqsat.from_function(SEED.model_ref), SEED.make_inputs(64, 96)))
    assert main(["optimize", str(path), "--verify-on-gpu", "--cache-dir", str(tmp_path)]) == 2
    assert "needs a CUDA device and nvFuser" in capsys.readouterr().err
