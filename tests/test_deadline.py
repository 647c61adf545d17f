"""One deadline (``optimize_fusion(deadline_s=)``, ``eqsat optimize|check --deadline``) bounds
encoding, saturation, extraction and lowering together. Where it cuts a stage the result is
still one the outputs agree with (the input, or the best candidate scored by then) and a note
says which stage it cut. Time is asserted with a wide margin (10x the deadline; the code
before the deadline took 10-60 s on these fusions); bench/large.py measures it."""

import time

import pytest
import torch
from helpers import long_sum

import eqsat
from eqsat.cli import main
from eqsat.egraph.saturate import Limits
from eqsat.lowering.source import repro_source
from eqsat.optimize import MIN_GAIN
from eqsat.testing.large_fusions import elementwise
from eqsat.testing.seeds import SEEDS

META = [torch.empty(4096, 4096, device="meta")]


def _read(definition) -> eqsat.ir.Fusion:
    fusion = eqsat.ingest(definition)
    fusion.types  # typed before the clock starts, as optimize_fusion's deadline is
    return fusion


def _assert_same_outputs(optimized, original, inputs):
    got = eqsat.run_fusion(optimized, inputs, strict=True)
    want = eqsat.run_fusion(original, inputs, strict=True)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


def _timed_optimize(fusion, inputs, **options):
    start = time.perf_counter()
    opt = eqsat.optimize_fusion(fusion, inputs, **options)
    return opt, time.perf_counter() - start


def _deadline_notes(opt) -> list[str]:
    return [n for n in opt.report.notes if n.startswith("the deadline")]


def test_a_large_fusion_is_cut_by_the_deadline_in_time_and_still_agrees():
    fusion = _read(elementwise(12_000)[0])
    opt, took = _timed_optimize(fusion, META, deadline_s=0.5)
    assert took < 5.0, f"{took:.1f} s under a 0.5 s deadline"
    assert _deadline_notes(opt), opt.report.notes
    _assert_same_outputs(opt.fusion, fusion, [torch.randn(4, 8)])


def test_a_deadline_of_zero_keeps_the_input_and_says_which_stage_it_cut():
    fusion = _read(elementwise(40)[0])
    opt = eqsat.optimize_fusion(fusion, META, deadline_s=0)
    assert not opt.report.changed and opt.fusion == fusion
    assert not opt.report.estimated
    assert _deadline_notes(opt) == ["the deadline (0 s) cut encoding: kept the input (not estimated)"]
    assert "before: not estimated" in str(opt.report)


def test_the_default_deadline_leaves_the_seeds_optimized_as_without_one():
    shapes = {"reduction_broadcast": (4096, 2048, 1024), "layernorm_amax": (16384, 4096)}
    for name, shape in shapes.items():
        seed = SEEDS[name]
        inputs = seed.make_inputs(*shape, device="meta")
        # the flat margin: what is tested is the deadline, not whether the measured error lets
        # the rewrite be kept (test_margin.py)
        bounded = eqsat.optimize_fusion(seed.model_ref, inputs, min_gain=MIN_GAIN)
        unbounded = eqsat.optimize_fusion(seed.model_ref, inputs, deadline_s=None, min_gain=MIN_GAIN)
        assert bounded.report.changed and not _deadline_notes(bounded)
        assert bounded.source == unbounded.source
        assert bounded.report.after.summary() == unbounded.report.after.summary()


def test_the_deadline_cuts_saturation_before_generous_limits_do(exploding_rule):
    fusion = _read(long_sum)
    limits = Limits(iterations=1000, nodes=10**8, seconds=600.0)
    opt, took = _timed_optimize(
        fusion, [torch.empty(64, 64, device="meta")] * 3, limits=limits, deadline_s=1.0
    )
    assert took < 10.0
    assert opt.report.saturation.stop == "deadline"
    assert any(n.startswith("the deadline (1 s) cut saturation after ") for n in opt.report.notes)
    _assert_same_outputs(opt.fusion, fusion, [torch.randn(8, 16) for _ in range(3)])


def test_a_deadline_must_be_a_number_of_seconds_or_none():
    for bad in (-1, float("nan"), "2"):
        with pytest.raises(ValueError, match="deadline_s"):
            eqsat.optimize_fusion(elementwise(4)[0], deadline_s=bad)


@pytest.fixture
def large_repro(tmp_path):
    path = tmp_path / "chain.py"
    path.write_text(repro_source(_read(elementwise(6000)[0]), [torch.randn(4, 8)]))
    return path


def test_the_cli_takes_a_deadline_and_reports_what_it_cut(large_repro, capsys):
    assert main(["optimize", str(large_repro), "--deadline", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "note: the deadline (0.2 s) cut " in out
    assert main(["check", str(large_repro), "--deadline", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "1 output: the values agree" in out and "the deadline (0.2 s) cut " in out
    with pytest.raises(SystemExit):
        main(["optimize", str(large_repro), "--deadline", "-1"])


def test_a_chain_of_fifty_thousand_ops_gives_a_result_not_a_recursion_error():
    fusion = _read(elementwise(50_000)[0])
    try:
        opt, took = _timed_optimize(fusion, META, deadline_s=2.0)
    except eqsat.FusionError:
        return  # a clean error is an answer too
    assert took < 20.0  # 10x the deadline
    _assert_same_outputs(opt.fusion, fusion, [torch.randn(2, 3)])
