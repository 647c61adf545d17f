"""Attention on cuDNN for Thunder: an executor that claims ``scaled_dot_product_attention``,
forward and backward, and runs it on torch's cuDNN attention ops
(``aten._scaled_dot_product_cudnn_attention`` and its backward), as torch.compile does on
Hopper.

Why: Thunder 0.2.6's sdpa executor knows only flash and memory-efficient attention. With the
boolean mask transformers materializes, it takes the memory-efficient kernels (CUTLASS, built
for sm80) and expands the mask to every head first. On an H100, for Phi-3 at 4x2048 in bf16,
that path took 8.74 ms of a 26.98 ms step. torch.compile's cuDNN attention took 3.28 ms
(``docs/step-profile.md``).

    import thunder
    from eqsat.thunder.cudnn_attention_executor import cudnn_sdpa_executor
    jmodel = thunder.jit(model, executors=[cudnn_sdpa_executor(), *thunder.get_default_executors()])

The executor claims a call only where cuDNN's attention takes it (:func:`cudnn_takes`). It
needs CUDA tensors in bf16 or fp16 on a GPU of compute capability 9.0 or more, and no dropout.
Query, key and value must have the same heads and one head size, a multiple of 8 and at most
128. The mask must be boolean or floating, broadcast to the scores, and not itself
differentiated. Every other call is left to Thunder's own executors. A boolean mask becomes
the additive bias cuDNN takes (:func:`additive_bias`: 0 where True, -inf where False), as
torch's ``scaled_dot_product_attention`` makes it.

A mask known to be causal (:mod:`eqsat.thunder.causal_masks`: computed in an nvFuser region
from no input, and checked at that region's first call) runs as ``is_causal`` with no mask
where the scores are square (:func:`mask_arguments`). ``CALLS`` counts the calls by pass and by
how they ran: "forward causal", "backward masked", ... ("causal", "masked", "no mask"), and
"forward grouped", "backward grouped" for calls on fewer key-value heads than query heads
(grouped-query attention, put in the trace by :mod:`eqsat.thunder.grouped_attention` where
:func:`grouped_heads_work` finds that this GPU's cuDNN takes them).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import torch

from .causal_masks import is_marked

MIN_CAPABILITY = (9, 0)  # cuDNN's fused attention kernels that torch takes on Hopper and later
MAX_HEAD = 128
CALLS: Counter = Counter()  # calls by pass and how they ran: "forward causal", "backward masked", ...
# torch's cuDNN attention ops, looked up at each call (tests without a GPU put math in their place)
ATEN_OPS = {
    "forward": lambda *args, **kwargs: torch.ops.aten._scaled_dot_product_cudnn_attention(*args, **kwargs),
    "backward": lambda *args, **kwargs: torch.ops.aten._scaled_dot_product_cudnn_attention_backward(
        *args, **kwargs
    ),
}


def additive_bias(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """The additive bias cuDNN's attention takes for ``mask``: a boolean mask's True is 0 and
    its False -inf; a floating mask is itself, in ``dtype``."""
    if mask is None:
        return None
    if mask.dtype == torch.bool:  # made on the device: no copy from the host, no synchronization
        return torch.full(mask.shape, -math.inf, dtype=dtype, device=mask.device).masked_fill_(mask, 0.0)
    return mask.to(dtype)


def cudnn_takes(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any,
    dropout_p: float,
    *,
    capability: tuple[int, int] | None,
    grouped: bool = False,
) -> str | None:
    """None where cuDNN's attention takes the call; else why not. The arguments may be torch
    tensors or Thunder's proxies (``shape``, ``dtype``, ``requires_grad``); ``capability``
    is the GPU's (None: no GPU). ``grouped``: key and value may have fewer heads than the
    query, a divisor of its heads (grouped-query attention: query head ``i`` reads key-value
    head ``i // (heads // key-value heads)``)."""
    if capability is None or tuple(capability) < MIN_CAPABILITY:
        return "no GPU of compute capability 9.0 or more"
    if dropout_p:
        return "dropout"
    if any(len(t.shape) != 4 for t in (query, key, value)):
        return "query, key and value are not 4-D"
    if (
        not all(_half_precision(t.dtype) for t in (query, key, value))
        or len({str(t.dtype) for t in (query, key, value)}) != 1
    ):
        return "query, key and value are not all bf16 or all fp16"
    (b, h, _, e), (bk, hk, sk, ek), (bv, hv, sv, ev) = (tuple(t.shape) for t in (query, key, value))
    if grouped:
        if bk != b or not 0 < hk <= h or h % hk or (bv, hv, sv) != (b, hk, sk):
            return "key and value do not match the query's batch, nor divide its heads into groups"
    elif (bk, hk) != (b, h) or (bv, hv, sv) != (b, h, sk):
        return "key and value do not match the query's batch and heads"
    if not (e == ek == ev) or e % 8 or e > MAX_HEAD:
        return f"head size {e}, {ek}, {ev}: cuDNN takes one size, a multiple of 8, at most {MAX_HEAD}"
    if attn_mask is not None:
        if getattr(attn_mask, "requires_grad", False):
            return "the mask is differentiated"
        if not _broadcasts(tuple(attn_mask.shape), (b, h, query.shape[2], sk)):
            return "the mask does not broadcast to the scores"
    return None


def grouped_heads_work(device: int = 0) -> bool:
    """Whether this torch's cuDNN attention takes keys and values with fewer heads than the
    query on GPU ``device``, forward and backward, and computes what repeating them to every
    head computes (checked once per device against torch's math attention, on 4 query heads
    reading 2 key-value heads: query heads 0 and 1 read the first, as ``repeat_kv`` repeats
    them, not 0 and 2)."""
    if device not in _GROUPED_WORK:
        _GROUPED_WORK[device] = _check_grouped_heads(device)
    return _GROUPED_WORK[device]


_GROUPED_WORK: dict[int, bool] = {}


def _check_grouped_heads(device: int) -> bool:
    try:
        gen = torch.Generator(device=f"cuda:{device}").manual_seed(0)
        q, k, v, g = (
            torch.randn(1, h, 128, 64, device=f"cuda:{device}", dtype=torch.bfloat16, generator=gen)
            for h in (4, 2, 2, 4)
        )
        out, lse, seed, offset = forward_impl(q, k, v, None, 0.0, True, None, count=False)
        dq, dk, dv = backward_impl(g, q, k, v, None, out, lse, seed, offset, 0.0, True, None, count=False)
        want = [t.float().requires_grad_() for t in (q, k, v)]
        ref = torch.nn.functional.scaled_dot_product_attention(
            want[0], *(t.repeat_interleave(2, dim=1) for t in want[1:]), is_causal=True
        )
        ref.backward(g.float())
        got = (out, dq, dk, dv)
        refs = (ref.detach(), *(t.grad for t in want))
        return all(
            a.shape == b.shape and torch.allclose(a.float(), b, rtol=2e-2, atol=2e-2 * float(b.abs().max()))
            for a, b in zip(got, refs)
        )
    except Exception:  # cuDNN or torch refuses the groups: the calls stay repeated
        return False


def mask_arguments(attn_mask: Any, is_causal: bool, query: Any, key: Any) -> tuple[Any, bool]:
    """The mask and ``is_causal`` cuDNN's attention is called with: a mask known causal
    (:func:`eqsat.thunder.causal_masks.is_marked`) whose last two dims are the scores' (the
    query's and the key's sequence, equal) becomes no mask and ``is_causal=True``; anything
    else is passed as it is."""
    if (
        attn_mask is not None
        and not is_causal
        and query.shape[2] == key.shape[2] == attn_mask.shape[-1] == attn_mask.shape[-2]
        and is_marked(attn_mask)
    ):
        return None, True
    return attn_mask, is_causal


def _count(stage: str, attn_mask: Any, is_causal: bool, query: Any, key: Any) -> None:
    CALLS[f"{stage} {_how(attn_mask, is_causal)}"] += 1
    if key.shape[1] != query.shape[1]:
        CALLS[f"{stage} grouped"] += 1


def _how(attn_mask: Any, is_causal: bool) -> str:
    return "causal" if attn_mask is None and is_causal else "no mask" if attn_mask is None else "masked"


def _half_precision(dtype: Any) -> bool:
    return str(dtype).rsplit(".", 1)[-1] in ("bfloat16", "float16")


def _broadcasts(shape: tuple, to: tuple) -> bool:
    if len(shape) > len(to):
        return False
    return all(s in (1, t) for s, t in zip(shape[::-1], to[::-1]))


def _contiguous_last(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself where its last dimension is dense, which is all cuDNN's attention asks of
    its operands (torch matches the gradient's layout to the output's itself, from cuDNN 9.5.1
    on); otherwise a contiguous copy."""
    return t if t.stride(-1) == 1 else t.contiguous()


def _bias_for(attn_mask: torch.Tensor | None, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor | None:
    bias = additive_bias(attn_mask, query.dtype)
    if bias is None:
        return None
    b, h, sq, _ = query.shape
    return bias.expand(b, h, sq, key.shape[2])


def forward_impl(query, key, value, attn_mask, dropout_p, is_causal, scale, *, count=True):
    """(output, logsumexp, philox seed, philox offset) of cuDNN's attention."""
    attn_mask, is_causal = mask_arguments(attn_mask, is_causal, query, key)
    if count:
        _count("forward", attn_mask, is_causal, query, key)
    out, lse, _, _, _, _, seed, offset, _ = ATEN_OPS["forward"](
        _contiguous_last(query),
        _contiguous_last(key),
        _contiguous_last(value),
        _bias_for(attn_mask, query, key),
        True,
        dropout_p,
        is_causal,
        False,
        scale=scale,
    )
    return out, lse, seed, offset


def backward_impl(
    grad_out, query, key, value, attn_mask, out, lse, seed, offset, dropout_p, is_causal, scale, *, count=True
):
    """The gradients of query, key and value from cuDNN's attention backward."""
    attn_mask, is_causal = mask_arguments(attn_mask, is_causal, query, key)
    if count:
        _count("backward", attn_mask, is_causal, query, key)
    grads = ATEN_OPS["backward"](
        _contiguous_last(grad_out),  # not .contiguous(): a copy of a transposed gradient
        _contiguous_last(query),
        _contiguous_last(key),
        _contiguous_last(value),
        out,
        lse,
        seed,
        offset,
        _bias_for(attn_mask, query, key),
        None,
        None,
        query.shape[2],
        key.shape[2],
        dropout_p,
        is_causal,
        scale=scale,
    )
    return tuple(grads)
