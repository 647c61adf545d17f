# Attacks integer pow with a negative exponent, which torch refuses for a Python exponent.
# Must: no traceback; nvFuser's value (runtime/helpers.cu pow<T>): 1 for 1, +-1 for -1, else 0.
import torch
from nvfuser import FusionDefinition, DataType


def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int32, is_cpu=False, stride_order=[0])
    S1 = fd.define_scalar(-1, dtype=DataType.Int)
    T2 = fd.ops.pow(T0, S1)
    fd.add_output(T2)


inputs = [
    torch.tensor([2, 1, -1, 0], dtype=torch.int32),
]
