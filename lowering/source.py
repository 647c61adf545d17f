"""Fusion IR -> Python source in nvFuser's repro format (re-ingests to the same IR)."""

from __future__ import annotations

import ast
from typing import Any, Sequence

from eqsat.ir.fusion import FRONTENDS, Fusion
from eqsat.ir.opspec import OPAQUE_OUTPUTS, OPS
from eqsat.ir.printing import literal
from .frontends import replay_for


class Name(str):
    """A value's name in the emitted text (written bare by :func:`eqsat.ir.printing.literal`)."""

    def __repr__(self) -> str:
        return str(self)


class SourceWriter:
    """A FusionDefinition implementation whose calls print themselves."""

    def __init__(self, indent: str = "    ", style: str = "classic"):
        self.lines: list[str] = []
        self.indent = indent
        self.style = style
        self.count = 0
        self.ops = _WriterOps(self)

    def _name(self, kind: str) -> Name:
        name = Name(f"{kind}{self.count}")
        self.count += 1
        return name

    def call(self, target: str, args: Sequence, kwargs: dict, kinds: Sequence[str]):
        names = [self._name(k) for k in kinds]
        text = ", ".join([literal(a) for a in args] + [f"{k}={literal(v)}" for k, v in kwargs.items()])
        lhs = f"{', '.join(names)} = " if names else ""
        self.lines.append(f"{self.indent}{lhs}{target}({text})")
        return names[0] if len(names) == 1 else tuple(names)

    def define_tensor(self, **kwargs):
        return self.call("fd.define_tensor", [], kwargs, "T")

    def define_scalar(self, value, dtype):
        return self.call("fd.define_scalar", [value], {"dtype": dtype}, "S")

    def define_vector(self, values, dtype):
        return self.call("fd.define_vector", [values], {"dtype": dtype}, "V")

    def add_output(self, value, alias_input=None, stride_order=None):
        if self.style == "direct" and alias_input is None and stride_order is not None:
            # nvfuser_direct has no add_output(t, stride_order): it prints an output's layout as
            # a stride_order op whose result is the output (python_direct/python_translate.cpp)
            value, stride_order = self.ops.stride_order(value, stride_order=stride_order), None
        args = [value] + ([alias_input] if alias_input is not None else [])
        self.call("fd.add_output", args, {"stride_order": stride_order} if stride_order else {}, "")


class _WriterOps:
    def __init__(self, writer: SourceWriter):
        self._w = writer

    def __getattr__(self, name: str):
        spec = OPS.get(name)

        def op(*args, **kwargs):
            opaque = OPAQUE_OUTPUTS.get()  # set for an opaque node of several outputs
            kinds = ("T",) * opaque if opaque else spec.outputs if spec else ("T",)
            return self._w.call(f"fd.ops.{name}", args, kwargs, kinds)

        return op


STYLES = {"nvfuser": "classic", "nvfuser_direct": "direct"}


def style_of(fusion: Fusion) -> str:
    """The print style of the frontend ``fusion`` was written for (classic where unknown)."""
    return STYLES.get(fusion.frontend, "classic")


def fusion_source(fusion: Fusion, style: str | None = None) -> str:
    """The definition function, as nvFuser prints it: ``style`` "classic" (the ``nvfuser``
    module: Python numbers that stand as operands are defined as scalars first) or "direct"
    (``nvfuser_direct``: shapes as lists, no ``define_vector(list)``, numbers inline); by
    default the style of the frontend the fusion was written for."""
    style = style or style_of(fusion)
    if style not in ("classic", "direct"):
        raise ValueError(f"style must be 'classic' or 'direct', got {style!r}")
    writer = SourceWriter(style=style)
    replay_for(fusion, writer, style)
    name = "nvfuser_fusion_id0" if style == "classic" else "nvfuser_fusion"
    return f"def {name}(fd : FusionDefinition) -> None :\n" + "\n".join(writer.lines) + "\n"


def _input_literal(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype)
        if value.dim() == 0 or value.is_contiguous():
            return f"torch.testing.make_tensor({tuple(value.shape)}, dtype={dtype}, device='cuda')"
        numel = 1 + sum((s - 1) * st for s, st in zip(value.shape, value.stride())) if value.numel() else 0
        maker = (
            f"torch.randn({numel}, dtype={dtype}, device='cuda')"
            if value.dtype.is_floating_point
            else f"torch.randint(0, 10, ({numel},), dtype={dtype}, device='cuda')"
        )
        return f"{maker}.as_strided({tuple(value.shape)}, {tuple(value.stride())})"
    return literal(value)


def repro_source(fusion: Fusion, inputs: Sequence[Any] | None = None, style: str | None = None) -> str:
    """A whole repro file: imports, the definition, and (with ``inputs``) an input list and
    ``fd.execute(inputs)``, runnable with nvFuser and ingestible by eqsat."""
    style = style or style_of(fusion)
    module = "nvfuser" if style == "classic" else "nvfuser_direct"
    name = "nvfuser_fusion_id0" if style == "classic" else "nvfuser_fusion"
    text = (
        f"import torch\nfrom {module} import FusionDefinition, DataType\n\n"
        f"{fusion_source(fusion, style)}\nwith FusionDefinition() as fd:\n    {name}(fd)\n"
    )
    if inputs is not None:
        text += "\ninputs = [\n" + "".join(f"    {_input_literal(v)},\n" for v in inputs) + "]\n"
        text += "fd.execute(inputs)\n"
    return text


MODULES = {style: module for module, style in STYLES.items()}


def spliced_repro(
    source: str,
    definition: ast.FunctionDef,
    fusion: Fusion,
    style: str | None = None,
    header: Sequence[str] = (),
) -> str:
    """The repro file ``source`` with its definition function (``definition``, its syntax
    tree) replaced by ``fusion``'s in ``style`` (by default its frontend's) under the file's
    own function name, each top-level ``from nvfuser... import`` made the style's module, and
    ``header`` as comment lines first: the file's inputs and everything else it holds are
    kept as written, so it runs and re-reads as the original did."""
    style = style or style_of(fusion)
    text = fusion_source(fusion, style).split("\n", 1)[1]  # the body, under the file's name
    lines = source.splitlines()
    new = [f"def {definition.name}(fd : FusionDefinition) -> None :"] + text.rstrip("\n").split("\n")
    first = min([definition.lineno] + [d.lineno for d in definition.decorator_list]) - 1
    lines[first : definition.end_lineno] = new
    module = MODULES[style]
    tree = ast.parse(source)
    for stmt in sorted(tree.body, key=lambda st: -st.lineno):  # later first: earlier lines stay put
        if stmt.lineno > first:
            continue
        if (
            isinstance(stmt, ast.ImportFrom)
            and (stmt.module or "").split(".")[0] in FRONTENDS
            and stmt.module != module
        ):
            names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in stmt.names)
            lines[stmt.lineno - 1 : stmt.end_lineno] = [f"from {module} import {names}"]
    return "".join(f"# {h}\n" for h in header) + "\n".join(lines) + "\n"
