"""eqsat.thunder.cudnn_attention on the CPU: the additive bias a boolean mask becomes (against
torch's own attention on the math backend, written by hand), and where cuDNN's attention is
claimed (cudnn_takes). The executor itself needs Thunder and a GPU (bench/attention_paths.py
checks its values there against the math backend)."""

import math

import pytest
import torch
import torch.nn.functional as F

from eqsat.thunder.cudnn_attention import additive_bias, cudnn_takes

HOPPER = (9, 0)


def _qkv(dtype=torch.bfloat16, heads=4, kv_heads=4, head=16, seq=8):
    return (
        torch.randn(2, heads, seq, head, dtype=dtype),
        torch.randn(2, kv_heads, seq, head, dtype=dtype),
        torch.randn(2, kv_heads, seq, head, dtype=dtype),
    )


def test_a_boolean_mask_becomes_zero_where_true_and_minus_inf_where_false():
    mask = torch.tensor([[True, False], [False, True]])
    bias = additive_bias(mask, torch.bfloat16)
    assert bias.dtype == torch.bfloat16
    assert bias.tolist() == [[0.0, -math.inf], [-math.inf, 0.0]]
    assert additive_bias(None, torch.float16) is None
    floating = torch.tensor([0.5, -2.0], dtype=torch.float32)
    assert additive_bias(floating, torch.float16).tolist() == [0.5, -2.0]


def test_attention_with_the_bias_equals_attention_with_the_mask():
    q, k, v = (t.double() for t in _qkv())
    mask = torch.ones(8, 8, dtype=torch.bool).tril().expand(2, 1, 8, 8)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    want = torch.softmax(scores.masked_fill(~mask, -math.inf), dim=-1) @ v  # by hand
    got = F.scaled_dot_product_attention(q, k, v, attn_mask=additive_bias(mask, torch.float64))
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize(
    "change, why",
    [
        ({"capability": None}, "no GPU"),
        ({"capability": (8, 0)}, "compute capability"),
        ({"dropout_p": 0.1}, "dropout"),
        ({"dtype": torch.float32}, "bf16 or all fp16"),
        ({"kv_heads": 2}, "batch and heads"),
        ({"head": 12}, "multiple of 8"),
        ({"head": 256}, "at most 128"),
        ({"mask": torch.ones(3, 8, 8, dtype=torch.bool)}, "broadcast"),
        ({"mask": torch.zeros(8, 8, requires_grad=True)}, "differentiated"),
    ],
)
def test_cudnn_takes_what_its_kernels_run_and_says_why_not(change, why):
    q, k, v = _qkv(
        dtype=change.get("dtype", torch.bfloat16),
        kv_heads=change.get("kv_heads", 4),
        head=change.get("head", 16),
    )
    mask = change.get("mask", torch.ones(2, 1, 8, 8, dtype=torch.bool))
    dropout = change.get("dropout_p", 0.0)
    reason = cudnn_takes(q, k, v, mask, dropout, capability=change.get("capability", HOPPER))
    assert reason is not None and why in reason, reason


def test_cudnn_takes_phi3s_attention_on_a_hopper_gpu():
    q, k, v = (torch.empty(4, 32, 2048, 96, dtype=torch.bfloat16, device="meta") for _ in range(3))
    mask = torch.empty(4, 1, 2048, 2048, dtype=torch.bool, device="meta")
    assert cudnn_takes(q, k, v, mask, 0.0, capability=(9, 0)) is None
    assert cudnn_takes(q, k, v, None, 0.0, capability=(10, 0)) is None


def test_the_backward_hands_cudnn_a_transposed_gradient_as_it_is(monkeypatch):
    """The gradient of attention's output usually arrives as a [B, S, H, D] tensor viewed as
    [B, H, S, D]. Its last dimension is dense, which is all cuDNN asks: copying it to contiguous
    cost a kernel per layer and its memory. Only a gradient whose last dimension is strided is
    copied."""
    from eqsat.thunder import cudnn_attention

    seen = []

    def backward(grad_out, query, key, value, *rest, **kw):  # stands in for aten's cuDNN op
        seen.append(grad_out)
        return query, key, value

    monkeypatch.setattr(torch.ops.aten, "_scaled_dot_product_cudnn_attention_backward", backward)
    q, k, v = _qkv()
    transposed = torch.randn(2, 8, 4, 16, dtype=torch.bfloat16).transpose(1, 2)
    strided = torch.randn(2, 4, 8, 32, dtype=torch.bfloat16)[..., ::2]
    for grad in (transposed, strided):
        cudnn_attention.backward_impl(grad, q, k, v, None, q, None, None, None, 0.0, True, None)
    assert seen[0] is transposed
    assert seen[1] is not strided and seen[1].is_contiguous()
    torch.testing.assert_close(seen[1], strided, rtol=0, atol=0)
