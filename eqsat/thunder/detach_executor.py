"""``detach`` that nvFuser fuses: a Thunder executor that claims ``torch.detach`` and
``Tensor.detach``, runs it as Thunder's ``shallow_copy`` primitive (a view; nvFuser's executor
translates it to the same value), and gives it no gradient.

Why: Thunder 0.2.6 has no symbol of its own for ``detach``. It registers it automatically
(``thunder/torch/default_torch_ops.py``) as an operator of the torch executor, whose backward
is torch's autograd run on the operator (``detach_vjp``). nvFuser claims neither, so every
``.detach()`` ends one nvFuser region and starts another, in the forward and in the backward.
FP8 training with current scaling detaches twice per cast (the scale, and the straight-through
``(x8 - xs).detach()``): on an H100 the ``fp8_current`` step of 4 blocks held 16 ``detach``
and 16 ``detach_vjp`` operators and 25 + 25 nvFuser regions (``docs/step-profile.md``).

What ``detach`` means is kept: its value is its input's (a view, as torch's is), and no
gradient flows through it (the grad transform puts none). Thunder's handling of in-place ops
still sees ``detach``, since the claim applies when the trace is lowered for execution.
"""

from __future__ import annotations

import functools

import thunder.torch as ltorch
from thunder.core import prims
from thunder.core.proxies import TensorProxy
from thunder.extend import OperatorExecutor, register_executor


@functools.cache
def detach_executor() -> OperatorExecutor:
    """The executor, made once and registered with Thunder by its name, ``eqsat_detach``."""
    ex = OperatorExecutor("eqsat_detach", version="0.1")
    register_executor(ex)

    def checker(a):
        return isinstance(a, TensorProxy)

    def execution(a):
        return prims.shallow_copy(a)

    def grad(a):  # no put_grads: detach stops the gradient
        return prims.shallow_copy(a)

    ex.register_implementation(
        ltorch.detach, checker=checker, execution_transform=execution, grad_transform=grad
    )
    return ex
