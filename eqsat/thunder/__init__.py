"""eqsat inside Lightning Thunder: every nvFuser region Thunder builds, forward and backward,
optimized by eqsat before nvFuser compiles it.

    import thunder, eqsat.thunder
    opt = eqsat.thunder.Optimize()                 # or Optimize(verify="gpu"): never slower, as timed
    jmodel = thunder.jit(model, transforms=[opt])
    loss = jmodel(x).loss; loss.backward()
    print(opt.report)                              # per region: rewritten or not, rules, predicted
                                                   # (and under verify="gpu" measured) times

Install with ``pip install 'eqsat[thunder]'``. Supported: Lightning Thunder 0.2.6 with nvFuser
<= 0.2.35 (``versions``); importing this package where Thunder is installed imports it and
checks both, raising ``UnsupportedVersion`` (an ImportError) naming them. Where Thunder is not
installed the package imports (its options, report and region handling need no Thunder) and
``Optimize`` raises that ImportError when it is reached for. ``import eqsat`` never imports
this package.

Modules: ``versions`` (the supported versions and their check), ``options`` (``Options``),
``report`` (``RegionRecord``, ``ThunderReport``), ``region`` (``RegionHook``: one region
through eqsat, with the fallback to Thunder's own definition), ``transform`` (``Optimize``:
the Thunder transform; where and why it hooks in).
"""
from .options import Options
from .region import EqsatThunderWarning, RegionHook
from .report import RegionRecord, ThunderReport
from .versions import NVFUSER_MAX, SUPPORTED_THUNDER, UnsupportedVersion, check_thunder, thunder_installed

__all__ = ["EqsatThunderWarning", "NVFUSER_MAX", "Optimize", "Options", "RegionHook", "RegionRecord",
           "SUPPORTED_THUNDER", "ThunderReport", "UnsupportedVersion"]

if thunder_installed():
    # Thunder is optional: the transform (which imports Thunder, and checks its version and
    # nvFuser's as it is imported) is imported only where Thunder is installed.
    from .transform import Optimize
else:
    def __getattr__(name: str):
        if name == "Optimize":
            check_thunder(None)          # raises UnsupportedVersion: Thunder is not installed
        raise AttributeError(f"module 'eqsat.thunder' has no attribute {name!r}")
