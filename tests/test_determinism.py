"""What eqsat returns is decided by the fusion and the options, not by the machine's load: a cold
``eqsat optimize --json`` (a new process, its e-graph set-up included) with both cores busy
gives the same ``changed`` and ``source`` as ``optimize_fusion(..., deadline_s=None)`` on this
process. A sample of the corpora (where present) and the seeds; bench/determinism.py sweeps
them all."""

import json
import os
import subprocess
import sys
from pathlib import Path

import eqsat
from eqsat.lowering import repro_source
from eqsat.testing.seeds import SEEDS

CORPORA = {
    "corpus": os.environ.get("EQSAT_CORPUS", "../shared/corpus"),
    "corpus_thunder": os.environ.get("EQSAT_CORPUS_THUNDER", "../shared/corpus_thunder"),
}
# fusions eqsat changes and fusions it keeps, from both print styles
SAMPLE = {
    "corpus": ["repro_ws_tma_norm5.py"],
    "corpus_thunder": ["thunder_opt_15_nvFusion3.py", "thunder_gpt_neox_14_nvFusion5.py"],
}
SPINNERS = 6  # busy processes: three per core on the 2-core CI machine


def _sample(tmp_path: Path) -> list[Path]:
    files = []
    for name, shape in (("layernorm_amax", (2048, 4096)),):
        seed = SEEDS[name]
        path = tmp_path / f"{name}.py"
        path.write_text(
            repro_source(eqsat.from_function(seed.model_ref), seed.make_inputs(*shape, device="meta"))
        )
        files.append(path)
    for corpus, names in SAMPLE.items():
        folder = Path(__file__).resolve().parent.parent / CORPORA[corpus]
        files += [folder / n for n in names if (folder / n).exists()]
    return files


def test_a_cold_cli_on_a_busy_machine_decides_as_no_deadline_does(tmp_path):
    files = _sample(tmp_path)
    want = {}
    for path in files:
        opt = eqsat.optimize_fusion(path, deadline_s=None)
        want[path.name] = (opt.report.changed, opt.source)
    assert any(changed for changed, _ in want.values())  # the sample holds rewrites
    got = {}
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(SPINNERS)]
    try:
        for path in files:
            done = subprocess.run(
                [sys.executable, "-m", "eqsat.cli", "optimize", str(path), "--json"],
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, done.stderr
            out = json.loads(done.stdout)
            assert out["cut"] is None and out["estimated"], (path.name, out["cut"])
            got[path.name] = (out["changed"], out["source"])
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    assert got == want
