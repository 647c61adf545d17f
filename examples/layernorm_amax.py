# LayerNorm of (x + bias) + residual, and the amax of its absolute value for FP8 scaling, in
# nvFuser's repro format. nvFuser runs the full amax in a kernel of its own, which reads the
# normalized tensor again; eqsat splits it so that its first stage fuses into the LayerNorm.
#   eqsat optimize examples/layernorm_amax.py
import torch
from nvfuser import FusionDefinition, DataType


def nvfuser_fusion_id0(fd: FusionDefinition) -> None:
    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    T1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False)
    T2 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    T3 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False)
    T4 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False)
    V5 = fd.ops.shape(T0)
    T6 = fd.ops.cast(T0, dtype=DataType.Float)
    T7 = fd.ops.cast(T1, dtype=DataType.Float)
    T8 = fd.ops.broadcast_in_dim(T7, shape=V5, broadcast_dims=[1])
    T9 = fd.ops.add(T6, T8)
    T10 = fd.ops.cast(T2, dtype=DataType.Float)
    T11 = fd.ops.add(T9, T10)
    T12, T13 = fd.ops.var_mean(T11, dims=[1], correction=0)
    S14 = fd.define_scalar(1e-05, dtype=DataType.Double)
    T15 = fd.ops.add(T12, S14)
    T16 = fd.ops.rsqrt(T15)
    T17 = fd.ops.broadcast_in_dim(T13, shape=V5, broadcast_dims=[0])
    T18 = fd.ops.sub(T11, T17)
    T19 = fd.ops.broadcast_in_dim(T16, shape=V5, broadcast_dims=[0])
    T20 = fd.ops.mul(T18, T19)
    T21 = fd.ops.cast(T3, dtype=DataType.Float)
    T22 = fd.ops.broadcast_in_dim(T21, shape=V5, broadcast_dims=[1])
    T23 = fd.ops.mul(T20, T22)
    T24 = fd.ops.cast(T4, dtype=DataType.Float)
    T25 = fd.ops.broadcast_in_dim(T24, shape=V5, broadcast_dims=[1])
    T26 = fd.ops.add(T23, T25)
    T27 = fd.ops.abs(T26)
    T28 = fd.ops.max(T27, dims=[0, 1])
    T29 = fd.ops.cast(T26, dtype=DataType.BFloat16)
    fd.add_output(T29)
    fd.add_output(T28)


with FusionDefinition() as fd:
    nvfuser_fusion_id0(fd)

inputs = [
    torch.testing.make_tensor((16384, 4096), dtype=torch.bfloat16, device="cuda"),
    torch.testing.make_tensor((4096,), dtype=torch.bfloat16, device="cuda"),
    torch.testing.make_tensor((16384, 4096), dtype=torch.bfloat16, device="cuda"),
    torch.testing.make_tensor((4096,), dtype=torch.bfloat16, device="cuda"),
    torch.testing.make_tensor((4096,), dtype=torch.bfloat16, device="cuda"),
]
fd.execute(inputs)
