"""The options of ``eqsat.thunder.Optimize``: an ``eqsat.Options``, checked further when the
transform is made, so that a bad option is an error at ``Optimize(...)`` rather than a warning
at every region."""

from __future__ import annotations

import os
from dataclasses import fields

from eqsat.egraph.saturate import Limits, select_rules
from eqsat.pipeline.options import Options as BaseOptions

_RUNNER_MEMBERS = ("device", "versions", "prepare", "run", "steady_us")


class Options(BaseOptions):
    """``eqsat.Options``, as each region's optimization is given them: ``verify`` None (the
    cost model decides, within its measured error) or ``"gpu"`` (each region's candidates are
    run on the region's own inputs at its first call, checked against Thunder's definition and
    timed; one is kept only where it runs faster: the region is never slower as measured);
    ``deadline_s`` per region and input signature. Checked further than ``eqsat.Options``: the
    flags are bools, ``rules`` a non-empty collection of known rule names, ``limits`` a Limits,
    ``cache_dir`` a path and ``runner`` a Runner (both for verify="gpu" only), and the profile
    is loaded now. ValueError or TypeError, naming the option, where one is bad."""

    def __post_init__(self):
        super().__post_init__()
        for name in ("reassociate", "relower", "recompute"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        self._check_rules()
        if self.limits is not None and not isinstance(self.limits, Limits):
            raise TypeError(
                f"limits must be an eqsat.egraph.saturate.Limits, got {type(self.limits).__name__}"
            )
        if self.cache_dir is not None and not isinstance(self.cache_dir, (str, os.PathLike)):
            raise TypeError(f"cache_dir must be a path, got {type(self.cache_dir).__name__}")
        if self.runner is not None:
            missing = [m for m in _RUNNER_MEMBERS if not hasattr(self.runner, m)]
            if missing:
                raise TypeError(
                    f"runner must be an eqsat.verification.Runner (device, versions, prepare, "
                    f"run, steady_us); {type(self.runner).__name__} lacks {', '.join(missing)}"
                )
        for name in ("cache_dir", "runner"):
            if getattr(self, name) is not None and self.verify != "gpu":
                raise ValueError(
                    f"{name} applies to verify='gpu' only (GPU verification's decisions), "
                    f"and verify is {self.verify!r}"
                )
        try:
            self.loaded_profile
        except Exception as err:  # a bad path, JSON or table: FusionError, TypeError, ...
            raise ValueError(f"profile {self.profile!r} cannot be used: {err}") from err

    @classmethod
    def of(cls, options: BaseOptions) -> "Options":
        """``options`` as the transform's, checked as above."""
        if isinstance(options, cls):
            return options
        return cls(**{f.name: getattr(options, f.name) for f in fields(options)})

    def _check_rules(self) -> None:
        if self.rules is None:
            return
        if isinstance(self.rules, str) or not all(isinstance(r, str) for r in self.rules):
            raise TypeError(
                f"rules must be a collection of rule names (see `eqsat rules list`), got {self.rules!r}"
            )
        if not self.rules:
            raise ValueError("rules is empty: give None for every rule, or the names of some")
        if not select_rules(self.rules, reassociate=self.reassociate):  # ValueError naming unknown rules
            raise ValueError(f"reassociate=False leaves out every rule of {list(self.rules)}")
