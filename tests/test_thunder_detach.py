"""eqsat's detach executor in a Thunder training step (marker ``gpu``: CUDA, Thunder 0.2.6 and
nvFuser <= 0.2.35; skipped elsewhere with the reason).

A block with FP8 current scaling (a scale from the input's own amax, detached; a
straight-through cast, ``xs + (x8 - xs).detach()``), under ``thunder.jit``: with
``eqsat.thunder.executors()``'s detach executor, no ``detach`` or ``detach_vjp`` is left in the
traces, nvFuser makes fewer regions than under Thunder alone, and the loss and the gradients
match eager PyTorch's (the straight-through gradient: the cast is skipped, the scale is not
differentiated)."""

import copy

import pytest
import torch
from thunder_gpu import thunder_on_gpu
from torch import nn

try:
    import eqsat.thunder as et
except ImportError as err:  # Thunder installed but unusable here: the reason
    pytest.skip(str(err), allow_module_level=True)

FP8_MAX = 448.0
LOSS_RTOL, GRAD_RTOL = 2e-2, 5e-2


def _fp8_current(x):  # as users write it (bench/thunder.py's fp8_current, written again here)
    s = FP8_MAX / x.abs().amax().float().clamp(min=1e-12).detach()
    xs = x * s
    x8 = xs.to(torch.float8_e4m3fn).to(x.dtype)
    return (xs + (x8 - xs).detach()) / s


class _Block(nn.Module):
    def __init__(self, dim=256, hidden=512):
        super().__init__()
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, h):
        a = nn.functional.silu(self.up(_fp8_current(h)))
        return (h + self.down(_fp8_current(a))).float().pow(2).mean()


def _step(run, model, h):
    for p in model.parameters():
        p.grad = None
    loss = run(h)
    loss.backward()
    return float(loss), {n: p.grad.double() for n, p in model.named_parameters()}


def _names(trace) -> list[str]:
    return [b.sym.name for b in trace.bound_symbols]


@pytest.mark.gpu
def test_detach_runs_inside_nvfuser_regions_and_stops_the_gradient():
    thunder = thunder_on_gpu(nvfuser=True)
    torch.manual_seed(0)
    model = _Block().to("cuda", torch.bfloat16)
    h = torch.randn(4, 128, 256, device="cuda", dtype=torch.bfloat16)
    want_loss, want = _step(model, model, h)  # eager, in bf16 as the step runs

    regions = {}
    for name, executors in (
        ("thunder", thunder.get_default_executors()),
        ("eqsat", et.executors(attention=False, linear=False)),
    ):
        copied = copy.deepcopy(model)
        jitted = thunder.jit(copied, executors=executors)
        loss, got = _step(jitted, copied, h)
        forward, backward = thunder.last_traces(jitted)[-1], thunder.last_backward_traces(jitted)[-1]
        names = _names(forward) + _names(backward)
        regions[name] = sum(n.startswith("nvFusion") for n in names)
        if name == "eqsat":
            assert [n for n in names if "detach" in n] == [], names
            assert abs(loss - want_loss) <= LOSS_RTOL * abs(want_loss), (loss, want_loss)
            for n, e in want.items():
                assert float((got[n] - e).norm()) <= GRAD_RTOL * float(e.norm()), n
    assert regions["eqsat"] < regions["thunder"], regions
