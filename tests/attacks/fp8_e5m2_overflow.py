# Attacks a cast to Float8_e5m2 that overflows: torch gives +-inf, nvFuser's cvt.rn.satfinite
# gives +-57344 (runtime/casts.cu). Must: the run gives +-57344 for 1e6 and +-inf, NaN for NaN.
import torch
from nvfuser import FusionDefinition, DataType


def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, is_cpu=False, stride_order=[0])
    T1 = fd.ops.cast(T0, dtype=DataType.Float8_e5m2)
    T2 = fd.ops.cast(T1, dtype=DataType.Float)
    fd.add_output(T2)


inputs = [
    torch.tensor([1e6, -1e6, 60000.0, float('inf'), float('-inf'), float('nan'), 1.5]),
]
