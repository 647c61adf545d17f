"""Small Llama-, GPT-2- and BERT-like models in plain torch, for the Thunder tests
(tests/test_thunder.py; bench/thunder.py takes its RMSNorm): the same structure as their transformers
counterparts (norms, attention through scaled_dot_product_attention, rotary embeddings, grouped key/value
heads, SwiGLU and GELU MLPs, tied embeddings, a masked-LM head) in ops Lightning Thunder 0.2.6 traces,
whatever version of transformers is installed. Each model's ``forward(ids)`` returns its
training loss."""

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    """Multi-head attention through scaled_dot_product_attention: causal or not, with rotary
    position embeddings and grouped key/value heads (Llama) where asked."""

    def __init__(self, dim, heads, kv_heads=None, causal=True, rope=False, bias=False):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads or heads, dim // heads
        self.causal, self.rope = causal, rope
        self.q = nn.Linear(dim, dim, bias=bias)
        self.kv = nn.Linear(dim, 2 * self.kv_heads * self.head_dim, bias=bias)
        self.out = nn.Linear(dim, dim, bias=bias)

    def forward(self, x):
        b, t, d = x.shape
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).view(b, t, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if self.rope:
            q, k = rotary(q), rotary(k)
        if self.kv_heads != self.heads:
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


def rotary(x, base=10000.0):
    """Rotary position embedding over the last dim of (batch, heads, seq, head_dim)."""
    t, half = x.shape[-2], x.shape[-1] // 2
    freq = base ** (-torch.arange(0, half, device=x.device, dtype=torch.float32) / half)
    angle = torch.arange(t, device=x.device, dtype=torch.float32)[:, None] * freq[None, :]
    cos, sin = torch.cat([angle.cos()] * 2, -1).to(x.dtype), torch.cat([angle.sin()] * 2, -1).to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


class LlamaLike(nn.Module):
    """Pre-norm decoder: RMSNorm, rotary attention with grouped key/value heads, SwiGLU MLP."""

    def __init__(self, vocab, dim=256, layers=2, heads=4, kv_heads=2, hidden=512):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(
            nn.ModuleDict(
                dict(
                    norm1=RMSNorm(dim),
                    attn=Attention(dim, heads, kv_heads, causal=True, rope=True),
                    norm2=RMSNorm(dim),
                    gate=nn.Linear(dim, hidden, bias=False),
                    up=nn.Linear(dim, hidden, bias=False),
                    down=nn.Linear(hidden, dim, bias=False),
                )
            )
            for _ in range(layers)
        )
        self.norm, self.head = RMSNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for blk in self.blocks:
            x = x + blk["attn"](blk["norm1"](x))
            h = blk["norm2"](x)
            x = x + blk["down"](F.silu(blk["gate"](h)) * blk["up"](h))
        logits = self.head(self.norm(x)).float()
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


class GPT2Like(nn.Module):
    """Pre-norm decoder: learned positions, LayerNorm, causal attention with biases, tanh-GELU
    MLP, the output projection tied to the embedding."""

    def __init__(self, vocab, seq, dim=256, layers=2, heads=4):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(
            nn.ModuleDict(
                dict(
                    ln1=nn.LayerNorm(dim),
                    attn=Attention(dim, heads, causal=True, bias=True),
                    ln2=nn.LayerNorm(dim),
                    fc=nn.Linear(dim, 4 * dim),
                    proj=nn.Linear(4 * dim, dim),
                )
            )
            for _ in range(layers)
        )
        self.ln_f = nn.LayerNorm(dim)
        nn.init.normal_(self.wte.weight, std=0.02)
        nn.init.normal_(self.wpe.weight, std=0.02)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
        for blk in self.blocks:
            x = x + blk["attn"](blk["ln1"](x))
            x = x + blk["proj"](F.gelu(blk["fc"](blk["ln2"](x)), approximate="tanh"))
        logits = F.linear(self.ln_f(x), self.wte.weight).float()
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


class BertLike(nn.Module):
    """Post-norm encoder: word, position and token-type embeddings, bidirectional attention,
    GELU MLP, and a masked-LM head (dense, GELU, LayerNorm, decoder) over every position."""

    def __init__(self, vocab, seq, dim=256, layers=2, heads=4, hidden=512):
        super().__init__()
        self.word, self.pos = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
        self.token_type = nn.Embedding(2, dim)
        self.ln = nn.LayerNorm(dim, eps=1e-12)
        self.blocks = nn.ModuleList(
            nn.ModuleDict(
                dict(
                    attn=Attention(dim, heads, causal=False, bias=True),
                    ln1=nn.LayerNorm(dim, eps=1e-12),
                    fc=nn.Linear(dim, hidden),
                    proj=nn.Linear(hidden, dim),
                    ln2=nn.LayerNorm(dim, eps=1e-12),
                )
            )
            for _ in range(layers)
        )
        self.dense, self.head_ln = nn.Linear(dim, dim), nn.LayerNorm(dim, eps=1e-12)
        self.decoder = nn.Linear(dim, vocab)

    def forward(self, ids):
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.ln(self.word(ids) + self.pos(positions) + self.token_type(torch.zeros_like(ids)))
        for blk in self.blocks:
            x = blk["ln1"](x + blk["attn"](x))
            x = blk["ln2"](x + blk["proj"](F.gelu(blk["fc"](x))))
        logits = self.decoder(self.head_ln(F.gelu(self.dense(x)))).float()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids.reshape(-1))
