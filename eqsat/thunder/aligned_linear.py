"""A linear layer whose output features are not 16-byte aligned, run on padded operands so that
cuBLAS takes its fast kernels; the Thunder executor that claims it is in
:mod:`eqsat.thunder.aligned_linear_executor`.

Why: gpt2's language-model head maps 1,024 features to a vocabulary of 50,257, not a multiple
of 8. The logits ([tokens, 50257], bf16) and their gradient then have rows that are not 16
bytes apart, and cuBLAS falls back to kernels built for sm75. On an H100, at 4 x 1024 tokens,
the head's three GEMMs took 4.28 + 2.95 + 2.83 ms under Thunder (and eager), where
torch.compile, which pads such dimensions, ran them as sm90 kernels of about 0.5 ms each
(``docs/step-profile.md``, "Other models").

What runs, for ``F.linear(x, weight, bias)`` with ``weight`` [N, K] and N not aligned
(:func:`padded_features`: N rounded up to 8 elements of 2 bytes, N'):
- forward: ``weight`` (and ``bias``) padded with zero rows to N', one GEMM into [..., N'], and
  the first N features of it copied out contiguous, the layout eager's linear returns. (A view
  would save the copy, but under Dynamo the next piece may be Inductor's, compiled for eager's
  strides, whose stride assertion then fails: ``docs/step-profile.md``, "Other models".)
- backward: the output's gradient padded with zero columns to N', then two GEMMs,
  ``grad_x = g' @ weight'`` and ``grad_weight = (g'^T @ x)[:N]`` (a contiguous slice), and
  ``grad_bias = g.sum``.
The padding is zeros, which add exact zeros to every sum, so the results are those of the
unpadded products up to the order cuBLAS sums in: what a different kernel choice gives.

:func:`aligned_linear_takes` says which calls are claimed: on a CUDA GPU, ``x`` and ``weight``
in bf16 or fp16 (one dtype), ``weight`` 2-D with its output features unaligned and its input
features aligned, and the weight large enough for the padding's copies to pay
(``MIN_WEIGHT_ELEMENTS``). ``CALLS`` counts the calls by pass.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
import torch.nn.functional as F

ALIGN_BYTES = 16  # what cuBLAS's tensor-core kernels want of a leading dimension
MIN_WEIGHT_ELEMENTS = 1 << 20  # below this the padding's copies cost about what they save
CALLS: Counter = Counter()  # "forward", "backward"


def _itemsize(dtype: Any) -> int | None:
    name = str(dtype).rsplit(".", 1)[-1]
    return {"bfloat16": 2, "float16": 2}.get(name)


def padded_features(n: int, itemsize: int = 2) -> int:
    """``n`` rounded up to a multiple of ``ALIGN_BYTES`` bytes of ``itemsize``-byte elements."""
    per = ALIGN_BYTES // itemsize
    return -(-n // per) * per


def aligned_linear_takes(x: Any, weight: Any, bias: Any, *, on_cuda: bool) -> str | None:
    """None where the call is run padded; else why not. The arguments may be torch tensors or
    Thunder's proxies (``shape``, ``dtype``)."""
    if not on_cuda:
        return "not on a CUDA GPU"
    size = _itemsize(weight.dtype)
    if size is None or str(x.dtype) != str(weight.dtype):
        return "x and weight are not both bf16 or both fp16"
    if bias is not None and str(bias.dtype) != str(weight.dtype):
        return "the bias is not in the weight's dtype"
    if len(weight.shape) != 2:
        return "the weight is not 2-D"
    if len(x.shape) < 1 or x.shape[-1] != weight.shape[1]:
        return "x's last dimension is not the weight's input features"
    n, k = weight.shape
    if (n * size) % ALIGN_BYTES == 0:
        return "the output features are aligned already"
    if (k * size) % ALIGN_BYTES:
        return "the input features are not aligned either"
    if n * k < MIN_WEIGHT_ELEMENTS:
        return f"the weight has fewer than {MIN_WEIGHT_ELEMENTS} elements"
    return None


def _pad_rows(t: torch.Tensor, rows: int) -> torch.Tensor:
    """``t`` with zero rows (its first dimension) appended up to ``rows``."""
    return torch.cat([t, t.new_zeros((rows - t.shape[0], *t.shape[1:]))])


def forward_impl(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``F.linear(x, weight, bias)``, through the weight padded to aligned output features."""
    CALLS["forward"] += 1
    n = weight.shape[0]
    padded = padded_features(n, weight.element_size())
    out = F.linear(x, _pad_rows(weight, padded), None if bias is None else _pad_rows(bias, padded))
    return out[..., :n].contiguous()


def backward_impl(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, with_bias: bool
) -> tuple[torch.Tensor, ...]:
    """(grad_x, grad_weight) and, ``with_bias``, grad_bias of ``F.linear(x, weight, bias)``."""
    CALLS["backward"] += 1
    n, k = weight.shape
    padded = padded_features(n, weight.element_size())
    g = grad_out.reshape(-1, n)
    g_padded = F.pad(g, (0, padded - n))
    grad_x = (g_padded @ _pad_rows(weight, padded)).reshape(x.shape)
    grad_weight = (g_padded.t() @ x.reshape(-1, k))[:n]
    if not with_bias:
        return grad_x, grad_weight
    return grad_x, grad_weight, g.sum(0)
