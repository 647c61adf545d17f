"""What the GPU tests of eqsat's Thunder executors need, each missing piece a skip with its
reason (tests/test_thunder_attention.py, test_thunder_aligned_linear.py, test_thunder_detach.py)."""

import pytest
import torch


def thunder_on_gpu(*, capability: tuple[int, int] | None = None, nvfuser: bool = False):
    """Thunder, where it is installed and eqsat.thunder imported it, on a CUDA GPU (of at least
    ``capability``), with Thunder's nvFuser executor where ``nvfuser``; else a skip."""
    thunder = pytest.importorskip("thunder", reason="needs Lightning Thunder 0.2.6")
    import eqsat.thunder as et  # after the skip: the package imports Thunder where installed

    if not hasattr(et, "Optimize"):
        pytest.skip("eqsat.thunder did not import Thunder")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    if capability is not None and torch.cuda.get_device_capability() < capability:
        pytest.skip(f"needs a GPU of compute capability {capability[0]}.{capability[1]} or more")
    if nvfuser:
        from thunder.executors.nvfuserex import nvfuserex  # Thunder's: None without nvFuser

        if nvfuserex is None:
            pytest.skip("Thunder found no nvFuser (nvFuser <= 0.2.35 with CUDA)")
    return thunder


LOSS_RTOL, GRAD_RTOL, GRAD_FLOOR = 1e-2, 0.05, 0.01


def training_step(model, loss_fn) -> tuple[float, dict]:
    """One step's loss (``loss_fn(model)``, backward run) and its gradients by parameter name,
    in float64, for :func:`off_from_eager`."""
    loss = loss_fn(model)
    loss.backward()
    return float(loss), {n: p.grad.double() for n, p in model.named_parameters() if p.grad is not None}


def off_from_eager(loss: float, grads: dict, want_loss: float, want_grads: dict) -> dict:
    """Where a step's loss and gradients (by parameter name) deviate from eager's: the loss by
    more than LOSS_RTOL, a gradient by more than GRAD_RTOL of its norm plus GRAD_FLOOR of the
    gradients' root mean square (scaled to its size); {name: why}, empty where all agree."""
    off = {}
    if not abs(loss - want_loss) <= LOSS_RTOL * abs(want_loss):
        off["loss"] = f"{loss} against eager's {want_loss}"
    total = sum(int(e.numel()) for e in want_grads.values())
    rms = (sum(float(e.pow(2).sum()) for e in want_grads.values()) / total) ** 0.5
    for name, e in want_grads.items():
        g = grads.get(name)
        allowed = GRAD_RTOL * float(e.norm()) + GRAD_FLOOR * rms * e.numel() ** 0.5
        if g is None or not float((g - e).norm()) <= allowed:
            off[name] = (
                "missing" if g is None else f"|difference| {float((g - e).norm()):.3g} > {allowed:.3g}"
            )
    return off
