"""eqsat's aligned-linear executor in a Thunder training step (marker ``gpu``: a CUDA GPU,
Thunder 0.2.6; skipped elsewhere with the reason).

A linear layer of 1,025 output features in bf16 (rows of 2,050 bytes: not 16-byte aligned),
under ``thunder.jit`` with ``eqsat.thunder.executors()``, against the same step of a float32
copy in eager PyTorch: the executor must claim the layer's forward and backward, and the loss
and every gradient (the input's, the weight's and the bias's) must match eager's."""

import copy

import pytest
import torch
from thunder_gpu import thunder_on_gpu

try:
    import eqsat.thunder as et
except ImportError as err:  # Thunder installed but unusable here: the reason
    pytest.skip(str(err), allow_module_level=True)

IN, OUT = 1024, 1025  # a weight of 1,049,600 elements: over aligned_linear.MIN_WEIGHT_ELEMENTS
LOSS_RTOL, GRAD_RTOL = 1e-2, 2e-2


class _Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(IN)
        self.head = torch.nn.Linear(IN, OUT)

    def forward(self, h):
        return self.head(self.norm(h)).float().logsumexp(-1).mean()


def _step(run, model, h):
    """One step of ``run`` (``model`` or Thunder's module of it, which shares its parameters)."""
    h = h.detach().clone().requires_grad_(True)
    loss = run(h)
    loss.backward()
    grads = {n: p.grad.double() for n, p in model.named_parameters()}
    return float(loss), grads | {"input": h.grad.double()}


@pytest.mark.gpu
def test_a_training_step_runs_an_unaligned_linear_padded_and_matches_eager():
    thunder = thunder_on_gpu()
    from eqsat.thunder.aligned_linear import CALLS

    torch.manual_seed(0)
    model = _Head().to("cuda", torch.bfloat16)
    h = torch.randn(4, 512, IN, device="cuda", dtype=torch.bfloat16)
    reference = copy.deepcopy(model).float()
    want_loss, want = _step(reference, reference, h.float())
    CALLS.clear()
    jitted = thunder.jit(model, executors=et.executors(attention=False))
    loss, got = _step(jitted, model, h)
    torch.cuda.synchronize()
    assert dict(CALLS) == {"forward": 1, "backward": 1}, dict(CALLS)
    assert abs(loss - want_loss) <= LOSS_RTOL * abs(want_loss), (loss, want_loss)
    for name, e in want.items():
        g = got[name]
        assert g.shape == e.shape, name
        assert float((g - e).norm()) <= GRAD_RTOL * float(e.norm()), name
