# attacks the reader's integers (issue 36 item 6): (10**65536)**65536 passed the exponent guard and
# hung; must: refused at once at its line, exit 2
# expect-exit: 2
# expect-error: huge_power.py:line 14: '10 ** 65536': its result would be an integer
import torch
from nvfuser import FusionDefinition, DataType


def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, is_cpu=False)
    T1 = fd.ops.mul(T0, 2.0)
    fd.add_output(T1)

x = (10 ** 65536) ** 65536
inputs = [torch.randn(4)]
