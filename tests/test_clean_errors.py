"""Bad input gets a one-line FusionError naming the line and op, never a raw traceback
(issue 14's list: an integer beyond int64, a reduction over a dim a rank-0 tensor lacks, an
output written into an input of another shape, a profile with zero bandwidth, rules verify
with a negative case count)."""

import json
import re
import textwrap

import pytest
import torch

import eqsat
from eqsat import DataType
from eqsat.cli import main


def test_an_integer_beyond_int64_is_refused_at_its_line():
    def define(fd):
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        fd.add_output(fd.ops.add(x, 2**70))

    with pytest.raises(eqsat.FusionError, match=r"line \d+: fd.ops.add: the integer \d+ does not fit"):
        eqsat.from_function(define)

    def scalar(fd):
        fd.add_output(fd.ops.full([2], fd.define_scalar(-(2**64)), DataType.Int))

    with pytest.raises(eqsat.FusionError, match="fd.define_scalar: the integer"):
        eqsat.from_function(scalar)


def test_a_rank_0_tensor_has_no_dim_to_reduce():
    def define(fd):
        x = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(x, dims=[0]))

    with pytest.raises(
        eqsat.FusionError, match="fd.ops.sum: dims entry 0 is out of range for a tensor of rank 0"
    ):
        eqsat.from_function(define)


def test_an_output_written_into_an_input_of_another_shape():
    def define(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(x, dims=[1]), alias_input=x)

    with pytest.raises(
        eqsat.FusionError, match=r"fd.add_output: the output \(Float, rank 1\) cannot be written"
    ):
        eqsat.from_function(define)

    def same_rank(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        y = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.add(y, 1.0), alias_input=x)

    fusion = eqsat.from_function(same_rank)  # extents known only at run time
    with pytest.raises(eqsat.FusionError, match="cannot be written into its alias_input of shape"):
        eqsat.run_fusion(fusion, [torch.zeros(2, 3), torch.zeros(3, 3)], strict=True)


def test_a_profile_with_zero_bandwidth_is_refused(tmp_path):
    from eqsat.cost.profile import load_profile

    profile = json.loads(json.dumps(load_profile().__dict__, default=lambda o: o.__dict__))
    profile["kinds"]["pointwise"]["bandwidth_GBps"] = 0
    path = tmp_path / "p.json"
    path.write_text(json.dumps(profile))
    with pytest.raises(eqsat.FusionError, match="not a cost-model profile.*bandwidth_GBps"):
        load_profile(str(path))


def test_rules_verify_refuses_a_negative_case_count(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["rules", "verify", "add-commutes", "--cases", "-5"])
    assert exit_.value.code == 2 and "must be 1 or more" in capsys.readouterr().err


REPRO = textwrap.dedent("""\
    import torch
    from nvfuser_direct import FusionDefinition, DataType

    def nvfuser_fusion(fd : FusionDefinition) -> None :
        tv0 = fd.define_tensor(shape=[-1, 4], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
        fd.add_output(fd.ops.exp(tv0))

    """)


@pytest.mark.parametrize(
    "inputs, where, message",
    [
        (
            "[torch.randn(3, 5)]",
            ":line 5: fd.define_tensor: ",
            "input 0: expected shape [-1, 4] (got [3, 5])",
        ),
        ("[torch.randn(3, 4), 2]", ": ", "the definition takes 1 inputs, got 2"),
        ("[torch.randn(3, 4).double()]", ":line 5: fd.define_tensor: ", "input 0: expected dtype Float"),
    ],
)
def test_every_error_about_a_file_names_the_file(tmp_path, capsys, inputs, where, message):
    """Input checks (optimize, check, pair, show --run, optimize_fusion(path)) name the file, and
    the line where there is one."""
    path = tmp_path / "repro.py"
    path.write_text(REPRO + f"inputs = {inputs}\n")
    for command in (["optimize"], ["check"], ["show", "--run"]):
        assert main(command + [str(path)]) == 2, command
        assert capsys.readouterr().err.startswith(f"eqsat: {path}{where}{message}"), command
    assert main(["pair", str(path), str(path), "--link", "0:0"]) == 2
    assert f"eqsat pair: error: {path}{where}{message}" in capsys.readouterr().err
    with pytest.raises(eqsat.FusionError, match=re.escape(f"{path}{where}{message}")):
        eqsat.optimize_fusion(str(path), eval(inputs))


def test_a_definition_without_outputs_is_an_error_at_its_line(tmp_path, capsys):
    path = tmp_path / "repro.py"
    path.write_text(
        REPRO.replace("fd.add_output(fd.ops.exp(tv0))", "tv1 = fd.ops.exp(tv0)")
        + "inputs = [torch.randn(3, 4)]\n"
    )
    with pytest.raises(eqsat.FusionError, match=re.escape(f"{path}:line 4: the definition has no outputs")):
        eqsat.from_file(path)
    assert main(["show", str(path)]) == 2
    assert f"{path}:line 4: the definition has no outputs" in capsys.readouterr().err


def test_show_run_without_an_inputs_list_says_so(tmp_path, capsys):
    """``eqsat show --run`` on a file with no ``inputs`` runs nothing: an error, as optimize's."""
    path = tmp_path / "repro.py"
    path.write_text(REPRO)
    assert main(["show", str(path)]) == 0
    capsys.readouterr()
    assert main(["show", "--run", str(path)]) == 2
    assert f"{path}: the file has no `inputs = [...]` list" in capsys.readouterr().err
