"""eqsat: an equality-saturation optimizer for nvFuser fusions.

The public names below are imported on first use (``eqsat.optimize_fusion`` imports torch and
egglog; ``import eqsat`` alone does not, so ``eqsat --help`` answers at once).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS = {
    "from_file": "eqsat.frontend.ingest",
    "from_function": "eqsat.frontend.ingest",
    "from_nvfuser": "eqsat.frontend.ingest",
    "from_source": "eqsat.frontend.ingest",
    "ingest": "eqsat.frontend.ingest",
    "FusionDefinition": "eqsat.frontend.recorder",
    "DataType": "eqsat.ir.dtypes",
    "Fusion": "eqsat.ir.fusion",
    "run_fusion": "eqsat.reference.torch_executor",
    "OptimizedPair": "eqsat.crossfusion",
    "optimize_pair": "eqsat.crossfusion",
    "FusionError": "eqsat.errors",
    "OptimizedFusion": "eqsat.optimize",
    "estimate_fusion": "eqsat.optimize",
    "optimize_fusion": "eqsat.optimize",
    "Options": "eqsat.pipeline.options",
}
_SUBPACKAGES = (
    "cost",
    "crossfusion",
    "egraph",
    "frontend",
    "ir",
    "lowering",
    "pipeline",
    "reference",
    "rules",
    "testing",
    "thunder",
    "verification",
)

__all__ = [
    "DataType",
    "FusionDefinition",
    "FusionError",
    "Fusion",
    "from_file",
    "from_function",
    "from_nvfuser",
    "from_source",
    "ingest",
    "run_fusion",
    "optimize_fusion",
    "estimate_fusion",
    "OptimizedFusion",
    "Options",
    "optimize_pair",
    "OptimizedPair",
]

if TYPE_CHECKING:  # for type checkers and editors: the same names, imported eagerly
    from eqsat.crossfusion import OptimizedPair, optimize_pair
    from eqsat.errors import FusionError
    from eqsat.frontend.ingest import from_file, from_function, from_nvfuser, from_source, ingest
    from eqsat.frontend.recorder import FusionDefinition
    from eqsat.ir.dtypes import DataType
    from eqsat.ir.fusion import Fusion
    from eqsat.optimize import OptimizedFusion, estimate_fusion, optimize_fusion
    from eqsat.pipeline.options import Options
    from eqsat.reference.torch_executor import run_fusion


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name]), name)
    elif name in _SUBPACKAGES:
        value = import_module(f"eqsat.{name}")
    else:
        raise AttributeError(f"module 'eqsat' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_SUBPACKAGES))
