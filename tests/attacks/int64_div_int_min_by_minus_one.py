# Attacks the torch executor's integer division: Int64 INT64_MIN / -1 traps torch's CPU division
# (SIGFPE). Must: no signal; the result is nvFuser's, INT64_MIN (CUDA's `/` wraps); exit 0.
import torch
from nvfuser import FusionDefinition, DataType


def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int, is_cpu=False, stride_order=[0])
    T1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int, is_cpu=False, stride_order=[0])
    T2 = fd.ops.div(T0, T1)
    fd.add_output(T2)


inputs = [
    torch.tensor([-9223372036854775808, 9223372036854775807], dtype=torch.int64),
    torch.tensor([-1, -1], dtype=torch.int64),
]
