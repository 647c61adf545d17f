"""The recorder: nvFuser's ``FusionDefinition`` protocol, recording calls into the Fusion IR.

    from eqsat import FusionDefinition, DataType     # instead of: from nvfuser import ...
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(t0, dims=[1]))
    fd.fusion          # the recorded eqsat.ir.Fusion
    fd.execute([x])    # runs it through the torch executor (the reference)

Every call is checked as it is made (types, ranks, extents, through
:class:`eqsat.ir.axes.AxisInference`); a bad one raises :class:`~eqsat.errors.FusionError`
naming the definition line and the op, and the definition is then unusable: nothing is
half-built.
"""

from __future__ import annotations

import contextvars
import os
import sys
from typing import Any, Sequence

from eqsat.errors import FusionError
from eqsat.ir import dtypes as dt
from eqsat.ir import layout
from eqsat.ir.axes import AxisInference, TensorType
from eqsat.ir.dtypes import DataType
from eqsat.ir.fusion import SCALAR, TENSOR, VECTOR, Fusion, Node, Output, Ref, freeze
from eqsat.ir.operators import Operators
from eqsat.ir.opspec import OPAQUE_OUTPUTS, OPERANDS, OPS, OpSpec, bind_call
from eqsat.reference.torch_executor import run_fusion

from .arguments import normalize
from .nvfuser_ops import unknown_op

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


# the definition line being evaluated, where eqsat's reader evaluates a repro (its frames are
# eqsat's own, so the line cannot be found on the stack)
SOURCE_LINE: contextvars.ContextVar[int | None] = contextvars.ContextVar("SOURCE_LINE", default=None)


def caller_line() -> int | None:
    """The user's definition line: the one the reader is evaluating, or else the line of the
    first frame outside eqsat."""
    line = SOURCE_LINE.get()
    if line is not None:
        return line
    frame = sys._getframe(1)
    while frame is not None:
        if not os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
            return frame.f_lineno
        frame = frame.f_back
    return None


class Value(Operators):
    """A value of a recorded definition (what ``fd.ops.*`` and ``define_*`` return)."""

    kind = "?"

    def __init__(self, fd: "FusionDefinition", vid: int):
        self._fd = fd
        self.id = vid

    def __repr__(self) -> str:
        return f"{self.kind}{self.id}"


class Tensor(Value):
    kind = TENSOR

    @property
    def _type(self) -> TensorType:
        return self._fd._inference.types[self.id]

    @property
    def ndim(self) -> int:
        return self._type.rank

    @property
    def dtype(self) -> DataType:
        return self._type.dtype

    def shape(self) -> "Vector":
        return self._fd.ops.shape(self)

    def size(self, dim: int) -> "Scalar":
        return self._fd.ops.size(self, dim)


class Scalar(Value):
    kind = SCALAR


class Vector(Value):
    kind = VECTOR


_HANDLES = {TENSOR: Tensor, SCALAR: Scalar, VECTOR: Vector}


class _Ops:
    """``fd.ops``: every attribute is an op. A call of one that nvFuser's frontend (the
    definition's; either where it has none) lacks is a FusionError at its line; one nvFuser has
    that eqsat does not model records an opaque node (of one tensor output, or, read from a
    file, of as many as the names the call is unpacked into)."""

    def __init__(self, fd: "FusionDefinition"):
        self._fd = fd

    def __getattr__(self, name: str):
        if name.startswith("_"):  # no op of nvFuser's is private
            raise AttributeError(name)

        def op(*args, **kwargs):
            return self._fd._record_op(name, args, kwargs)

        op.__name__ = name
        return op


class FusionDefinition:
    """Records an nvFuser fusion definition into :class:`eqsat.ir.Fusion`."""

    def __init__(self, frontend: str | None = None):
        """``frontend``: the nvFuser frontend the definition is written for (``nvfuser``,
        ``nvfuser_direct``, None for either); where the two differ, calls mean what they mean
        there, and lowering goes back to it."""
        self.frontend = frontend
        self.ops = _Ops(self)
        self._nodes: list[Node] = []
        self._outputs: list[Output] = []
        self._inference = AxisInference()
        self._next = 0
        self._broken: FusionError | None = None
        self._fusion: Fusion | None = None

    # -- context manager ----------------------------------------------------------------------
    def __enter__(self) -> "FusionDefinition":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is not None and self._broken is None:
            self._broken = (
                exc
                if isinstance(exc, FusionError)
                else FusionError(f"the definition raised {type(exc).__name__}: {exc}")
            )

    @property
    def fusion(self) -> Fusion:
        """The recorded fusion (an error if the definition failed part-way)."""
        if self._broken is not None:
            raise FusionError(f"this definition failed and was not built ({self._broken})")
        if self._fusion is None or self._fusion.nodes != tuple(self._nodes):
            if not self._outputs:
                raise FusionError("the definition has no outputs (call fd.add_output)")
            self._fusion = Fusion(tuple(self._nodes), tuple(self._outputs), self.frontend)
        return self._fusion

    def execute(self, inputs: Sequence[Any], **kwargs) -> list:
        """Run the definition through the torch executor (eqsat's reference)."""
        return run_fusion(self.fusion, inputs, **kwargs)

    def __repr__(self) -> str:
        """The recorded IR, with each value's dtype and axis labels (``eqsat.lowering.fusion_source``
        gives nvFuser's repro text)."""
        return str(self.fusion) if self._outputs else "<empty FusionDefinition>"

    # -- recording ---------------------------------------------------------------------------------
    def _fail(self, message: str, op: str, line: int | None) -> None:
        err = FusionError(message, line=line, op=op)
        self._broken = err
        raise err

    def _arg(self, value: Any, op: str, line: int | None) -> Any:
        """A call argument in IR form: handles to Refs, lists to tuples, dtypes coerced."""
        if isinstance(value, Value):
            if value._fd is not self:
                self._fail(f"{value!r} belongs to another FusionDefinition", op, line)
            return Ref(value.id)
        if isinstance(value, (list, tuple)):
            return tuple(self._arg(v, op, line) for v in value)
        self._check_int64(value, op, line)
        if hasattr(value, "name") and type(value).__name__ == "DataType":
            return dt.coerce(value)
        if type(value).__name__ == "Size" or hasattr(value, "tolist") and not isinstance(value, (int, float)):
            return freeze(list(value))
        return value

    def _check_int64(self, value: Any, op: str, line: int | None) -> None:
        if isinstance(value, int) and not isinstance(value, bool) and not _INT64_MIN <= value <= _INT64_MAX:
            self._fail(f"the integer {value} does not fit nvFuser's Int (64 bits)", op, line)

    def _emit(
        self, op: str, args: tuple, kinds: tuple[str, ...], line: int | None, opaque: bool = False
    ) -> list[Value]:
        outputs = tuple(range(self._next, self._next + len(kinds)))
        node = Node(op, args, outputs, kinds, opaque=opaque, line=line)
        try:
            self._inference.add(node)
        except FusionError as err:
            self._broken = err
            raise
        self._next += len(kinds)
        self._nodes.append(node)
        self._fusion = None
        return [_HANDLES[k](self, v) for v, k in zip(outputs, kinds)]

    def _check_open(self, op: str, line: int | None) -> None:
        if self._broken is not None:
            raise FusionError(
                f"this definition already failed ({self._broken.message}); start a new FusionDefinition",
                line=line,
                op=op,
            )

    def _record_op(self, name: str, args: tuple, kwargs: dict) -> Any:
        line = caller_line()
        label = f"fd.ops.{name}"
        self._check_open(label, line)
        problem = unknown_op(name, self.frontend)
        if problem is not None:
            self._fail(problem, label, line)
        spec, count = OPS.get(name), OPAQUE_OUTPUTS.get()
        if (
            spec is not None
            and spec.more_is_opaque
            and (len(args) > len(spec.params) or set(kwargs) - set(spec.params))
        ):
            spec, count = None, count or spec.more_is_opaque
        if spec is None:
            bound = tuple((f"_{i}", self._arg(a, label, line)) for i, a in enumerate(args)) + tuple(
                (k, self._arg(v, label, line)) for k, v in kwargs.items()
            )
            outs = self._emit(name, bound, (TENSOR,) * (count or 1), line, opaque=True)
            return tuple(outs) if count else outs[0]
        bound = self._bind(spec, args, kwargs, label, line)
        for key in OPERANDS.intersection(bound):
            if isinstance(bound[key], bool):  # nvfuser_direct reads a Python bool operand as an Int
                bound[key] = int(bound[key])
        try:
            bound = normalize(spec, bound, self._inference)
        except (ValueError, TypeError) as err:
            self._fail(str(err), label, line)
        outs = self._emit(name, tuple(bound.items()), spec.outputs, line)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _bind(self, spec: OpSpec, args: tuple, kwargs: dict, label: str, line) -> dict[str, Any]:
        try:
            bound = bind_call(spec, args, kwargs)
        except TypeError as err:
            self._fail(str(err), label, line)
        return {k: self._arg(v, label, line) for k, v in bound.items()}

    # -- definitions -------------------------------------------------------------------------------
    def define_tensor(
        self,
        shape=None,
        contiguity=None,
        dtype=DataType.Float,
        is_cpu=False,
        stride_order=None,
        *,
        sizes=None,
        strides=None,
        static_sizes=False,
        symbolic_sizes=None,
    ) -> Tensor:
        line = caller_line()
        op = "fd.define_tensor"
        self._check_open(op, line)
        try:
            if symbolic_sizes is not None and shape is None:
                shape = symbolic_sizes
            if sizes is not None:
                shape, contiguity, stride_order = _from_sizes_strides(sizes, strides, static_sizes)
            if shape is None:
                raise ValueError("needs shape= (a list of extents, -1 for symbolic)")
            shape = tuple(int(s) for s in shape)
            if any(s < -1 for s in shape):
                raise ValueError(f"shape entries must be -1 (symbolic) or an extent >= 0, got {list(shape)}")
            if stride_order is not None:
                stride_order = tuple(int(s) for s in stride_order)
                problem = layout.permutation_problem(stride_order, len(shape))
                if problem:
                    raise ValueError(problem)
            if contiguity is None or isinstance(contiguity, bool):
                contiguity = layout.default_contiguity(
                    shape, stride_order, True if contiguity is None else contiguity
                )
            contiguity = tuple(contiguity)
            if len(contiguity) != len(shape):
                raise ValueError(f"contiguity has {len(contiguity)} entries; shape has {len(shape)}")
            if any(c not in (True, False, None) for c in contiguity):
                raise ValueError(f"contiguity entries must be True, False or None, got {list(contiguity)}")
            dtype = dt.coerce(dtype)
        except ValueError as err:
            self._fail(str(err), op, line)
        args = (
            ("shape", shape),
            ("contiguity", contiguity),
            ("dtype", dtype),
            ("is_cpu", bool(is_cpu)),
            ("stride_order", stride_order),
        )
        return self._emit("define_tensor", args, (TENSOR,), line)[0]

    def from_pytorch(self, tensor, static_sizes: bool = False) -> Tensor:
        return self.define_tensor(
            sizes=tensor.size(),
            strides=tensor.stride(),
            dtype=dt.from_torch(tensor.dtype),
            static_sizes=static_sizes,
            is_cpu=tensor.device.type == "cpu" and tensor.dim() == 0,
        )

    def define_scalar(self, value=None, dtype=None) -> Scalar:
        line = caller_line()
        op = "fd.define_scalar"
        self._check_open(op, line)
        if isinstance(value, Value):
            self._fail("value must be a python number or None (a fusion input)", op, line)
        if value is not None and not isinstance(value, (bool, int, float, complex)):
            if hasattr(value, "item"):
                value = value.item()
            else:
                self._fail(f"value must be a python number or None, got {value!r}", op, line)
        self._check_int64(value, op, line)
        try:
            if dtype is None:
                if value is None:
                    raise ValueError("a scalar input (value None) needs a dtype")
                if isinstance(value, bool) and self.frontend == "nvfuser_direct":
                    value = int(value)  # nvfuser_direct makes define_scalar(True) an Int
                dtype = dt.of_number(value)
            dtype = dt.coerce(dtype)
        except ValueError as err:
            self._fail(str(err), op, line)
        return self._emit("define_scalar", (("value", value), ("dtype", dtype)), (SCALAR,), line)[0]

    def define_vector(self, values, dtype=DataType.Int):
        line = caller_line()
        op = "fd.define_vector"
        self._check_open(op, line)
        if isinstance(values, int) and not isinstance(values, bool):
            # nvfuser_direct: define_vector(size) is that many scalar inputs
            return [self.define_scalar(None, dtype=DataType.Int) for _ in range(values)]
        try:
            dtype = dt.coerce(dtype)
        except ValueError as err:
            self._fail(str(err), op, line)
        args = (("values", self._arg(list(values), op, line)), ("dtype", dtype))
        return self._emit("define_vector", args, (VECTOR,), line)[0]

    def add_output(self, output, alias_input=None, stride_order=None) -> None:
        line = caller_line()
        op = "fd.add_output"
        self._check_open(op, line)
        if isinstance(alias_input, (list, tuple)):
            alias_input, stride_order = None, alias_input
        if not isinstance(output, Tensor) or output._fd is not self:
            self._fail(f"output must be a tensor of this definition, got {output!r}", op, line)
        alias = None
        if alias_input is not None:
            if (
                not isinstance(alias_input, Tensor)
                or alias_input._fd is not self
                or self._nodes[self._index_of(alias_input.id)].op != "define_tensor"
            ):
                self._fail(
                    f"alias_input must be an input tensor of this definition, got {alias_input!r}", op, line
                )
            alias = alias_input.id
            self._check_alias(output, alias_input, op, line)
        if stride_order is not None:
            stride_order = tuple(int(s) for s in stride_order)
            rank = output.ndim
            problem = layout.permutation_problem(stride_order, rank) if rank is not None else None
            if problem:
                self._fail(problem, op, line)
        self._outputs.append(Output(output.id, alias, stride_order))
        self._fusion = None

    def _check_alias(self, output: "Tensor", target: "Tensor", op: str, line) -> None:
        """An output written into an input has its rank, extents and dtype."""
        out, into = output._type, target._type
        if out.dims is None or into.dims is None:
            return  # downstream of an opaque op
        if out.rank != into.rank or out.dtype is not into.dtype:
            self._fail(
                f"the output ({out.dtype.name}, rank {out.rank}) cannot be written into its "
                f"alias_input ({into.dtype.name}, rank {into.rank})",
                op,
                line,
            )
        inference = self._inference
        for i, (a, b) in enumerate(zip(out.dims, into.dims)):
            ea, eb = inference.extent(a.label), inference.extent(b.label)
            if ea is not None and eb is not None and ea != eb:
                self._fail(f"the output's dim {i} has extent {ea}, its alias_input's {eb}", op, line)

    def _index_of(self, vid: int) -> int:
        for i, n in enumerate(self._nodes):
            if vid in n.outputs:
                return i
        raise KeyError(vid)


def _from_sizes_strides(sizes, strides, static_sizes):
    """(shape, contiguity, stride_order) that ``define_tensor(sizes=, strides=)`` declares: extents
    symbolic but for 1 (all static with ``static_sizes``), the layout of ``strides`` (row-major
    where None)."""
    sizes = [int(s) for s in sizes]
    strides = [int(s) for s in strides] if strides is not None else layout.dense_strides(sizes)
    shape = tuple(s if (static_sizes or s == 1) else -1 for s in sizes)
    return (shape, *layout.layout_of(sizes, strides))
