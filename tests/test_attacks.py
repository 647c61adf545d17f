"""The attack corpus: every file in tests/attacks/ (hostile repro files, one attack each, the
first comment lines saying what it attacks and what must happen) is run through
``eqsat show FILE --run``, ``eqsat optimize FILE`` and ``eqsat check FILE``, each in its own
process with a 30 s limit: none may be killed by a signal, run past the limit, print a Python
traceback, or exit with other than 0, 1 or 2. Where a file has a line ``# expect-exit: N``,
each must exit N; where it has ``# expect-error: TEXT``, each that exits non-zero must print
TEXT (its file, line and what was refused). Any file added to the folder is taken. The runs
of all files go at once, a process per core, so the corpus costs about its CPU time (some 3 s
a run, mostly importing torch) over the cores."""
import os
import pathlib
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

ATTACKS = pathlib.Path(__file__).resolve().parent / "attacks"
FILES = sorted(ATTACKS.glob("*.py"))
COMMANDS = (["show", "--run"], ["optimize"], ["check"])
TIMEOUT_S = 30
WORKERS = max(2, min(8, os.cpu_count() or 2))


def _run(path: pathlib.Path, command: list[str]) -> tuple[int | None, str]:
    """(exit status, or None past the time limit; stdout and stderr) of one eqsat command."""
    argv = [sys.executable, "-m", "eqsat.cli", command[0], str(path), *command[1:]]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S,
                              cwd=ATTACKS.parent.parent)
    except subprocess.TimeoutExpired as err:         # its output is bytes, whatever text= says
        return None, "".join((out or b"").decode(errors="replace") for out in (err.stdout, err.stderr))
    return done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="module")
def results() -> dict:
    """Every (file, command) of the corpus, run at once, WORKERS processes at a time."""
    runs = [(path, tuple(command)) for path in FILES for command in COMMANDS]
    with ThreadPoolExecutor(WORKERS) as pool:
        outcomes = list(pool.map(lambda run: _run(run[0], list(run[1])), runs))
    return dict(zip(runs, outcomes))


def test_the_attack_corpus_is_there():
    assert len(FILES) >= 9, f"the attack corpus at {ATTACKS} has {len(FILES)} files"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_an_attack_is_answered_cleanly(path, results):
    text = path.read_text()
    expected = re.search(r"^# expect-exit: ([012])$", text, re.M)
    error = re.search(r"^# expect-error: (.+)$", text, re.M)
    for command in COMMANDS:
        status, output = results[path, tuple(command)]
        what = f"eqsat {' '.join(command)} {path.name}"
        assert status is not None, f"{what}: still running after {TIMEOUT_S} s\n{output[-2000:]}"
        assert status >= 0, f"{what}: killed by signal {-status}\n{output[-2000:]}"
        assert "Traceback" not in output, f"{what}: printed a traceback\n{output[-4000:]}"
        assert status in (0, 1, 2), f"{what}: exit status {status}\n{output[-2000:]}"
        if expected is not None:
            assert status == int(expected[1]), f"{what}: exit {status}, not {expected[1]}\n{output[-2000:]}"
        if error is not None and status != 0:
            assert error[1].strip() in output, f"{what}: no {error[1].strip()!r} in\n{output[-2000:]}"
