"""Repro files read without running them: an interpreter of the language nvFuser's and
Thunder's printed repros are written in.

A repro is Python, but only a small part of Python: imports of torch and nvFuser, one
definition function of straight-line ``fd.*`` calls, and an ``inputs`` list built from torch's
tensor constructors. :class:`Reader` evaluates just that, statement by statement, for
:mod:`eqsat.frontend.repro_file` (``read_inputs``, ``run_definition``):

- the definition's statements: assignments (one name, or a tuple of names) of calls on ``fd``
  and on values it returned, ``fd.add_output(...)``; of ``fd``'s attributes only the recording
  calls nvFuser's FusionDefinition has (``ops``, ``define_*``, ``add_output``,
  ``from_pytorch``: :data:`eqsat.frontend.nvfuser_ops.RECORDING_CALLS`), never ``fd.execute``;
  expressions of literals, names bound before, lists and tuples, ``DataType.X``,
  ``float("inf")``-style constants, arithmetic; the bare names ``nan`` and ``inf``, not bound
  by the file, are those floats (Python prints them so: a capture that formats a tensor's
  statistics with ``f"{x:.4g}"`` writes ``nan`` where the tensor held non-finite values);
- at the top level: ``import torch``, imports of ``nvfuser``/``nvfuser_direct`` (also inside
  ``try``/``except ImportError``), ``torch.manual_seed(n)``, names bound to input expressions,
  ``inputs = [...]``; ``with FusionDefinition() as fd: ...`` and ``fd.execute(...)`` are skipped;
- in input expressions: the torch functions and tensor methods in :data:`TORCH_FUNCTIONS` and
  :data:`TENSOR_METHODS` (constructors, dtype and layout changes, elementwise math), none of
  which touches files, processes or the network.

Anything else (another import, a loop, an attribute outside those lists, a call of a function
the file defines) is refused with its line: :class:`OutsideLanguage`, which says that
``trust=True`` (``--trust``) runs the file as Python instead.

What is evaluated is bounded before it runs (:mod:`eqsat.frontend.bounds`: integer sizes,
Python-level iteration of tensors, the tensor work of the whole read), and a file nesting
deeper than ``repro_file.MAX_DEPTH`` levels is refused (``repro_file.parse``): a read answers at once or is
refused with the line, whatever the file holds.
"""

from __future__ import annotations

import ast
import builtins
import operator
import types
from typing import Any, Callable

from eqsat.errors import FusionError
from eqsat.ir.fusion import FRONTENDS
from eqsat.ir.opspec import OPAQUE_OUTPUTS

from .bounds import (
    NO_WORK,
    TensorWork,
    TooMuchWork,
    check_items,
    int_op_problem,
    int_problem,
    on_meta,
)
from .nvfuser_ops import ANY_RECORDING_CALL
from .recorder import SOURCE_LINE
from .repro_language import (
    BINARY_OPERATORS,
    BUILTINS,
    COMPARISONS,
    FACTORIES,
    INT_OPERATORS,
    NON_FINITE,
    NO_WORK_BUILTINS,
    TENSOR_METHODS,
    TORCH_FUNCTIONS,
    TORCH_NAMESPACES,
    UNARY_OPERATORS,
)

TRUST_HINT = (
    "eqsat reads repro files without running them; pass trust=True (eqsat --trust) to run this file as Python"
)


class OutsideLanguage(FusionError):
    """A construct the repro reader does not evaluate (the file may still be run with trust)."""


class _Namespace:
    """A module the file may name (``torch``, ``torch.testing``), exposing only ``allowed``."""

    def __init__(self, path: str, target: Any, allowed: frozenset[str]):
        self.path, self.target, self.allowed = path, target, allowed


class Skipped:
    """A name the file binds to something eqsat does not evaluate (the fd of ``with``)."""


def torch_namespace():
    import torch

    dtypes = frozenset(name for name in dir(torch) if isinstance(getattr(torch, name, None), torch.dtype))
    return _Namespace(
        "torch",
        torch,
        TORCH_FUNCTIONS
        | dtypes
        | frozenset(TORCH_NAMESPACES)
        | {"device", "Size", "strided", "contiguous_format", "channels_last"},
    )


class Reader:
    """Evaluates the repro language over ``names``; ``device`` (say ``"meta"``) replaces the
    device of every tensor the inputs make. ``fd``, where given, is the definition's
    FusionDefinition: of its attributes only the recording calls nvFuser's has may be used."""

    def __init__(
        self, filename: str, names: dict[str, Any] | None = None, device: str | None = None, fd: Any = None
    ):
        self.filename = filename
        self.names: dict[str, Any] = dict(names or {})
        self.device = device
        self.fd = fd
        # tensor work is charged where tensors are made on a device that computes (bounds.py)
        self.work = TensorWork() if device != "meta" else None
        self._unpacking: int | None = None  # names the call being evaluated is unpacked into

    # -- errors ------------------------------------------------------------------------------
    def refuse(self, node: ast.AST, what: str) -> OutsideLanguage:
        return OutsideLanguage(
            f"{what}: {TRUST_HINT}", line=getattr(node, "lineno", None), filename=self.filename
        )

    # -- statements ----------------------------------------------------------------------------
    def assign(self, stmt: ast.Assign, value: Any) -> None:
        if len(stmt.targets) != 1:
            raise self.refuse(stmt, "a chained assignment")
        target = stmt.targets[0]
        if isinstance(target, ast.Name):
            self.names[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(t, ast.Name) for t in target.elts):
            values = list(value) if isinstance(value, (list, tuple)) else None
            if values is None or len(values) != len(target.elts):
                raise FusionError(
                    f"cannot unpack {type(value).__name__} into {len(target.elts)} names",
                    line=stmt.lineno,
                    filename=self.filename,
                )
            for t, v in zip(target.elts, values):
                self.names[t.id] = v
        else:
            raise self.refuse(stmt, f"an assignment to {ast.unparse(target)}")

    def run_body(self, body: list[ast.stmt]) -> None:
        """A definition function's statements."""
        for stmt in body:
            if isinstance(stmt, ast.Assign):
                target = stmt.targets[0] if len(stmt.targets) == 1 else None
                if isinstance(target, (ast.Tuple, ast.List)) and isinstance(stmt.value, ast.Call):
                    self._unpacking = len(target.elts)
                self.assign(stmt, self.eval(stmt.value))
            elif isinstance(stmt, ast.Expr):
                if not isinstance(stmt.value, ast.Constant):  # a docstring is skipped
                    self.eval(stmt.value)
            elif isinstance(stmt, ast.Return) and stmt.value is None:
                return
            elif not isinstance(stmt, ast.Pass):
                raise self.refuse(stmt, f"a {type(stmt).__name__.lower()} statement in the definition")

    # -- expressions -----------------------------------------------------------------------
    def eval(self, node: ast.expr) -> Any:
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            raise self.refuse(node, f"the expression {ast.unparse(node)[:60]!r}")
        try:
            return method(node)
        except RecursionError:
            raise FusionError(
                "the expression is nested too deeply to evaluate", line=node.lineno, filename=self.filename
            ) from None

    def _Constant(self, node):
        if not isinstance(node.value, (int, float, complex, bool, str, type(None))):
            raise self.refuse(node, f"the constant {node.value!r}")
        problem = int_problem(node.value)
        if problem is not None:
            raise FusionError(problem, line=node.lineno, filename=self.filename)
        return node.value

    def _Name(self, node):
        if node.id in self.names:
            value = self.names[node.id]
            if isinstance(value, Skipped):
                raise self.refuse(node, f"{node.id} here")
            return value
        if node.id in BUILTINS:
            return BUILTINS[node.id]
        if node.id in NON_FINITE:
            return NON_FINITE[node.id]
        if node.id in dir(builtins):
            raise self.refuse(node, f"the builtin {node.id}")
        raise FusionError(f"name {node.id!r} is not defined", line=node.lineno, filename=self.filename)

    def _List(self, node):
        return [self.eval(e) for e in node.elts]

    def _Tuple(self, node):
        return tuple(self.eval(e) for e in node.elts)

    def _UnaryOp(self, node):
        return self._apply(node, UNARY_OPERATORS.get(type(node.op)), self.eval(node.operand))

    def _BinOp(self, node):
        left, right = self.eval(node.left), self.eval(node.right)
        if any(isinstance(v, (list, tuple, str)) for v in (left, right)):
            raise self.refuse(node, "arithmetic on a list or string")
        problem = int_op_problem(INT_OPERATORS.get(type(node.op), ""), left, right)
        if problem is not None:
            raise FusionError(f"{_text(node)}: {problem}", line=node.lineno, filename=self.filename)
        return self._apply(node, BINARY_OPERATORS.get(type(node.op)), left, right)

    def _apply(self, node, fn, *args):
        if fn is None:
            raise self.refuse(node, f"the operator in {ast.unparse(node)[:60]!r}")
        return self._guarded(node, fn, *args)

    def _Compare(self, node):
        if len(node.ops) != 1 or type(node.ops[0]) not in COMPARISONS:
            raise self.refuse(node, f"the comparison {ast.unparse(node)[:60]!r}")
        return self._guarded(
            node, COMPARISONS[type(node.ops[0])], self.eval(node.left), self.eval(node.comparators[0])
        )

    def _Subscript(self, node):
        base, index = self.eval(node.value), self.eval(node.slice)
        return self._guarded(node, operator.getitem, base, index)

    def _Slice(self, node):
        part = lambda e: None if e is None else self.eval(e)  # noqa: E731
        return slice(part(node.lower), part(node.upper), part(node.step))

    def _Attribute(self, node):
        base = self.eval(node.value)
        name = node.attr
        if isinstance(base, _Namespace):
            if name not in base.allowed:
                raise self.refuse(node, f"{base.path}.{name}")
            path = f"{base.path}.{name}"
            key = path.split(".", 1)[1]
            if key in TORCH_NAMESPACES:
                return _Namespace(path, getattr(base.target, name), TORCH_NAMESPACES[key])
            value = getattr(base.target, name)
            if path in ("torch.device", "torch.Size"):
                return _allowed(value)
            return (
                self._torch_function(value, name)
                if callable(value) and not isinstance(value, type)
                else value
            )
        if name.startswith("_"):
            raise self.refuse(node, f"the attribute {name}")
        if self.fd is not None and base is self.fd and name not in ANY_RECORDING_CALL:
            raise FusionError(
                "not a recording call: reading a file records its definition "
                "(fd.define_*, fd.add_output, fd.ops.*) and runs none of it",
                line=node.lineno,
                op=f"fd.{name}",
                filename=self.filename,
            )
        if _is_tensor(base):
            if name not in TENSOR_METHODS:
                raise self.refuse(node, f"the tensor attribute .{name}")
            value = getattr(base, name)
            return self._tensor_method(base, name, value) if callable(value) else value
        if _is_definition_object(base):
            return self._guarded(node, getattr, base, name)
        raise self.refuse(node, f"the attribute .{name} of a {type(base).__name__}")

    def _Call(self, node):
        unpacking, self._unpacking = self._unpacking, None  # this call's, not its arguments'
        fn = self.eval(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self._unpacked(a))
            else:
                args.append(self.eval(a))
        kwargs = {}
        for k in node.keywords:
            if k.arg is None:
                raise self.refuse(k.value, "**keyword arguments")
            kwargs[k.arg] = self.eval(k.value)
        if not (fn in BUILTINS.values() or _is_wrapper(fn) or _is_definition_call(fn)):
            raise self.refuse(node, f"a call of {ast.unparse(node.func)[:60]}")
        token = OPAQUE_OUTPUTS.set(unpacking)
        try:
            return self._guarded(node, fn, *args, **kwargs)
        finally:
            OPAQUE_OUTPUTS.reset(token)

    def _unpacked(self, node: ast.Starred) -> Any:
        value = self.eval(node.value)
        try:
            return check_items(value, "unpacking (*)")
        except TooMuchWork as err:
            raise FusionError(str(err), line=node.lineno, filename=self.filename) from None

    def _guarded(self, node, fn, *args, **kwargs):
        token = SOURCE_LINE.set(node.lineno)
        try:
            result = self._run(node, fn, args, kwargs)
            problem = int_problem(result)
            if problem is not None:
                raise FusionError(f"{_text(node)} gives {problem}")
            return result
        except TooMuchWork as err:
            raise FusionError(f"{_text(node)}: {err}", line=node.lineno, filename=self.filename) from None
        except FusionError as err:
            if err.line is None and err.filename is None:
                raise FusionError(err.message, line=node.lineno, op=err.op, filename=self.filename) from None
            raise
        except (RecursionError, MemoryError) as err:
            raise FusionError(
                f"{type(err).__name__} evaluating {ast.unparse(node)[:60]!r}",
                line=node.lineno,
                filename=self.filename,
            ) from None
        except Exception as err:
            raise FusionError(
                f"{type(err).__name__}: {err}", line=node.lineno, filename=self.filename
            ) from None
        finally:
            SOURCE_LINE.reset(token)

    def _run(self, node, fn, args: tuple, kwargs: dict) -> Any:
        """``fn(*args, **kwargs)``, charged first the tensor work it does (bounds.py)."""
        real = lambda: fn(*args, **kwargs)  # noqa: E731
        if self.work is None:
            return real()
        _, receiver, name, _ = getattr(fn, "_eqsat_spec", (None, None, None, None))
        return self.work.run(real, _meta_run(fn, args, kwargs), [receiver, args, kwargs], name)

    # -- torch, with the device replaced ----------------------------------------------------------
    def _torch_function(self, fn, name):
        device = self.device

        def call(*args, **kwargs):
            if device is not None and name != "manual_seed":
                if "device" in kwargs or name in FACTORIES:
                    kwargs["device"] = device
            return fn(*args, **kwargs)

        call._eqsat_allowed = True
        call._eqsat_spec = ("torch", None, name, fn)
        return call

    def _tensor_method(self, tensor, name, method):
        device = self.device

        def call(*args, **kwargs):
            if device is not None and name == "cuda":
                return tensor.to(device)
            if device is not None and name == "to":
                args = tuple(device if _is_device(a) else a for a in args)
                if "device" in kwargs:
                    kwargs["device"] = device
            return method(*args, **kwargs)

        call._eqsat_allowed = True
        call._eqsat_spec = ("method", tensor, name, None)
        return call


def _is_wrapper(fn) -> bool:
    """One of the reader's own wrappers of a torch function or tensor method."""
    return isinstance(fn, types.FunctionType) and getattr(fn, "_eqsat_allowed", False)


def _allowed(fn):
    """``fn`` (torch.device, torch.Size), callable from a file; a tensor it is given is iterated
    only up to MAX_ITEMS rows."""

    def call(*args, **kwargs):
        for a in args:
            check_items(a, f"{fn.__name__}()")
        return fn(*args, **kwargs)

    call._eqsat_allowed = True
    call._eqsat_spec = ("none", None, None, None)
    return call


def _text(node: ast.AST) -> str:
    """The expression's text, shortened, for an error message."""
    try:
        return repr(ast.unparse(node)[:60])
    except RecursionError:
        return f"a {type(node).__name__} nested too deeply"


def _meta_run(fn, args: tuple, kwargs: dict) -> Callable[[dict], Any] | None:
    """The call ``fn(*args, **kwargs)`` made on meta tensors instead (a function of the dict of
    meta tensors made, by the real ones' ids), or None where it does no tensor work."""
    import torch

    kind, tensor, name, raw = getattr(fn, "_eqsat_spec", ("plain", None, None, fn))
    if kind == "none" or name in NO_WORK or fn in BUILTINS.values() and fn.__name__ in NO_WORK_BUILTINS:
        return None
    if name == "tolist":
        check_items(tensor, ".tolist()", elements=True)
        return None
    if kind == "plain" and not any(_is_tensor(v) for v in (*args, *kwargs.values())):
        return None

    def run_on_meta(made: dict):
        margs, mkwargs = on_meta(args, made), on_meta(kwargs, made)
        if "device" in mkwargs:
            mkwargs["device"] = "meta"
        with torch.device("meta"):
            if kind == "torch":
                if name == "one_hot":
                    mkwargs["num_classes"] = _one_hot_classes(args, kwargs)
                return raw(*margs, **mkwargs)
            if kind == "method":
                receiver = on_meta(tensor, made)
                if name in ("cuda", "cpu"):
                    return receiver.clone()
                margs = ["meta" if _is_device(a) else a for a in margs]
                return getattr(receiver, name)(*margs, **mkwargs)
            return fn(*margs, **mkwargs)

    return run_on_meta


def _one_hot_classes(args: tuple, kwargs: dict) -> int:
    """The classes ``one_hot(t, num_classes)`` makes: given, or one more than t's largest."""
    given = kwargs.get("num_classes", args[1] if len(args) > 1 else -1)
    if given != -1 or not _is_tensor(args[0]) or not args[0].numel():
        return given
    return int(args[0].max()) + 1


def _is_tensor(value) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _is_device(value) -> bool:
    import torch

    return (
        isinstance(value, torch.device)
        or isinstance(value, str)
        and value.split(":")[0] in ("cpu", "cuda", "meta")
    )


def _is_definition_object(value) -> bool:
    """The fd, its ``ops``, its values (tensors and scalars of a FusionDefinition), and
    DataType: what a definition's calls and attributes are made on."""
    if isinstance(value, types.ModuleType):  # nvfuser_direct's fd.ops is a module
        module = value.__name__
    else:
        owner = value if isinstance(value, type) else type(value)  # DataType is a class
        module = getattr(owner, "__module__", None) or ""
    return module.split(".")[0] in ("eqsat",) + FRONTENDS


def _is_definition_call(fn) -> bool:
    """A method of the fd, its ops or its values, or a function of eqsat or nvFuser."""
    owner = getattr(fn, "__self__", None)
    if owner is not None and _is_definition_object(owner):
        return True
    return (getattr(fn, "__module__", None) or "").split(".")[0] in ("eqsat",) + FRONTENDS


# -- whole files -------------------------------------------------------------------------------
