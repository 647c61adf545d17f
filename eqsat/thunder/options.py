"""The options of ``eqsat.thunder.Optimize``: what each region's ``optimize_fusion`` is given,
checked when the transform is made, so that a bad option is an error at ``Optimize(...)``
rather than a warning at every region."""
from __future__ import annotations

import numbers
import os
from dataclasses import dataclass, field
from typing import Any

from eqsat.cost.profile import load_profile
from eqsat.egraph.saturate import Limits, select_rules
from eqsat.optimize import DEADLINE_S, VERIFY, Deadline
from eqsat.verification.runner import Runner

_RUNNER_MEMBERS = ("device", "versions", "prepare", "run", "steady_us")


@dataclass(frozen=True)
class Options:
    """``verify``: None (the cost model decides, within its measured error) or ``"gpu"``
    (each region's candidates are run on the region's own inputs at its first call, checked
    against Thunder's definition and timed; one is kept only where it runs faster: the region
    is never slower as measured). ``min_gain``, ``deadline_s`` (per region and input
    signature), ``profile``, ``rules``, ``reassociate``, ``relower``, ``recompute``, ``limits``: as
    ``eqsat.optimize_fusion`` takes them. ``cache_dir`` (where verify="gpu" keeps its
    decisions) and ``runner`` (what compiles and times them; a fake one in tests) apply to
    verify="gpu" only. ValueError or TypeError, naming the option, where one is bad."""

    verify: str | None = None
    min_gain: float | None = None
    deadline_s: float | None = DEADLINE_S
    profile: Any = None
    rules: tuple[str, ...] | None = None
    reassociate: bool = True
    relower: bool = False
    recompute: bool = True
    limits: Limits | None = None
    cache_dir: str | os.PathLike | None = None
    runner: Runner | None = None
    _profile: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.verify not in VERIFY:
            raise ValueError(f"verify must be None (the cost model decides) or 'gpu' (the GPU times each "
                             f"candidate), got {self.verify!r}")
        if self.min_gain is not None and (isinstance(self.min_gain, bool) or not (
                isinstance(self.min_gain, numbers.Real) and 0 <= self.min_gain < 1)):
            raise ValueError(f"min_gain must be a fraction >= 0 and < 1 (the least predicted saving kept), "
                             f"or None (the cost model's measured error); got {self.min_gain!r}")
        if isinstance(self.deadline_s, bool):
            raise ValueError(f"deadline_s must be a number of seconds >= 0, or None; got {self.deadline_s!r}")
        Deadline.check(self.deadline_s)
        for name in ("reassociate", "relower", "recompute"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        self._check_rules()
        if self.limits is not None and not isinstance(self.limits, Limits):
            raise TypeError(f"limits must be an eqsat.egraph.saturate.Limits, got {type(self.limits).__name__}")
        if self.cache_dir is not None and not isinstance(self.cache_dir, (str, os.PathLike)):
            raise TypeError(f"cache_dir must be a path, got {type(self.cache_dir).__name__}")
        if self.runner is not None:
            missing = [m for m in _RUNNER_MEMBERS if not hasattr(self.runner, m)]
            if missing:
                raise TypeError(f"runner must be an eqsat.verification.Runner (device, versions, prepare, run, "
                                f"steady_us); {type(self.runner).__name__} lacks {', '.join(missing)}")
        for name in ("cache_dir", "runner"):
            if getattr(self, name) is not None and self.verify != "gpu":
                raise ValueError(f"{name} applies to verify='gpu' only (GPU verification's decisions), "
                                 f"and verify is {self.verify!r}")
        try:
            loaded = load_profile(self.profile)
        except Exception as err:   # a bad path, JSON or table: FusionError, TypeError, ...
            raise ValueError(f"profile {self.profile!r} cannot be used: {err}") from err
        object.__setattr__(self, "_profile", loaded)

    def _check_rules(self) -> None:
        if self.rules is None:
            return
        if isinstance(self.rules, str) or not all(isinstance(r, str) for r in self.rules):
            raise TypeError(f"rules must be a collection of rule names (see `eqsat rules list`), "
                            f"got {self.rules!r}")
        object.__setattr__(self, "rules", tuple(self.rules))
        if not self.rules:
            raise ValueError("rules is empty: give None for every rule, or the names of some")
        if not select_rules(self.rules, reassociate=self.reassociate):   # ValueError naming unknown rules
            raise ValueError(f"reassociate=False leaves out every rule of {list(self.rules)}")

    def optimize_kwargs(self) -> dict:
        """The keyword arguments of ``eqsat.optimize_fusion`` (the profile loaded once)."""
        return dict(profile=self._profile, rules=self.rules, reassociate=self.reassociate, limits=self.limits,
                    min_gain=self.min_gain, deadline_s=self.deadline_s, relower=self.relower,
                    recompute=self.recompute, verify=self.verify, cache_dir=self.cache_dir, runner=self.runner)
