"""eqsat: an equality-saturation optimizer for nvFuser fusions."""
from .dtypes import DataType
from .errors import FusionError
from .frontend import FusionDefinition
from .ingest import from_file, from_function, from_nvfuser, from_source, ingest
from .ir import Fusion
from .optimize import OptimizedFusion, estimate_fusion, optimize_fusion
from .torch_executor import run_fusion

__all__ = ["DataType", "FusionDefinition", "FusionError", "Fusion", "from_file", "from_function",
           "from_nvfuser", "from_source", "ingest", "run_fusion", "optimize_fusion", "estimate_fusion", "OptimizedFusion"]
__version__ = "0.1.0"
