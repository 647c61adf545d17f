"""The margin a predicted saving must exceed: the cost model's measured error on a saving (the
saving recorded candidates were predicted and did not deliver), by the input's kernel count and
predicted time (a profile's error table, eqsat.cost.error_table), fitted from recorded GPU pairs
by bench/corpus.py --fit-error; min_gain replaces it."""

import json

import pytest
from conftest import ROOT
from helpers import load_bench

from eqsat import FusionError, optimize_fusion
from eqsat.cost.error_table import ErrorTable, cell, fit_error_table, shortfall
from eqsat.cost.profile import load_profile
from eqsat.optimize import MIN_GAIN
from eqsat.testing.seeds import SEEDS

SEED = SEEDS["reduction_broadcast"]


def _profile(error: dict | None, base: str = "h200") -> dict:
    """The packaged profile ``base`` with ``error`` as its error table (None: none)."""
    data = json.loads((ROOT / "eqsat" / "cost" / "profiles" / f"{base}.json").read_text())
    data.pop("error", None)
    if error is not None:
        data["error"] = error
    return data


def _table(values, default=0.5) -> dict:
    """An error table of the default buckets (4 x 4) holding ``values`` (a number for every
    cell, or a function of (row, column))."""
    value = values if callable(values) else (lambda r, c: values)
    return {
        "kernel_bounds": [1, 2, 4, 8],
        "time_bounds_us": [50, 200, 1000],
        "error": [[value(r, c) for c in range(4)] for r in range(4)],
        "count": [[10] * 4 for _ in range(4)],
        "basis": [["cell"] * 4 for _ in range(4)],
        "default": default,
    }


def _cell(estimate):
    return cell(len(estimate.kernels), estimate.time_us, (1, 2, 4, 8), (50, 200, 1000))


@pytest.fixture(scope="module")
def seed_one():
    """Seed 1 at 512^3, as the flat H200 profile predicts it: (inputs, input's estimate, the
    candidate's estimate, its predicted saving)."""
    inputs = SEED.make_inputs(512, 512, 512, device="meta")
    opt = optimize_fusion(SEED.model_ref, inputs, profile=_profile(None), min_gain=0.0)
    before, after = opt.report.before, opt.report.after
    assert opt.report.changed and _cell(before) != _cell(after)
    return inputs, before, after, 1 - after.time_us / before.time_us


def test_a_saving_within_the_measured_error_is_rejected_and_reported(seed_one):
    inputs, before, after, saving = seed_one
    margin = round(saving + 0.05, 3)
    opt = optimize_fusion(SEED.model_ref, inputs, profile=_profile(_table(margin)))
    assert not opt.report.changed and opt.fusion == opt.original
    [r] = opt.report.rejected
    assert r.predicted_us == pytest.approx(after.time_us) and r.saving == pytest.approx(saving)
    assert r.margin == margin and "the cost model's measured error" in r.reason
    assert (
        f"rejected: candidate of {after.time_us:.1f} us predicted (saves {saving:.1%}, margin {margin:.0%})"
        in str(opt.report)
    )
    assert opt.report.summary()["rejected"] == [r.summary()]
    kept = optimize_fusion(SEED.model_ref, inputs, profile=_profile(_table(round(saving - 0.05, 3))))
    assert kept.report.changed and not kept.report.rejected


def test_the_margin_is_read_at_the_input_s_kernel_count_and_time(seed_one):
    inputs, before, after, saving = seed_one
    high, low = round(saving + 0.05, 3), round(saving - 0.2, 3)
    at_input = optimize_fusion(
        SEED.model_ref,
        inputs,
        profile=_profile(_table(lambda r, c: high if (r, c) == _cell(before) else low)),
    )
    [r] = at_input.report.rejected
    assert (
        not at_input.report.changed
        and r.margin == high
        and "the cost model's measured error on a saving" in r.reason
    )
    at_candidate = optimize_fusion(
        SEED.model_ref, inputs, profile=_profile(_table(lambda r, c: high if (r, c) == _cell(after) else low))
    )
    assert at_candidate.report.changed and not at_candidate.report.rejected


def test_min_gain_replaces_the_measured_error(seed_one):
    inputs, _, _, saving = seed_one
    strict = optimize_fusion(
        SEED.model_ref, inputs, profile=_profile(_table(0.0)), min_gain=round(saving + 0.01, 3)
    )
    [r] = strict.report.rejected
    assert not strict.report.changed and r.reason.endswith(f"min_gain={round(saving + 0.01, 3):g}, as given")
    lax = optimize_fusion(SEED.model_ref, inputs, profile=_profile(_table(0.99)), min_gain=0.0)
    assert lax.report.changed
    with pytest.raises(ValueError, match="min_gain must be a fraction"):
        optimize_fusion(SEED.model_ref, inputs, min_gain=1.5)


def test_a_profile_without_an_error_table_keeps_the_flat_margin():
    seed = SEEDS["layernorm_amax"]  # at 16x512 the best candidate saves under 1%
    opt = optimize_fusion(seed.model_ref, seed.make_inputs(16, 512, device="meta"), profile=_profile(None))
    [r] = opt.report.rejected
    assert not opt.report.changed and r.margin == MIN_GAIN and 0 < r.saving < MIN_GAIN
    assert "the default margin 5% (the profile has no error table)" in r.reason


def test_the_default_profile_carries_a_table_fitted_on_recorded_pairs():
    table = load_profile(None).error
    assert load_profile(None).name == load_profile("h200_host_fit").name
    assert table is not None and table.samples >= 10 and table.quantile == 0.75
    assert all(n >= table.min_samples for row in table.count for n in row)
    assert load_profile("h200").error is None  # no pair was recorded under the flat profile
    # the seeds' predicted savings (20% and more) exceed it at their shapes
    for seed, shape in (
        (SEED, (4096, 2048, 1024)),
        (SEEDS["layernorm_amax"], (16384, 4096)),
        (SEEDS["rmsnorm_fp8"], (16384, 4096)),
    ):
        opt = optimize_fusion(seed.model_ref, seed.make_inputs(*shape, device="meta"))
        assert opt.report.changed and not opt.report.rejected, seed.name


def test_the_fit_takes_a_quantile_per_bucket_and_falls_back_to_coarser_ones():
    # six pairs of 1 kernel under 50 us, errors 0.0 .. 0.5; two of 2 kernels at 100 us
    samples = [(1, 10.0, e) for e in (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)]
    samples += [(2, 100.0, 1.0), (3, 120.0, 0.2)]
    table = fit_error_table(samples, source="test")
    assert (
        table.error[0][0] == pytest.approx(0.375) and table.count[0][0] == 6 and table.basis[0][0] == "cell"
    )
    # (2-3 kernels, 50-200 us) has 2 pairs: the time bucket too; the kernel bucket too; all
    m = table.margin(2, 100.0)
    assert (m.basis, m.count, m.kernels, m.time) == ("all", 8, "2-3", "50-200 us")
    # all eight errors, sorted 0, .1, .2, .2, .3, .4, .5, 1: at 0.75 * 7 = 5.25, .4 + .25 * .1
    assert m.error == table.default == pytest.approx(0.425)
    # (1 kernel, 50-200 us): no pair in the cell or the time bucket, six in the kernel bucket
    assert table.margin(1, 70.0).basis == "kernels" and table.margin(1, 70.0).error == pytest.approx(0.375)
    assert table.margin(0, 1.0) == table.margin(1, 1.0)  # no kernel counts as one
    assert table.margin(100, 5000.0).kernels == "8+" and table.margin(100, 5000.0).time == ">=1000 us"
    again = ErrorTable.from_dict(json.loads(json.dumps(table.to_dict())))
    assert again == table
    assert f"{table.error[0][0]:.0%} / 6" in table.text()
    with pytest.raises(ValueError, match="no samples"):
        fit_error_table([])
    with pytest.raises(ValueError, match="finite and >= 0"):
        fit_error_table([(1, 10.0, -0.1)])


def test_only_the_saving_not_delivered_counts():
    # predicted 100 -> 80 (20%); measured 100 -> 90 (10%): 10% short; 100 -> 70: none short
    assert shortfall(100, 80, 100, 90) == pytest.approx(0.1)
    assert shortfall(100, 80, 100, 70) == 0.0
    assert shortfall(100, 99, 50, 60) == pytest.approx(0.21)  # slower than as given


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda t: t.update(count=[[1, 2]]), "error.count must be 4 rows"),
        (lambda t: t.update(time_bounds_us=[200, 50, 1000]), "error.time_bounds_us must rise"),
        (lambda t: t["error"][0].__setitem__(0, -0.1), "error.error values must be finite and >= 0"),
        (lambda t: t["basis"][1].__setitem__(2, "guess"), "error.basis values must be one of"),
        (lambda t: t.pop("default"), "error.default"),
    ],
)
def test_a_bad_error_table_is_refused_naming_the_field(change, message):
    table = _table(0.3)
    change(table)
    with pytest.raises(FusionError, match=message):
        load_profile(_profile(table))


SEED_FILE = """import torch
from nvfuser_direct import FusionDefinition, DataType

def nvfuser_fusion(fd) -> None:
    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    T1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    T2 = fd.ops.broadcast_in_dim(T0, shape=[4096, 2048, 1024], broadcast_dims=[0, 1])
    T3 = fd.ops.broadcast_in_dim(T1, shape=[4096, 2048, 1024], broadcast_dims=[0, 2])
    T4 = fd.ops.mul(T2, T3)
    T5 = fd.ops.sum(T4, dims=[1], keepdim=False, dtype=DataType.Null)
    fd.add_output(T5)

inputs = [torch.randn((4096, 2048), dtype=torch.float32), torch.randn((4096, 1024), dtype=torch.float32)]
"""


def test_the_bench_script_fits_the_table_into_the_profile_file(tmp_path, capsys, monkeypatch):
    """Each recorded pair is predicted again by the current model (the file optimized anew at
    the run's min_gain); a pair whose recorded candidate (rules) it no longer picks is left
    out, and so are pairs made with another profile."""
    for name in ("f0", "f1", "other_rules"):
        (tmp_path / f"{name}.py").write_text(SEED_FILE)
    from eqsat import from_file

    repro = from_file(tmp_path / "f0.py", device="meta")
    rep = optimize_fusion(repro.fusion, repro.inputs, profile="h200_host_fit", min_gain=0.0).report
    assert rep.changed
    predicted = 1 - rep.after.time_us / rep.before.time_us
    rows = [
        {
            "name": f"f{i}",
            "changed": True,
            "profile": "h200_host_fit",
            "min_gain": 0.0,
            "rules": rep.rules,
            "predicted_before": {"kernels": 1, "time_us": 100.0},  # stale: predicted again
            "predicted_after": {"kernels": 1, "time_us": 99.0},
            "given": {"steady_us": 100.0},
            "optimized": {"steady_us": steady},
        }
        for i, steady in enumerate((100.0 * (1 - predicted) + 5.0, 120.0))
    ]
    rows.append({**rows[0], "name": "other_rules", "rules": ["no-such-rule"]})
    rows.append({**rows[0], "name": "flat", "profile": "h200", "optimized": {"steady_us": 500.0}})
    rows.append({"name": "unchanged", "changed": False, "given": {"steady_us": 10.0}})
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"device": "test", "rows": rows}))
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps(_profile(None, base="h200_host_fit")))
    corpus = load_bench(monkeypatch, "corpus")
    assert corpus.main(["--corpus", str(tmp_path), "--predict", str(run), "--fit-error", str(profile)]) == 0
    table = load_profile(str(profile)).error
    # the two pairs made with this profile: 5% short of the saving predicted, and all of it plus 20%
    short = sorted([0.05, predicted + 0.20])
    assert table.samples == 2
    assert table.default == pytest.approx(short[0] + 0.75 * (short[1] - short[0]), abs=1e-3)
    assert {b for row in table.basis for b in row} == {"all"}
    written = json.loads(profile.read_text())
    assert {k: v for k, v in written.items() if k != "error"} == _profile(None, base="h200_host_fit")
    out = capsys.readouterr()
    assert "the saving predicted and not measured, over 2 pairs" in out.out
    assert (
        "left out 1 pairs whose candidate the model no longer picks" in out.err and "other_rules" in out.err
    )


def test_a_recorded_run_is_predicted_again_candidate_and_all(tmp_path, monkeypatch):
    """--predict recomputes a changed row's candidate too, where the model still picks it, and
    keeps (and flags) the recorded prediction where it does not."""
    (tmp_path / "seed.py").write_text(SEED_FILE)
    (tmp_path / "other.py").write_text(SEED_FILE)
    from eqsat import from_file

    repro = from_file(tmp_path / "seed.py", device="meta")
    rep = optimize_fusion(repro.fusion, repro.inputs, min_gain=0.0).report
    stale = {"kernels": 9, "time_us": 1.0}
    row = {
        "name": "seed",
        "changed": True,
        "profile": None,
        "min_gain": 0.0,
        "rules": rep.rules,
        "predicted_before": stale,
        "predicted_after": stale,
        "given": {"kernels": 1, "steady_us": 100.0},
        "optimized": {"steady_us": 50.0},
    }
    run = tmp_path / "run.json"
    run.write_text(
        json.dumps({"device": "test", "rows": [row, {**row, "name": "other", "rules": ["no-such-rule"]}]})
    )
    corpus = load_bench(monkeypatch, "corpus")
    seed, other = corpus.repredict(str(run), [tmp_path], None, quiet=True)
    assert seed["predicted_before"] == rep.before.summary() and seed["predicted_after"] == rep.after.summary()
    assert "predicted_after_recorded" not in seed
    assert other["predicted_after"] == stale and other["predicted_after_recorded"]
