"""Fusion IR -> a live nvFuser FusionDefinition, through either of nvFuser's frontends.

``nvfuser`` is the classic frontend (up to 0.2.35); ``nvfuser_direct`` is the only one from
0.2.36 on. Direct takes shapes as python lists (no ``define_vector(list)``) and has no
``add_output(t, stride_order)``: an output's stride order goes through ``ops.stride_order``.
"""

from __future__ import annotations

import importlib
from typing import Any

from eqsat.errors import FusionError
from eqsat.frontend.ingest import define_on
from eqsat.ir.dtypes import DataType
from eqsat.ir.fusion import FRONTENDS, Fusion
from .frontends import replay_for


def load_frontend(frontend: str | None = None, prefer: str | None = None):
    """The nvFuser module: ``frontend`` if given; else the first that imports of ``prefer``
    and then the others (classic ``nvfuser`` before ``nvfuser_direct``). A FusionError names
    what is missing."""
    for name in (frontend, prefer):
        if name is not None and name not in FRONTENDS:
            raise FusionError(f"unknown nvFuser frontend {name!r}; expected one of {FRONTENDS}")
    names = [frontend] if frontend else sorted(FRONTENDS, key=lambda n: n != prefer)
    errors = []
    for name in names:
        try:
            return importlib.import_module(name)
        except Exception as err:  # ImportError, or a CUDA/ABI error raised while importing
            errors.append(f"{name}: {type(err).__name__}: {err}")
    raise FusionError(
        "nvFuser is not available (" + "; ".join(errors) + "). Install an nvFuser wheel "
        "matching your CUDA torch, e.g. pip install nvfuser-cu130-torch210"
    )


class _DirectAdapter:
    """nvfuser_direct's FusionDefinition, taking the calls that the classic one takes."""

    def __init__(self, fd):
        self._fd = fd
        self.ops = fd.ops

    def define_tensor(self, **kwargs):
        return self._fd.define_tensor(**kwargs)

    def define_scalar(self, *args, **kwargs):
        return self._fd.define_scalar(*args, **kwargs)

    def add_output(self, value, alias_input=None, stride_order=None):
        if alias_input is not None:
            return self._fd.add_output(value, alias_input)
        if stride_order is not None:
            value = self._fd.ops.stride_order(value, stride_order=stride_order)
        return self._fd.add_output(value)


class _DtypeAdapter:
    """Passes eqsat's DataType values to nvFuser as nvFuser's own."""

    def __init__(self, target, module):
        self._target = target
        self._dtypes = module.DataType
        self.ops = _OpsAdapter(target.ops, self._convert)

    def _convert(self, value):
        if isinstance(value, DataType):
            return getattr(self._dtypes, value.name)
        if isinstance(value, list):
            return [self._convert(v) for v in value]
        return value

    def __getattr__(self, name):
        method = getattr(self._target, name)

        def call(*args, **kwargs):
            return method(
                *[self._convert(a) for a in args], **{k: self._convert(v) for k, v in kwargs.items()}
            )

        return call


class _OpsAdapter:
    def __init__(self, ops, convert):
        self._ops, self._convert = ops, convert

    def __getattr__(self, name):
        op = getattr(self._ops, name)

        def call(*args, **kwargs):
            return op(*[self._convert(a) for a in args], **{k: self._convert(v) for k, v in kwargs.items()})

        return call


def to_nvfuser(fusion: Fusion, frontend: str | None = None) -> Any:
    """A live nvFuser FusionDefinition computing ``fusion``, on ``frontend`` if given, else on
    the frontend the definition was written for (``fusion.frontend``) where it imports, else
    on whichever imports (classic first)."""
    module = load_frontend(frontend, prefer=fusion.frontend)
    direct = module.__name__ == "nvfuser_direct"
    fd = module.FusionDefinition()
    with fd:
        target = _DirectAdapter(fd) if direct else fd
        replay_for(fusion, _DtypeAdapter(target, module), "direct" if direct else "classic")
    return fd


def as_given(repro, frontend: str | None = None) -> Any:
    """A live nvFuser FusionDefinition made by the repro file's own definition (not eqsat's
    IR of it): the reference for "as given". Its ``fd`` calls are made on ``frontend``'s
    FusionDefinition, by default the one the file imports (classic first where it imports
    both, as such files do), by the reader that ingestion uses, so no code of the file runs."""
    module = load_frontend(frontend, prefer=repro.frontend)
    fd = module.FusionDefinition()
    with fd:
        define_on(repro, fd, module.DataType)
    return fd
