"""eqsat inside Lightning Thunder: every nvFuser region Thunder builds, forward and backward,
optimized by eqsat before nvFuser compiles it.

    import thunder, eqsat.thunder
    opt = eqsat.thunder.Optimize()                 # or Optimize(verify="gpu"): never slower, as timed
    jmodel = thunder.jit(model, transforms=[opt])  # add executors=eqsat.thunder.executors()
                                                   # for attention on cuDNN (docs/thunder.md)
    loss = jmodel(x).loss; loss.backward()
    print(opt.report)                              # per region: rewritten or not, rules, predicted
                                                   # (and under verify="gpu" measured) times

Install with ``pip install 'eqsat[thunder]'`` (docs/thunder.md). Supported: Lightning Thunder
0.2.6 with torch >= 2.7.1 and < 2.13 and nvFuser <= 0.2.35 (``versions``); importing this
package where Thunder is installed checks Thunder's and torch's versions, imports Thunder and
checks nvFuser's, and raises ``UnsupportedVersion`` (an ImportError) naming the versions found
and those needed where any check fails or Thunder's own import raises anything (with torch
2.13, an AttributeError). Where Thunder is not installed the package imports (its options,
report and region handling need no Thunder) and ``Optimize`` raises that ImportError when it
is reached for. Without CUDA or nvFuser, Thunder makes no nvFuser regions: the transform then
says so once (``EqsatThunderWarning``) and in its report. ``import eqsat`` never imports this
package.

Modules: ``versions`` (the supported versions and their check), ``options`` (``Options``),
``report`` (``RegionRecord``, ``ThunderReport``), ``region`` (``RegionHook``: one region
through eqsat, with the fallback to Thunder's own definition), ``transform`` (``Optimize``:
the Thunder transform; where and why it hooks in), ``executor_list`` (eqsat's executors:
``cudnn_attention``, ``aligned_linear``, ``detach_executor``).
"""

import torch

from .options import Options
from .region import EqsatThunderWarning, RegionHook
from .report import RegionRecord, ThunderReport
from .versions import (
    NVFUSER_MAX,
    SUPPORTED_THUNDER,
    TORCH_BELOW,
    TORCH_MIN,
    UnsupportedVersion,
    check_before_import,
    check_thunder,
    thunder_installed,
    unusable,
)

__all__ = [
    "EqsatThunderWarning",
    "NVFUSER_MAX",
    "Optimize",
    "Options",
    "RegionHook",
    "RegionRecord",
    "SUPPORTED_THUNDER",
    "TORCH_BELOW",
    "TORCH_MIN",
    "ThunderReport",
    "UnsupportedVersion",
    "executors",
]

if thunder_installed():
    # Thunder is optional: the transform (which imports Thunder, and checks nvFuser's version as
    # it is imported) is imported only where Thunder is installed, once Thunder's and torch's
    # versions are checked; whatever fails, the error names the versions found and needed.
    try:
        check_before_import(str(torch.__version__))
        from .executor_list import executors
        from .transform import Optimize
    except Exception as err:  # Thunder's import may raise anything (torch 2.13: AttributeError)
        raise unusable(err, str(torch.__version__)) from err
else:

    def __getattr__(name: str):
        if name in ("Optimize", "executors"):
            check_thunder(None)  # raises UnsupportedVersion: Thunder is not installed
        raise AttributeError(f"module 'eqsat.thunder' has no attribute {name!r}")
