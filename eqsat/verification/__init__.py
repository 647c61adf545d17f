"""Verification on the GPU (opt-in: ``optimize_fusion(..., verify="gpu")``, ``eqsat optimize
--verify-on-gpu``): the input as given and the best few candidates compiled, checked against
each other and timed on the device at hand; the fastest kept, the decision cached on disk.

- ``timing``: steady-state and latency timing with CUDA events (``bench/gpu_timing.py`` uses it);
- ``cache``: the on-disk cache of decisions (``cache_dir=``, ``$EQSAT_CACHE_DIR``, ``~/.cache/eqsat``);
- ``runner``: compiling, running and timing a fusion on nvFuser (``NvFuserRunner``);
- ``verify``: the decision.
"""

from .cache import VerificationCache
from .runner import NvFuserRunner, Runner
from .verify import Measurement, Verification, check_verifiable, verify

__all__ = [
    "Measurement",
    "NvFuserRunner",
    "Runner",
    "Verification",
    "VerificationCache",
    "check_verifiable",
    "verify",
]
