"""The README's code blocks run as written: the two set-up commands are what CI and the demo
run, the example's output is what `eqsat optimize` prints, the command-line block and the
Python block run, and every file it names exists. Its first screen is short."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", README, re.S | re.M)


def _eqsat(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "eqsat.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def test_the_two_commands_set_up_and_run_the_demo_and_the_tests():
    setup, tests = _blocks("bash")[:2]
    assert setup.strip().endswith(".venv/bin/eqsat demo") and "torch==2.13.0" in setup
    assert tests.strip().endswith(".venv/bin/python -m pytest -q") and "'.[test]'" in tests
    ci = (ROOT / ".ci" / "run").read_text()
    assert "n == 2" in ci and 'eval "$test_command"' in ci  # CI runs the second block as written


def test_the_example_prints_what_the_readme_shows(tmp_path):
    (console,) = _blocks("console")
    command, *shown = console.strip("\n").split("\n")
    assert command.startswith("$ .venv/bin/eqsat ")
    done = _eqsat(command.split()[2:], ROOT)
    assert done.returncode == 0, done.stderr
    printed = done.stdout.split("\n")
    at = 0
    for line in shown:  # in order; "..." stands for lines left out
        if line == "...":
            continue
        assert line in printed[at:], f"the README shows {line!r}; eqsat printed:\n{done.stdout[:3000]}"
        at = printed.index(line, at) + 1


def test_the_command_line_block_runs(tmp_path):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    (block,) = [b for b in _blocks("bash") if "eqsat optimize" in b]
    for line in block.strip().split("\n"):
        args = line.split()
        assert args[0] == ".venv/bin/eqsat", line
        if "--draw" in args and shutil.which("dot") is None:
            args[args.index("--draw") + 1] = "kernels.dot"  # .svg needs graphviz's dot
        done = _eqsat(args[1:], tmp_path)
        assert done.returncode == 0, (line, done.stderr)
        assert "Traceback" not in done.stderr
    assert (tmp_path / "optimized.py").exists()


def test_the_python_block_runs(tmp_path, capsys):
    (block,) = _blocks("python")
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        exec(compile(block, "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    assert "rules that changed the result: split-max" in capsys.readouterr().out


@pytest.mark.parametrize(
    "path", sorted(set(re.findall(r"(?:docs|examples|rules|bench)/[\w./-]+\.(?:md|py|svg)", README)))
)
def test_every_file_it_names_exists(path):
    assert (ROOT / path).exists(), path


def test_it_is_short_enough_to_read():
    assert len(README.split()) <= 1500
    first_screen = "\n".join(README.split("\n")[:60])
    assert (
        "eqsat demo" in first_screen
        and "pytest -q" in first_screen
        and "$ .venv/bin/eqsat optimize" in first_screen
    )
