"""The Thunder side of :mod:`eqsat.thunder.cudnn_attention`. It registers the forward and
backward as Thunder operators, and registers the executor's claim on
``scaled_dot_product_attention``. Its checker asks ``cudnn_takes``; its execution and grad
transforms mirror Thunder's own sdpa executor (``thunder/executors/sdpaex.py``)."""

from __future__ import annotations

import functools

import thunder.core.devices as devices
import thunder.core.dtypes as dtypes
import thunder.torch as ltorch
import torch
from thunder.core.prims import OpTags
from thunder.core.proxies import TensorProxy
from thunder.core.transforms import get_grad, put_grads
from thunder.extend import OperatorExecutor, register_executor

from .cudnn_attention import backward_impl, cudnn_takes, forward_impl, grouped_heads_work

EXECUTOR_NAME = "eqsat_cudnn_sdpa"
GROUPED_NAME = "eqsat_cudnn_grouped_sdpa"


def _forward_meta(query, key, value, attn_mask, dropout_p, is_causal, scale):
    b, h, sq, _ = query.shape
    out = TensorProxy(like=query, shape=(b, h, sq, value.shape[-1]))
    lse = TensorProxy(shape=(b, h, sq, 1), dtype=dtypes.float32, device=query.device, requires_grad=False)
    seed = TensorProxy(shape=(), dtype=dtypes.int64, device=query.device, requires_grad=False)
    offset = TensorProxy(shape=(), dtype=dtypes.int64, device=query.device, requires_grad=False)
    return out, lse, seed, offset


def _backward_meta(
    grad_out, query, key, value, attn_mask, out, lse, seed, offset, dropout_p, is_causal, scale
):
    return TensorProxy(like=query), TensorProxy(like=key), TensorProxy(like=value)


def _capability(query) -> tuple[int, int] | None:
    if query.device.devicetype is not devices.DeviceType.CUDA or not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_capability(query.device.index or 0)


@functools.cache
def cudnn_sdpa_executor() -> OperatorExecutor:
    """The executor, made once and registered with Thunder by its name, ``eqsat_cudnn_sdpa``."""
    ex = OperatorExecutor(EXECUTOR_NAME, version="0.1")
    register_executor(ex)
    forward = ex.register_operator(
        "eqsat_cudnn_sdpa_forward",
        meta=_forward_meta,
        fn=forward_impl,
        tags=(OpTags.DONT_AUTO_RECOMPUTE_IN_BACKWARD,),
    )
    backward = ex.register_operator("eqsat_cudnn_sdpa_backward", meta=_backward_meta, fn=backward_impl)

    def checker(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None):
        return cudnn_takes(query, key, value, attn_mask, dropout_p, capability=_capability(query)) is None

    def execution(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None):
        out, _, _, _ = forward(query, key, value, attn_mask, dropout_p, is_causal, scale)
        return out

    def grad(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None):
        out, lse, seed, offset = forward(query, key, value, attn_mask, dropout_p, is_causal, scale)
        grads = backward(
            get_grad(out), query, key, value, attn_mask, out, lse, seed, offset, dropout_p, is_causal, scale
        )
        put_grads((query, key, value), grads)
        return out

    ex.register_implementation(
        ltorch.scaled_dot_product_attention,
        checker=checker,
        execution_transform=execution,
        grad_transform=grad,
    )

    # grouped-query attention on the key-value heads as they are (eqsat.thunder.grouped_attention
    # puts it in the trace before autodiff): the same operators, the groups' own gradients
    grouped = ex.register_operator(
        GROUPED_NAME,
        meta=_grouped_meta,
        fn=lambda q, k, v, m, p, c, s: forward_impl(q, k, v, m, p, c, s)[0],
        tags=(OpTags.DONT_AUTO_RECOMPUTE_IN_BACKWARD,),
    )
    ex.register_implementation(
        grouped,
        checker=lambda q, k, v, m=None, p=0.0, c=False, s=None: grouped_takes(q, k, v, m, p),
        execution_transform=lambda q, k, v, m=None, p=0.0, c=False, s=None: execution(
            q, k, v, m, p, c, scale=s
        ),
        grad_transform=lambda q, k, v, m=None, p=0.0, c=False, s=None: grad(q, k, v, m, p, c, scale=s),
    )
    return ex


def grouped_takes(query, key, value, attn_mask=None, dropout_p=0.0) -> bool:
    """Whether eqsat's cuDNN attention runs this call on the key-value heads as they are: cuDNN
    takes the call with groups, and this GPU's cuDNN computes groups as their repeat would."""
    capability = _capability(query)
    return (
        cudnn_takes(query, key, value, attn_mask, dropout_p, capability=capability, grouped=True) is None
        and key.shape[1] < query.shape[1]
        and grouped_heads_work(query.device.index or 0)
    )


def grouped_symbol():
    """The Thunder Symbol of grouped-query attention on cuDNN (made with the executor)."""
    return cudnn_sdpa_executor().opmap[GROUPED_NAME]


def _grouped_meta(query, key, value, attn_mask, dropout_p, is_causal, scale):
    b, h, sq, _ = query.shape
    return TensorProxy(like=query, shape=(b, h, sq, value.shape[-1]))
