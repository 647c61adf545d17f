"""The Thunder side of :mod:`eqsat.thunder.aligned_linear`: the padded forward and backward
registered as Thunder operators, and the executor's claim on ``torch.nn.functional.linear``
(Thunder's ``ltorch.linear``), whose checker asks ``aligned_linear_takes``. Built as
:mod:`eqsat.thunder.cudnn_attention_executor` is."""

from __future__ import annotations

import functools

import thunder.core.devices as devices
import thunder.torch as ltorch
from thunder.core.proxies import TensorProxy
from thunder.core.transforms import get_grad, put_grads
from thunder.extend import OperatorExecutor, register_executor

from .aligned_linear import aligned_linear_takes, backward_impl, forward_impl


def _forward_meta(x, weight, bias):
    return TensorProxy(like=x, shape=(*x.shape[:-1], weight.shape[0]))


def _backward_meta(grad_out, x, weight, with_bias):
    grads = (TensorProxy(like=x), TensorProxy(like=weight))
    if with_bias:
        return (*grads, TensorProxy(like=weight, shape=(weight.shape[0],)))
    return grads


@functools.cache
def aligned_linear_executor() -> OperatorExecutor:
    """The executor, made once and registered with Thunder by its name, ``eqsat_aligned_linear``."""
    ex = OperatorExecutor("eqsat_aligned_linear", version="0.1")
    register_executor(ex)
    forward = ex.register_operator("eqsat_aligned_linear_forward", meta=_forward_meta, fn=forward_impl)
    backward = ex.register_operator("eqsat_aligned_linear_backward", meta=_backward_meta, fn=backward_impl)

    def checker(a, w, bias=None):
        on_cuda = a.device.devicetype is devices.DeviceType.CUDA
        return aligned_linear_takes(a, w, bias, on_cuda=on_cuda) is None

    def execution(a, w, bias=None):
        return forward(a, w, bias)

    def grad(a, w, bias=None):
        out = forward(a, w, bias)
        grads = backward(get_grad(out), a, w, bias is not None)
        put_grads((a, w) if bias is None else (a, w, bias), grads)
        return out

    ex.register_implementation(
        ltorch.linear, checker=checker, execution_transform=execution, grad_transform=grad
    )
    return ex
