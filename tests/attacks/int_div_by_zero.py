# Attacks integer division by zero, whose GPU result PTX leaves unspecified (torch's CPU raises).
# Must: no signal, no traceback; running it (show --run, check) is an error naming the line of
# fd.ops.div: `eqsat: ...`, exit 2.
import torch
from nvfuser import FusionDefinition, DataType


def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int32, is_cpu=False, stride_order=[0])
    T1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int32, is_cpu=False, stride_order=[0])
    T2 = fd.ops.div(T0, T1)
    fd.add_output(T2)


inputs = [
    torch.tensor([7, -7], dtype=torch.int32),
    torch.tensor([0, 0], dtype=torch.int32),
]
