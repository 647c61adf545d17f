"""The run: one optimization as it passes from stage to stage (the fusion, its inputs and
options, the deadline, and what the stages record), :func:`read`, the stage that makes it, and
the ``Pick``, the candidate chosen as the later stages build it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from eqsat.cost.model import Estimate
from eqsat.cost.profile import Profile
from eqsat.deadline import Cut, Deadline
from eqsat.egraph.saturate import Limits, prepare, select_rules
from eqsat.errors import naming_file
from eqsat.frontend.ingest import ingest, ingest_with_inputs, source_file
from eqsat.ir.fusion import Fusion
from eqsat.reference.inputs import check_inputs
from eqsat.verification.runner import NvFuserRunner
from eqsat.verification.verify import check_verifiable

from .options import Options
from .report import Rejection


@dataclass
class Run:
    """One optimization: the ``fusion`` as read, its ``inputs`` (None: none), the ``options``
    (with the runner chosen under verify="gpu"), the ``profile`` loaded, the ``concrete``
    extents by label, the ``rules`` selected and the ``deadline``; and what the stages record:
    ``notes``, the stages the deadline ``cuts`` (in order) and the seconds by stage
    (``phases``)."""

    fusion: Fusion
    inputs: Sequence[Any] | None
    options: Options
    profile: Profile
    concrete: dict[int, int]
    rules: tuple[str, ...]
    deadline: Deadline
    notes: list[str] = field(default_factory=list)
    cuts: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def limits(self) -> Limits:
        return self.options.limits or Limits()

    def cut(self, cut: Cut, kept: str) -> str:
        """The note that the deadline cut ``cut.stage`` and what was ``kept``; records the stage."""
        self.cuts.append(cut.stage)
        return f"the deadline ({self.deadline.seconds:g} s) cut {cut.stage}: {kept}"

    def add_seconds(self, stage: str, seconds: float) -> None:
        self.phases[stage] = self.phases.get(stage, 0.0) + seconds


@dataclass
class Pick:
    """The candidate chosen: the result (the input where none was kept), the estimates before
    and after, whether it changed, the rules credited, whether the input was estimated, the
    candidates lowered for verify="gpu" to decide between, those rejected and why, the notes of
    the extraction it came from, and extraction's search ("scored", "nodes", "stop")."""

    result: Fusion
    before: Estimate = field(default_factory=Estimate)
    after: Estimate = field(default_factory=Estimate)
    changed: bool = False
    credited: list[str] = field(default_factory=list)
    estimated: bool = False
    lowered: list = field(default_factory=list)  # verify's Lowered, cheapest first
    rejected: list[Rejection] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    search: dict = field(default_factory=dict)

    def keep(self, result: Fusion, after: Estimate, credited: list[str]) -> None:
        """Keep ``result`` (estimated ``after``, crediting ``credited``) in place of the input."""
        self.result, self.after, self.changed, self.credited = result, after, True, credited

    def keep_input(self, fusion: Fusion) -> None:
        self.result, self.after, self.changed, self.credited = fusion, self.before, False, []


def read(definition: Any, inputs: Sequence[Any] | None, options: Options, start: float) -> Run:
    """The definition read and typed (with a repro file's or text's own inputs where none are
    given), its inputs checked, the profile loaded, the rules selected and the process's e-graph
    made; then the deadline starts. ``start``: when the optimization began."""
    if inputs is None:  # a repro file's or text's own inputs, where it has them
        fusion, inputs = ingest_with_inputs(definition, device="cpu" if options.verify else "meta")
    else:
        fusion = ingest(definition)
    profile = options.loaded_profile
    with naming_file(source_file(definition)):  # a repro file's inputs: errors name it
        concrete = concrete_extents(fusion, inputs, options.extents, options.default_extent)
    if options.verify:
        check_verifiable(inputs)
        options = options.with_runner(options.runner or NvFuserRunner(prefer=fusion.frontend))
    rules = tuple(select_rules(options.rules, reassociate=options.reassociate))
    setup = prepare()  # the process's e-graph, made once: outside every fusion's deadline
    deadline = Deadline(options.deadline_s)
    phases = {"read": deadline.began - start - setup, "setup": setup}
    return Run(fusion, inputs, options, profile, concrete, rules, deadline, phases=phases)


def concrete_extents(
    fusion: Fusion, inputs: Sequence[Any] | None, extents: dict | None, default_extent: int
) -> dict[int, int]:
    """label -> extent: static ones, then from ``inputs`` (checked against the definition),
    then ``extents`` given by label, then ``default_extent``."""
    types = fusion.types
    out = {k: v for k, v in types.extents.items() if v is not None}
    if inputs is not None:
        out.update(check_inputs(fusion, inputs))
    out.update(extents or {})
    for label in types.extents:
        out.setdefault(label, default_extent)
    return out
