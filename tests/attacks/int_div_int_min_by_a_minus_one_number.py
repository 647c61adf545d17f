# Attacks the torch executor's integer division by a Python number: INT_MIN / -1 with the -1 a
# constant traps torch's CPU division. Must: no signal; INT_MIN (the number does not lift Int32).
import torch
from nvfuser import FusionDefinition, DataType


def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int32, is_cpu=False, stride_order=[0])
    S1 = fd.define_scalar(-1, dtype=DataType.Int)
    T2 = fd.ops.div(T0, S1)
    fd.add_output(T2)


inputs = [
    torch.tensor([-2147483648, 6], dtype=torch.int32),
]
