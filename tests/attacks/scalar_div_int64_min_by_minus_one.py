# Attacks define_scalar arithmetic INT64_MIN / -1: evaluated as 0-dim int64 tensors it traps
# torch's CPU division, and nvFuser's own host C++ division is undefined there. Must: no signal,
# no traceback; running it is an error at the line of fd.ops.div (`eqsat: ...`, exit 2).
import torch
from nvfuser import FusionDefinition, DataType


def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int, is_cpu=False, stride_order=[0])
    S1 = fd.define_scalar(-9223372036854775808, dtype=DataType.Int)
    S2 = fd.define_scalar(-1, dtype=DataType.Int)
    S3 = fd.ops.div(S1, S2)
    T4 = fd.ops.add(T0, S3)
    fd.add_output(T4)


inputs = [
    torch.tensor([0, 1], dtype=torch.int64),
]
