"""Calibration profiles: the constants of the cost model, per kernel kind.

A profile is a JSON file (``bench/calibrate.py`` writes one); the package ships
``profiles/h200.json``, the default.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources

from eqsat.errors import FusionError

KINDS = ("pointwise", "reduction", "normalization")


@dataclass(frozen=True)
class KindConstants:
    launch_us: float
    bandwidth_GBps: float
    gflops: float


@dataclass(frozen=True)
class Profile:
    name: str
    host_us: float
    kinds: dict[str, KindConstants]
    special_function_weight: float = 4.0

    @classmethod
    def from_dict(cls, data: dict, where: str = "profile") -> "Profile":
        try:
            kinds = {k: KindConstants(float(v["launch_us"]), float(v["bandwidth_GBps"]), float(v["gflops"]))
                     for k, v in data["kinds"].items()}
            missing = [k for k in KINDS if k not in kinds]
            if missing:
                raise KeyError(f"kinds.{missing[0]}")
            for k, c in kinds.items():
                if not (c.bandwidth_GBps > 0 and c.gflops > 0 and 0 <= c.launch_us < float("inf")) \
                        or c.bandwidth_GBps == float("inf") or c.gflops == float("inf"):
                    raise ValueError(f"kinds.{k} needs launch_us >= 0 and finite bandwidth_GBps and "
                                     f"gflops > 0, got {c}")
            if not 0 <= float(data["host_us"]) < float("inf"):
                raise ValueError(f"host_us must be finite and >= 0, got {data['host_us']}")
            return cls(str(data.get("name", where)), float(data["host_us"]), kinds,
                       float(data.get("special_function_weight", 4.0)))
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise FusionError(f"{where}: not a cost-model profile ({err}); expected host_us and "
                              f"kinds.{{{','.join(KINDS)}}}.{{launch_us,bandwidth_GBps,gflops}}") from None


def load_profile(profile=None) -> Profile:
    """``profile``: None (the packaged H200 profile), a Profile, a dict, or a path to JSON."""
    if profile is None:
        text = resources.files("eqsat.cost").joinpath("profiles/h200.json").read_text()
        return Profile.from_dict(json.loads(text), "profiles/h200.json")
    if isinstance(profile, Profile):
        return profile
    if isinstance(profile, dict):
        return Profile.from_dict(profile)
    path = os.fspath(profile)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as err:
        raise FusionError(f"cannot read profile: {err}", filename=path) from None
    return Profile.from_dict(data, path)
