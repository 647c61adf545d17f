"""Random draws and kernel boundaries: what a draw costs in each kernel kind (the profile's
``draw_ps`` and ``draw_row_ns``), a ``segment_set`` as the kernel boundary nvFuser makes of it, and the rule
that draws dropout's mask in a kernel of its own where the kernel that uses it draws slowly.
Checked on dropout's backward as Thunder writes it (eqsat.testing.dropout_backward), against
torch given the mask (nvFuser's Philox numbers, as eqsat's torch executor draws them)."""

import json
from importlib import resources

import pytest
import torch

import eqsat
from eqsat.cost.profile import Profile
from eqsat.errors import FusionError
from eqsat.testing.dropout_backward import definition, make_inputs, torch_reference

SHAPE = (4096, 1024)  # OPT's hidden size at batch 4 x seq 1024, as Thunder's OPT fusions


def _ops(fusion, name: str) -> int:
    return sum(n.op == name for n in fusion.nodes)


def _profile(draw_row_ns=None, **draw_ps) -> Profile:
    """The packaged profile with the kinds' draw_ps replaced (the others left out), and the
    outer reduction's draw_row_ns where given (else none)."""
    data = json.loads(resources.files("eqsat.cost").joinpath("profiles/h200_host_fit.json").read_text())
    for kind, consts in data["kinds"].items():
        consts.pop("draw_ps", None)
        consts.pop("draw_row_ns", None)
        if kind in draw_ps:
            consts["draw_ps"] = draw_ps[kind]
    if draw_row_ns is not None:
        data["kinds"]["outer_reduction"]["draw_row_ns"] = draw_row_ns
    return Profile.from_dict(data)


@pytest.fixture(scope="module")
def outer():
    return eqsat.optimize_fusion(definition(SHAPE, "rows"), make_inputs(SHAPE, "meta"))


def test_a_draw_costs_its_kinds_draw_ps_per_element_in_each_kernel_that_draws_it():
    """4 Mi elements drawn in a pointwise kernel at 10 ps each: 41.9 us of arithmetic, which
    the kernel's bytes (16.8 MB, 3.8 us) no longer hide; without draw_ps the bytes decide."""
    n = SHAPE[0] * SHAPE[1]
    fusion, inputs = definition(SHAPE, None), make_inputs(SHAPE, "meta")
    free = eqsat.estimate_fusion(fusion, inputs, profile=_profile())
    slow = eqsat.estimate_fusion(fusion, inputs, profile=_profile(pointwise=10.0))
    consts = _profile().kinds["pointwise"]
    flops = free.kernels[0].flops
    assert slow.kernels[0].time_us == pytest.approx(
        consts.launch_us + flops / (consts.gflops * 1e3) + n * 10e-6
    )
    assert free.kernels[0].time_us == pytest.approx(
        consts.launch_us + free.bytes / (consts.bandwidth_GBps * 1e3)
    )


@pytest.mark.parametrize("shape", [SHAPE, (8192, 4096)])
def test_an_outer_reduction_draws_by_the_rows_it_reduces(shape):
    """An outer reduction's threads run along the kept axis, each drawing its column's rows
    in turn: with draw_row_ns its draw takes that per row (4096 rows of 1024, 8192 of 4096:
    8x the elements, 2x the time; an H100 measured 2.0x), unless draw_ps per element is more."""
    fusion, inputs = definition(shape, "rows"), make_inputs(shape, "meta")
    rows = shape[0]
    base = eqsat.estimate_fusion(fusion, inputs, profile=_profile()).kernels[0]
    consts = _profile().kinds["outer_reduction"]
    by_rows = eqsat.estimate_fusion(fusion, inputs, profile=_profile(draw_row_ns=100.0)).kernels[0]
    assert by_rows.kind == "outer_reduction"
    assert by_rows.time_us == pytest.approx(
        consts.launch_us + base.flops / (consts.gflops * 1e3) + rows * 0.1
    )
    by_elements = eqsat.estimate_fusion(
        fusion, inputs, profile=_profile(draw_row_ns=100.0, outer_reduction=1000.0)
    )
    assert by_elements.kernels[0].time_us == pytest.approx(
        consts.launch_us + base.flops / (consts.gflops * 1e3) + shape[0] * shape[1] * 1e-3
    )


def test_a_segment_set_is_a_kernel_boundary_that_writes_and_reads_its_value():
    """The mask behind a segment_set (the form written by hand): two kernels, the first
    writing the bool mask (1 byte an element), the second reading it with g."""
    n = SHAPE[0] * SHAPE[1]
    est = eqsat.estimate_fusion(definition(SHAPE, "rows", split=True), make_inputs(SHAPE, "meta"))
    kinds = sorted(k.kind for k in est.kernels)
    assert kinds == ["outer_reduction", "pointwise"]
    draw = next(k for k in est.kernels if k.kind == "pointwise")
    assert (draw.bytes_read, draw.bytes_written) == (0, n)
    reduction = next(k for k in est.kernels if k.kind == "outer_reduction")
    assert reduction.bytes_read == n + 2 * n  # the mask, and g in bf16


def test_the_mask_is_drawn_apart_from_an_outer_reduction(outer):
    """An outer reduction of 4096 rows draws about 5x slower per element than a pointwise
    kernel (h200_host_fit's draw_row_ns, fitted on OPT's backward fusions): eqsat cuts the
    fusion at the bool mask, which a pointwise kernel of its own draws."""
    assert outer.report.rules == ["draw-in-its-own-kernel"]
    assert len(outer.report.before.kernels) == 1 and len(outer.report.after.kernels) == 2
    assert outer.report.after.time_us < 0.7 * outer.report.before.time_us
    assert _ops(outer.fusion, "segment_set") == 1
    cut = next(n for n in outer.fusion.nodes if n.op == "segment_set")
    assert outer.fusion.types[cut.outputs[0]].dtype is eqsat.DataType.Bool
    again = eqsat.estimate_fusion(outer.fusion, make_inputs(SHAPE, "meta"))
    assert again.time_us == pytest.approx(outer.report.after.time_us, rel=0.01)


@pytest.mark.parametrize("reduce", [None, "cols"])
def test_a_kernel_that_draws_cheaply_keeps_its_draw(reduce):
    """A pointwise kernel, and an inner reduction (which draws as fast), keep the draw: a
    kernel of its own would cost a launch, a segment's host time and the mask's bytes."""
    optimized = eqsat.optimize_fusion(definition(SHAPE, reduce), make_inputs(SHAPE, "meta"))
    assert not optimized.report.rules
    assert _ops(optimized.fusion, "segment_set") == 0


def test_the_split_gives_the_same_numbers(outer):
    """Exact: the same draw from the same seed and offset, element for element (eqsat's torch
    executor draws nvFuser's Philox numbers; the draw's shape is literal, as Thunder prints
    it); and both agree with torch given the mask the draw made."""
    inputs = make_inputs(SHAPE)
    inputs[0][0, :3] = torch.tensor([float("inf"), float("-inf"), float("nan")])
    given = eqsat.run_fusion(eqsat.ingest(definition(SHAPE, "rows")), inputs, strict=True)
    got = eqsat.run_fusion(outer.fusion, inputs, strict=True)
    for g, w in zip(got, given, strict=True):
        assert torch.equal(g.view(torch.int16), w.view(torch.int16))
    kept = float((given[0] != 0).float().mean())
    assert 0.89 < kept < 0.91  # p = 0.9, 4 Mi draws
    want = torch_reference(inputs[0], given[0], "rows")
    torch.testing.assert_close(given[0], want[0], equal_nan=True)
    finite = want[1].isfinite()
    torch.testing.assert_close(given[1][finite], want[1][finite], rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("field", ["draw_ps", "draw_row_ns"])
def test_a_profile_refuses_a_negative_draw_cost(field):
    data = json.loads(resources.files("eqsat.cost").joinpath("profiles/h200_host_fit.json").read_text())
    data["kinds"]["pointwise"][field] = -1.0
    with pytest.raises(FusionError, match=field):
        Profile.from_dict(data)
