# attacks the reader's work (issue 36 item 6): .tolist() of a 10**8-element tensor makes 10**8 Python
# floats (GBs); must: refused at once at its line, exit 2
# expect-exit: 2
# expect-error: tolist_tensor.py:line 14: 
import torch
from nvfuser import FusionDefinition, DataType


def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, is_cpu=False)
    T1 = fd.ops.mul(T0, 2.0)
    fd.add_output(T1)

inputs = [torch.randn(4), torch.zeros(10 ** 8).tolist()]
