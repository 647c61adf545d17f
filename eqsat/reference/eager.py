"""The eager executor: a user's definition function run straight on torch, with no IR in
between. It is the independent check that recording, emitting and re-ingesting a definition
keep its meaning (the torch executor runs the IR; this runs the user's calls)."""

from __future__ import annotations

from typing import Any, Sequence

from eqsat.ir import dtypes as dt
from eqsat.ir.dtypes import DataType
from eqsat.ir.operators import Operators

from .inputs import check_tensor_input
from .torch_executor import TorchDefinition


class EagerValue(Operators):
    """A value of an :class:`EagerDefinition`: a torch tensor or number behind nvFuser's
    Tensor/Scalar interface (``.shape()``, ``.ndim``, operators)."""

    def __init__(self, fd: "EagerDefinition", value: Any):
        self._fd = fd
        self.value = value

    def shape(self):
        return [int(s) for s in self.value.shape]

    def size(self, dim: int):
        return int(self.value.shape[dim])

    @property
    def ndim(self) -> int:
        return self.value.dim()


def _unwrap(x):
    if isinstance(x, EagerValue):
        return x.value
    if isinstance(x, (list, tuple)):
        return [_unwrap(v) for v in x]
    return x


class _EagerOps:
    def __init__(self, fd: "EagerDefinition"):
        self._fd = fd

    def __getattr__(self, name):
        target = getattr(self._fd._inner.ops, name)

        def op(*args, **kwargs):
            out = target(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()})
            if isinstance(out, tuple):
                return tuple(EagerValue(self._fd, o) for o in out)
            return EagerValue(self._fd, out)

        return op


class EagerDefinition:
    """A user's definition function run straight on torch, with no IR in between:
    ``fn(EagerDefinition(inputs))`` then ``.outputs``. It is the independent check that
    recording, emitting and re-ingesting a definition keep its meaning."""

    def __init__(self, inputs: Sequence[Any], device=None, generator=None):
        self._inner = TorchDefinition(inputs, device=device, generator=generator)
        self.ops = _EagerOps(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    @property
    def outputs(self) -> list:
        return self._inner.outputs

    def define_tensor(self, *args, **kwargs):
        shape = kwargs.get("shape", args[0] if args else None)
        if shape is None and "sizes" in kwargs:
            shape = [-1] * len(kwargs["sizes"])
        index, t = self._inner._take("fd.define_tensor")
        dtype = dt.coerce(kwargs.get("dtype", args[2] if len(args) > 2 else DataType.Float))
        check_tensor_input(
            index,
            t,
            list(shape),
            dtype,
            kwargs.get("contiguity", args[1] if len(args) > 1 else None),
            kwargs.get("stride_order", args[4] if len(args) > 4 else None),
        )
        return EagerValue(self, t)

    def define_scalar(self, *args, **kwargs):
        return EagerValue(self, self._inner.define_scalar(*args, **kwargs))

    def define_vector(self, values, dtype=DataType.Int):
        if isinstance(values, int):
            return [self.define_scalar(None, dtype=DataType.Int) for _ in range(values)]
        return EagerValue(self, [int(v) for v in _unwrap(values)])

    def add_output(self, value, alias_input=None, stride_order=None):
        if isinstance(alias_input, (list, tuple)):
            alias_input, stride_order = None, alias_input
        self._inner.add_output(_unwrap(value), _unwrap(alias_input), stride_order)
