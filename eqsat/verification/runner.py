"""What GPU verification asks of a device: move the caller's inputs there, and compile, run and
time a fusion on it. :class:`NvFuserRunner` does it on nvFuser and the current CUDA device;
the verifier (``eqsat.verification.verify``) takes any object with the same four members, so
that its decisions are tested on a machine without a GPU.

nvFuser is imported only when a runner is made (``eqsat.lowering.nvfuser.load_frontend``), so
this module imports without it.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any, Protocol, Sequence

import torch

from eqsat.errors import FusionError
from eqsat.ir.fusion import Fusion
from eqsat.lowering.nvfuser import load_frontend, to_nvfuser
from eqsat.reference.devices import to_device
from eqsat.reference.index_inputs import in_range_inputs

from .timing import throughput_us


class Runner(Protocol):
    """``device``: the GPU's name; ``versions``: what else a measurement depends on (the
    nvFuser version, ...); ``prepare``: the inputs as the runs take them; ``run``: the
    outputs of one call; ``steady_us``: the steady-state time of one call in µs."""

    device: str
    versions: dict[str, str]

    def prepare(self, fusion: Fusion, inputs: Sequence[Any]) -> list: ...

    def run(self, fusion: Fusion, inputs: Sequence[Any]) -> list: ...

    def steady_us(self, fusion: Fusion, inputs: Sequence[Any]) -> float: ...


def nvfuser_version(module) -> str:
    """The version of the nvFuser ``module``: its ``__version__`` or ``version()``, else its
    distribution's, else "unknown"."""
    version = getattr(module, "__version__", None)
    if version is None and callable(getattr(module, "version", None)):
        version = module.version()
    if version is None:
        for dist in metadata.packages_distributions().get(module.__name__, []):
            version = metadata.version(dist)
            break
    return str(version or "unknown")


class NvFuserRunner:
    """Fusions compiled by nvFuser (through ``frontend``, by default each fusion's own where it
    is installed, as :func:`eqsat.lowering.nvfuser.to_nvfuser` picks) and run on the current
    CUDA device; timed at steady state (``throughput_us``: up to ``runs`` calls back to back,
    ``max_seconds`` at most). Raises FusionError where CUDA or nvFuser is missing."""

    def __init__(
        self,
        frontend: str | None = None,
        prefer: str | None = None,
        runs: int = 100,
        max_seconds: float = 0.5,
    ):
        if not torch.cuda.is_available():
            raise FusionError("verify='gpu' needs a CUDA device and nvFuser; torch sees no CUDA device here")
        module = load_frontend(frontend, prefer)
        self.frontend = frontend
        self.device = torch.cuda.get_device_name()
        self.versions = {
            "nvfuser": nvfuser_version(module),
            "frontend": module.__name__,
            "torch": torch.__version__,
        }
        self.runs, self.max_seconds = runs, max_seconds
        self._compiled: dict[Fusion, Any] = {}

    def prepare(self, fusion: Fusion, inputs: Sequence[Any]) -> list:
        """CUDA tensors as they are; CPU tensors copied to the GPU with their strides, integers
        zeroed where an index op would read out of range with them (as ``bench/corpus.py``
        does); CPU scalar inputs (``is_cpu=True``) stay on the CPU."""
        if all(t.device.type == "cuda" for t in inputs if isinstance(t, torch.Tensor)):
            return list(inputs)
        return to_device(in_range_inputs(fusion, inputs), "cuda", fusion)

    def _fd(self, fusion: Fusion):
        if fusion not in self._compiled:
            self._compiled[fusion] = to_nvfuser(fusion, self.frontend)
        return self._compiled[fusion]

    def run(self, fusion: Fusion, inputs: Sequence[Any]) -> list:
        outputs = list(self._fd(fusion).execute(list(inputs)))
        torch.cuda.synchronize()
        return outputs

    def steady_us(self, fusion: Fusion, inputs: Sequence[Any]) -> float:
        fd, given = self._fd(fusion), list(inputs)
        # an output aliased to an input is written into it each call: the values drift, the work does not
        return throughput_us(lambda: fd.execute(given), self.runs, max_seconds=self.max_seconds)
