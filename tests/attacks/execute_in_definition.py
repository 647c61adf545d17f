# attacks reading (issue 36 item 1): the definition calls fd.execute, which ran eqsat's executor while
# reading, and an Int32 -2**31 / -1 there killed `eqsat show` with SIGFPE; must: refused at line 14, exit 2
# expect-exit: 2
# expect-error: execute_in_definition.py:line 14: fd.execute: not a recording call
import torch
from nvfuser import FusionDefinition, DataType


def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.ops.full(shape=[4], fill_value=-2**31, dtype=DataType.Int32)
    T1 = fd.ops.full(shape=[4], fill_value=-1, dtype=DataType.Int32)
    T2 = fd.ops.div(T0, T1)
    fd.add_output(T2)
    fd.execute([])


inputs = []
