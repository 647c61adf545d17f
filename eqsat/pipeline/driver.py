"""The pipeline, top to bottom: read, analyse, choose, verify, report; and ``OptimizedFusion``,
what it returns (it runs the pipeline again for new input shapes)."""

from __future__ import annotations

import threading
import time
from typing import Any, Sequence

import torch

from eqsat.cost.model import Estimate
from eqsat.errors import FusionError
from eqsat.frontend.ingest import ingest, ingest_with_inputs
from eqsat.ir.fusion import Fusion
from eqsat.lowering.nvfuser import to_nvfuser
from eqsat.lowering.source import fusion_source
from eqsat.reference.torch_executor import run_fusion
from eqsat.verification.verify import Verification

from .analyse import Analysis, analyse, analyse_run
from .choose import choose
from .context import Pick, Run, concrete_extents, read
from .options import Options
from .report import Report, SaturationSummary
from .verify import decide


def optimize(definition: Any, inputs: Sequence[Any] | None, options: Options) -> OptimizedFusion:
    """``definition`` optimized with ``options`` (see ``eqsat.optimize_fusion``)."""
    start = time.perf_counter()
    run = read(definition, inputs, options, start)  # the deadline starts at its end
    analysis = analyse_run(run)  # encode, saturate, dump, the input's estimate
    pick = choose(run, analysis)  # extract, the margin, credit, lower, re-estimate
    verification = decide(run, pick)  # under verify="gpu", the GPU's decision
    report = _report(run, analysis, pick, verification, start)
    key = None if run.inputs is None else _input_key(run.inputs)
    return OptimizedFusion(run.fusion, pick.result, report, run.options, key)


def estimate(definition: Any, inputs: Sequence[Any] | None, options: Options) -> Estimate:
    """The cost model's estimate of ``definition`` as given (see ``eqsat.estimate_fusion``)."""
    if inputs is None:
        fusion, inputs = ingest_with_inputs(definition)
    else:
        fusion = ingest(definition)
    concrete = concrete_extents(fusion, inputs, options.extents, options.default_extent)
    a = analyse(fusion, concrete, options.loaded_profile)
    if a.enc.skipped or a.before is None:
        raise FusionError(f"cannot estimate: {a.enc.skipped or 'the fusion has no cost-model reading'}")
    return a.before


def _report(run: Run, a: Analysis, pick: Pick, verification: Verification | None, start: float) -> Report:
    if not pick.changed:
        pick.after = pick.before
    seconds = time.perf_counter() - start
    run.phases["total"] = seconds
    sat = a.sat
    return Report(
        pick.before,
        pick.after,
        pick.changed,
        rules_fired=sat.fired if sat else {},
        saturation=SaturationSummary.of(sat),
        seconds=seconds,
        notes=run.notes,
        rules=pick.credited,
        phases=run.phases,
        estimated=pick.estimated,
        rejected=pick.rejected,
        verification=verification,
        cut=run.cuts[0] if run.cuts else None,
        unchanged=None if pick.changed else _why_unchanged(run, a, pick, verification),
        search=pick.search,
    )


def _why_unchanged(run: Run, a: Analysis, pick: Pick, verification: Verification | None) -> str:
    """Why the input was kept, in a line: nothing to optimize, the deadline, no candidate
    predicted cheaper, or the best candidate's rejection."""
    deadline = f"the deadline ({run.deadline.seconds:g} s) cut {run.cuts[0]}" if run.cuts else ""
    if a.enc is not None and a.enc.skipped:
        return f"not optimized: {a.enc.skipped}"
    if run.cuts and not pick.estimated:
        return f"{deadline} before the input was estimated"
    if verification is not None and verification.kept < 0:
        return "on the GPU, no candidate ran more than 1% faster than the input"
    if pick.rejected:
        return f"rejected the {pick.rejected[0]}"
    if run.cuts:
        return deadline
    return "no candidate in the saturated e-graph is predicted cheaper than the input"


def _input_key(inputs: Sequence[Any]) -> tuple:
    key = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            key.append(("T", tuple(x.shape), str(x.dtype), tuple(x.stride())))
        else:
            key.append(("S", type(x).__name__))
    return tuple(key)


class OptimizedFusion:
    """The result of :func:`eqsat.optimize_fusion`: executes like a FusionDefinition. ``options``
    are those it was optimized with; ``for_inputs`` optimizes again with them for new shapes."""

    def __init__(self, original: Fusion, fusion: Fusion, report: Report, options: Options, key: tuple | None):
        self.original = original
        self.fusion = fusion.with_frontend(original.frontend)
        self.report = report
        self.options = options
        self._cache: dict[tuple, OptimizedFusion] = {} if key is None else {key: self}
        self._nvfuser: dict[str | None, Any] = {}
        self._lock = threading.Lock()

    @property
    def frontend(self) -> str | None:
        """The nvFuser frontend the definition was written for (None: unknown); ``source``,
        ``to_nvfuser`` and ``execute`` use it unless told another."""
        return self.original.frontend

    @property
    def source(self) -> str:
        """The optimized definition in the print style of its frontend."""
        return fusion_source(self.fusion)

    def explain(self) -> str:
        return (
            f"{self.report}\n\npredicted kernels as given:\n{self.report.before.explain()}\n\n"
            f"predicted kernels optimized:\n{self.report.after.explain()}"
        )

    def for_inputs(self, inputs: Sequence[Any]) -> "OptimizedFusion":
        """The fusion optimized for these inputs' shapes and dtypes (cached per shape)."""
        key = _input_key(inputs)
        with self._lock:
            found = self._cache.get(key)
        if found is None:
            found = optimize(self.original, inputs, self.options)
            with self._lock:
                found = self._cache.setdefault(key, found)
        return found

    def run_reference(self, inputs: Sequence[Any], **kwargs) -> list:
        """The optimized fusion through the torch executor."""
        return run_fusion(self.for_inputs(inputs).fusion, inputs, **kwargs)

    def to_nvfuser(self, frontend: str | None = None):
        """A live nvFuser FusionDefinition of the optimized fusion, on ``frontend``
        (``"nvfuser"`` or ``"nvfuser_direct"``); by default the definition's own frontend
        where it imports, else whichever does."""
        with self._lock:
            if frontend not in self._nvfuser:
                self._nvfuser[frontend] = to_nvfuser(self.fusion, frontend)
            return self._nvfuser[frontend]

    def execute(self, inputs: Sequence[Any], frontend: str | None = None, **kwargs) -> list:
        """Run on nvFuser (CUDA), through ``frontend`` as in :meth:`to_nvfuser`;
        re-optimizes for new input shapes and dtypes."""
        if not torch.cuda.is_available():
            raise FusionError(
                "execute needs a CUDA device and nvFuser; none is available here "
                "(run_reference runs the optimized fusion through torch instead)"
            )
        return self.for_inputs(inputs).to_nvfuser(frontend).execute(list(inputs), **kwargs)
