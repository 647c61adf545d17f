"""The attack corpus: every file in tests/attacks/ (hostile repro files, one attack each, the
first comment lines saying what it attacks and what must happen) is run through
``eqsat show FILE --run``, ``eqsat optimize FILE`` and ``eqsat check FILE``, the three in a
process of the file's own, each under a 30 s limit: none may be killed by a signal, run past the
limit, print a Python traceback, or exit with other than 0, 1 or 2. Where a file has a line
``# expect-exit: N``, each must exit N; where it has ``# expect-error: TEXT``, each that exits
non-zero must print TEXT (its file, line and what was refused). Any file added to the folder is
taken. The files go at once, a process per core."""

import json
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
TIMEOUT_S = 30  # per command
WORKERS = max(2, min(8, os.cpu_count() or 2))

# One interpreter per file runs its three commands in turn (torch is imported once, not three
# times), each under an alarm of TIMEOUT_S; it prints a JSON line per command as it finishes, so a
# signal or a hang still names the command that met it.
CHILD = r"""
import contextlib, io, json, signal, sys, traceback
from eqsat.cli import main

class Late(BaseException):
    pass

def late(*_):
    raise Late()

signal.signal(signal.SIGALRM, late)
path, limit, commands = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
for command in commands:
    out = io.StringIO()
    signal.alarm(limit)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            status = main([command[0], path, *command[1:]])
    except Late:
        status = None
    except SystemExit as exit_:
        status = exit_.code
    except BaseException:
        status = "traceback"
        out.write(traceback.format_exc())
    finally:
        signal.alarm(0)
    print(json.dumps({"command": command, "status": status, "output": out.getvalue()[-4000:]}), flush=True)
"""


def _run(path: pathlib.Path) -> dict[tuple, tuple[int | str | None, str]]:
    """command -> (exit status: None past the time limit, "traceback", or -N killed by signal N;
    its output) for the three commands on one file."""
    argv = [sys.executable, "-c", CHILD, str(path), str(TIMEOUT_S), json.dumps(COMMANDS)]
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S * len(COMMANDS) + 30,
            cwd=ATTACKS.parent.parent,
        )
        lines, rc, rest = done.stdout.splitlines(), done.returncode, done.stderr
    except subprocess.TimeoutExpired as err:  # its output is bytes, whatever text= says
        lines = (err.stdout or b"").decode(errors="replace").splitlines()
        rc, rest = None, (err.stderr or b"").decode(errors="replace")
    found = {}
    for line in lines:
        if line.startswith("{"):
            row = json.loads(line)
            found[tuple(row["command"])] = (row["status"], row["output"])
    for command in COMMANDS:  # the one a signal or a hang stopped, and those after
        found.setdefault(tuple(command), (rc if rc is None or rc < 0 else "died", rest[-2000:]))
        rc = "not run" if rc is None or rc < 0 else rc
    return found


@pytest.fixture(scope="module")
def results() -> dict:
    """Every (file, command) of the corpus, WORKERS files at a time."""
    with ThreadPoolExecutor(WORKERS) as pool:
        outcomes = list(pool.map(_run, FILES))
    return {
        (path, command): outcome
        for path, found in zip(FILES, outcomes, strict=True)
        for command, outcome in found.items()
    }


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
        assert not (isinstance(status, int) and status < 0), f"{what}: killed by signal {-status}\n{output}"
        assert status != "traceback" and "Traceback" not in output, f"{what}: a traceback\n{output[-4000:]}"
        assert status in (0, 1, 2), f"{what}: exit status {status}\n{output[-2000:]}"
        if expected is not None:
            assert status == int(expected[1]), f"{what}: exit {status}, not {expected[1]}\n{output[-2000:]}"
        if error is not None and status != 0:
            assert error[1].strip() in output, f"{what}: no {error[1].strip()!r} in\n{output[-2000:]}"
