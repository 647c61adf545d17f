"""eqsat: an equality-saturation optimizer for nvFuser fusions."""
from eqsat.frontend.ingest import from_file, from_function, from_nvfuser, from_source, ingest
from eqsat.frontend.recorder import FusionDefinition
from eqsat.ir.dtypes import DataType
from eqsat.ir.fusion import Fusion
from eqsat.reference.torch_executor import run_fusion

from .crossfusion import OptimizedPair, optimize_pair
from .errors import FusionError
from .optimize import OptimizedFusion, estimate_fusion, optimize_fusion

__all__ = ["DataType", "FusionDefinition", "FusionError", "Fusion", "from_file", "from_function",
           "from_nvfuser", "from_source", "ingest", "run_fusion", "optimize_fusion", "estimate_fusion", "OptimizedFusion",
           "optimize_pair", "OptimizedPair"]
__version__ = "0.1.0"
