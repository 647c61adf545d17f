"""Which Lightning Thunder, torch and nvFuser versions ``eqsat.thunder`` works with, and the
checks made when it is imported.

The hook (``eqsat.thunder.transform``) relies on Thunder internals that change between
releases (the fusion BoundSymbols' call context holding a ``FusionDefinitionWrapper`` with
``get_fd``/``to_descriptors``, ``Transform.transform_trace_post_optimization`` called on the
forward and backward traces), so only the release it was written against is accepted:
Thunder 0.2.6. Thunder 0.2.6 itself imports nvFuser's classic frontend
(``nvfuser.compute_tensor_descriptor`` in ``nvfuserex_impl.compute_contiguity``), which nvFuser
0.2.36 dropped: it needs nvFuser <= 0.2.35 (its lower bound, 0.2.8, Thunder checks itself).
It needs torch >= 2.7.1 (its own requirement) and < 2.13: Thunder 0.2.6 reads
``torch.Tensor.align_as`` when it is imported (``thunder/torch/default_torch_ops.py``), and torch
2.13 removed named tensors (pytorch/pytorch#173895), so there ``import thunder`` raises
AttributeError (a fix, Lightning-AI/lightning-thunder#2829, was proposed after 0.2.6). The
``thunder`` extra of pyproject.toml pins that range (docs/thunder.md).

The functions here read version strings (and the installed distributions' metadata) only;
nothing imports Thunder or nvFuser.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re

SUPPORTED_THUNDER = ("0.2.6",)
NVFUSER_MAX = "0.2.35"
TORCH_MIN, TORCH_BELOW = "2.7.1", "2.13"  # Thunder 0.2.6 imports with torch >= 2.7.1, < 2.13
INSTALL = "pip install 'eqsat[thunder]'"
THUNDER_DIST = "lightning-thunder"  # Thunder's distribution (its module is ``thunder``)

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
        raise UnsupportedVersion(
            f"eqsat.thunder needs Lightning Thunder {supported}, which is not "
            f"installed ({INSTALL}; Thunder {supported} needs nvFuser <= {NVFUSER_MAX})"
        )
    try:
        numbers, pre = release(version)
    except ValueError:
        numbers, pre = (), False
    wanted = {_padded(release(v)[0]) for v in SUPPORTED_THUNDER}
    if _padded(numbers) in wanted and len(numbers) <= 3 and not pre:
        return
    raise UnsupportedVersion(
        f"eqsat.thunder supports Lightning Thunder {supported}, found {version} "
        f"({INSTALL} installs {SUPPORTED_THUNDER[-1]})"
    )


def check_nvfuser(version: str | None) -> None:
    """Raises UnsupportedVersion where ``version`` (nvFuser's, as Thunder reads it; None: none
    installed, so Thunder makes no nvFuser regions) is newer than :data:`NVFUSER_MAX`. A
    pre-release or local build of 0.2.35 (the wheels are ``0.2.35.devYYYYMMDD``) is 0.2.35."""
    if version is None:
        return
    try:
        numbers, _ = release(version)
    except ValueError:
        raise UnsupportedVersion(
            f"cannot read nvFuser's version {version!r}; Lightning Thunder "
            f"{SUPPORTED_THUNDER[-1]} needs nvFuser <= {NVFUSER_MAX}"
        ) from None
    if _padded(numbers)[:3] <= _padded(release(NVFUSER_MAX)[0]):
        return
    raise UnsupportedVersion(
        f"Lightning Thunder {SUPPORTED_THUNDER[-1]} needs nvFuser <= {NVFUSER_MAX} "
        f"(nvFuser 0.2.36 dropped the classic frontend that Thunder "
        f"{SUPPORTED_THUNDER[-1]} imports), found {version}"
    )


def check_torch(version: str) -> None:
    """Raises UnsupportedVersion unless torch ``version`` (``torch.__version__``) is one that
    Thunder 0.2.6 imports with: >= :data:`TORCH_MIN` and < :data:`TORCH_BELOW`, pre-releases
    and local builds by their release (``2.12.1+cu130`` is 2.12.1; ``2.13.0.dev20260601``,
    without named tensors, is 2.13)."""
    try:
        numbers, _ = release(version)
    except ValueError:
        raise UnsupportedVersion(
            f"cannot read torch's version {version!r}; Lightning Thunder "
            f"{SUPPORTED_THUNDER[-1]} needs {needed_torch()}"
        ) from None
    if release(TORCH_MIN)[0] <= _padded(numbers) and _padded(numbers)[:2] < release(TORCH_BELOW)[0]:
        return
    why = (
        " (torch 2.13 removed named tensors: Thunder 0.2.6 reads torch.Tensor.align_as when it is imported)"
        if _padded(numbers)[:2] >= release(TORCH_BELOW)[0]
        else ""
    )
    raise UnsupportedVersion(
        f"Lightning Thunder {SUPPORTED_THUNDER[-1]} needs {needed_torch()}{why}, found torch {version}"
    )


def needed_torch() -> str:
    return f"torch >= {TORCH_MIN} and < {TORCH_BELOW}"


def thunder_installed() -> bool:
    """Whether a ``thunder`` package can be imported (found, not imported)."""
    return importlib.util.find_spec("thunder") is not None


def installed_thunder() -> str | None:
    """Lightning Thunder's version as pip recorded it (None where no distribution is recorded:
    not installed, or a ``thunder`` package on the path without metadata)."""
    try:
        return importlib.metadata.version(THUNDER_DIST)
    except importlib.metadata.PackageNotFoundError:
        return None


def installed_nvfuser() -> str:
    """The nvFuser distributions pip recorded (``nvfuser-cu130-torch210 0.2.35.dev20260215``),
    or "none"; nothing is imported."""
    found = sorted(
        {
            f"{d.metadata['Name']} {d.version}"
            for d in importlib.metadata.distributions()
            if (d.metadata["Name"] or "").lower().replace("_", "-").startswith("nvfuser")
        }
    )
    return ", ".join(found) or "none"


def check_before_import(torch_version: str) -> None:
    """The checks made before Thunder is imported, which may fail in its own way otherwise:
    Thunder's recorded version (where recorded) and torch's. UnsupportedVersion where one fails."""
    recorded = installed_thunder()
    if recorded is not None:
        check_thunder(recorded)
    check_torch(torch_version)


def unusable(error: BaseException, torch_version: str) -> UnsupportedVersion:
    """What ``import eqsat.thunder`` raises where Thunder is installed but cannot be used: what
    went wrong (``error``: a version check's UnsupportedVersion, or whatever importing Thunder
    raised: with torch 2.13, an AttributeError), the versions found (Thunder, torch, nvFuser)
    and the ones needed."""
    if isinstance(error, UnsupportedVersion):
        what = str(error)
    else:
        lines = str(error).strip().splitlines()
        what = f"importing Lightning Thunder raised {type(error).__name__}: {lines[0] if lines else ''}"
    thunder = installed_thunder() or "(version not recorded)"
    return UnsupportedVersion(
        f"eqsat.thunder cannot use Lightning Thunder here: {what}. Found Lightning Thunder {thunder}, torch "
        f"{torch_version}, nvFuser {installed_nvfuser()}; eqsat.thunder needs Lightning Thunder "
        f"{' or '.join(SUPPORTED_THUNDER)}, {needed_torch()}, and for nvFuser regions CUDA with nvFuser "
        f"<= {NVFUSER_MAX} ({INSTALL} installs Thunder and such a torch: docs/thunder.md)"
    )
