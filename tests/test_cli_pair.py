"""``eqsat pair FORWARD BACKWARD --link B:F``: the command line of ``eqsat.optimize_pair``.

The fusions are written here: a forward computing a row-wise logsumexp of x [N, V] and its
sum, and a backward recomputing that logsumexp from the same x (linked 0:0) by the same calls
to scale exp(x - lse) by a scalar. At [4096, 32768] (meta tensors: the CLI reads only shapes)
the forward writes the [N] logsumexp as an extra output and the backward reads it instead of
reducing x again."""

import json
import textwrap

import pytest

from eqsat.cli import main

HEADER = "import torch\nfrom nvfuser_direct import FusionDefinition, DataType\n\n\n"

FORWARD = textwrap.dedent("""\
    def nvfuser_fusion(fd : FusionDefinition) -> None :
        tv0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
        tv1 = fd.ops.max(tv0, dims=[1], keepdim=False, dtype=DataType.Null)
        tv2 = fd.ops.broadcast(tv1, is_broadcast_dim=[False, True])
        tv3 = fd.ops.sub(tv0, tv2)
        tv4 = fd.ops.exp(tv3)
        tv5 = fd.ops.sum(tv4, dims=[1], keepdim=False, dtype=DataType.Null)
        tv6 = fd.ops.log(tv5)
        tv7 = fd.ops.add(tv6, tv1)
        tv8 = fd.ops.sum(tv7, dims=[0], keepdim=False, dtype=DataType.Null)
        fd.add_output(tv8)
    """)

BACKWARD = textwrap.dedent("""\
    def nvfuser_fusion(fd : FusionDefinition) -> None :
        tv0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
        tv1 = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float, is_cpu=False)
        tv2 = fd.ops.max(tv0, dims=[1], keepdim=False, dtype=DataType.Null)
        tv3 = fd.ops.broadcast(tv2, is_broadcast_dim=[False, True])
        tv4 = fd.ops.sub(tv0, tv3)
        tv5 = fd.ops.exp(tv4)
        tv6 = fd.ops.sum(tv5, dims=[1], keepdim=False, dtype=DataType.Null)
        tv7 = fd.ops.log(tv6)
        tv8 = fd.ops.add(tv7, tv2)
        tv9 = fd.ops.broadcast(tv8, is_broadcast_dim=[False, True])
        tv10 = fd.ops.sub(tv0, tv9)
        tv11 = fd.ops.exp(tv10)
        tv12 = fd.ops.mul(tv11, tv1)
        fd.add_output(tv12)
    """)

SHAPE = "4096, 32768"


def _write(tmp_path, shape=SHAPE, forward_inputs=None, backward_inputs=None):
    fwd, bwd = tmp_path / "forward.py", tmp_path / "backward.py"
    fwd.write_text(HEADER + FORWARD + (forward_inputs or f"\ninputs = [torch.empty({shape})]\n"))
    backward_inputs = backward_inputs or f"\ninputs = [torch.empty({shape}), torch.empty(())]\n"
    bwd.write_text(HEADER + BACKWARD + backward_inputs)
    return str(fwd), str(bwd)


def _section(out: str, title: str) -> str:
    """The definition printed under ``title``."""
    return out.split(title + "\n", 1)[1].split("\n\n", 1)[0]


def test_pair_passes_the_logsumexp_and_prints_both_definitions(tmp_path, capsys):
    fwd, bwd = _write(tmp_path)
    assert main(["pair", fwd, bwd, "--link", "0:0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("pair predicted: ")
    assert "saved: add -> DataType.Float[-1]: forward output 1, backward input 2" in out
    forward = _section(out, "optimized forward definition:")
    backward = _section(out, "optimized backward definition:")
    assert forward.count("fd.add_output(") == 2  # the loss, then the logsumexp
    assert backward.count("fd.define_tensor(") == 3  # x, the scalar, the logsumexp
    assert "shape=[-1], contiguity=[True], dtype=DataType.Float" in backward
    assert "fd.ops.max" not in backward and "fd.ops.sum" not in backward  # x is read once
    assert "run the forward, then the backward on its own 2 inputs followed by:" in out
    assert "backward input 2 = forward output 1 (add -> DataType.Float[-1])" in out


def test_pair_json(tmp_path, capsys):
    fwd, bwd = _write(tmp_path)
    assert main(["pair", fwd, bwd, "--link", "0:0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"before_us", "apart_us", "after_us", "saved", "variants", "notes"} <= set(out)
    assert out["after_us"] < 0.95 * out["apart_us"] and out["apart_us"] <= out["before_us"]
    assert out["saved"] == ["add -> DataType.Float[-1]: forward output 1, backward input 2"]
    assert [(p["forward_output"], p["backward_input"]) for p in out["passed"]] == [(1, 2)]
    assert out["backward_source"].count("fd.define_tensor(") == 3
    assert out["forward_source"].count("fd.add_output(") == 2


def test_pair_keeps_the_fusions_apart_below_the_margin(tmp_path, capsys):
    fwd, bwd = _write(tmp_path)
    assert main(["pair", fwd, bwd, "--link", "0:0", "--min-gain", "0.9"]) == 0
    out = capsys.readouterr().out
    assert "saved: nothing" in out and "not above the margin 90%" in out
    assert "nothing passed: the backward takes its own inputs" in out
    assert _section(out, "optimized backward definition:").count("fd.define_tensor(") == 2


def test_pair_reads_a_file_beyond_the_repro_language_with_trust(tmp_path, capsys):
    fwd, bwd = _write(tmp_path, forward_inputs="\ninputs = [torch.empty(4096, 32768) for _ in range(1)]\n")
    assert main(["pair", fwd, bwd, "--link", "0:0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"eqsat pair: error: {fwd}:line ") and "(eqsat --trust)" in err
    assert main(["pair", fwd, bwd, "--link", "0:0", "--trust"]) == 0
    assert "saved: add" in capsys.readouterr().out


@pytest.mark.parametrize(
    "link, message",
    [
        (["--link", "a:b"], "not B:F"),
        (["--link", "1"], "not B:F"),
        (["--link", "1:"], "not B:F"),
        (["--link", "0:0:0"], "not B:F"),
        (["--link=-1:0"], "input positions are 0 or more, got '-1:0'"),
        (["--link", "0:-2"], "input positions are 0 or more"),
        (["--link", "-1:0"], "expected one argument"),  # argparse takes -1:0 for an option
        ([], "the following arguments are required: --link"),
        (["--link", "0:0", "--link", "0:1"], "backward input 0 is linked to forward inputs 0 and 1"),
    ],
)
def test_bad_link_text_is_a_usage_error(tmp_path, capsys, link, message):
    fwd, bwd = _write(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["pair", fwd, bwd, *link])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert "eqsat pair: error: argument --link" in err or "required" in err
    assert message in err


def test_a_link_out_of_range_is_a_fusion_error(tmp_path, capsys):
    fwd, bwd = _write(tmp_path)
    assert main(["pair", fwd, bwd, "--link", "5:0"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == (
        "eqsat pair: error: links: backward input 5 -> forward input 0 is out of "
        "range (the backward has 2 inputs, the forward 1)"
    )
    assert main(["pair", fwd, bwd, "--link", "0:1"]) == 2
    assert "forward input 1 is out of range" in capsys.readouterr().err


def test_a_link_of_another_rank_names_the_backward_file_and_line(tmp_path, capsys):
    fwd, bwd = _write(tmp_path)
    assert main(["pair", fwd, bwd, "--link", "1:0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"eqsat pair: error: {bwd}:line 7: fd.define_tensor: links: backward input 1")
    assert "dtype and rank must agree" in err


def test_a_file_without_inputs_is_an_error(tmp_path, capsys):
    fwd, bwd = _write(tmp_path, backward_inputs="\n")
    assert main(["pair", fwd, bwd, "--link", "0:0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("eqsat pair: error: ") and bwd in err and "no `inputs = [...]` list" in err


def test_pair_help_lists_the_options(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["pair", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for option in (
        "--link B:F",
        "--min-gain",
        "--trust",
        "--json",
        "--deadline",
        "--profile",
        "--no-reassociate",
        "--frontend",
        "forward",
        "backward",
    ):
        assert option in out, option
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "pair" in capsys.readouterr().out
