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
