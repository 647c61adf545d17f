"""eqsat: an equality-saturation optimizer for nvFuser fusions."""
from eqsat.ir.dtypes import DataType
from .errors import FusionError
from eqsat.frontend.recorder import FusionDefinition
from eqsat.frontend.ingest import from_file, from_function, from_nvfuser, from_source, ingest
from eqsat.ir.fusion import Fusion
from .optimize import OptimizedFusion, estimate_fusion, optimize_fusion
from eqsat.reference.torch_executor import run_fusion

__all__ = ["DataType", "FusionDefinition", "FusionError", "Fusion", "from_file", "from_function",
           "from_nvfuser", "from_source", "ingest", "run_fusion", "optimize_fusion", "estimate_fusion", "OptimizedFusion"]
__version__ = "0.1.0"
