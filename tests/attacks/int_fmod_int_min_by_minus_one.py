# Attacks integer fmod at INT_MIN % -1, which traps an x86 idiv. Must: no signal; 0 (nvFuser's
# fmod is CUDA's `%`, runtime/helpers.cu); exit 0.
import torch
from nvfuser import FusionDefinition, DataType


def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int32, is_cpu=False, stride_order=[0])
    T1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int32, is_cpu=False, stride_order=[0])
    T2 = fd.ops.fmod(T0, T1)
    fd.add_output(T2)


inputs = [
    torch.tensor([-2147483648, -7], dtype=torch.int32),
    torch.tensor([-1, 2], dtype=torch.int32),
]
