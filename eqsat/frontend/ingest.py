"""Ingestion: a fusion from a function of ``fd``, a printed nvFuser repro (text or file), or a
live ``nvfuser`` / ``nvfuser_direct`` FusionDefinition.

Repro files are read, not run: :mod:`eqsat.frontend.reader` evaluates their definition's ``fd`` calls
(against eqsat's recorder) and their ``inputs`` expressions, and refuses anything else with its
line, so no code of the file runs, nvFuser need not be installed and ``fd.execute`` is never
called. ``trust=True`` runs a file as Python instead, for repros beyond that language.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
from dataclasses import dataclass
from typing import Any, Callable

from eqsat.errors import FusionError, naming_file
from eqsat.ir.dtypes import DataType
from eqsat.ir.fusion import FRONTENDS, Fusion

from .repro_file import about_running, parse, read_inputs, run_definition
from .recorder import FusionDefinition, caller_line


class _DataTypeNames:
    """``DataType`` as repro text sees it: ``DataType.X`` is a dtype; a misspelled name, or a
    call (``DataType('Float')``, no dtype in nvFuser), is a FusionError at the user's line."""

    def __getattr__(self, name: str) -> DataType:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in DataType.__members__:
            return DataType[name]
        raise FusionError(
            f"unknown dtype DataType.{name}; expected one of {', '.join(DataType.__members__)}",
            line=caller_line(),
        )

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], DataType):
            return args[0]
        written = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
        name = args[0] if len(args) == 1 and args[0] in DataType.__members__ else None
        spelled = (
            f"DataType.{name}" if name else f"DataType.<name> (one of {', '.join(DataType.__members__)})"
        )
        raise FusionError(f"DataType({written}) is not a dtype: write {spelled}", line=caller_line())


@dataclass
class Repro:
    """A repro file's fusion, its ``inputs`` list (None if it has none) and its source."""

    fusion: Fusion
    inputs: list | None
    source: str
    filename: str
    function: str
    definition: ast.FunctionDef | None = None  # its syntax tree

    @property
    def frontend(self) -> str | None:
        """The nvFuser frontend the file was written for (None: either)."""
        return self.fusion.frontend


def from_function(fn: Callable[[Any], None]) -> Fusion:
    """Record ``fn(fd)`` (a function written against nvFuser's FusionDefinition)."""
    fd = FusionDefinition()
    with fd:
        fn(fd)
    return fd.fusion


def _imported_frontends(stmt: ast.stmt) -> set[str]:
    """The nvFuser frontends a top-level statement imports (through try/except too)."""
    if isinstance(stmt, ast.Import):
        return {a.name.split(".")[0] for a in stmt.names} & set(FRONTENDS)
    if isinstance(stmt, ast.ImportFrom):
        return {(stmt.module or "").split(".")[0]} & set(FRONTENDS)
    if isinstance(stmt, ast.Try):
        body = stmt.body + [s for h in stmt.handlers for s in h.body] + stmt.orelse
        return set().union(*(_imported_frontends(s) for s in body))
    return set()


def detect_frontend(tree: ast.Module, definition: ast.FunctionDef) -> str | None:
    """The frontend a repro was written for: the one it imports, or else the one whose printer
    names the definition that way (classic ``nvfuser_fusion_idN``; nvfuser_direct's
    ``nvfuser_fusion(fd : FusionDefinition)``). None where it imports both or nothing tells."""
    imported = set().union(*(_imported_frontends(s) for s in tree.body))
    if len(imported) == 1:
        return imported.pop()
    if imported:
        return None
    if re.fullmatch(r"nvfuser_fusion_id\d+", definition.name):
        return "nvfuser"
    annotation = definition.args.args[0].annotation if definition.args.args else None
    if (
        definition.name == "nvfuser_fusion"
        and isinstance(annotation, ast.Name)
        and annotation.id == "FusionDefinition"
    ):
        return "nvfuser_direct"
    return None


def _find_definition(tree: ast.Module, filename: str) -> ast.FunctionDef:
    funcs = [s for s in tree.body if isinstance(s, ast.FunctionDef)]
    named = [f for f in funcs if f.name.startswith("nvfuser_fusion")]
    if len(named) == 1:
        return named[0]
    taking_fd = [f for f in funcs if f.args.args and f.args.args[0].arg == "fd"]
    candidates = named or taking_fd
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise FusionError(
            "found no definition function (def nvfuser_fusion...(fd) or a function "
            "whose first parameter is fd)",
            filename=filename,
        )
    names = ", ".join(f"{f.name} (line {f.lineno})" for f in candidates)
    raise FusionError(f"found several definition functions: {names}; pass function=NAME", filename=filename)


@contextlib.contextmanager
def _device_override(device: str | None):
    """Inside, torch factory calls that name the CPU make tensors on ``device`` instead."""
    if device is None:
        yield
        return
    import torch
    from torch.overrides import TorchFunctionMode

    class Redirect(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if "device" in kwargs:
                kwargs["device"] = device
            return func(*args, **kwargs)

    with Redirect(), torch.device(device):
        yield


def from_source(
    source: str,
    filename: str = "<repro>",
    *,
    function: str | None = None,
    inputs: bool = True,
    device: str | None = None,
    trust: bool = False,
) -> Repro:
    """Ingest the text of a repro file (or just its definition function).

    The file is read, not run (:mod:`eqsat.frontend.reader`): its definition's ``fd`` calls and its
    ``inputs`` expressions are evaluated in the small language repros are written in, and
    anything outside it is refused with its line. ``trust=True`` runs the file as Python
    instead (its top-level statements but those about running the fusion, then the
    definition function). ``inputs=False`` skips building the ``inputs`` list; ``device``
    (e.g. ``"meta"``) builds it on another device than the one the file names.
    """
    tree = parse(source, filename)
    if function is not None:
        matches = [s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == function]
        if not matches:
            raise FusionError(f"has no function {function!r}", filename=filename)
        definition = matches[0]
    else:
        definition = _find_definition(tree, filename)
    fd = FusionDefinition(frontend=detect_frontend(tree, definition))
    if trust:
        found, define = _run_trusted(tree, definition, filename, inputs, device)
    else:
        found = read_inputs(tree, definition, filename, device) if inputs else None
        define = lambda fd: run_definition(definition, fd, _DataTypeNames(), filename)  # noqa: E731
    try:
        with fd:
            define(fd)
        with naming_file(filename):
            fusion = _recorded(fd, definition)
    except FusionError as err:
        named = err.in_file(filename)
        if named is err:
            raise
        raise named from None
    except (Exception, SystemExit) as err:
        raise FusionError(
            f"the definition raised {type(err).__name__}: {err}",
            line=_traceback_line(err, filename),
            filename=filename,
        ) from err
    return Repro(fusion, found, source, filename, definition.name, definition)


def _recorded(fd: FusionDefinition, definition: ast.FunctionDef) -> Fusion:
    """The fusion ``fd`` recorded; an error about the whole definition (it has no outputs) is at
    its ``def`` line."""
    try:
        return fd.fusion
    except FusionError as err:
        if err.line is not None:
            raise
        raise FusionError(err.message, line=definition.lineno, op=err.op) from None


def _run_trusted(
    tree: ast.Module, definition: ast.FunctionDef, filename: str, inputs: bool, device: str | None
) -> tuple[list | None, Callable[[Any], None]]:
    """``trust=True``: the file run as Python (all but its statements about running the
    fusion, and its nvFuser imports), and its definition function as it is."""
    kept = []
    for stmt in tree.body:
        if stmt is definition:
            kept.append(stmt)
        elif _imported_frontends(stmt):
            continue
        elif isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
            kept.append(stmt)
        elif inputs and not about_running(stmt, {"fd"}):
            kept.append(stmt)
    namespace: dict[str, Any] = {
        "FusionDefinition": FusionDefinition,
        "DataType": _DataTypeNames(),
        "__name__": "__eqsat_repro__",
        "__file__": filename,
    }
    try:
        with _device_override(device):
            exec(compile(ast.Module(body=kept, type_ignores=[]), filename, "exec"), namespace)
    except FusionError:
        raise
    except (Exception, SystemExit) as err:  # a file that calls exit() is reported, not obeyed
        line = getattr(err, "lineno", None) or _traceback_line(err, filename)
        raise FusionError(
            f"running the file failed: {type(err).__name__}: {err}", line=line, filename=filename
        ) from err
    found = namespace.get("inputs") if inputs else None
    if found is not None and not isinstance(found, (list, tuple)):
        raise FusionError(f"'inputs' must be a list, got {type(found).__name__}", filename=filename)
    return (list(found) if found is not None else None), namespace[definition.name]


def define_on(repro: Repro, fd: Any, datatype: Any) -> None:
    """The repro's definition evaluated on ``fd`` (say a live nvFuser FusionDefinition, with
    that frontend's ``DataType``), read as :func:`from_source` reads it: nothing of the file
    runs."""
    run_definition(repro.definition, fd, datatype, repro.filename)


def _traceback_line(err: BaseException, filename: str) -> int | None:
    tb = err.__traceback__
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def from_file(path: str | os.PathLike, **kwargs) -> Repro:
    """A repro file, read as :func:`from_source` reads text (UTF-8, with or without a BOM)."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8-sig") as f:
            source = f.read()
    except OSError as err:
        raise FusionError(f"cannot read: {err.strerror}", filename=path) from None
    except UnicodeDecodeError as err:
        raise FusionError(f"is not UTF-8 text ({err.reason} at byte {err.start})", filename=path) from None
    return from_source(source, filename=path, **kwargs)


def from_nvfuser(fd: Any) -> Fusion:
    """A live ``nvfuser.FusionDefinition`` or ``nvfuser_direct.FusionDefinition``, through the
    text it prints."""
    text = repr(fd)
    if "def " not in text:
        raise FusionError("the nvFuser definition printed no definition function; is it defined?")
    fusion = from_source(text, filename="<nvfuser definition>", inputs=False).fusion
    return fusion.with_frontend(type(fd).__module__.split(".")[0])


def is_nvfuser_definition(obj: Any) -> bool:
    mod = type(obj).__module__ or ""
    return type(obj).__name__ == "FusionDefinition" and mod.split(".")[0] in FRONTENDS


def ingest_with_inputs(definition: Any, device: str = "meta", **kwargs) -> tuple[Fusion, list | None]:
    """:func:`ingest`, and for a repro file or repro text its ``inputs`` list, built on
    ``device`` (the meta device by default: shapes, dtypes and strides, no values); None where
    it has none, or for the other forms."""
    if source_file(definition) is not None:
        repro = from_file(definition, device=device, **kwargs)
    elif isinstance(definition, str):
        repro = from_source(definition, device=device, **kwargs)
    else:
        return ingest(definition, **kwargs), None
    return repro.fusion, repro.inputs


def source_file(definition: Any) -> str | None:
    """The path :func:`ingest` reads ``definition`` from (a path object, or a one-line string
    ending in ``.py``); None for any other form."""
    if isinstance(definition, os.PathLike):
        return os.fspath(definition)
    if isinstance(definition, str) and "\n" not in definition and definition.endswith(".py"):
        return definition
    return None


def ingest(definition: Any, **kwargs) -> Fusion:
    """Any ingestible form: a Fusion, eqsat's FusionDefinition, a function of fd, repro text,
    a path to a repro file, or a live nvFuser FusionDefinition."""
    if isinstance(definition, Fusion):
        return definition
    if isinstance(definition, FusionDefinition):
        return definition.fusion
    if is_nvfuser_definition(definition):
        return from_nvfuser(definition)
    if source_file(definition) is not None:
        return from_file(definition, inputs=False, **kwargs).fusion
    if isinstance(definition, str):
        return from_source(definition, inputs=False, **kwargs).fusion
    if callable(definition):
        return from_function(definition)
    raise FusionError(
        f"cannot ingest a {type(definition).__name__}: expected a function of fd, "
        "repro text or path, or a FusionDefinition"
    )
