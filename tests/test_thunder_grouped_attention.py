"""Grouped-query attention under Thunder + eqsat: on the GPU (marker ``gpu``: Hopper or later,
Thunder 0.2.6, nvFuser 0.2.35; skipped elsewhere with the reason), and where Thunder imports
without a GPU, with math attention in place of torch's cuDNN ops.

Two layers of attention with 2 key-value heads of 8, each repeated to every query head as
transformers' ``repeat_kv`` does, in bf16, one training step through ``thunder.jit``, against
the same step of a float32 copy in eager PyTorch. With ``Optimize(grouped_attention=True)`` and
eqsat's executors,
cuDNN runs every call, forward and backward, on the key-value heads as they are
(``eqsat.thunder.grouped_attention``); with the executor alone, on the repeats. Both must match
eager's loss and gradients."""

import copy
import math

import pytest
import torch
from thunder_gpu import off_from_eager, thunder_on_gpu, training_step

try:
    import eqsat.thunder as et
except ImportError as err:  # Thunder installed but unusable here: the reason
    pytest.skip(str(err), allow_module_level=True)

BATCH, SEQ, DIM, HEADS, KV_HEADS = 2, 256, 512, 8, 2


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.head = DIM // HEADS
        self.q = torch.nn.Linear(DIM, DIM, bias=False)
        self.kv = torch.nn.Linear(DIM, 2 * KV_HEADS * self.head, bias=False)
        self.o = torch.nn.Linear(DIM, DIM, bias=False)

    def forward(self, x, mask):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, HEADS, self.head).transpose(1, 2)
        k, v = (
            t.view(b, s, KV_HEADS, self.head).transpose(1, 2)
            for t in self.kv(x).split(KV_HEADS * self.head, dim=-1)
        )
        r = HEADS // KV_HEADS  # transformers' repeat_kv
        k, v = (
            t[:, :, None, :, :].expand(b, KV_HEADS, r, s, self.head).reshape(b, HEADS, s, self.head)
            for t in (k, v)
        )
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return x + self.o(out.transpose(1, 2).reshape(b, s, DIM))


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Attention(), Attention()])

    def forward(self, x):
        s = x.shape[1]
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        for layer in self.layers:
            x = layer(x, mask)
        return x.float().pow(2).mean()


@pytest.mark.gpu
@pytest.mark.parametrize("with_eqsat", [True, False])
def test_grouped_query_attention_runs_on_the_key_value_heads_as_they_are_under_optimize(with_eqsat):
    thunder = thunder_on_gpu(capability=(9, 0), nvfuser=True)
    from eqsat.thunder.cudnn_attention import CALLS, grouped_heads_work

    torch.manual_seed(0)
    model = Model().to("cuda", torch.bfloat16)
    x = torch.randn(BATCH, SEQ, DIM, device="cuda", dtype=torch.bfloat16)
    want_loss, want_grads = training_step(copy.deepcopy(model).float(), lambda m: m(x.float()))
    transforms = [et.Optimize(grouped_attention=True)] if with_eqsat else []
    CALLS.clear()
    jitted = thunder.jit(model, transforms=transforms, executors=et.executors())
    loss, grads = training_step(jitted, lambda m: m(x))
    torch.cuda.synchronize()
    assert grouped_heads_work(), "this GPU's cuDNN attention does not take grouped keys and values"
    grouped = {k: v for k, v in CALLS.items() if k.endswith("grouped")}
    assert grouped == ({"forward grouped": 2, "backward grouped": 2} if with_eqsat else {}), dict(CALLS)
    assert off_from_eager(loss, grads, want_loss, want_grads) == {}
    if with_eqsat:  # the forward saves the groups for the backward, not their repeats
        saved = [tuple(p.shape) for p in thunder.last_traces(jitted)[-1].output[1][0] if hasattr(p, "shape")]
        head = DIM // HEADS
        assert saved.count((BATCH, KV_HEADS, SEQ, head)) == 4, saved  # each layer's k and v
        assert saved.count((BATCH, HEADS, SEQ, head)) <= 4, saved  # each layer's q and output


def _math_forward(q, k, v, bias, lse, dropout_p, is_causal, debug, *, scale=None):
    """torch's ``_scaled_dot_product_cudnn_attention`` in float32 math, groups repeated."""
    out, lse = _math_attention(q.float(), k.float(), v.float(), bias, is_causal, scale)
    zero = torch.zeros((), dtype=torch.int64)
    return out.to(q.dtype), lse, None, None, q.shape[2], k.shape[2], zero, zero, None


def _math_attention(q, k, v, bias, is_causal, scale):
    r = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)
    scores = q @ k.transpose(-1, -2) * (scale or 1 / math.sqrt(q.shape[-1]))
    if is_causal:
        scores = scores.masked_fill(~torch.ones(scores.shape[-2:], dtype=torch.bool).tril(), -math.inf)
    if bias is not None:
        scores = scores + bias
    lse = scores.logsumexp(-1, keepdim=True)
    return (scores - lse).exp() @ v, lse


def _math_backward(
    grad, q, k, v, out, lse, seed, offset, bias, cq, ck, mq, mk, dropout_p, is_causal, *, scale=None
):
    with torch.enable_grad():
        leaves = [t.detach().float().requires_grad_() for t in (q, k, v)]
        _math_attention(*leaves, bias, is_causal, scale)[0].backward(grad.float())
    return tuple(t.grad.to(o.dtype) for t, o in zip(leaves, (q, k, v)))


def test_without_a_gpu_thunders_step_on_the_groups_matches_eager_and_saves_the_groups(monkeypatch):
    """Thunder on the CPU, eqsat's executor told it runs on Hopper, cuDNN's ops stood in by math
    attention: ``Optimize(grouped_attention=True)`` puts the grouped call in the trace before
    autodiff, the forward saves the groups, and the step matches eager's."""
    thunder = pytest.importorskip("thunder", reason="needs Lightning Thunder 0.2.6")
    if not hasattr(et, "Optimize"):
        pytest.skip("eqsat.thunder did not import Thunder")
    import eqsat.thunder.cudnn_attention as ca
    import eqsat.thunder.cudnn_attention_executor as cx

    monkeypatch.setitem(ca.ATEN_OPS, "forward", _math_forward)
    monkeypatch.setitem(ca.ATEN_OPS, "backward", _math_backward)
    monkeypatch.setattr(cx, "_capability", lambda query: (9, 0))
    monkeypatch.setitem(ca._GROUPED_WORK, 0, True)
    torch.manual_seed(0)
    model = Model().to(torch.bfloat16)
    x = torch.randn(BATCH, 64, DIM, dtype=torch.bfloat16)
    want_loss, want_grads = training_step(copy.deepcopy(model).float(), lambda m: m(x.float()))
    opt = et.Optimize(grouped_attention=True)
    ca.CALLS.clear()
    jitted = thunder.jit(model, transforms=[opt], executors=et.executors())
    loss, grads = training_step(jitted, lambda m: m(x))
    assert {k: v for k, v in ca.CALLS.items() if k.endswith("grouped")} == {
        "forward grouped": 2,
        "backward grouped": 2,
    }, dict(ca.CALLS)
    assert off_from_eager(loss, grads, want_loss, want_grads) == {}
    saved = [tuple(p.shape) for p in thunder.last_traces(jitted)[-1].output[1][0] if hasattr(p, "shape")]
    assert saved.count((BATCH, KV_HEADS, 64, DIM // HEADS)) == 4, saved
    assert saved.count((BATCH, HEADS, 64, DIM // HEADS)) <= 4, saved
    assert any("8 query heads on 2 key-value heads" in n for n in opt.report.notes), opt.report.notes
