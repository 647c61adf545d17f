"""Which Lightning Thunder and nvFuser versions ``eqsat.thunder`` works with, and the check made
when it is imported.

The hook (``eqsat.thunder.transform``) relies on Thunder internals that change between
releases (the fusion BoundSymbols' call context holding a ``FusionDefinitionWrapper`` with
``get_fd``/``to_descriptors``, ``Transform.transform_trace_post_optimization`` called on the
forward and backward traces), so only the release it was written against is accepted:
Thunder 0.2.6. Thunder 0.2.6 itself imports nvFuser's classic frontend
(``nvfuser.compute_tensor_descriptor`` in ``nvfuserex_impl.compute_contiguity``), which nvFuser
0.2.36 dropped: it needs nvFuser <= 0.2.35 (its lower bound, 0.2.8, Thunder checks itself).

The functions here read version strings only; nothing imports Thunder or nvFuser.
"""
from __future__ import annotations

import importlib.util
import re

SUPPORTED_THUNDER = ("0.2.6",)
NVFUSER_MAX = "0.2.35"
INSTALL = "pip install 'eqsat[thunder]'"

_VERSION = re.compile(r"\s*v?(\d+(?:\.\d+)*)(.*)", re.S)
_PRERELEASE = re.compile(r"[.\-_]?(dev|a|alpha|b|beta|c|rc|pre|preview)\d*", re.I)


class UnsupportedVersion(ImportError):
    """Thunder or nvFuser is missing or at a version ``eqsat.thunder`` does not support."""


def release(version: str) -> tuple[tuple[int, ...], bool]:
    """(the release numbers, whether it is a pre-release) of a version string such as
    ``0.2.6``, ``0.2.35.dev20260215`` (a pre-release) or ``0.2.35+git1a2b3c`` (a local build).
    ValueError where it does not begin with a number."""
    m = _VERSION.fullmatch(str(version))
    if m is None:
        raise ValueError(f"cannot read the version {version!r}")
    numbers = tuple(int(p) for p in m.group(1).split("."))
    return numbers, _PRERELEASE.match(m.group(2)) is not None


def _padded(numbers: tuple[int, ...], n: int = 3) -> tuple[int, ...]:
    return numbers + (0,) * (n - len(numbers))


def check_thunder(version: str | None) -> None:
    """Raises UnsupportedVersion unless ``version`` (Thunder's ``__version__``; None: not
    installed) is a supported release: 0.2.6, or a post-release or local build of it (not a
    pre-release, which may predate what the hook relies on)."""
    supported = " or ".join(SUPPORTED_THUNDER)
    if version is None:
        raise UnsupportedVersion(f"eqsat.thunder needs Lightning Thunder {supported}, which is not "
                                 f"installed ({INSTALL}; Thunder {supported} needs nvFuser <= {NVFUSER_MAX})")
    try:
        numbers, pre = release(version)
    except ValueError:
        numbers, pre = (), False
    wanted = {_padded(release(v)[0]) for v in SUPPORTED_THUNDER}
    if _padded(numbers) in wanted and len(numbers) <= 3 and not pre:
        return
    raise UnsupportedVersion(f"eqsat.thunder supports Lightning Thunder {supported}, found {version} "
                             f"({INSTALL} installs {SUPPORTED_THUNDER[-1]})")


def check_nvfuser(version: str | None) -> None:
    """Raises UnsupportedVersion where ``version`` (nvFuser's, as Thunder reads it; None: none
    installed, so Thunder makes no nvFuser regions) is newer than :data:`NVFUSER_MAX`. A
    pre-release or local build of 0.2.35 (the wheels are ``0.2.35.devYYYYMMDD``) is 0.2.35."""
    if version is None:
        return
    try:
        numbers, _ = release(version)
    except ValueError:
        raise UnsupportedVersion(f"cannot read nvFuser's version {version!r}; Lightning Thunder "
                                 f"{SUPPORTED_THUNDER[-1]} needs nvFuser <= {NVFUSER_MAX}") from None
    if _padded(numbers)[:3] <= _padded(release(NVFUSER_MAX)[0]):
        return
    raise UnsupportedVersion(f"Lightning Thunder {SUPPORTED_THUNDER[-1]} needs nvFuser <= {NVFUSER_MAX} "
                             f"(nvFuser 0.2.36 dropped the classic frontend that Thunder "
                             f"{SUPPORTED_THUNDER[-1]} imports), found {version}")


def thunder_installed() -> bool:
    """Whether a ``thunder`` package can be imported (found, not imported)."""
    return importlib.util.find_spec("thunder") is not None
