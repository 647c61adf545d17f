"""The command line a user expects: --version, a written repro (-o) that check and Python take,
a closed pipe that ends quietly, a line per rule as it is verified, --json on show and check,
check saying what it compared, an unchanged fusion saying why, and --help that imports neither
torch nor egglog."""

import json
import os
import subprocess
import sys

import pytest
import torch

import eqsat
from eqsat.cli import main
from eqsat.lowering import repro_source
from eqsat.testing.seeds import SEEDS

CLI = [sys.executable, "-m", "eqsat.cli"]


def _seed_file(tmp_path, name="layernorm_amax", shape=(1024, 1024)):
    seed = SEEDS[name]
    path = tmp_path / f"{name}.py"
    path.write_text(repro_source(eqsat.from_function(seed.model_ref), seed.make_inputs(*shape)))
    return path


def _elementwise_file(tmp_path):
    """A fusion with nothing to rewrite: one elementwise op."""

    def define(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=eqsat.DataType.Float)
        fd.add_output(fd.ops.exp(x))

    path = tmp_path / "exp.py"
    path.write_text(repro_source(eqsat.from_function(define), [torch.randn(8, 16)]))
    return path


def test_version_is_the_packages():
    done = subprocess.run(CLI + ["--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == f"eqsat {eqsat.__version__}"


def test_help_imports_neither_torch_nor_egglog():
    code = (
        "import sys\nfrom eqsat.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('torch', 'egglog', 'numpy') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_optimize_writes_a_repro_that_check_and_python_take(tmp_path, capsys):
    path = _seed_file(tmp_path)
    out = tmp_path / "optimized.py"
    assert main(["optimize", str(path), "-o", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# optimized by eqsat ") and "split-max" in text.splitlines()[0]
    assert "inputs = [" in text and "from nvfuser import FusionDefinition, DataType" in text
    assert eqsat.from_file(out, device="meta").fusion == eqsat.optimize_fusion(path).fusion
    capsys.readouterr()
    assert main(["check", str(out)]) == 0
    assert "the values agree" in capsys.readouterr().out
    # ``python OUT.py`` with eqsat's recorder standing in for nvFuser (no GPU here): the file
    # defines, records and executes the optimized fusion on its own inputs
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "nvfuser.py").write_text("from eqsat import FusionDefinition, DataType\n")
    cpu = tmp_path / "optimized_cpu.py"
    cpu.write_text(text.replace("device='cuda'", "device='cpu'"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(stub), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(cpu)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr


def test_optimize_output_keeps_the_files_own_inputs_and_names(tmp_path):
    path = _seed_file(tmp_path)
    text = path.read_text().replace("inputs = [", "ROWS = 64\ninputs = [")
    path.write_text(text)
    out = tmp_path / "optimized.py"
    assert main(["optimize", str(path), "-o", str(out), "--frontend", "nvfuser_direct"]) == 0
    written = out.read_text()
    assert "ROWS = 64" in written and "from nvfuser_direct import FusionDefinition, DataType" in written
    assert "def nvfuser_fusion_id0(fd : FusionDefinition) -> None :" in written  # the file's own name
    assert eqsat.from_file(out, device="meta").frontend == "nvfuser_direct"


def test_a_closed_pipe_ends_quietly(tmp_path):
    path = _seed_file(tmp_path)
    reader = subprocess.Popen(["head", "-n", "1"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    done = subprocess.run(
        CLI + ["optimize", str(path)], stdout=reader.stdin, stderr=subprocess.PIPE, text=True
    )
    reader.stdin.close()
    reader.wait()
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.returncode in (0, 141)


def test_rules_verify_prints_a_line_per_rule_as_it_goes(capsys):
    assert main(["rules", "verify", "add-commutes", "mul-commutes", "--cases", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("[1/2] add-commutes") and lines[1].startswith("[2/2] mul-commutes")
    assert lines[-1] == "2 passed, 0 failed"


def test_show_json(tmp_path, capsys):
    path = _seed_file(tmp_path)
    assert main(["show", str(path), "--json", "--run"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["frontend"] == "nvfuser" and len(out["inputs"]) == 5
    assert {o["op"] for o in out["ops"]} >= {"var_mean", "max", "abs"}
    assert all(o["line"] for o in out["ops"])
    assert out["run"] == [{"dtype": "bfloat16", "shape": [1024, 1024]}, {"dtype": "float32", "shape": []}]


def test_check_json_and_what_it_compared(tmp_path, capsys):
    path = _seed_file(tmp_path)
    assert main(["check", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["agree"] and out["compared"] == "values" and out["outputs"] == 2
    assert main(["check", str(path), "--meta"]) == 0
    text = capsys.readouterr().out
    assert "2 outputs: the shapes and dtypes agree" in text and "values" not in text


def test_an_unchanged_fusion_says_why(tmp_path, capsys):
    assert main(["optimize", str(_elementwise_file(tmp_path))]) == 0
    assert "unchanged: no candidate in the saturated e-graph is predicted cheaper" in capsys.readouterr().out
    # a candidate found and kept out by the margin says so too
    assert main(["optimize", str(_seed_file(tmp_path)), "--min-gain", "0.99", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert not out["changed"] and "within min_gain=0.99" in out["unchanged"]


def test_json_says_not_estimated_rather_than_zero(tmp_path, capsys):
    assert main(["optimize", str(_seed_file(tmp_path)), "--json", "--deadline", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["estimated"] is False and out["before"] is None and out["after"] is None
    assert out["cut"] == "encoding" and not out["changed"]
    assert "the deadline (0 s) cut encoding" in out["unchanged"]


def test_optimize_fusion_of_a_path_uses_the_files_inputs(tmp_path):
    path = _seed_file(tmp_path, shape=(4096, 8192))
    repro = eqsat.from_file(path, device="meta")
    by_path = eqsat.optimize_fusion(path).report.before
    given = eqsat.optimize_fusion(repro.fusion, repro.inputs).report.before
    default = eqsat.optimize_fusion(repro.fusion).report.before  # 1024 per symbolic axis
    assert by_path.summary() == given.summary() != default.summary()
    assert eqsat.estimate_fusion(str(path)).summary() == given.summary()
    assert eqsat.optimize_fusion(path.read_text()).report.before.summary() == given.summary()


@pytest.mark.parametrize(
    "argv", [["optimize", "missing.py"], ["show", "missing.py"], ["check", "missing.py"]]
)
def test_a_missing_file_is_a_clean_error(argv, capsys):
    assert main(argv) == 2
    assert "missing.py" in capsys.readouterr().err
