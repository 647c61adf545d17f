"""``Optimize``: the Thunder transform that routes every nvFuser region through eqsat.

How it hooks in (Lightning Thunder 0.2.6):

- ``thunder/__init__.py`` (``jit``'s ``get_computation_and_inputs``) calls each transform's
  ``transform_trace_post_optimization`` on the execution trace, and on the backward trace
  where there is one, after the executors' passes (nvFuser's ``fusion_pass``, rematerialization,
  the forward/backward split, ``del_last_used``) and before ``python_callable`` turns the
  trace into the function that runs. The regions are final there.
- Each nvFuser region is a BoundSymbol of a fusion Symbol (``sym.is_fusion``,
  ``sym.executor`` the nvFuser executor) that ``FusionExecutor.register_temporary_operation``
  (``thunder/extend/__init__.py``) binds with ``_call_ctx = {name: fn}``: ``fn`` is the
  region's ``FusionDefinitionWrapper`` (``thunder/executors/nvfuserex_impl.py``), which the
  generated code calls by the region's name (``nvFusion3(...)``).
- ``FusionDefinitionWrapper.__call__`` gets its definition from ``get_fd(to_descriptors(args))``,
  an ``lru_cache`` over ``create_fd`` keyed by the inputs' contiguity and stride order:
  Thunder builds the definition only at the region's first call with new descriptors.

So the transform replaces each region's BoundSymbol by one whose call context holds a
``RegionHook`` around Thunder's wrapper: the hook gets Thunder's definition from the wrapper's
own ``get_fd`` at the first call with new inputs, has eqsat optimize it for them, and runs
eqsat's definition or Thunder's wrapper. Nothing of Thunder's is patched: the traces that come
out of the transform hold the hooks; Thunder's wrappers, and traces built without the
transform, are untouched. The fusion Symbol is copied with a ``_bind_postprocess`` that binds
the hook, so that a later pass that rebuilds the BoundSymbol (``from_bsym``) keeps it. List
``Optimize`` before transforms that regroup fusions (``CUDAGraphTransform``).

Where Thunder has no nvFuser executor (no CUDA device, or no nvFuser it can use), it makes no
nvFuser regions: the transform then notes in its report, and warns once, that eqsat has
nothing to do.

Importing this module imports Thunder and checks its version and nvFuser's
(``eqsat.thunder.versions``; ``eqsat.thunder`` checks torch's first).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import thunder
import torch
from thunder.core.trace import TraceProvenance, TraceTag, from_trace
from thunder.core.transform_common import Transform
from thunder.executors.nvfuserex import nvfuser_version, nvfuserex

from .cudnn_attention_executor import EXECUTOR_NAME as CUDNN_SDPA_NAME
from .cudnn_attention_executor import grouped_symbol, grouped_takes
from .grouped_attention import rewrite
from .options import Options
from .region import RegionHook, no_regions
from .report import ThunderReport
from .versions import NVFUSER_MAX, check_nvfuser, check_thunder

check_thunder(thunder.__version__)
_NVFUSER = nvfuser_version()  # None without CUDA or nvFuser: Thunder then makes no regions
check_nvfuser(None if _NVFUSER is None else str(_NVFUSER))


class Optimize(Transform):
    """``thunder.jit(model, transforms=[eqsat.thunder.Optimize()])``: every nvFuser region
    Thunder builds, forward and backward, is optimized by eqsat for the inputs of its first
    call (and again for each new input signature), and runs as eqsat rewrote it where eqsat
    changed it. Options: an ``eqsat.Options`` (checked further as ``eqsat.thunder.Options``),
    or its fields as keywords (``verify="gpu"``, ``min_gain``, ``deadline_s``, ``profile``,
    ``rules``, ``reassociate``, ``relower``, ``recompute``, ``limits``, ``cache_dir``,
    ``runner``, ...). ``report``: a record per region and input signature
    (``print(transform.report)``).

    ``grouped_attention`` (default False, not yet measured on a GPU): where eqsat's cuDNN
    attention executor is listed, attention on keys and values repeated to every query head
    runs on the key-value heads as they are (:mod:`eqsat.thunder.grouped_attention`); False
    leaves the repeats as Thunder traced them."""

    def __init__(self, options: Options | None = None, *, grouped_attention: bool = False, **kwargs):
        if options is not None and kwargs:
            raise TypeError("give Optimize an Options or its fields as keywords, not both")
        if not isinstance(grouped_attention, bool):
            raise TypeError(f"grouped_attention must be True or False, got {grouped_attention!r}")
        self.options = Options.of(options) if options is not None else Options(**kwargs)
        self.grouped_attention = grouped_attention
        self.report = ThunderReport()

    def transform_traces_pre_prologue(
        self, prologue_trc, computation_trc, epilogue_trc, *, executors_list=()
    ):
        """Before autodiff: where eqsat's cuDNN attention executor is listed, attention on keys
        and values repeated to every head runs on the key-value heads as they are
        (:mod:`eqsat.thunder.grouped_attention`)."""
        if not self.grouped_attention or not any(
            getattr(ex, "name", None) == CUDNN_SDPA_NAME for ex in executors_list
        ):
            return prologue_trc, computation_trc, epilogue_trc
        bsyms, calls = rewrite(computation_trc.bound_symbols, grouped_symbol(), grouped_takes)
        if not calls:
            return prologue_trc, computation_trc, epilogue_trc
        new = from_trace(computation_trc)
        new.bound_symbols = bsyms
        new.set_provenance(
            TraceProvenance(
                f"eqsat.thunder.Optimize ({len(calls)} attention calls on grouped keys and values)"
            )
        )
        for h, hk in sorted(set(calls)):
            self.report.note(
                f"grouped-query attention: {h} query heads on {hk} key-value heads run on cuDNN "
                f"without repeating the keys and values"
            )
        return prologue_trc, new, epilogue_trc

    def transform_trace_post_optimization(self, computation_trace, **kwargs):
        why = no_nvfuser()
        if why is not None:
            no_regions(self.report, why)
        return wrap_regions(computation_trace, self.options, self.report)

    def __repr__(self) -> str:
        return f"eqsat.thunder.Optimize({self.options})"


def no_nvfuser() -> str | None:
    """Why Thunder makes no nvFuser regions here (it has no nvFuser executor), else None."""
    if nvfuserex is not None:
        return None
    if not torch.cuda.is_available():
        return "no CUDA device here, so Thunder has no nvFuser executor"
    return f"Thunder found no nvFuser it can use here (eqsat.thunder needs nvFuser <= {NVFUSER_MAX})"


def trace_kind(trace) -> str:
    """ "backward" for the backward trace (Thunder names its function ``backward_fn``:
    ``thunder/transforms/autodiff.py``), else "forward"."""
    if TraceTag.AUGMENTED_FORWARD in trace.tags:
        return "forward"
    try:
        name = trace.siginfo().name
    except Exception:  # a trace made without a function has no signature to read
        return "forward"
    return "backward" if name == "backward_fn" else "forward"


def thunder_region(bsym) -> Any | None:
    """The ``FusionDefinitionWrapper`` of an nvFuser region's BoundSymbol, else None."""
    sym = bsym.sym
    if not sym.is_fusion or nvfuserex is None or sym.executor is not nvfuserex:
        return None
    fn = (bsym._call_ctx or {}).get(sym.name)
    return fn if hasattr(fn, "get_fd") and hasattr(fn, "to_descriptors") else None


def wrap_regions(trace, options: Options, report: ThunderReport):
    """``trace`` with each nvFuser region's wrapper behind a RegionHook (the trace itself
    where it has none)."""
    kind = trace_kind(trace)
    bsyms, wrapped = [], 0
    for bsym in trace.bound_symbols:
        fn = thunder_region(bsym)
        if fn is None:
            bsyms.append(bsym)
            continue
        hook = RegionHook(fn, name=bsym.sym.name, trace=kind, options=options, report=report)
        bsyms.append(rebind(bsym, hook))
        wrapped += 1
    if not wrapped:
        return trace
    new = from_trace(trace)
    new.bound_symbols = bsyms
    new.set_provenance(
        TraceProvenance(
            f"eqsat.thunder.Optimize ({wrapped} nvFuser regions optimized at "
            f"their first call per input signature)"
        )
    )
    return new


def rebind(bsym, hook: RegionHook):
    """``bsym`` calling ``hook`` instead of Thunder's wrapper: its Symbol copied with a
    ``_bind_postprocess`` that puts the hook in the call context, as Thunder's puts its wrapper."""
    name = bsym.sym.name

    def bind_hook(b) -> None:
        b._call_ctx = {name: hook}

    sym = dataclasses.replace(bsym.sym, _bind_postprocess=bind_hook)
    return bsym.from_bsym(sym=sym)
