# attacks the reader's integers (issue 36 item 6): squaring 10**1000 over and over hung; must: refused
# at the first square past 4096 bits, exit 2
# expect-exit: 2
# expect-error: repeated_squaring.py:line 15: 'x * x': its result would be an integer
import torch
from nvfuser import FusionDefinition, DataType


def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, is_cpu=False)
    T1 = fd.ops.mul(T0, 2.0)
    fd.add_output(T1)

x = 10 ** 1000
x = x * x
x = x * x
x = x * x
x = x * x
x = x * x
x = x * x
x = x * x
x = x * x
x = x * x
x = x * x
x = x * x
x = x * x
x = x * x
x = x * x
x = x * x
x = x * x
x = x * x
x = x * x
x = x * x
x = x * x
x = x * x
x = x * x
x = x * x
x = x * x
inputs = [torch.randn(4)]
