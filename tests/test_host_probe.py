"""The host probe: a profile's host constants scaled to the machine at hand (eqsat.cost.host_probe)."""

import math

import pytest

from eqsat.testing import host_probe
from eqsat.cost.profile import load_profile


def test_the_probe_is_one_pointwise_kernel_whose_time_is_mostly_host():
    est = host_probe.predicted()
    assert len(est.kernels) == 1 and est.kernels[0].kind == "pointwise"
    assert est.host_us > 10 * est.device_us


@pytest.mark.parametrize("factor", [0.5, 1.0, 1.7, 3.0])
def test_the_scale_measured_by_the_probe_is_the_hosts_own(factor):
    """A machine whose host is ``factor`` times as slow as the profile's times the probe as the
    profile scaled by ``factor`` predicts it, and the probe recovers ``factor`` from that time;
    the kernel's part of it does not scale."""
    profile = load_profile()
    scaled = profile.with_host_scale(factor)
    est, base = host_probe.predicted(scaled), host_probe.predicted(profile)
    assert math.isclose(est.host_us, factor * base.host_us) and math.isclose(est.device_us, base.device_us)
    assert math.isclose(host_probe.host_scale(est.time_us, profile), factor)
    assert scaled.kinds == profile.kinds and scaled.error == profile.error


@pytest.mark.parametrize("factor", [0.0, -1.0, math.inf, math.nan])
def test_a_scale_that_is_not_finite_and_positive_is_refused(factor):
    with pytest.raises(ValueError, match="finite and positive"):
        load_profile().with_host_scale(factor)


def test_a_probe_time_not_above_its_kernel_is_refused():
    with pytest.raises(ValueError, match="must exceed its kernel"):
        host_probe.host_scale(0.5)


@pytest.mark.gpu
def test_the_probe_runs_on_nvfuser():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device and nvfuser_direct")
    pytest.importorskip("nvfuser_direct", reason="needs nvfuser_direct")
    us = host_probe.measure_us(runs=50)
    assert 1 < us < 10_000
    assert 0.1 < host_probe.host_scale(us) < 20
    again = host_probe.measurer()  # defined once, measured beside each corpus row
    assert all(1 < again(50) < 10_000 for _ in range(2))


def test_a_resumed_corpus_run_scales_each_row_by_its_own_machines_probe(monkeypatch):
    """bench/corpus.py --host-scale auto: a row recorded with its call's probe is predicted at
    that machine's scale; a row without one at the run's mean probe."""
    from helpers import load_bench

    bench = load_bench(monkeypatch, "corpus")
    profile = load_profile()
    probe_us = host_probe.predicted(profile).time_us
    recorded = {"host_probe_us": [2 * probe_us, 2 * probe_us]}
    fast = bench._host_scale("auto", recorded, {"host_probe_us": probe_us}, None, "run.json")
    slow = bench._host_scale("auto", recorded, {}, None, "run.json")
    assert math.isclose(fast, 1.0, rel_tol=1e-6) and math.isclose(slow, 2.0, rel_tol=0.1)
    assert bench._host_scale("1.5", recorded, {}, None, "run.json") == 1.5
    with pytest.raises(SystemExit, match="no host probe"):
        bench._host_scale("auto", {}, {}, None, "run.json")


def test_the_host_microbenchmarks_are_fusions_that_run(monkeypatch):
    """bench/host_cost.py's microbenchmarks (RoPE blocks of slices, negation and cat among
    them) each read and run through the torch executor at their extents, and count their
    resize ops as the host fit sees them."""
    import torch
    from helpers import load_bench

    import eqsat

    bench = load_bench(monkeypatch, "host_cost")
    names = set()
    for name, definition, ranks in bench.microbenchmarks():
        fusion = eqsat.from_function(definition)
        inputs = [torch.randn(r if isinstance(r, tuple) else [bench.SIDE] * r) for r in ranks]
        outs = eqsat.run_fusion(fusion, inputs, strict=True)
        if name.startswith("full_sum"):  # full sums: one element each, of each input
            assert [o.shape for o in outs] == [torch.Size([])] * len(inputs), name
            for o, x in zip(outs, inputs):
                torch.testing.assert_close(o, x.sum(), rtol=1e-4, atol=1e-3)
        elif name.startswith("alias_outputs"):  # the negation, then each other input flat
            torch.testing.assert_close(outs[0], -inputs[0])
            assert all(torch.equal(o, x.reshape(-1)) for o, x in zip(outs[1:], inputs[1:], strict=True)), name
        else:
            assert outs and all(o.shape == inputs[0].shape for o in outs), name
        names.add(name)
        if name.startswith("rotary"):
            assert bench.features(fusion, 1, 0)["resizes"] == 3 * int(name[len("rotary") :])
    assert {"resizes32", "rotary8", "segments12", "full_sums4", "full_sum_small", "alias_outputs4"} <= names


def test_a_corpus_run_records_the_host_probe_beside_each_row(monkeypatch, tmp_path):
    """bench/corpus.py on a GPU measures the probe again right before each fusion: the host's
    speed drifts within one call (18.1 to 36.3 us in session 45's), so each row keeps its own
    (``host_probe_us``) beside the call's first (``host_probe_start_us``). Here the GPU, the
    probe and the fusion's run are stand-ins."""
    import json

    import torch
    from helpers import load_bench

    bench = load_bench(monkeypatch, "corpus")
    for name in ("a", "b"):
        (tmp_path / f"{name}.py").write_text("")
    readings = iter([20.0, 30.0, 40.0, 22.0])  # the call's first, a's, b's, the last
    monkeypatch.setattr(bench.host_probe, "measurer", lambda: lambda runs=200: next(readings))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "a stand-in GPU")
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    given = {"us": 1.0, "steady_us": 1.0, "device_us": 1.0, "kernels": 1}
    row = lambda path, *a: {
        "name": path.stem,
        "given": given,
        "optimized": given,
        "predicted_before": {"kernels": 1, "time_us": 1.0},
        "predicted_after": {"kernels": 1, "time_us": 1.0},
    }
    monkeypatch.setattr(bench, "run_one", row)
    monkeypatch.setattr(bench, "summarize", lambda rows: {})
    monkeypatch.setattr(bench, "table", lambda rows: "")
    out = tmp_path / "run.json"
    assert bench.main(["--corpus", str(tmp_path), "--json", str(out)]) == 0
    rows = {r["name"]: r for r in json.loads(out.read_text())["rows"]}
    assert (rows["a"]["host_probe_us"], rows["b"]["host_probe_us"]) == (30.0, 40.0)
    assert rows["a"]["host_probe_start_us"] == rows["b"]["host_probe_start_us"] == 20.0
