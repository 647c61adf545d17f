# Attacks integer remainder at INT64_MIN % -1, which traps an x86 idiv. Must: no signal; 0
# (runtime/helpers.cu remainder: a % b, then the divisor's sign); exit 0.
import torch
from nvfuser import FusionDefinition, DataType


def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int, is_cpu=False, stride_order=[0])
    T1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int, is_cpu=False, stride_order=[0])
    T2 = fd.ops.remainder(T0, T1)
    fd.add_output(T2)


inputs = [
    torch.tensor([-9223372036854775808, -7], dtype=torch.int64),
    torch.tensor([-1, 2], dtype=torch.int64),
]
