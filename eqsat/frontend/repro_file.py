"""A repro file's parts, read without running it: its syntax tree (:func:`parse`, bounded in
depth), its ``inputs`` list (:func:`read_inputs`) and its definition's body on an ``fd``
(:func:`run_definition`), both evaluated by :class:`eqsat.frontend.reader.Reader`; which
top-level statements are about running the fusion (:func:`about_running`), which reading
skips."""

from __future__ import annotations

import ast
import io
import tokenize
from typing import Any

from eqsat.errors import FusionError
from eqsat.ir.fusion import FRONTENDS

from .reader import Reader, Skipped, torch_namespace

MAX_DEPTH = 100  # levels of a file's syntax tree (real repros have under 20)


def parse(source: str, filename: str) -> ast.Module:
    """The syntax tree of a repro's text (a leading BOM dropped). A FusionError naming the file
    and line where it does not parse, or where it nests deeper than :data:`MAX_DEPTH` levels
    (deeper than Python's parser, compiler or this reader can recurse)."""
    source = source.lstrip("\ufeff")
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as err:
        raise FusionError(f"does not parse: {err.msg}", line=err.lineno, filename=filename) from None
    except (RecursionError, MemoryError):  # Python's parser recursing past its limit
        raise FusionError(
            "nested too deeply for Python's parser", line=_unparsable_line(source), filename=filename
        ) from None
    except ValueError as err:  # a null byte
        raise FusionError(f"does not parse: {err}", filename=filename) from None
    _check_depth(tree, filename)
    return tree


def _check_depth(tree: ast.Module, filename: str) -> None:
    """A FusionError at the first statement nesting deeper than :data:`MAX_DEPTH` levels."""
    stack = [(tree, 0, None)]
    while stack:
        node, depth, line = stack.pop()
        line = getattr(node, "lineno", line)
        if depth > MAX_DEPTH:
            raise FusionError(
                f"nested too deeply (more than {MAX_DEPTH} levels)", line=line, filename=filename
            )
        stack.extend((child, depth + 1, line) for child in ast.iter_child_nodes(node))


def _unparsable_line(source: str) -> int | None:
    """The first line of the first logical line that Python's parser cannot parse on its own
    for recursing too deeply (None if none is found)."""
    lines = source.splitlines(keepends=True)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    start = None
    for tok in tokens:
        if start is None and tok.type not in (
            tokenize.NL,
            tokenize.COMMENT,
            tokenize.INDENT,
            tokenize.DEDENT,
            tokenize.NEWLINE,
        ):
            start = tok.start[0]
        if tok.type == tokenize.NEWLINE and start is not None:
            text = "".join(lines[start - 1 : tok.end[0]]).lstrip()
            try:
                ast.parse(text)
            except (RecursionError, MemoryError):
                return start
            except (SyntaxError, ValueError):
                pass
            start = None
    return None


def _is_frontend_import(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Import):
        return all(a.name.split(".")[0] in FRONTENDS + ("torch",) for a in stmt.names)
    if isinstance(stmt, ast.ImportFrom):
        return (stmt.module or "").split(".")[0] in FRONTENDS + ("torch",)
    if isinstance(stmt, ast.Try):
        return all(
            _is_frontend_import(s)
            for s in stmt.body + stmt.orelse + stmt.finalbody + [s for h in stmt.handlers for s in h.body]
        )
    return False


RUNNING_CALLS = ("execute", "validate", "manual_execute")


def about_running(stmt: ast.stmt, names: set[str] | dict[str, str]) -> bool:
    """A statement about running the definition (it names ``FusionDefinition``, one of
    ``names``, or calls ``.execute``/``.validate``), which reading skips."""
    return _running_part(stmt, names) is not None


def _running_part(stmt: ast.stmt, names: set[str] | dict[str, str]) -> str | None:
    """What makes ``stmt`` a statement about running the definition (see :func:`about_running`),
    in the user's terms; None where nothing does. ``names`` may map each name to what it is."""
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and (node.id in names or node.id == "FusionDefinition"):
            what = names.get(node.id) if isinstance(names, dict) else None
            return f"{node.id}, {what}" if what else node.id
        if isinstance(node, ast.Attribute) and node.attr in RUNNING_CALLS:
            return f".{node.attr}, which runs the fusion"
    return None


def _changes_inputs(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` binds or changes ``inputs`` (an assignment to it or into it, or a call of
    one of its methods)."""
    for node in ast.walk(stmt):
        target = node.value if isinstance(node, (ast.Subscript, ast.Attribute)) else node
        changed = isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del)) or isinstance(
            node, ast.Attribute
        )
        if isinstance(target, ast.Name) and target.id == "inputs" and changed:
            return True
    return False


def read_inputs(
    tree: ast.Module, definition: ast.FunctionDef, filename: str, device: str | None = None
) -> list | None:
    """The file's ``inputs`` list, evaluated in the repro language (None if it has none).
    Statements about running the fusion are skipped, but for one that binds or changes
    ``inputs``: that is refused with its line and what reading could not evaluate."""
    reader = Reader(filename, {"torch": torch_namespace()}, device)
    skipped = {definition.name: "the definition function"}
    for stmt in tree.body:
        if stmt is definition or _is_frontend_import(stmt):
            continue
        if isinstance(stmt, ast.FunctionDef):
            skipped[stmt.name] = "a function this file defines, which reading never calls"
            reader.names[stmt.name] = Skipped()
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # a docstring
        running = _running_part(stmt, skipped)
        if running is not None and _changes_inputs(stmt):
            raise reader.refuse(stmt, f"`inputs` here uses {running}")
        if isinstance(stmt, ast.With) and running is not None:
            for item in stmt.items:
                if isinstance(item.optional_vars, ast.Name):
                    skipped[item.optional_vars.id] = "the FusionDefinition of a with statement reading skips"
            continue
        if running is not None:
            if isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            skipped[n.id] = f"bound at line {stmt.lineno} by a statement reading skips"
            continue
        if isinstance(stmt, ast.Assign):
            reader.assign(stmt, reader.eval(stmt.value))
        elif (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and ast.unparse(stmt.value.func) == "torch.manual_seed"
        ):
            reader.eval(stmt.value)
        elif (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and ast.unparse(stmt.value.func) == "print"
        ):
            continue
        else:
            raise reader.refuse(
                stmt,
                f"the top-level {type(stmt).__name__.lower()} statement "
                f"{ast.unparse(stmt).splitlines()[0][:60]!r}",
            )
    found = reader.names.get("inputs")
    if found is not None and not isinstance(found, (list, tuple)):
        raise FusionError(f"'inputs' must be a list, got {type(found).__name__}", filename=filename)
    return list(found) if found is not None else None


def run_definition(definition: ast.FunctionDef, fd: Any, datatype: Any, filename: str) -> None:
    """The definition function's body, evaluated on ``fd`` (eqsat's recorder, a live nvFuser
    FusionDefinition, or any implementation of the protocol), with ``datatype`` as DataType."""
    params = [a.arg for a in definition.args.args]
    if not params:
        raise FusionError(
            f"the definition {definition.name} takes no fd parameter",
            line=definition.lineno,
            filename=filename,
        )
    if definition.decorator_list:
        raise Reader(filename).refuse(definition.decorator_list[0], "a decorator on the definition")
    names = {params[0]: fd, "DataType": datatype}
    Reader(filename, names, fd=fd).run_body(definition.body)
