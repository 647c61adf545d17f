"""Cross-entropy (issue 17, item 1): ``F.cross_entropy(logits.float(), target,
ignore_index=-100, reduction="mean", label_smoothing=eps)`` on bf16 logits [N, V], forward
and backward, each written the way Thunder decomposes it (the naive form), with a fused form
written by hand (the anchor), plain-torch references and an input maker.

The naive forward (Thunder 0.2.6's ``cross_entropy`` -> ``log_softmax`` + ``nll_loss``):

    xf      = cast(logits, Float)
    m       = max_V(xf);  m' = where(|m| == inf, 0, m)             logsumexp's max, sans inf
    lse     = log(sum_V(exp(xf - m'))) + m'
    logp    = xf - lse                                             the [N, V] Float log-softmax
    valid   = target != ignore_index
    picked  = take_along_axis(-logp, where(valid, target, 0))      masked before indexing
    nll     = sum(where(valid, picked, 0)) / sum(valid)
    smooth  = sum(where(valid, sum_V(-logp), 0)) / sum(valid)      (label smoothing only)
    loss    = (1 - eps) * nll + eps / V * smooth

The target is masked before the take: out of range (ignore_index = -100) nvFuser's
take_along_axis reads memory it was not given. Thunder itself (0.2.6, ``_nll_loss_helper``),
for an ignore_index outside [0, V), caps the target at V and pads the negated log-softmax
with a zero column instead, so that an ignored row picks that zero (``forward_thunder``):

    target' = where(valid, target, V)                              capped at V
    picked  = take_along_axis(pad(-logp, [0, 1, 0, 0], 0.0), target')   [N, V+1] padded
    nll     = sum(picked) / sum(valid)
    smooth  = sum(-logp) / sum(valid)                              ignored rows not masked
    loss    = (1 - eps) * nll + eps / V * smooth

with static extents, as Thunder defines its fusions' tensors. Its label-smoothing term sums
``-logp`` over every row, ignored ones too (``_cross_entropy_loss_label_smoothing`` masks
``smooth_loss`` but divides the unmasked ``sum(out)``), so with label smoothing and ignored
rows it is not F.cross_entropy's loss (``torch_forward_thunder`` is its value in plain torch).

The naive backward recomputes the log-softmax (Thunder's rematerialization) and applies
``log_softmax_backward`` to the one-hot gradient of the nll, written as
``where(iota == target, ...)`` (Thunder's nvFuser cross-entropy backward writes it so):

    c       = where(valid, g / sum(valid), 0)
    dlogp   = -(1 - eps) * c * onehot(target) - eps / V * c       [N, V]
    grad    = cast(dlogp - exp(logp) * sum_V(dlogp), BFloat16)

The anchor picks the target's logit from the bf16 logits (the log-softmax never exists;
nvFuser copies the upcast of the logits into each kernel of the logsumexp, so the Float
logits are never written either) and, in the backward, uses sum_V(dlogp) = -c.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from eqsat.ir.dtypes import DataType

IGNORE_INDEX = -100
DEMO_SHAPE = (8192, 128256)


def _inputs(fd, grad: bool):
    logits = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    target = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int, is_cpu=False)
    g = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float, is_cpu=False) if grad else None
    return logits, target, g


def _logsumexp(fd, xf):
    """Thunder's logsumexp over V, keepdim: [N, 1]."""
    m = fd.ops.max(xf, dims=[1], keepdim=False, dtype=DataType.Null)
    m = fd.ops.where(fd.ops.eq(fd.ops.abs(m), float("inf")), 0.0, m)
    mb = fd.ops.broadcast(m, is_broadcast_dim=[False, True])
    s = fd.ops.sum(fd.ops.exp(fd.ops.sub(xf, mb)), dims=[1], keepdim=False, dtype=DataType.Null)
    return fd.ops.broadcast(fd.ops.add(fd.ops.log(s), m), is_broadcast_dim=[False, True])


def _valid(fd, target):
    """(target != ignore_index as [N, 1], the count of valid rows as Float)."""
    yb = fd.ops.broadcast(target, is_broadcast_dim=[False, True])
    valid = fd.ops.ne(yb, IGNORE_INDEX)
    count = fd.ops.sum(valid, dims=[0, 1], keepdim=False, dtype=DataType.Null)
    count = fd.ops.cast(count, dtype=DataType.Float)
    return yb, valid, count


def _prelude(fd, grad: bool):
    """What each definition starts with: (logits, target, g or None, the logits in Float,
    their logsumexp [N, 1], the target [N, 1], whether it is valid, the count of valid rows)."""
    logits, target, g = _inputs(fd, grad=grad)
    xf = fd.ops.cast(logits, dtype=DataType.Float)
    yb, valid, count = _valid(fd, target)
    return logits, target, g, xf, _logsumexp(fd, xf), yb, valid, count


def forward(label_smoothing: float = 0.0):
    """The naive forward: (logits bf16 [N, V], target Int [N]) -> loss (Float, 0-dim)."""
    eps = float(label_smoothing)

    def cross_entropy_fwd(fd) -> None:
        logits, target, _ = _inputs(fd, grad=False)
        xf = fd.ops.cast(logits, dtype=DataType.Float)
        logp = fd.ops.sub(xf, _logsumexp(fd, xf))
        neg = fd.ops.neg(logp)
        yb, valid, count = _valid(fd, target)
        index = fd.ops.where(valid, yb, 0)
        picked = fd.ops.take_along_axis(neg, index, dim=1)
        picked = fd.ops.where(valid, picked, 0.0)
        nll = fd.ops.div(fd.ops.sum(picked, dims=[0, 1], keepdim=False, dtype=DataType.Null), count)
        if not eps:
            fd.add_output(nll)
            return
        row = fd.ops.broadcast(
            fd.ops.sum(neg, dims=[1], keepdim=False, dtype=DataType.Null), is_broadcast_dim=[False, True]
        )
        smooth = fd.ops.div(
            fd.ops.sum(fd.ops.where(valid, row, 0.0), dims=[0, 1], keepdim=False, dtype=DataType.Null), count
        )
        v = fd.ops.cast(fd.ops.size(logits, dim=1), dtype=DataType.Float)
        fd.add_output(fd.ops.add(fd.ops.mul(nll, 1.0 - eps), fd.ops.mul(smooth, fd.ops.div(eps, v))))

    cross_entropy_fwd.__name__ = f"cross_entropy_fwd{'_smoothed' if eps else ''}"
    return cross_entropy_fwd


def forward_thunder(label_smoothing: float = 0.0, shape: tuple[int, int] = DEMO_SHAPE):
    """The naive forward as Thunder 0.2.6 writes it for ignore_index = -100 (outside [0, V)):
    the target capped at V, the negated log-softmax padded with a zero column, then the take
    (the module's docstring). Static extents ``shape`` = (N, V), as Thunder's fusions have."""
    eps = float(label_smoothing)
    n, v = shape

    def cross_entropy_fwd_thunder(fd) -> None:
        logits = fd.define_tensor(
            shape=[n, v], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False
        )
        target = fd.define_tensor(shape=[n], contiguity=[True], dtype=DataType.Int, is_cpu=False)
        xf = fd.ops.cast(logits, dtype=DataType.Float)
        neg = fd.ops.neg(fd.ops.sub(xf, _logsumexp(fd, xf)))
        yb = fd.ops.broadcast_in_dim(target, shape=[n, 1], broadcast_dims=[0])
        valid = fd.ops.ne(yb, IGNORE_INDEX)
        capped = fd.ops.where(valid, yb, v)
        padded = fd.ops.pad(neg, [0, 1, 0, 0], 0.0)  # [N, V + 1]
        picked = fd.ops.take_along_axis(padded, capped, dim=1)
        count = fd.ops.cast(
            fd.ops.sum(valid, dims=[0, 1], keepdim=False, dtype=DataType.Null), dtype=DataType.Float
        )
        nll = fd.ops.div(fd.ops.sum(picked, dims=[0, 1], keepdim=False, dtype=DataType.Null), count)
        if not eps:
            fd.add_output(nll)
            return
        smooth = fd.ops.div(fd.ops.sum(neg, dims=[0, 1], keepdim=False, dtype=DataType.Null), count)
        fd.add_output(fd.ops.add(fd.ops.mul(nll, 1.0 - eps), fd.ops.mul(smooth, eps / v)))

    cross_entropy_fwd_thunder.__name__ = f"cross_entropy_fwd_thunder{'_smoothed' if eps else ''}"
    return cross_entropy_fwd_thunder


def backward(label_smoothing: float = 0.0):
    """The naive backward: (logits bf16 [N, V], target Int [N], g Float 0-dim) -> d loss /
    d logits (bf16 [N, V])."""
    eps = float(label_smoothing)

    def cross_entropy_bwd(fd) -> None:
        logits, target, g = _inputs(fd, grad=True)
        xf = fd.ops.cast(logits, dtype=DataType.Float)
        logp = fd.ops.sub(xf, _logsumexp(fd, xf))
        yb, valid, count = _valid(fd, target)
        c = fd.ops.where(valid, fd.ops.div(g, count), 0.0)  # [N, 1]
        iota = fd.ops.broadcast(
            fd.ops.iota(fd.ops.size(logits, dim=1), 0, 1, dtype=DataType.Int), is_broadcast_dim=[True, False]
        )
        onehot = fd.ops.where(fd.ops.eq(iota, yb), fd.ops.mul(c, -(1.0 - eps)), 0.0)
        dlogp = onehot
        if eps:
            v = fd.ops.cast(fd.ops.size(logits, dim=1), dtype=DataType.Float)
            dlogp = fd.ops.sub(onehot, fd.ops.mul(c, fd.ops.div(eps, v)))
        total = fd.ops.broadcast(
            fd.ops.sum(dlogp, dims=[1], keepdim=False, dtype=DataType.Null), is_broadcast_dim=[False, True]
        )
        grad = fd.ops.sub(dlogp, fd.ops.mul(fd.ops.exp(logp), total))
        fd.add_output(fd.ops.cast(grad, dtype=DataType.BFloat16))

    cross_entropy_bwd.__name__ = f"cross_entropy_bwd{'_smoothed' if eps else ''}"
    return cross_entropy_bwd


def forward_anchor(label_smoothing: float = 0.0):
    """The forward fused by hand: the target's logit picked from the bf16 logits; the row
    sums of the smoothing term as V * lse - sum_V(x)."""
    eps = float(label_smoothing)

    def cross_entropy_fwd_anchor(fd) -> None:
        logits, target, _, xf, lse, yb, valid, count = _prelude(fd, grad=False)
        picked = fd.ops.take_along_axis(logits, fd.ops.where(valid, yb, 0), dim=1)
        picked = fd.ops.cast(picked, dtype=DataType.Float)
        row = fd.ops.sub(lse, picked)  # -logp[target]
        if eps:
            v = fd.ops.cast(fd.ops.size(logits, dim=1), dtype=DataType.Float)
            sum_x = fd.ops.broadcast(
                fd.ops.sum(xf, dims=[1], keepdim=False, dtype=DataType.Null), is_broadcast_dim=[False, True]
            )
            smooth = fd.ops.sub(fd.ops.mul(lse, v), sum_x)  # sum_V(-logp)
            row = fd.ops.add(fd.ops.mul(row, 1.0 - eps), fd.ops.mul(smooth, fd.ops.div(eps, v)))
        total = fd.ops.sum(fd.ops.where(valid, row, 0.0), dims=[0, 1], keepdim=False, dtype=DataType.Null)
        fd.add_output(fd.ops.div(total, count))

    cross_entropy_fwd_anchor.__name__ = f"cross_entropy_fwd_anchor{'_smoothed' if eps else ''}"
    return cross_entropy_fwd_anchor


def backward_anchor(label_smoothing: float = 0.0):
    """The backward fused by hand: softmax * c - c * ((1 - eps) onehot + eps / V), with
    sum_V(dlogp) = -c known."""
    eps = float(label_smoothing)

    def cross_entropy_bwd_anchor(fd) -> None:
        logits, target, g, xf, lse, yb, valid, count = _prelude(fd, grad=True)
        c = fd.ops.where(valid, fd.ops.div(g, count), 0.0)
        iota = fd.ops.broadcast(
            fd.ops.iota(fd.ops.size(logits, dim=1), 0, 1, dtype=DataType.Int), is_broadcast_dim=[True, False]
        )
        grad = fd.ops.mul(fd.ops.exp(fd.ops.sub(xf, lse)), c)
        grad = fd.ops.sub(grad, fd.ops.where(fd.ops.eq(iota, yb), fd.ops.mul(c, 1.0 - eps), 0.0))
        if eps:
            v = fd.ops.cast(fd.ops.size(logits, dim=1), dtype=DataType.Float)
            grad = fd.ops.sub(grad, fd.ops.mul(c, fd.ops.div(eps, v)))
        fd.add_output(fd.ops.cast(grad, dtype=DataType.BFloat16))

    cross_entropy_bwd_anchor.__name__ = f"cross_entropy_bwd_anchor{'_smoothed' if eps else ''}"
    return cross_entropy_bwd_anchor


def torch_forward(label_smoothing: float = 0.0):
    """The loss in plain torch: F.cross_entropy of the logits as Float."""

    def reference(logits, target):
        return F.cross_entropy(
            logits.float(),
            target,
            ignore_index=IGNORE_INDEX,
            reduction="mean",
            label_smoothing=label_smoothing,
        )

    return reference


def torch_forward_thunder(label_smoothing: float = 0.0):
    """Thunder 0.2.6's loss in plain torch: F.cross_entropy's but for the label-smoothing
    term, which sums -log_softmax over ignored rows too (``forward_thunder``)."""

    def reference(logits, target):
        logp = torch.log_softmax(logits.float(), dim=1)
        valid = target != IGNORE_INDEX
        count = valid.sum()
        nll = -logp.gather(1, torch.where(valid, target, 0)[:, None])[:, 0].where(valid, 0.0).sum() / count
        smooth = -logp.sum() / count
        return (1 - label_smoothing) * nll + label_smoothing / logits.shape[1] * smooth

    return reference


def torch_backward(label_smoothing: float = 0.0):
    """d loss / d logits (bf16) in plain torch, by autograd through F.cross_entropy."""

    def reference(logits, target, g):
        x = logits.detach().requires_grad_(True)
        loss = F.cross_entropy(
            x.float(), target, ignore_index=IGNORE_INDEX, reduction="mean", label_smoothing=label_smoothing
        )
        (grad,) = torch.autograd.grad(loss, x, grad_outputs=g)
        return grad

    return reference


def torch_step(label_smoothing: float = 0.0):
    """Forward and backward in plain torch (what eager and torch.compile are timed on): the
    loss and d loss / d logits for an upstream gradient g."""

    def step(logits, target, g):
        x = logits.detach().requires_grad_(True)
        loss = F.cross_entropy(
            x.float(), target, ignore_index=IGNORE_INDEX, reduction="mean", label_smoothing=label_smoothing
        )
        loss.backward(g)
        return loss.detach(), x.grad

    return step


def make_inputs(
    n: int = 64, v: int = 96, device="cpu", ignored: float = 0.125, seed: int = 0
) -> list[torch.Tensor]:
    """bf16 logits [n, v] (standard normal, times 4), Int targets in [0, v) with a share
    ``ignored`` of them set to ignore_index, and the upstream gradient g = 1.0 (Float,
    0-dim; the forward takes the first two)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    logits = (torch.randn(n, v, generator=gen) * 4).to(torch.bfloat16)
    target = torch.randint(0, v, (n,), generator=gen, dtype=torch.int64)
    target[torch.rand(n, generator=gen) < ignored] = IGNORE_INDEX
    return [logits.to(device), target.to(device), torch.tensor(1.0, dtype=torch.float32, device=device)]
