"""Calibration profiles: the constants of the cost model, per kernel kind.

A profile is a JSON file (``bench/calibrate.py`` writes one); the package ships
``profiles/h200_host_fit.json`` (the default) and ``profiles/h200.json``. Its ``kinds`` hold the
constants of each kernel kind (:class:`KernelKind`, one row per kind); one written before a
kind was told apart from another (``grid_reduction`` and ``outer_reduction`` from
``reduction``) gives it that one's (the kind's ``fallback``). Its optional ``error`` table
(``eqsat.cost.error_table``; ``bench/corpus.py --fit-error`` writes it) is the model's measured
error, the margin a rewrite's predicted saving must exceed.
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass, replace
from importlib import resources

from eqsat.errors import FusionError

from .error_table import ErrorTable, real_number


class KernelKind(enum.StrEnum):
    """The kind of a predicted kernel: which of nvFuser's schedulers runs it, and so which of a
    profile's constants price it. Each member is one row: its name (as profiles and reports
    write it); ``fallback``, the kind whose constants a profile that leaves this one out gives
    it (written before the two were told apart; None: a profile must give it); ``color``, its
    boxes' fill in a drawing (``eqsat.cost.drawing``); ``grid``, whether its blocks combine
    through global memory, each such kernel costing the host a kernel that zeroes its
    semaphores (``HostConstants.per_grid_us``)."""

    color: str
    grid: bool

    def __new__(cls, name: str, fallback: str | None, color: str, grid: bool = False):
        member = str.__new__(cls, name)
        member._value_ = name
        member._fallback_name = fallback
        member.color = color
        member.grid = grid
        return member

    # fmt: off
    #                  name               fallback      color       grid
    POINTWISE =        "pointwise",       None,         "#dbeafe"
    REDUCTION =        "reduction",       None,         "#dcfce7"
    OUTER_REDUCTION =  "outer_reduction", "reduction",  "#d1fae5"
    GRID_REDUCTION =   "grid_reduction",  "reduction",  "#ffedd5",  True
    NORMALIZATION =    "normalization",   None,         "#ede9fe"
    # fmt: on

    @property
    def fallback(self) -> KernelKind | None:
        """The kind whose constants a profile that leaves this one out gives it (None: none)."""
        return KernelKind(self._fallback_name) if self._fallback_name else None


# a kind's constants a profile may leave out (0: none): fitted by hand on recorded runs, not by
# bench/calibrate.py's microbenchmarks, which carry them over from the default profile
HAND_FITTED = ("draw_ps", "draw_row_ns", "inner_outer_row_ns")


@dataclass(frozen=True)
class KindConstants:
    """A kernel kind's launch cost, bandwidth and arithmetic throughput (counted flops), and
    ``draw_ps``: the time one element of a random draw (``uniform``, ``normal``: nvFuser's
    Philox, computed where it is used) adds to the kind's arithmetic, in ps (0 where not
    measured); ``draw_row_ns``: where more, the time per row the kernel's reductions reduce
    (the elements drawn over the elements its reductions keep), in ns: an outer reduction's
    threads run along the kept axis, each drawing its column's rows one after another, so
    its draw takes time by the rows, not by the elements (0: not so); ``inner_outer_row_ns``
    (the normalization kind's): the time an inner-outer persistent kernel (a normalization
    that also reduces along the outer axis, through per-block partial results, as a norm
    backward's weight gradient does) adds per row its outer reduction reduces, in ns: each
    block folds its rows into the outer accumulators one after another (0: nothing)."""

    launch_us: float
    bandwidth_GBps: float
    gflops: float
    draw_ps: float = 0.0
    draw_row_ns: float = 0.0
    inner_outer_row_ns: float = 0.0


@dataclass(frozen=True)
class HostConstants:
    """nvFuser's host cost of one ``execute`` at steady state (calls back to back), in µs:
    ``base + per_segment * kernels + per_input * inputs + per_output * outputs + per_op * ops
    + per_resize * resize ops + per_grid * grid reductions`` (each zeroes its semaphores with a
    kernel of its own). ``bench/host_cost.py`` measures and fits it on a GPU."""

    base_us: float
    per_segment_us: float = 0.0
    per_input_us: float = 0.0
    per_output_us: float = 0.0
    per_op_us: float = 0.0
    per_resize_us: float = 0.0
    per_grid_us: float = 0.0

    def cost_us(
        self, segments: int, inputs: int, outputs: int, ops: int, resizes: int, grids: int = 0
    ) -> float:
        return (
            self.base_us
            + self.per_segment_us * segments
            + self.per_input_us * inputs
            + self.per_output_us * outputs
            + self.per_op_us * ops
            + self.per_resize_us * resizes
            + self.per_grid_us * grids
        )


HOST_FIELDS = (
    "base_us",
    "per_segment_us",
    "per_input_us",
    "per_output_us",
    "per_op_us",
    "per_resize_us",
    "per_grid_us",
)


@dataclass(frozen=True)
class Profile:
    name: str
    host: HostConstants
    kinds: dict[KernelKind, KindConstants]
    special_function_weight: float = 4.0
    error: ErrorTable | None = None  # the measured error by kernel count and time (None: none measured)

    @property
    def host_us(self) -> float:
        """The host cost of a one-kernel fusion with nothing else counted (the base and one
        segment)."""
        return self.host.base_us + self.host.per_segment_us

    def with_host_scale(self, factor: float) -> "Profile":
        """This profile with every host constant multiplied by ``factor``: the same GPU on a
        machine whose host is ``factor`` times as slow (``eqsat.testing.host_probe``)."""
        if not 0 < factor < float("inf"):
            raise ValueError(f"a host scale must be finite and positive, not {factor!r}")
        host = HostConstants(**{f: getattr(self.host, f) * factor for f in HOST_FIELDS})
        return replace(self, name=f"{self.name}, host x{factor:.3g}", host=host)

    @classmethod
    def from_dict(cls, data: dict, where: str = "profile") -> "Profile":
        try:
            if not isinstance(data, dict):
                raise TypeError(f"a JSON object was expected, got a {type(data).__name__}")
            kinds = _kinds(data["kinds"])
            host = _host(data)
            error = None
            if data.get("error") is not None:
                try:
                    error = ErrorTable.from_dict(data["error"])
                except KeyError as err:
                    raise KeyError(f"error.{err.args[0]}") from None
            weight = real_number(
                data.get("special_function_weight", 4.0), "special_function_weight", positive=True
            )
            return cls(str(data.get("name", where)), host, kinds, weight, error)
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise FusionError(
                f"{where}: not a cost-model profile ({err}); expected host (or host_us), "
                f"kinds.{{{','.join(KernelKind)}}}.{{launch_us,bandwidth_GBps,gflops"
                f"[,{','.join(HAND_FITTED)}]}} and "
                f"optionally an error table (eqsat.cost.error_table)"
            ) from None


def _kinds(given: dict) -> dict[KernelKind, KindConstants]:
    """``kinds``: every kernel kind's constants, each kind's ``fallback`` standing in for a kind
    left out; an unknown kind is an error."""
    kinds = {k: _kind(k, v) for k, v in given.items()}
    for kind in KernelKind:
        if kind.fallback is not None and kind not in kinds and kind.fallback in kinds:
            kinds[kind] = kinds[kind.fallback]
    unknown = sorted(set(kinds) - set(KernelKind))
    if unknown:
        raise ValueError(f"kinds has unknown kinds {unknown}; known: {', '.join(KernelKind)}")
    missing = [k for k in KernelKind if k not in kinds]
    if missing:
        raise KeyError(f"kinds.{missing[0]}")
    return {KernelKind(k): c for k, c in kinds.items()}


def _kind(name: str, given: dict) -> KindConstants:
    """A kind's constants, each checked: launch_us and the hand-fitted ones finite and >= 0,
    bandwidth_GBps and gflops finite and > 0 (rates)."""
    if not isinstance(given, dict):
        raise TypeError(f"kinds.{name} must be a JSON object, got a {type(given).__name__}")
    for f in ("launch_us", "bandwidth_GBps", "gflops"):
        if f not in given:
            raise KeyError(f"kinds.{name}.{f}")
    rates = ("bandwidth_GBps", "gflops")
    return KindConstants(
        **{
            f: real_number(given[f], f"kinds.{name}.{f}", positive=f in rates)
            for f in ("launch_us", *rates, *HAND_FITTED)
            if f in given
        }
    )


def _host(data: dict) -> HostConstants:
    """``host``: the fitted constants ({base_us, per_segment_us, ...}); or ``host_us``: one
    flat cost per execute (profiles written before the host fit)."""
    if "host" in data:
        given = data["host"]
        unknown = sorted(set(given) - set(HOST_FIELDS))
        if unknown:
            raise ValueError(f"host has unknown fields {unknown}; known: {', '.join(HOST_FIELDS)}")
        values = {f: real_number(given[f], f"host.{f}") for f in HOST_FIELDS if f in given}
        if "base_us" not in values:
            raise KeyError("host.base_us")
    else:
        values = {"base_us": real_number(data["host_us"], "host_us")}
    return HostConstants(**values)


PACKAGED = ("h200_host_fit", "h200")  # profiles/NAME.json; the first is the default


def load_profile(profile=None) -> Profile:
    """``profile``: None (the packaged H200 profile), the name of a packaged profile
    (:data:`PACKAGED`), a Profile, a dict, or a path to JSON."""
    if profile is None or profile in PACKAGED:
        name = f"profiles/{profile or PACKAGED[0]}.json"
        return Profile.from_dict(json.loads(resources.files("eqsat.cost").joinpath(name).read_text()), name)
    if isinstance(profile, Profile):
        return profile
    if isinstance(profile, dict):
        return Profile.from_dict(profile)
    if not isinstance(profile, (str, os.PathLike)):
        raise FusionError(
            f"a profile is the name of a packaged one ({', '.join(PACKAGED)}), a path, a dict "
            f"or a Profile, not a {type(profile).__name__}"
        )
    path = os.fspath(profile)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except RecursionError:
        raise FusionError("cannot read profile: its JSON is nested too deeply", filename=path) from None
    except UnicodeDecodeError as err:
        raise FusionError(
            f"cannot read profile: it is not UTF-8 text (byte {err.start}: {err.reason})", filename=path
        ) from None
    except (OSError, ValueError) as err:  # json.JSONDecodeError is a ValueError
        raise FusionError(f"cannot read profile: {err}", filename=path) from None
    return Profile.from_dict(data, path)
