# attacks the reader's tensor work (issue 36 item 6): two small inputs broadcast to 4*10**10 bytes; must:
# refused at its line where the inputs are built on the CPU (show --run, check: exit 2), free on meta
# expect-error: broadcast_blowup.py:line 13: 'torch.ones(10 ** 5, 1) + torch.ones(1, 10 ** 5)': it would take
import torch
from nvfuser import FusionDefinition, DataType


def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    T1 = fd.ops.mul(T0, 2.0)
    fd.add_output(T1)

inputs = [torch.ones(10 ** 5, 1) + torch.ones(1, 10 ** 5)]
