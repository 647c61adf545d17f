# attacks the reader's integers (issue 36 item 6): round(1, -10**18) computes 10**(10**18) and hung;
# must: refused at once at its line, exit 2
# expect-exit: 2
# expect-error: round_ndigits.py:line 14: 'round(1, -10 ** 18)': round to
import torch
from nvfuser import FusionDefinition, DataType


def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, is_cpu=False)
    T1 = fd.ops.mul(T0, 2.0)
    fd.add_output(T1)

inputs = [torch.randn(4) + round(1, -10 ** 18)]
