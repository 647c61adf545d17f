"""A sum over an axis its operand does not vary along (an expanded broadcast) is the operand
times that axis's extent: sum_k(y[i] broadcast along k) = y[i] * |k|. eqsat's terms drop the
broadcast, so where the optimized form keeps such a sum, the definition lowered back writes it
as a multiply by the extent (issue 37 item 7; only one corpus file outside the repository
exercised it). Each definition here also computes sum_k(x[i,k] * b[i,j]), which eqsat
rewrites as sum_k(x) * b, so the fusion is lowered anew from its terms. Each test optimizes
it, runs the optimized fusion with eqsat's executor and compares every output with torch
written by hand: y * |k| (an Int32 sum is Int64), never eqsat's run of the input."""

import pytest
import torch

import eqsat
from eqsat import DataType

TORCH = {DataType.Float: torch.float32, DataType.BFloat16: torch.bfloat16, DataType.Int32: torch.int32}


def _broadcast_sum(y_dtype: DataType, static: tuple[int, int, int] | None, inside: bool):
    """Outputs sum_k(x[i,k] * b[i,j]) and sum_k(y[i] broadcast along k) (``inside``: the
    latter, cast to Float, times sum_k(x)); extents ``static`` (n, k, j), else symbolic."""
    n_, k_, j_ = static or (-1, -1, -1)

    def define(fd):
        x = fd.define_tensor(shape=[n_, k_], contiguity=[True, True], dtype=DataType.Float)
        b = fd.define_tensor(shape=[n_, j_], contiguity=[True, True], dtype=DataType.Float)
        y = fd.define_tensor(shape=[n_], contiguity=[True], dtype=y_dtype)
        n, k, j = (
            (fd.ops.size(x, dim=0), fd.ops.size(x, dim=1), fd.ops.size(b, dim=1))
            if static is None
            else static
        )
        xb = fd.ops.broadcast_in_dim(x, shape=[n, k, j], broadcast_dims=[0, 1])
        bb = fd.ops.broadcast_in_dim(b, shape=[n, k, j], broadcast_dims=[0, 2])
        fd.add_output(fd.ops.sum(fd.ops.mul(xb, bb), dims=[1]))
        s = fd.ops.sum(fd.ops.broadcast_in_dim(y, shape=[n, k], broadcast_dims=[0]), dims=[1])
        if inside:
            s = fd.ops.mul(fd.ops.cast(s, dtype=DataType.Float), fd.ops.sum(x, dims=[1]))
        fd.add_output(s)

    return define


def _reference(x, b, y, inside: bool):
    """What the definition computes, by hand: y times the extent of k (Int32 summed to Int64)."""
    k = x.shape[1]
    first = x.double().sum(1, keepdim=True) * b.double()
    if y.dtype == torch.int32:
        second = y.long() * k
    else:
        second = (y.double() * k).to(y.dtype)
    if inside:
        second = second.double() * x.double().sum(1)
    return [first.float(), second.float() if inside else second]


def _optimized(define, meta_shapes, y_dtype):
    """The definition optimized at ``meta_shapes`` (the cost model's extents; a flat 5% margin,
    so that what is tested is the lowering, not the profile's error table)."""
    meta = [
        torch.empty(s, device="meta", dtype=TORCH[y_dtype] if i == 2 else torch.float32)
        for i, s in enumerate(meta_shapes)
    ]
    opt = eqsat.optimize_fusion(define, meta, min_gain=0.05, deadline_s=None)
    assert opt.report.changed and "sum-of-product-factor-right" in opt.report.rules, opt.report
    return opt


def _inputs(n, k, j, y_dtype):
    """x [n, k] of whole numbers, b [n, j], y [n] of ``y_dtype``: seeded draws."""
    g = torch.Generator().manual_seed(k)
    y = (
        torch.randint(-50, 50, (n,), generator=g).to(TORCH[y_dtype])
        if y_dtype is DataType.Int32
        else torch.randn(n, generator=g).to(TORCH[y_dtype])
    )
    x = torch.randint(-8, 8, (n, k), generator=g).float()  # whole numbers: sums of x are exact
    return [x, torch.randn(n, j, generator=g), y]


def _assert_matches(got, want, bf16=False):
    """Each output of the reference's dtype and shape; integers equal, floats close (bf16
    rounding where ``bf16``: a bf16 sum is rounded to bf16 before the cast)."""
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == w.dtype and g.shape == w.shape, (i, g.dtype, w.dtype, g.shape, w.shape)
        rtol, atol = (1e-2 if bf16 else 1e-5, 1e-4) if w.dtype.is_floating_point else (0, 0)
        torch.testing.assert_close(
            g.double(), w.double(), rtol=rtol, atol=atol, msg=lambda m: f"output {i}: {m}"
        )


@pytest.mark.parametrize(
    "y_dtype, inside", [(DataType.Int32, False), (DataType.BFloat16, True), (DataType.Float, True)]
)
def test_a_sum_over_an_expanded_broadcast_is_the_operand_times_a_symbolic_extent(y_dtype, inside):
    """Symbolic extents: optimized at 512 x 512, run at k = 5 and k = 0 (an empty axis: the
    sum is 0), each against y * k by hand; an Int32 y sums to Int64, bf16 and Float y inside
    a larger expression (cast to Float, times sum_k(x))."""
    define = _broadcast_sum(y_dtype, None, inside)
    opt = _optimized(define, [(512, 512), (512, 512), (512,)], y_dtype)
    for n, k, j in ((6, 5, 4), (3, 0, 2)):
        inputs = _inputs(n, k, j, y_dtype)
        _assert_matches(
            eqsat.run_fusion(opt.fusion, inputs, strict=True),
            _reference(*inputs, inside),
            bf16=y_dtype is DataType.BFloat16,
        )


@pytest.mark.parametrize("y_dtype, inside", [(DataType.Int32, False), (DataType.Float, True)])
def test_a_sum_over_an_expanded_broadcast_is_the_operand_times_a_static_extent(y_dtype, inside):
    """Static extents (as Thunder writes them: the extent a number in the definition, not a
    size op): n = k = j = 512, against y * 512 by hand."""
    define = _broadcast_sum(y_dtype, (512, 512, 512), inside)
    opt = _optimized(define, [(512, 512), (512, 512), (512,)], y_dtype)
    inputs = _inputs(512, 512, 512, y_dtype)
    _assert_matches(eqsat.run_fusion(opt.fusion, inputs, strict=True), _reference(*inputs, inside))


def test_a_sum_over_a_broadcast_axis_and_an_axis_of_its_own():
    """sum over (k, j) of y[i,k] broadcast along j: the sum over k times |j| (the operand
    varies along one reduced axis and not the other), Int32 summed to Int64."""

    def define(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        y = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int32)
        n, k, j = fd.ops.size(x, dim=0), fd.ops.size(x, dim=1), fd.ops.size(b, dim=1)
        xb = fd.ops.broadcast_in_dim(x, shape=[n, k, j], broadcast_dims=[0, 1])
        bb = fd.ops.broadcast_in_dim(b, shape=[n, k, j], broadcast_dims=[0, 2])
        fd.add_output(fd.ops.sum(fd.ops.mul(xb, bb), dims=[1]))
        yb = fd.ops.broadcast_in_dim(y, shape=[n, k, j], broadcast_dims=[0, 1])
        fd.add_output(fd.ops.sum(yb, dims=[1, 2]))

    opt = _optimized(define, [(512, 512), (512, 512), (512, 512)], DataType.Int32)
    x, b = torch.randint(-8, 8, (6, 5)).float(), torch.randn(6, 4)
    y = torch.randint(-50, 50, (6, 5), dtype=torch.int32)
    want = [(x.double().sum(1, keepdim=True) * b.double()).float(), y.long().sum(1) * 4]
    _assert_matches(eqsat.run_fusion(opt.fusion, [x, b, y], strict=True), want)
