"""FP8 and UInt64 end to end: FP8 current scaling (amax of the input, a scale from it, the input scaled and
cast to e4m3) is recorded, run, optimized and checked, against torch written by hand. torch
itself promotes no FP8 type; nvFuser treats them as reduced-precision floats (arithmetic in
Float)."""

import pytest
import torch
from helpers import check

import eqsat
from eqsat import DataType
from eqsat.cli import main

E4M3_MAX = 448.0


def current_scaling(fd):
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
    xf = fd.ops.cast(x, dtype=DataType.Float)
    amax = fd.ops.max(fd.ops.abs(xf), dims=[0, 1])
    scale = fd.ops.div(E4M3_MAX, amax)
    q = fd.ops.cast(fd.ops.mul(xf, scale), dtype=DataType.Float8_e4m3fn)
    fd.add_output(q)
    fd.add_output(scale)


def reference(x):
    xf = x.float()
    amax = xf.abs().amax()
    scale = torch.full_like(amax, E4M3_MAX) / amax  # (E4M3_MAX / amax is 448 * 1/amax)
    return [(xf * scale).to(torch.float8_e4m3fn), scale]


def test_fp8_current_scaling_runs_optimizes_and_agrees():
    x = torch.randn(64, 48).to(torch.bfloat16)
    fusion = eqsat.from_function(current_scaling)
    got = eqsat.run_fusion(fusion, [x], strict=True)
    want = reference(x)
    assert [g.dtype for g in got] == [torch.float8_e4m3fn, torch.float32]
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g.float(), w.float())
    opt = check(fusion, [x], reference)
    assert opt.report.after.time_us <= opt.report.before.time_us


@pytest.mark.parametrize("dtype", ["Float8_e4m3fn", "Float8_e5m2"])
def test_fp8_arithmetic_is_done_in_float_and_kept_where_nothing_promotes(dtype):
    def define(fd):
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=getattr(DataType, dtype))
        b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=getattr(DataType, dtype))
        fd.add_output(fd.ops.add(a, b))
        fd.add_output(fd.ops.where(fd.ops.gt(a, b), a, b))
        fd.add_output(fd.ops.mul(a, 2.0))

    tdtype = {"Float8_e4m3fn": torch.float8_e4m3fn, "Float8_e5m2": torch.float8_e5m2}[dtype]
    a, b = torch.randn(16).to(tdtype), torch.randn(16).to(tdtype)
    s, m, t = eqsat.run_fusion(eqsat.from_function(define), [a, b], strict=True)
    assert (s.dtype, m.dtype, t.dtype) == (torch.float32, tdtype, torch.float32)
    assert torch.equal(s, a.float() + b.float())
    assert torch.equal(m.float(), torch.maximum(a.float(), b.float()))
    assert torch.equal(t, a.float() * 2)


@pytest.mark.parametrize(
    "op, kept",
    [
        (lambda fd, a, b: fd.ops.abs(a), True),
        (lambda fd, a, b: fd.ops.neg(a), False),
        (lambda fd, a, b: fd.ops.exp(a), False),
        (lambda fd, a, b: fd.ops.clamp(a, -1.0, 1.0), True),
        (lambda fd, a, b: fd.ops.where(fd.ops.gt(a, b), a, b), True),
        (lambda fd, a, b: fd.ops.max(a, dims=[1]), True),
        (lambda fd, a, b: fd.ops.sum(a, dims=[0]), True),
        (lambda fd, a, b: fd.ops.sub(a, b), False),
        (lambda fd, a, b: fd.ops.lerp(a, b, 0.5), False),
    ],
    ids=["abs", "neg", "exp", "clamp", "where", "max", "sum", "sub", "lerp"],
)
def test_fp8_ops_give_the_dtype_they_give_half(op, kept):
    # nvFuser promotes FP8 as the reduced-precision float it is: an op keeps FP8 where it keeps
    # Half and computes in Float where Half arithmetic does. The executor computes every such op
    # in fp32 (torch has few FP8 kernels); strict, it must give the IR's dtype itself
    def define(fd):
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float8_e4m3fn)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float8_e4m3fn)
        fd.add_output(op(fd, a, b))

    a, b = (torch.randn(4, 6).to(torch.float8_e4m3fn) for _ in range(2))
    fusion = eqsat.from_function(define)
    assert fusion.types[fusion.outputs[0].value].dtype is (DataType.Float8_e4m3fn if kept else DataType.Float)
    (out,) = eqsat.run_fusion(fusion, [a, b], strict=True)
    assert out.dtype == (torch.float8_e4m3fn if kept else torch.float32)


def test_eqsat_check_takes_fp8(tmp_path, capsys):
    from eqsat.lowering import repro_source

    path = tmp_path / "fp8.py"
    path.write_text(
        repro_source(eqsat.from_function(current_scaling), [torch.randn(32, 16).to(torch.bfloat16)])
    )
    assert main(["check", str(path)]) == 0, capsys.readouterr()


def test_uint64_is_recorded_and_optimized_and_unmodelled_promotion_is_a_clean_error():
    def same(fd):
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.UInt64)
        fd.add_output(fd.ops.add(x, x))

    fusion = eqsat.from_function(same)
    assert fusion.types[fusion.outputs[0].value].dtype is DataType.UInt64
    eqsat.optimize_fusion(fusion, [torch.zeros(4).to(torch.uint64)])  # no traceback

    def mixed(fd):
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.UInt64)
        y = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        fd.add_output(fd.ops.add(x, y))

    with pytest.raises(eqsat.FusionError, match=r"line \d+: fd.ops.add: .*UInt64 with Int"):
        eqsat.from_function(mixed)
