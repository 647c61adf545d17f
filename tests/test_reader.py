"""Reading a repro runs none of its code: each way a file could run code is refused at its line,
no marker file appears, and ``trust=True`` (``--trust``) runs the file as Python, as documented."""

import textwrap

import pytest
import torch

import eqsat
from eqsat import DataType
from eqsat.cli import main
from eqsat.frontend.reader import OutsideLanguage

DEFINITION = textwrap.dedent("""\
    def nvfuser_fusion(fd : FusionDefinition) -> None :
        tv0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, is_cpu=False)
        tv1 = fd.ops.mul(tv0, 2.00000)
        fd.add_output(tv1)
    """)
HEADER = "import torch\nfrom nvfuser_direct import FusionDefinition, DataType\n\n"
INPUTS = "\ninputs = [torch.randn(3)]\n"


def _marker_attempts(marker):
    """Files that would write ``marker`` if run, each with the line that would do it."""
    touch = f"open({str(marker)!r}, 'w').write('ran')"
    body = DEFINITION.splitlines()
    return {
        "top-level statement": (HEADER + DEFINITION + f"{touch}\n" + INPUTS, 8),
        "an import": (HEADER + f"import os\nos.system('touch {marker}')\n" + DEFINITION + INPUTS, 4),
        "in the inputs": (HEADER + DEFINITION + f"\ninputs = [torch.randn(3), {touch}]\n", 9),
        "in the definition": (HEADER + "\n".join(body[:2] + [f"    {touch}"] + body[2:]) + "\n" + INPUTS, 6),
        "a default argument": (
            HEADER + DEFINITION.replace("(fd : FusionDefinition)", f"(fd, x={touch})") + INPUTS,
            None,
        ),
        "a decorator": (
            HEADER + f"def deco(f):\n    {touch}\n    return f\n\n@deco\n" + DEFINITION + INPUTS,
            8,
        ),
        "a class body": (HEADER + f"class C:\n    {touch}\n\n" + DEFINITION + INPUTS, 4),
        "a dunder escape": (HEADER + DEFINITION + "\ninputs = [torch.randn(3).__class__]\n", 9),
        "torch beyond constructors": (HEADER + DEFINITION + "\ninputs = [torch.load('x')]\n", 9),
    }


@pytest.mark.parametrize("case", sorted(_marker_attempts("m")))
def test_reading_runs_nothing(case, tmp_path):
    marker = tmp_path / "marker"
    text, line = _marker_attempts(marker)[case]
    path = tmp_path / "repro.py"
    path.write_text(text)
    try:
        repro = eqsat.from_file(path)
    except OutsideLanguage as err:
        assert "trust=True" in str(err)
        if line is not None:
            assert err.line == line, str(err)
    else:  # what is never called (a default argument) is never evaluated either
        assert case == "a default argument"
        assert repro.fusion.ops() == ["define_tensor", "mul"]
    assert not marker.exists()
    # show reads the definition alone (no inputs): it refuses what is in or on the definition;
    # optimize reads the whole file and refuses all but the default argument (never called)
    assert main(["show", str(path)]) == (2 if case in ("a decorator", "in the definition") else 0)
    assert main(["optimize", str(path)]) == (0 if case == "a default argument" else 2)
    assert not marker.exists()


def test_trust_runs_the_file_as_python(tmp_path):
    marker = tmp_path / "marker"
    text, _ = _marker_attempts(marker)["top-level statement"]
    path = tmp_path / "repro.py"
    path.write_text(text)
    repro = eqsat.from_file(path, trust=True)
    assert marker.exists() and repro.inputs[0].shape == (3,)
    marker.unlink()
    assert main(["optimize", "--trust", str(path)]) == 0 and marker.exists()


def test_a_trusted_file_that_exits_is_reported_not_obeyed(tmp_path, capsys):
    path = tmp_path / "repro.py"
    path.write_text(HEADER + DEFINITION + "raise SystemExit(0)\n" + INPUTS)
    with pytest.raises(eqsat.FusionError, match="SystemExit"):
        eqsat.from_file(path, trust=True)
    assert main(["check", "--trust", str(path)]) == 2


def test_the_language_repros_are_written_in(tmp_path):
    text = HEADER + textwrap.dedent('''\
        def nvfuser_fusion(fd : FusionDefinition) -> None :
            """docstring"""
            tv0 = fd.define_tensor(shape=[2, -1], contiguity=[True, None], dtype=DataType.BFloat16, is_cpu=False)
            c1 = fd.define_scalar(None, dtype=DataType.Int)
            tv2, tv3, tv4 = fd.ops.welford(fd.ops.cast(tv0, dtype=DataType.Float), dims=[1])
            tv5 = fd.ops.where(fd.ops.gt(tv2, -float("inf")), tv2 * 2 + 1, -0.00000)
            fd.add_output(tv5)

        with FusionDefinition() as fd:
            nvfuser_fusion(fd)

        torch.manual_seed(0)
        base = torch.randn(2, 1).mul(0.5).add(1).clamp(-3, 3).to(torch.bfloat16)
        inputs = [
            base.expand(2, 4),
            (torch.rand(1) < 2).long().sum().item() * 3,
        ]
        out = fd.execute(inputs)
        print(out)
        ''')
    repro = eqsat.from_source(text)
    x, n = repro.inputs
    assert x.stride() == (1, 0) and n == 3
    (out,) = eqsat.run_fusion(repro.fusion, repro.inputs, strict=True)
    torch.testing.assert_close(out, x.float().mean(1) * 2 + 1)


def test_non_finite_statistics_printed_as_bare_names_are_those_floats():
    """A capture that formats a tensor's statistics with ``:.4g`` prints ``nan`` and ``inf``
    where the tensor held non-finite values; the reader takes them as the floats Python prints
    so, unless the file binds the name itself."""
    text = (
        HEADER
        + DEFINITION
        + textwrap.dedent("""
        inputs = [
            torch.randn(4).mul(1).add(nan).clamp(nan, nan).to(torch.float32),
            torch.full((2,), -inf),
        ]
        """)
    )
    repro = eqsat.from_source(text)
    x, y = repro.inputs
    assert x.isnan().all() and (y == float("-inf")).all()
    (out,) = eqsat.run_fusion(repro.fusion, [x], strict=True)
    assert out.isnan().all()
    bound = HEADER + DEFINITION + "\nnan = 2.0\ninputs = [torch.full((3,), nan)]\n"
    assert (eqsat.from_source(bound).inputs[0] == 2.0).all()


def test_unreadable_text_is_a_clean_error(tmp_path):
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbf" + (HEADER + DEFINITION + INPUTS).encode())
    assert eqsat.from_file(bom).fusion.ops() == ["define_tensor", "mul"]
    latin = tmp_path / "latin.py"
    latin.write_bytes(("# caf\xe9\n" + HEADER + DEFINITION).encode("latin-1"))
    with pytest.raises(eqsat.FusionError, match="not UTF-8"):
        eqsat.from_file(latin)
    with pytest.raises(OutsideLanguage, match="for statement"):
        eqsat.from_source(
            HEADER
            + DEFINITION.replace(
                "    fd.add_output(tv1)", "    for i in range(2):\n        fd.add_output(tv1)"
            )
        )
    with pytest.raises(eqsat.FusionError, match="line 9: '2 \\*\\* 10 \\*\\* 9': .* none beyond 4096"):
        eqsat.from_source(HEADER + DEFINITION + "\ninputs = [2 ** 10 ** 9]\n")
    deep = " + ".join(["tv0"] * 20000)
    with pytest.raises(eqsat.FusionError, match="deep|complex|nested|recursion"):
        eqsat.from_source(HEADER + DEFINITION.replace("fd.ops.mul(tv0, 2.00000)", deep))
    deep = "[" * 300 + "0" + "]" * 300  # too deep for the parser: a clean error
    with pytest.raises(eqsat.FusionError, match="nested|recursion"):
        eqsat.from_source(HEADER + DEFINITION + f"\ninputs = [torch.randn(3), {deep}]\n")


def test_the_reader_drives_a_frontend_laid_out_as_nvfuser_direct():
    """nvfuser_direct's fd.ops is a module of functions, its values are extension types: the
    reader makes the definition's calls on them as on eqsat's recorder (as bench/corpus.py's
    "as given" does on the GPU)."""
    import types

    calls = []
    ops = types.ModuleType("nvfuser_direct._C_DIRECT.ops")

    def mul(a, b):
        calls.append(("mul", a, b))
        return Value("tv1")

    mul.__module__ = ops.__name__
    ops.mul = mul

    class Value:
        def __init__(self, name):
            self.name = name

    class FusionDefinition:
        def __init__(self):
            self.ops = ops

        def define_tensor(self, **kwargs):
            calls.append(("define_tensor", kwargs["dtype"]))
            return Value("tv0")

        def add_output(self, value):
            calls.append(("add_output", value.name))

    class DataType:
        Float = "the frontend's Float"

    for cls in (Value, FusionDefinition, DataType):
        cls.__module__ = "nvfuser_direct"
    repro = eqsat.from_source(HEADER + DEFINITION + INPUTS)
    from eqsat.frontend.ingest import define_on

    define_on(repro, FusionDefinition(), DataType)
    assert [c[0] for c in calls] == ["define_tensor", "mul", "add_output"]
    assert calls[0][1] == "the frontend's Float" and calls[1][2] == 2.0


def test_an_op_eqsat_does_not_model_keeps_the_outputs_the_file_unpacks_it_into():
    """An op nvFuser has that eqsat's table lacks (sdpfa_fwd) is opaque: read from a file it has
    as many outputs as the names its call is unpacked into, the rest of the fusion is still
    optimized, and the optimized definition writes the call back with all of them."""
    text = (
        HEADER
        + textwrap.dedent("""\
        def nvfuser_fusion(fd : FusionDefinition) -> None :
            tv0 = fd.define_tensor(shape=[16, 128], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
            tv1 = fd.ops.exp(tv0)
            tv2, tv3, tv4, tv7 = fd.ops.sdpfa_fwd(fd.ops.neg(tv1), 4, dim=1)
            tv5 = fd.ops.mul(tv0, 2.0)
            tv6 = fd.ops.sum(fd.ops.mul(tv5, 3.0), dims=[1], keepdim=False, dtype=DataType.Null)
            fd.add_output(tv3)
            fd.add_output(tv4)
            fd.add_output(tv6)
        """)
        + "\ninputs = [torch.randn(16, 128)]\n"
    )
    fusion = eqsat.from_source(text).fusion
    (node,) = [n for n in fusion.nodes if n.opaque]
    assert node.op == "sdpfa_fwd" and len(node.outputs) == 4
    assert [n.op for n in fusion.nodes if n.line == node.line] == ["neg", "sdpfa_fwd"]
    opt = eqsat.optimize_fusion(fusion, [torch.randn(16, 128, device="meta")], min_gain=0)
    again = eqsat.from_source(HEADER + opt.source + "\ninputs = [torch.randn(16, 128)]\n").fusion
    (node,) = [n for n in again.nodes if n.opaque]
    assert len(node.outputs) == 4 and len(again.outputs) == 3
    assert again.outputs[0].value == node.outputs[1] and again.outputs[1].value == node.outputs[2]


def test_an_op_nvfuser_does_not_have_is_an_error_at_its_line(tmp_path, capsys):
    """A misspelled op is the user's mistake, not an op to keep opaque: an error naming the op,
    its line and the closest names, whatever the frontend; an op of the other frontend is named
    as such."""
    misspelled = HEADER + DEFINITION.replace("fd.ops.mul(tv0, 2.00000)", "fd.ops.maxx(tv0, dims=[0])")
    with pytest.raises(
        eqsat.FusionError,
        match=r"^<repro>:line 6: fd.ops.maxx: nvFuser's nvfuser_direct "
        r"frontend has no op maxx; did you mean max",
    ):
        eqsat.from_source(misspelled + INPUTS)
    path = tmp_path / "repro.py"
    path.write_text(misspelled + INPUTS)
    assert main(["optimize", str(path)]) == 2
    assert f"{path}:line 6: fd.ops.maxx: " in capsys.readouterr().err
    classic = misspelled.replace("nvfuser_direct", "nvfuser").replace("fd.ops.maxx", "fd.ops.complex")
    with pytest.raises(eqsat.FusionError, match="complex is an op of nvfuser_direct, not of nvfuser"):
        eqsat.from_source(classic + INPUTS)

    def define(fd):
        fd.add_output(fd.ops.sume(fd.define_tensor(shape=[-1], dtype=DataType.Float), dims=[0]))

    with pytest.raises(
        eqsat.FusionError,
        match=r"line \d+: fd.ops.sume: nvFuser has no op sume; did you "
        r"mean sum",
    ):
        eqsat.from_function(define)


def test_the_op_names_cover_the_corpora():
    """Every ``fd.ops`` name the corpora's files use is one their frontend has (what reading them
    checks; this finds a missing name without reading 173 files)."""
    import re

    from conftest import corpus_files, require_corpus, thunder_files
    from eqsat.frontend.nvfuser_ops import CLASSIC_OPS, DIRECT_OPS

    require_corpus()
    used = {
        name
        for p in corpus_files() + thunder_files()
        for name in re.findall(r"fd\.ops\.(\w+)", p.read_text())
    }
    unknown = used - set(CLASSIC_OPS) - set(DIRECT_OPS)
    assert used and not unknown, sorted(unknown)


def test_a_definition_cannot_run_the_fusion_it_is_read_from(tmp_path, monkeypatch, capsys):
    """Reading records; it never executes: ``fd.execute`` (and any other call on fd but the
    recording ones nvFuser's FusionDefinition has) inside a definition is refused at its line,
    and eqsat's executor is never called (a definition dividing an Int32 -2**31 by -1 there
    killed ``eqsat show`` with SIGFPE)."""
    import eqsat.frontend.recorder as recorder

    ran = []
    monkeypatch.setattr(recorder, "run_fusion", lambda *args, **kwargs: ran.append(args))
    body = DEFINITION.splitlines()
    for call, line in (
        ("fd.execute([])", 7),
        ("fd.fusion", 7),
        ("x = fd.frontend", 7),
        ("fd.validate([], [])", 7),
        ("fd.ops.add(fd.execute, 1)", 7),
    ):
        text = HEADER + "\n".join(body[:3] + [f"    {call}"] + body[3:]) + "\n" + INPUTS
        with pytest.raises(eqsat.FusionError, match=r"^<repro>:line 7: fd\.\w+: .*records") as info:
            eqsat.from_source(text)
        assert info.value.line == line, call
        path = tmp_path / "repro.py"
        path.write_text(text)
        assert main(["show", str(path), "--run"]) == 2 and main(["optimize", str(path)]) == 2
        assert "records" in capsys.readouterr().err
    assert not ran
    text = HEADER + DEFINITION.replace("fd.add_output(tv1)", "fd.add_output(tv1)\n    fd.execute([])")
    with pytest.raises(eqsat.FusionError, match="line 8: fd.execute"):
        eqsat.optimize_fusion(text)
    assert not ran


def test_a_dtype_called_by_name_is_an_error_at_the_users_line(tmp_path, capsys):
    """``DataType('Float')`` is no dtype in nvFuser: the error names the user's line and the
    spelling that is one, never a line of eqsat's own modules."""
    text = HEADER + DEFINITION.replace("dtype=DataType.Float", "dtype=DataType('Float')")
    with pytest.raises(
        eqsat.FusionError,
        match=r"^<repro>:line 5: DataType\('Float'\) is not a dtype: "
        r"write DataType\.Float",
    ) as info:
        eqsat.from_source(text + INPUTS)
    assert info.value.line == 5
    path = tmp_path / "repro.py"
    path.write_text(text + INPUTS)
    assert main(["show", str(path)]) == 2
    assert f"{path}:line 5: DataType('Float')" in capsys.readouterr().err
    bad = HEADER + DEFINITION.replace("dtype=DataType.Float", "dtype=DataType.Flaot")
    with pytest.raises(eqsat.FusionError, match=r"line 5: unknown dtype DataType\.Flaot"):
        eqsat.from_source(bad)
    with pytest.raises(eqsat.FusionError, match=r"line 5: DataType\(1\) is not a dtype"):
        eqsat.from_source(HEADER + DEFINITION.replace("dtype=DataType.Float", "dtype=DataType(1)"))


@pytest.mark.parametrize(
    "lines, line, what",
    [
        (["def helper():", "    return torch.randn(3)", "", "inputs = [helper()]"], 12, "helper, a function"),
        (
            ["def helper():", "    return torch.randn(3)", "", "x = helper()", "inputs = [x]"],
            13,
            "x, bound at line 12",
        ),
        (["inputs = [torch.randn(3)]", "inputs.append(fd.execute(inputs))"], 10, r"\.execute"),
        (
            [
                "def helper():",
                "    return [torch.randn(3)]",
                "",
                "inputs = [torch.randn(3)]",
                "inputs += helper()",
            ],
            13,
            "helper",
        ),
    ],
)
def test_an_inputs_list_the_reader_cannot_evaluate_is_refused_at_its_line(lines, line, what):
    """A statement that binds or changes ``inputs`` is never skipped as one about running the
    fusion: where it uses something reading does not evaluate (a function of the file, a name
    bound by a skipped statement, the fd), the error names its line and that."""
    text = HEADER + DEFINITION + "\n" + "\n".join(lines) + "\n"
    with pytest.raises(OutsideLanguage, match=rf"^<repro>:line {line}: `inputs` .*uses {what}") as info:
        eqsat.from_source(text)
    assert info.value.line == line


@pytest.mark.parametrize("where, line", [("top", 9), ("definition", 6), ("inputs", 9)])
@pytest.mark.parametrize("depth", [150, 2500, 20000])
def test_deep_nesting_is_an_error_at_its_line_for_every_entry_point(tmp_path, capsys, where, line, depth):
    """``x = ------...1`` (Python's parser or compiler, or the reader, recursing past its limit)
    is a FusionError naming the file and line, "nested too deeply", whether the statement is
    at the top level, in the definition or an element of ``inputs``; read, run with trust, or
    through the command line."""
    deep = "-" * depth + "1"
    body = DEFINITION.splitlines()
    text = {
        "top": HEADER + DEFINITION + f"\nx = {deep}\n" + INPUTS,
        "definition": HEADER + "\n".join(body[:2] + [f"    x = {deep}"] + body[2:]) + "\n" + INPUTS,
        "inputs": HEADER + DEFINITION + f"\ninputs = [torch.randn(3), {deep}]\n",
    }[where]
    path = tmp_path / "repro.py"
    path.write_text(text)
    for trust in (False, True):
        with pytest.raises(eqsat.FusionError, match="nested too deeply") as info:
            eqsat.from_file(path, trust=trust)
        assert (info.value.filename, info.value.line) == (str(path), line)
        with pytest.raises(eqsat.FusionError, match="nested too deeply"):
            eqsat.from_source(text, trust=trust)
    assert main(["show", "--run", str(path)]) == 2
    assert f"{path}:line {line}: nested too deeply" in capsys.readouterr().err


@pytest.mark.parametrize(
    "statements, line, message",
    [
        (["x = (10 ** 65536) ** 65536"], 9, "up to 262144 bits"),
        (
            ["x = 10 ** 1000"] + ["x = x * x"] * 20,
            10,
            r"'x \* x': its result would be an integer of up to 6644 bits",
        ),
        (["x = round(1, -10 ** 18)"], 9, "round to -1000000000000000000 digits"),
        (["x = 1 << 10 ** 6"], 9, "up to 1000001 bits"),
        (["x = " + "9" * 1300], 9, "an integer of 4319 bits"),
        (["x = int('" + "9" * 1300 + "')"], 9, "gives an integer of 4319 bits"),
        (["x = list(torch.zeros(10 ** 6))"], 9, "list\\(\\) of a tensor would make 1000000 Python values"),
        (["x = max(*torch.zeros(10 ** 6))"], 9, "unpacking \\(\\*\\) of a tensor would make 1000000"),
        (["x = torch.zeros(10 ** 6).tolist()"], 9, "tolist\\(\\) of a tensor would make 1000000"),
        (["x = torch.Size(torch.zeros(10 ** 6))"], 9, "Size\\(\\) of a tensor would make 1000000"),
        (["x = torch.randn(10 ** 12)"], 9, "would take 3.6 TiB of tensor data"),
        (["x = torch.ones(1).expand(10 ** 6, 10 ** 6).sum()"], 9, "would take 3.6 TiB"),
        (["x = torch.ones(10 ** 5, 1) + torch.ones(1, 10 ** 6)"], 9, "would take 372.5 GiB"),
        (["x = torch.nn.functional.one_hot(torch.tensor([2 ** 40]))"], 9, "would take 8.0 TiB"),
        (
            ["x = torch.ones(1 << 12, 1)", "y = torch.matmul(x.expand(-1, 1 << 12), x.expand(-1, 1 << 12))"],
            10,
            "would take 256.1 GiB",
        ),
    ],
)
def test_reading_is_bounded_before_it_runs(statements, line, message):
    """Integer sizes, Python-level iteration and tensor work are bounded before anything runs:
    each of these (hangs of minutes, or GBs, before) is refused at its line at once."""
    import time

    text = HEADER + DEFINITION + "\n" + "\n".join(statements) + "\ninputs = [torch.randn(3)]\n"
    began = time.perf_counter()
    with pytest.raises(eqsat.FusionError, match=message) as info:
        eqsat.from_source(text)
    assert info.value.line == line and time.perf_counter() - began < 2.0


def test_the_tensor_work_of_a_whole_read_is_bounded(monkeypatch):
    """Each tensor operation is charged the bytes it reads or makes; the read is refused at the
    line that passes the limit (16 GiB; 1 MiB here), and on the meta device nothing is charged."""
    from eqsat.frontend import bounds

    monkeypatch.setattr(bounds, "MAX_TENSOR_BYTES", 1 << 20)
    text = (
        HEADER
        + DEFINITION
        + "\nx = torch.empty(1 << 16)\n"
        + "\n".join(["y = x.uniform_()"] * 8)
        + "\ninputs = [x]\n"
    )
    with pytest.raises(eqsat.FusionError, match="line 13: .*uniform_.* past the 1.0 MiB reading a file"):
        eqsat.from_source(text)
    assert eqsat.from_source(text, device="meta").inputs[0].shape == (1 << 16,)
    views = (
        HEADER
        + DEFINITION
        + "\nx = torch.empty(1 << 16)\n"
        + "\n".join(["y = x.view(-1)"] * 100)
        + "\ninputs = [x]\n"
    )
    assert eqsat.from_source(views).inputs[0].shape == (1 << 16,)  # views cost nothing
    # a selection whose size depends on the data cannot run on meta tensors: charged what it
    # reads before it runs and what it made after
    selects = (
        HEADER
        + DEFINITION
        + "\nx = torch.randn(1 << 16)\n"
        + "\n".join(["y = x[x > 0]"] * 8)
        + "\ninputs = [x]\n"
    )
    with pytest.raises(eqsat.FusionError, match=r"line 1[0-9]: 'x(\[x > 0\]| > 0)': it would take"):
        eqsat.from_source(selects)
