# Attacks shifts by the type's width or more, or by a negative amount (undefined in C++). Must: no
# signal; PTX's value (the amount, unsigned, clamped to the width): << gives 0, >> the sign; exit 0.
import torch
from nvfuser import FusionDefinition, DataType


def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int32, is_cpu=False, stride_order=[0])
    T1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int32, is_cpu=False, stride_order=[0])
    T2 = fd.ops.bitwise_left_shift(T0, T1)
    T3 = fd.ops.bitwise_right_shift(T0, T1)
    fd.add_output(T2)
    fd.add_output(T3)


inputs = [
    torch.tensor([1, -1, 5, -5], dtype=torch.int32),
    torch.tensor([32, 32, -1, 64], dtype=torch.int32),
]
