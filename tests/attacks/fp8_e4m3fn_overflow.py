# Attacks a cast to Float8_e4m3fn that overflows (e4m3fn has no infinity): nvFuser's
# cvt.rn.satfinite gives +-448 (runtime/casts.cu). Must: +-448 for 1e6 and +-inf, NaN for NaN.
import torch
from nvfuser import FusionDefinition, DataType


def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, is_cpu=False, stride_order=[0])
    T1 = fd.ops.cast(T0, dtype=DataType.Float8_e4m3fn)
    T2 = fd.ops.cast(T1, dtype=DataType.Float)
    fd.add_output(T2)


inputs = [
    torch.tensor([1e6, -1e6, 460.0, float('inf'), float('-inf'), float('nan'), 1.5]),
]
