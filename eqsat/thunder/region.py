"""One of Thunder's nvFuser regions, run through eqsat: :class:`RegionHook` stands where Thunder
put the region's ``FusionDefinitionWrapper`` and is called as it is, with the region's inputs.

At the first call with a new input signature (shapes, strides, dtypes, devices) it takes
Thunder's own definition for those inputs (the wrapper's ``get_fd(to_descriptors(args))``,
Thunder's cache), optimizes it with ``eqsat.optimize_fusion`` for those inputs (once per
Thunder definition, then through ``OptimizedFusion.for_inputs``, eqsat's per-shape cache),
records what eqsat did in the report, and from then on runs eqsat's definition where eqsat
changed it, else calls Thunder's wrapper itself. Any failure of eqsat's (reading Thunder's
definition, optimizing, verifying, lowering, compiling or running eqsat's definition) makes the
region run as Thunder built it, with an :class:`EqsatThunderWarning` naming it.

Nothing here imports Thunder or nvFuser: the wrapper is used through the members named above
(``name``, ``get_fd``, ``to_descriptors``, ``enable_options``, ``disable_options``, calling it),
so a stand-in drives it in the tests.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import torch

from eqsat.frontend.ingest import ingest
from eqsat.ir.call_invariant import call_invariant_outputs
from eqsat.ir.fusion import Fusion
from eqsat.pipeline.driver import OptimizedFusion, optimize
from eqsat.reference.devices import fresh_copies

from .causal_masks import is_causal_pattern, mark
from .options import Options
from .report import RegionRecord, ThunderReport, describe_error

_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)
_NUMBERS = (bool, int, float, complex, type(None))


class EqsatThunderWarning(UserWarning):
    """eqsat failed on one of Thunder's regions, which runs as Thunder built it; or Thunder made
    no nvFuser regions at all, and eqsat has nothing to do (:func:`no_regions`)."""


def no_regions(report: ThunderReport, why: str, stacklevel: int = 2) -> None:
    """Thunder makes no nvFuser regions (``why``: no CUDA device, no usable nvFuser): the
    report notes that eqsat has nothing to do, and an EqsatThunderWarning says so, once per
    report (``stacklevel`` as ``warnings.warn`` takes it, counted from the caller)."""
    text = f"Thunder made no nvFuser regions ({why}), so eqsat has nothing to optimize"
    if report.note(text):
        warnings.warn(f"eqsat: {text}", EqsatThunderWarning, stacklevel=stacklevel + 1)


def signature(args) -> tuple | None:
    """What a region's definition is chosen by: per tensor its shape, strides, dtype and
    device; per number its type. None where an argument is neither a plain tensor nor a
    number (a DTensor, an AsyncCollectiveTensor, ...): such calls are left to Thunder."""
    key = []
    for a in args:
        t = type(a)
        if t in _PLAIN_TENSORS:
            key.append((a.shape, a.stride(), a.dtype, a.device))
        elif t in _NUMBERS:
            key.append(t)
        else:
            return None
    return tuple(key)


def describe_inputs(args) -> str:
    """``bfloat16[2, 64, 256], float32[256], float``."""
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(f"{str(a.dtype).removeprefix('torch.')}[{', '.join(map(str, a.shape))}]")
        else:
            out.append(type(a).__name__)
    return ", ".join(out)


def region_ops(annotation: str) -> str:
    """The ops of Thunder's annotation ``nvFusion3: (add, mul, sum)``: ``add, mul, sum``."""
    if ":" not in annotation:
        return ""
    return annotation.split(":", 1)[1].strip().removeprefix("(").removesuffix(")")


def optimizer_inputs(fusion: Fusion, args, options: Options) -> list:
    """The inputs ``optimize_fusion`` is given for a call: the call's own; copies of them where
    verify="gpu" would run (and time, many times over) a fusion that writes into its inputs
    (an ``alias_input`` output, as Thunder's ``copy_`` makes), which would change the
    caller's tensors."""
    if options.verify and any(o.alias_input is not None for o in fusion.outputs):
        return fresh_copies(args)
    return list(args)


def compile_nvfuser(optimized: OptimizedFusion, thunder_fd: Any) -> Any:
    """eqsat's definition as a live nvFuser FusionDefinition, on the frontend of Thunder's own
    (eqsat remembers it: ``nvfuser_direct`` under Thunder 0.2.6 with nvFuser 0.2.35)."""
    return optimized.to_nvfuser()


@dataclass
class _Entry:
    fd: Any  # eqsat's definition to run; None: Thunder's wrapper runs
    device: Any  # Thunder's definition's _selected_device (set by factory ops)
    record: RegionRecord
    to_check: tuple[int, ...] = ()  # call-invariant outputs, compared with a causal mask at the first call
    causal: tuple[int, ...] = ()  # outputs found causal masks: marked at every call


def _outputs(result: Any) -> tuple:
    return (result,) if isinstance(result, torch.Tensor) else tuple(result)


def _is_causal(output: Any) -> bool:
    try:
        return is_causal_pattern(output)
    except Exception:  # an output the check cannot read (a tensor subclass, ...): not marked
        return False


def mark_causal_masks(entry: _Entry, result: Any) -> Any:
    """At the first call, which of the call-invariant outputs are causal masks
    (:func:`eqsat.thunder.causal_masks.is_causal_pattern`); at every call, those outputs
    marked (``causal_masks.mark``). Returns ``result``."""
    if not (entry.to_check or entry.causal):  # most regions: nothing to check or mark
        return result
    outputs = _outputs(result)
    if entry.to_check:
        entry.causal = tuple(i for i in entry.to_check if i < len(outputs) and _is_causal(outputs[i]))
        entry.record.causal_masks = entry.causal
        entry.to_check = ()
    for i in entry.causal:
        mark(outputs[i])
    return result


class RegionHook:
    """Called as Thunder's ``FusionDefinitionWrapper`` ``thunder_region`` is, for the region
    ``name`` of a ``trace`` ("forward", "backward"); records into ``report``. ``compile`` turns
    an optimized fusion into what runs (default :func:`compile_nvfuser`: a live nvFuser
    definition); its ``execute`` is called as Thunder calls its own definition's. Other
    attributes (``get_fd``, ``cache_info``, ...) are the wrapper's; ``last_used`` is the
    definition that ran last.

    Whatever runs, the region's outputs that are causal attention masks are marked at each call
    (:func:`mark_causal_masks`, :mod:`eqsat.thunder.causal_masks`), for eqsat's cuDNN attention
    executor to run them as ``is_causal``.

    Per call it costs the input signature and a dict lookup (about 3.5 us for ten tensors on
    a CPU core) over Thunder's own call where it runs Thunder's definition; where it runs
    eqsat's, it replaces Thunder's own descriptor lookup, which costs about as much."""

    def __init__(
        self,
        thunder_region: Any,
        *,
        name: str,
        trace: str,
        options: Options,
        report: ThunderReport,
        compile: Callable[[OptimizedFusion, Any], Any] | None = None,
    ):
        self.thunder = thunder_region
        self.name = name
        self.trace = trace
        self.options = options
        self.report = report
        self.compile = compile or compile_nvfuser
        self.ops = region_ops(getattr(thunder_region, "name", "") or "")
        self._enable = list(getattr(thunder_region, "enable_options", None) or [])
        self._disable = list(getattr(thunder_region, "disable_options", None) or [])
        self._entries: dict[tuple, _Entry] = {}
        self._optimized: dict[Any, OptimizedFusion] = {}  # per Thunder definition (its descriptors)
        self._store_inputs = bool(getattr(thunder_region, "store_inputs", False))
        self._lock = threading.Lock()
        self._last_used = None

    def __call__(self, *args):
        key = signature(args)
        entry = None if key is None else self._entries.get(key) or self._prepare(key, args)
        if entry is None:
            self._last_used = None
            return self.thunder(*args)
        if entry.fd is None:
            self._last_used = None
            return mark_causal_masks(entry, self.thunder(*args))
        self._last_used = entry.fd
        if self._store_inputs:  # Thunder's repro tools read the wrapper's
            self.thunder.last_inputs = args
        try:
            result = entry.fd.execute(
                args, device=entry.device, _enable_options=self._enable, _disable_options=self._disable
            )
        except Exception as err:  # nvFuser's errors have no common type; Thunder's definition runs instead
            self._fall_back(entry, err)
            self._last_used = None
            result = self.thunder(*args)
        return mark_causal_masks(entry, result)

    @property
    def last_used(self) -> Any:
        """The definition that ran last: eqsat's, or the one Thunder's wrapper ran."""
        return self._last_used if self._last_used is not None else getattr(self.thunder, "last_used", None)

    def __getattr__(self, name: str) -> Any:
        if name == "thunder":
            raise AttributeError(name)
        return getattr(self.thunder, name)

    def __repr__(self) -> str:
        return f"RegionHook({self.trace} {self.name})"

    def _prepare(self, key: tuple, args: tuple) -> _Entry:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                return entry
            descriptors = self.thunder.to_descriptors(args)
            thunder_fd = self.thunder.get_fd(descriptors)  # Thunder's own definition (and its cache)
            inputs = describe_inputs(args)
            record = RegionRecord(self.name, self.trace, self.ops, inputs)
            fd, to_check = None, ()
            try:
                fusion = self._read(descriptors, thunder_fd)
                to_check = call_invariant_outputs(fusion)
                optimized = self._optimize(descriptors, fusion, args)
                record = RegionRecord.of(self.name, self.trace, self.ops, inputs, optimized.report)
                if optimized.report.changed:
                    fd = self.compile(optimized, thunder_fd)
            except Exception as err:  # any failure of eqsat's: Thunder's definition runs
                fd = None
                record.fell_back(err)
                self._warn(err)
            entry = _Entry(fd, getattr(thunder_fd, "_selected_device", None), record, to_check)
            self._entries[key] = entry
            self.report.add(record)
            return entry

    def _read(self, descriptors: Any, thunder_fd: Any) -> Fusion:
        """Thunder's definition in eqsat's IR (read once per definition)."""
        optimized = self._optimized.get(descriptors)
        return optimized.original if optimized is not None else ingest(thunder_fd)

    def _optimize(self, descriptors: Any, fusion: Fusion, args: tuple) -> OptimizedFusion:
        """Thunder's definition (``fusion``) optimized for ``args``: once per definition
        (Thunder makes one per input descriptors), then per shape through ``for_inputs``."""
        optimized = self._optimized.get(descriptors)
        if optimized is not None:
            return optimized.for_inputs(self._inputs(optimized.original, args))
        optimized = optimize(fusion, self._inputs(fusion, args), self.options)
        self._optimized[descriptors] = optimized
        return optimized

    def _inputs(self, fusion: Fusion, args: tuple) -> list:
        return optimizer_inputs(fusion, args, self.options)

    def _fall_back(self, entry: _Entry, err: BaseException) -> None:
        with self._lock:
            entry.fd = None
            entry.record.fell_back(err)
        self._warn(err)

    def _warn(self, err: BaseException) -> None:
        # stacklevel 4: the warning points at the caller of __call__ (Thunder's generated code)
        warnings.warn(
            f"eqsat: Thunder's {self.trace} region {self.name} runs as Thunder built it; eqsat "
            f"failed on it: {describe_error(err)}",
            EqsatThunderWarning,
            stacklevel=4,
        )
