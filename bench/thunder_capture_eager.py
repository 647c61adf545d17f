"""Capture Thunder's nvFuser regions of a model (``../shared/gpu/thunder_capture.py``) with the
pieces of Dynamo's graph that Thunder leaves run eagerly, as ``bench/step_profile.py
--dynamo-pieces eager`` runs them: ThunderCompiler hands those pieces to
``torch._inductor.compile``, which here returns the piece's own graph. Through Inductor, Thunder
0.2.6 fails on Llama and Qwen2 before any region is made (``docs/step-profile.md``).

    BATCH=4 SEQ=1024 python3 bench/thunder_capture_eager.py OUTDIR llama qwen2 bert

``CAPTURE`` names the capture script (default ``.gpudata/thunder_capture.py``: on the GPU
machine, the copy carried with the call); its arguments follow."""

from __future__ import annotations

import os
import runpy
import sys


def main(argv: list[str]) -> None:
    import torch._inductor

    script = os.environ.get("CAPTURE", ".gpudata/thunder_capture.py")
    torch._inductor.compile = lambda gm, example_inputs: gm  # the piece runs as Dynamo traced it
    sys.argv = [script, *argv]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
