"""Saturation finds the two motivating rewrites, honours rule selection, and stops cleanly at
every limit."""

import pytest
from conftest import corpus_files

import eqsat
from eqsat import DataType
from eqsat.egraph.explore import explore
from eqsat.egraph.saturate import Limits, select_rules
from eqsat.testing.seeds import SEEDS


def test_seed_one_egraph_contains_the_distributed_sum():
    seed = SEEDS["reduction_broadcast"]
    result = explore(seed.model_ref, contains=[seed.model])
    assert result.contains == [True]
    assert result.fired.get("sum-of-product-factor-right", 0) >= 1
    assert result.saturation.stop == "saturated"


def test_seed_two_egraph_contains_the_split_max():
    seed = SEEDS["layernorm_amax"]
    result = explore(seed.model_ref, contains=[seed.model])
    assert result.contains == [True]


def test_the_equivalence_check_is_not_trivially_true():
    for seed in SEEDS.values():
        assert explore(seed.model_ref, contains=[seed.model], rules=[]).contains == [False]

    def other(fd):  # a different computation on the same inputs
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        s = fd.ops.max(x, dims=[1])
        fd.add_output(fd.ops.mul(fd.ops.broadcast_in_dim(s, shape=fd.ops.shape(b), broadcast_dims=[0]), b))

    assert explore(SEEDS["reduction_broadcast"].model_ref, contains=[other]).contains == [False]


def test_reassociating_rules_can_be_turned_off():
    one, two = SEEDS["reduction_broadcast"], SEEDS["layernorm_amax"]
    assert explore(one.model_ref, contains=[one.model], reassociate=False).contains == [False]
    assert explore(two.model_ref, contains=[two.model], reassociate=False).contains == [True]
    names = select_rules(reassociate=False)
    assert "sum-of-product-factor-right" not in names and "split-max-lowest-axis-first" in names


def test_unknown_rule_names_are_an_error():
    with pytest.raises(ValueError, match="unknown rules"):
        select_rules(["sum-of-everything"])


def _deep(fd):
    x = fd.define_tensor(shape=[-1, -1, -1, -1])
    y = fd.ops.abs(x)
    for _ in range(6):
        y = fd.ops.add(fd.ops.mul(y, x), x)
    fd.add_output(fd.ops.sum(y, dims=[0, 1, 2, 3]))


@pytest.mark.parametrize(
    "limits, stop",
    [
        (Limits(iterations=1), "iteration limit"),
        (Limits(nodes=50), "node limit"),
        (Limits(seconds=0.0), "time limit"),
    ],
)
def test_each_limit_stops_cleanly(limits, stop):
    result = explore(_deep, limits=limits, contains=[_deep])
    assert result.saturation.stop == stop
    assert_stopped_within(result.saturation, limits)
    assert result.contains == [True]  # the e-graph is still usable


def test_more_labels_than_the_masks_hold_is_skipped_not_wrong():
    def wide(fd):
        ts = [fd.define_tensor(shape=[-1]) for _ in range(70)]
        out = None
        for t in ts:  # 70 unrelated axes, one per input
            b = fd.ops.sum(t, dims=[0])
            out = b if out is None else fd.ops.add(out, b)
        fd.add_output(out)

    result = explore(wide)
    assert result.encoding.skipped and "labels" in result.encoding.skipped


def assert_stopped_within(sat, limits: Limits) -> None:
    """What saturation under ``limits`` and no deadline must do, whatever the fusion: stop at
    one of those limits (never "deadline") or saturate, within the iteration limit, and name the
    stop truthfully. The iteration limit stops it only once it ran that many iterations; the node
    and time limits only after a first iteration (the node limit is looked at after one, the time
    limit lets the first run whatever it is); where the iteration or time limit stopped it, every
    iteration before passed the node limit's look, so the e-graph is under it; where no rule
    matched anything, it saturated at the first iteration (or before one, given no rules)."""
    assert sat.stop in ("saturated", "iteration limit", "node limit", "time limit"), sat.stop
    assert sat.iterations <= limits.iterations
    if sat.stop == "iteration limit":
        assert sat.iterations == limits.iterations
    if sat.stop in ("node limit", "time limit"):
        assert sat.iterations >= 1
    if sat.stop in ("iteration limit", "time limit") and sat.iterations:
        assert sat.nodes < limits.nodes
    if not sat.fired:
        assert sat.stop == "saturated" and sat.iterations <= 1


@pytest.mark.parametrize("path", corpus_files(), ids=[p.name for p in corpus_files()])
def test_corpus_saturates_within_the_default_limits(path):
    result = explore(eqsat.from_file(path, inputs=False).fusion)
    assert_stopped_within(result.saturation, Limits())
    assert result.nodes >= len(result.encoding.graph.nodes) > 0  # nothing is lost
