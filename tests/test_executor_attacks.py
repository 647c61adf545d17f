"""The executor's attack files (tests/attacks/, issue 36 items 2, 8, 9): each is run by
``eqsat show --run`` and ``eqsat check`` in one child interpreter (a SIGFPE fails the test, naming
the file, instead of killing pytest): no signal, no traceback, exit 0 or 2 as the file's comment
says, and the values it says nvFuser gives."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ALL = sorted((ROOT / "tests" / "attacks").glob("*.py"))
# the files whose run is refused, with a clean error at the line of the op named
REFUSED = {
    "int_div_by_zero.py": "fd.ops.div: integer div by zero",
    "scalar_div_int64_min_by_minus_one.py": "fd.ops.div: INT64_MIN / -1 overflows Int",
}
I32_MIN, I64_MIN, I64_MAX = -(2**31), -(2**63), 2**63 - 1
E5M2, E4M3 = 57344.0, 448.0
# the outputs nvFuser gives (derived from its source: see each file's comment)
VALUES = {
    "int32_div_int_min_by_minus_one.py": [[I32_MIN, I32_MIN, -3]],
    "int64_div_int_min_by_minus_one.py": [[I64_MIN, -I64_MAX]],
    "int_div_int_min_by_a_minus_one_number.py": [[I32_MIN, -6]],
    "int_fmod_int_min_by_minus_one.py": [[0, -1]],
    "int_remainder_int_min_by_minus_one.py": [[0, 1]],
    "int_pow_negative_exponent.py": [[0, 1, -1, 0]],
    "int_shift_past_the_width.py": [[0, 0, 0, 0], [0, -1, 0, -1]],
    "complex_abs.py": [[10.0, 2.0, 0.0]],
    "fp8_e5m2_overflow.py": [[E5M2, -E5M2, E5M2, E5M2, -E5M2, "nan", 1.5]],
    "fp8_e4m3fn_overflow.py": [[E4M3, -E4M3, E4M3, E4M3, -E4M3, "nan", 1.5]],
}
ATTACKS = [p for p in ALL if p.name in REFUSED or p.name in VALUES]  # the executor's own

CHILD = r"""
import contextlib, io, json, sys, traceback
import eqsat
from eqsat.cli import main

out = {}
for path in sys.argv[1:]:
    name = path.rsplit("/", 1)[-1]
    print("begin", name, file=sys.stderr, flush=True)
    runs = {}
    for command in (["show", path, "--run"], ["check", path]):
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            try:
                rc = main(command)
            except SystemExit as exit_:
                rc = exit_.code
            except BaseException:
                rc, _ = "traceback", traceback.print_exc(file=err)
        runs[command[0]] = [rc, err.getvalue()]
    try:
        repro = eqsat.from_file(path)
        values = [[v if v == v else "nan" for v in o.float().tolist()] if o.dtype.is_floating_point
                  or str(o.dtype).startswith("torch.float8") else o.tolist()
                  for o in eqsat.run_fusion(repro.fusion, repro.inputs, strict=True)]
    except eqsat.FusionError as error:
        values = str(error)
    out[name] = {"runs": runs, "values": values}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def results():
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *map(str, ATTACKS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    last = [ln for ln in done.stderr.splitlines() if ln.startswith("begin ")][-1:]
    assert done.returncode == 0, f"the child died (rc {done.returncode}) at {last}:\n{done.stderr[-2000:]}"
    return json.loads(done.stdout.splitlines()[-1])


def test_every_attack_file_has_its_comment_and_an_expectation():
    assert len(ATTACKS) == len(REFUSED) + len(VALUES)
    for path in ALL:  # the executor's are checked here; the others say what must happen
        text = path.read_text()
        assert text.startswith("# "), path.name
        assert path in ATTACKS or "must" in text.split("import", 1)[0].lower(), path.name


@pytest.mark.parametrize("path", ATTACKS, ids=[p.name for p in ATTACKS])
def test_an_attack_runs_without_a_signal_or_traceback(results, path):
    got = results[path.name]
    for command, (rc, err) in got["runs"].items():
        assert rc in (0, 1, 2) and "Traceback" not in err, f"{command}: rc {rc}\n{err}"
        if path.name in REFUSED and command in ("show", "check"):
            assert rc == 2 and err.startswith(f"eqsat: {path}:line ") and REFUSED[path.name] in err, err
    if path.name in REFUSED:
        assert REFUSED[path.name] in got["values"]
        return
    assert got["runs"]["check"][0] == 0
    assert got["values"] == VALUES[path.name]
