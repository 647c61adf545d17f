"""Attention's paths on one GPU, forward + backward, at a model's shapes (default Phi-3's: batch 4,
32 heads, 2048 tokens, head size 96, bf16) with the boolean causal mask transformers builds:

- ``thunder-mem-efficient``: as Thunder 0.2.6's sdpa executor runs it (the mask expanded to
  every head and made contiguous, then memory-efficient attention, forward and backward);
- ``eqsat-cudnn``: ``eqsat.thunder.cudnn_attention``'s forward and backward (cuDNN, the mask as
  an additive bias, broadcast);
- ``eqsat-cudnn-causal``: the same executor given the mask marked causal
  (``eqsat.thunder.causal_masks``), as eqsat's region hook marks the mask a Thunder region
  makes: cuDNN with ``is_causal`` and no mask;
- ``torch-sdpa``: ``F.scaled_dot_product_attention`` with the mask, torch choosing the backend;
- ``flash-causal``: flash attention with ``is_causal=True`` and no mask (a lower bound).

Per path: the median ms of forward + backward (CUDA events, back to back), and the largest
error of the output and the three gradients against the math backend in float32 (relative to
the reference's largest magnitude). JSON to --json.

    python bench/attention_paths.py [--batch 4 --heads 32 --seq 2048 --head 96] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

# this folder holds bench/thunder.py: with it on the path, `import thunder` is not Lightning Thunder
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

from eqsat.thunder.causal_masks import is_causal_pattern, mark  # noqa: E402
from eqsat.thunder.cudnn_attention import backward_impl, forward_impl  # noqa: E402


def thunder_mem_efficient(q, k, v, mask, g):
    bias = (
        torch.where(mask, 0.0, float("-inf")).to(q.dtype).expand(q.shape[0], q.shape[1], -1, -1).contiguous()
    )
    out, lse, seed, offset = torch.ops.aten._scaled_dot_product_efficient_attention(
        q, k, v, bias, True, 0.0, False
    )
    grads = torch.ops.aten._scaled_dot_product_efficient_attention_backward(
        g, q, k, v, bias, out, lse, seed, offset, 0.0, [True, True, True, False], False
    )
    return out, grads[:3]


def eqsat_cudnn(q, k, v, mask, g):
    out, lse, seed, offset = forward_impl(q, k, v, mask, 0.0, False, None)
    return out, backward_impl(g, q, k, v, mask, out, lse, seed, offset, 0.0, False, None)


_MARKED: dict = {}


def eqsat_cudnn_causal(q, k, v, mask, g):
    """eqsat's executor given the mask marked causal, as the region hook marks the mask Thunder's
    region makes (a marked copy, made once: the other paths get the mask unmarked)."""
    if id(mask) not in _MARKED:
        marked = mask.clone()
        assert is_causal_pattern(marked)
        mark(marked)
        _MARKED[id(mask)] = marked
    return eqsat_cudnn(q, k, v, _MARKED[id(mask)], g)


def _autograd(fn):
    def run(q, k, v, mask, g):
        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
        out = fn(q, k, v, mask)
        out.backward(g)
        return out.detach(), (q.grad, k.grad, v.grad)

    return run


torch_sdpa = _autograd(lambda q, k, v, mask: F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def _flash(q, k, v, mask):
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


PATHS = {
    "thunder-mem-efficient": thunder_mem_efficient,
    "eqsat-cudnn": eqsat_cudnn,
    "eqsat-cudnn-causal": eqsat_cudnn_causal,
    "torch-sdpa": torch_sdpa,
    "flash-causal": _autograd(_flash),
}


def reference(q, k, v, mask, g):
    with sdpa_kernel([SDPBackend.MATH]):
        return _autograd(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m))(
            q.float(), k.float(), v.float(), mask, g.float()
        )


def error(got, want) -> float:
    return float((got.float() - want).abs().max() / want.abs().max().clamp_min(1e-30))


def time_ms(fn, args, runs: int) -> float:
    for _ in range(3):
        fn(*args)
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--head", type=int, default=96)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--json")
    args = p.parse_args(argv)
    torch.manual_seed(0)
    shape = (args.batch, args.heads, args.seq, args.head)
    q, k, v, g = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    mask = (
        torch.ones(args.seq, args.seq, device="cuda", dtype=torch.bool).tril().expand(args.batch, 1, -1, -1)
    )
    want_out, want_grads = reference(q, k, v, mask, g)
    rows = {"card": torch.cuda.get_device_name(), "torch": torch.__version__, "shape": shape, "paths": {}}
    for name, fn in PATHS.items():
        try:
            out, grads = fn(q, k, v, mask, g)
            errors = [error(out, want_out)] + [error(a, b) for a, b in zip(grads, want_grads)]
            row = {"ms": round(time_ms(fn, (q, k, v, mask, g), args.runs), 3), "max_error": max(errors)}
        except Exception as err:  # a path this torch or GPU lacks: recorded, the others go on
            row = {"error": f"{type(err).__name__}: {str(err)[:300]}"}
        rows["paths"][name] = row
        print(f"{name:24s} {row}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
