"""The pipeline's shared parts: one ``eqsat.Options`` (the keywords of ``optimize_fusion``,
validated once), one ``Deadline`` (the stages' ``Cut``), and the entry points that take an
Options (the driver, ``optimize_pair``, the Thunder transform's Options)."""

import dataclasses
import inspect
import time

import pytest
import torch

import eqsat
from eqsat.deadline import NEVER, Cut, Deadline
from eqsat.pipeline.driver import optimize
from eqsat.thunder import Options as ThunderOptions


def _add(fd):
    x = fd.define_tensor(shape=[-1], contiguity=[True])
    fd.add_output(fd.ops.add(x, x))


def test_optimize_fusions_keywords_are_the_options_fields_with_their_defaults():
    params = inspect.signature(eqsat.optimize_fusion).parameters
    keywords = {n: p.default for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    fields = {f.name: f.default for f in dataclasses.fields(eqsat.Options)}
    assert keywords == fields


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"deadline_s": -1}, r"deadline_s must be a number of seconds >= 0, or None; got -1"),
        ({"deadline_s": True}, "deadline_s must be"),
        ({"min_gain": 1.0}, r"min_gain must be a fraction >= 0 and < 1"),
        ({"min_gain": False}, "min_gain must be"),
        ({"search_budget": 2.5}, "search_budget must be a whole number"),
        ({"search_seconds": float("nan")}, "search_seconds must be a number of seconds"),
        ({"verify": "cpu"}, r"verify must be None or 'gpu', got 'cpu'"),
    ],
)
def test_an_option_out_of_range_is_a_value_error_naming_it(kwargs, match):
    with pytest.raises(ValueError, match=match):
        eqsat.Options(**kwargs)
    with pytest.raises(ValueError, match=match):  # the same check, the same text
        eqsat.optimize_fusion(_add, **kwargs)


def test_options_are_frozen_and_keep_rules_as_a_tuple():
    o = eqsat.Options(rules=["mul-commutes"], min_gain=0.1)
    assert o.rules == ("mul-commutes",) and o == eqsat.Options(rules=("mul-commutes",), min_gain=0.1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.min_gain = 0.2
    with pytest.raises(TypeError):
        eqsat.Options(0.1)  # keywords only


def test_the_result_keeps_its_options_and_reoptimizes_with_them():
    o = eqsat.Options(min_gain=0.0, deadline_s=None)
    opt = optimize(_add, [torch.empty(8, device="meta")], o)
    assert opt.options is o
    again = opt.for_inputs([torch.empty(16, device="meta")])
    assert again.options is o and again is not opt


def test_the_thunder_options_are_eqsat_options_checked_further():
    assert issubclass(ThunderOptions, eqsat.Options)
    made = ThunderOptions.of(eqsat.Options(min_gain=0.1, rules=["mul-commutes"]))
    assert isinstance(made, ThunderOptions) and made.min_gain == 0.1 and made.rules == ("mul-commutes",)
    with pytest.raises(ValueError, match="rules is empty"):
        ThunderOptions.of(eqsat.Options(rules=[]))
    eqsat.Options(cache_dir="/tmp/x")  # optimize_fusion takes it without verify
    with pytest.raises(ValueError, match="cache_dir applies to verify='gpu' only"):
        ThunderOptions(cache_dir="/tmp/x")


def test_optimize_pair_takes_options_or_keywords_not_both():
    with pytest.raises(TypeError, match="not both"):
        eqsat.optimize_pair(_add, _add, {0: 0}, options=eqsat.Options(), min_gain=0.1)
    with pytest.raises(ValueError, match="does not take verify"):
        eqsat.optimize_pair(_add, _add, {0: 0}, verify="gpu")


def test_a_deadline_passes_once_and_stops_a_stage_with_a_cut():
    assert not NEVER.passed(ahead=1e9) and NEVER.left() == float("inf")
    d = Deadline(0.0)
    assert d.passed() and d.left() <= 0
    with pytest.raises(Cut) as caught:
        d.check("extraction")
    assert caught.value.stage == "extraction"
    NEVER.check("extraction")  # never raises


def test_derived_deadlines_end_where_they_should():
    d = Deadline(100.0)
    assert d.earlier(40.0).at == pytest.approx(d.at - 40.0)
    half = d.share(0.5)
    assert half.at == pytest.approx(time.perf_counter() + (d.at - time.perf_counter()) / 2, abs=0.5)
    assert half.ends_before(d) and not d.ends_before(half) and not NEVER.ends_before(d)
    assert d.ends_before(NEVER) and Deadline(None).earlier(5.0).at is None
    assert NEVER.share(0.5).at is None
