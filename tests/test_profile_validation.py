"""Hostile calibration profiles (issue 36, item 10): JSON nested too deeply, text that is not
UTF-8, and numbers that are NaN, infinite, negative or not numbers at all are refused with a
FusionError naming the file (or ``profile``) and the field, and the CLI says ``eqsat: ...`` and
exits 2, never a traceback."""

import copy
import json
from importlib import resources

import pytest

import eqsat
from eqsat.cli import main
from eqsat.cost.profile import Profile, load_profile

GOOD = json.loads(resources.files("eqsat.cost").joinpath("profiles/h200_host_fit.json").read_text())


def tiny(fd):
    x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=eqsat.DataType.Float)
    fd.add_output(fd.ops.exp(x))


def changed(path: str, value):
    """The packaged profile with the field at ``path`` (dots) set to ``value``."""
    data = copy.deepcopy(GOOD)
    *parents, last = path.split(".")
    at = data
    for p in parents:
        at = at[p]
    at[last] = value
    return data


def test_json_nested_too_deeply_is_a_clean_error_naming_the_file(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(eqsat.FusionError, match=r"deep\.json: cannot read profile: .*nested too deeply"):
        load_profile(str(path))


def test_a_profile_that_is_not_utf8_is_a_clean_error_naming_the_file(tmp_path):
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"name": "caf\xe9"}')
    with pytest.raises(eqsat.FusionError, match=r"latin1\.json: cannot read profile: .*not UTF-8"):
        load_profile(str(path))


@pytest.mark.parametrize(
    "content",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"name": "caf\xe9"}',
        b"[1, 2]",
        json.dumps(changed("special_function_weight", -4.0)).encode(),
    ],
    ids=["deep", "latin1", "a-list", "negative-weight"],
)
def test_the_cli_says_what_is_wrong_with_a_profile_and_exits_2(tmp_path, capsys, content):
    from eqsat.lowering import repro_source
    import torch

    repro = tmp_path / "f.py"
    repro.write_text(repro_source(eqsat.from_function(tiny), [torch.randn(8)]))
    profile = tmp_path / "P.json"
    profile.write_bytes(content)
    assert main(["optimize", str(repro), "--profile", str(profile)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("eqsat: ") and "P.json" in err and "Traceback" not in err


@pytest.mark.parametrize("weight", [float("nan"), float("inf"), -1.0, 0.0, "4", True])
def test_special_function_weight_must_be_a_positive_finite_number(weight):
    with pytest.raises(eqsat.FusionError, match=r"profile: .*special_function_weight"):
        eqsat.optimize_fusion(tiny, profile=changed("special_function_weight", weight))


@pytest.mark.parametrize(
    "path, value",
    [
        ("kinds.pointwise.launch_us", float("nan")),
        ("kinds.pointwise.launch_us", "1.0"),
        ("kinds.reduction.gflops", False),
        ("kinds.normalization.inner_outer_row_ns", float("inf")),
        ("host.per_segment_us", -0.5),
        ("host.base_us", None),
        ("error.default", float("nan")),
        ("error.quantile", 1.5),
        ("error.quantile", float("nan")),
        ("error.min_samples", -3),
        ("error.samples", 2.5),
        ("error.kernel_bounds", [1, 2.5]),
        ("error.time_bounds_us", [float("nan")]),
    ],
)
def test_every_number_of_a_profile_is_checked(path, value):
    field = path.split(".")[-1]
    with pytest.raises(eqsat.FusionError, match=rf"profile: not a cost-model profile \(.*{field}"):
        Profile.from_dict(changed(path, value))


def test_error_table_counts_are_whole_and_not_negative():
    data = changed("error.count", [[-1] * len(row) for row in GOOD["error"]["count"]])
    with pytest.raises(eqsat.FusionError, match=r"error\.count"):
        Profile.from_dict(data)


def test_the_packaged_profiles_pass():
    for name in ("h200_host_fit", "h200"):
        assert load_profile(name).special_function_weight > 0
