# Attacks abs of a complex tensor, which eqsat typed ComplexFloat. Must: the output is Float
# (csrc/ops/arith.cpp abs), the run agrees with the IR, `eqsat check` exits 0.
import torch
from nvfuser import FusionDefinition, DataType


def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.ComplexFloat, is_cpu=False)
    T1 = fd.ops.abs(T0)
    S2 = fd.define_scalar(2.00000, dtype=DataType.Double)
    T3 = fd.ops.mul(T1, S2)
    fd.add_output(T3)


inputs = [
    torch.tensor([3 + 4j, -1j, 0j], dtype=torch.complex64),
]
