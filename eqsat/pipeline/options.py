"""``Options``: what one optimization is asked to do, validated once, when made.
``optimize_fusion`` makes one from its keywords, the command line from its flags;
``optimize_pair`` and the Thunder transform take one."""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from eqsat.defaults import DEADLINE_S, DEFAULT_EXTENT, SEARCH_BUDGET

if TYPE_CHECKING:
    from eqsat.cost.profile import Profile
    from eqsat.egraph.saturate import Limits
    from eqsat.verification.runner import Runner

VERIFY = (None, "gpu")  # Options.verify


@dataclass(frozen=True, kw_only=True)
class Options:
    """The options of ``optimize_fusion`` (its keywords, with the same defaults).

    - ``profile``: the calibration profile (a packaged name, a path, a dict or a Profile;
      None: the packaged H200 one).
    - ``rules``: the rule names to use (None: all); ``reassociate=False`` leaves out the rules
      that reorder floating-point sums and products or may differ on NaN, +-inf or overflow.
    - ``limits``: where saturation stops (``eqsat.egraph.saturate.Limits``; None: its defaults).
    - ``extents``: extents by label, over the inputs'; ``default_extent`` for a symbolic axis
      no input gives.
    - ``search_budget``: the nodes extraction's local search may score, summed (what decides
      where it stops); ``search_seconds``: a time limit on it (None: none), a backstop.
    - ``min_gain``: the least predicted saving kept, a fraction (None: the cost model's measured
      error from the profile's error table, else ``MIN_GAIN``).
    - ``deadline_s``: seconds for encoding, saturation, extraction and lowering together
      (None: none), a backstop (docs/limits-and-deadline.md).
    - ``relower``: keep a predicted gain that no creditable rewrite shaped.
    - ``verify``: None (the cost model decides) or ``"gpu"`` (the GPU at hand times the best
      candidates; ``cache_dir`` keeps its decisions, ``runner`` compiles and times them).
    - ``recompute``: let a kernel recompute an elementwise chain of the inputs rather than read
      it from another kernel, where that reads fewer bytes.

    ValueError, naming the option, where ``deadline_s``, ``min_gain``, ``search_budget``,
    ``search_seconds`` or ``verify`` is out of range; the rest are checked where used."""

    profile: Any = None
    rules: tuple[str, ...] | None = None
    reassociate: bool = True
    limits: Limits | None = None
    extents: dict[int, int] | None = None
    default_extent: int = DEFAULT_EXTENT
    search_budget: int = SEARCH_BUDGET
    search_seconds: float | None = None
    min_gain: float | None = None
    deadline_s: float | None = DEADLINE_S
    relower: bool = False
    verify: str | None = None
    cache_dir: str | os.PathLike | None = None
    runner: Runner | None = None
    recompute: bool = True

    def __post_init__(self):
        _check_seconds("deadline_s", self.deadline_s)
        if self.min_gain is not None and not _real(self.min_gain, lambda g: 0 <= g < 1):
            raise ValueError(
                f"min_gain must be a fraction >= 0 and < 1 (the least predicted saving kept), "
                f"or None (the cost model's measured error); got {self.min_gain!r}"
            )
        budget = self.search_budget
        if isinstance(budget, bool) or not isinstance(budget, numbers.Integral) or budget < 0:
            raise ValueError(f"search_budget must be a whole number of nodes >= 0, got {budget!r}")
        _check_seconds("search_seconds", self.search_seconds)
        if self.verify not in VERIFY:
            raise ValueError(
                f"verify must be None or 'gpu', got {self.verify!r} (None: the cost model "
                f"decides, or 'gpu': the GPU times each candidate)"
            )
        if self.rules is not None and not isinstance(self.rules, str):
            object.__setattr__(self, "rules", tuple(self.rules))

    @cached_property
    def loaded_profile(self) -> Profile:
        """``profile`` loaded (once per Options)."""
        from eqsat.cost.profile import load_profile  # deferred: the options import nothing heavy

        return load_profile(self.profile)

    def with_runner(self, runner: Runner) -> "Options":
        """These options with ``runner`` (verify="gpu": the one chosen, reused per shape)."""
        return self if runner is self.runner else replace(self, runner=runner)


def _real(value, ok) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Real) and ok(value)


def _check_seconds(name: str, value) -> None:
    if value is not None and not _real(value, lambda s: s >= 0):
        raise ValueError(f"{name} must be a number of seconds >= 0, or None; got {value!r}")
