"""An optimized definition is symbolic: optimized at one shape, it is run at others, an empty
axis included. Rewrites and the analysis facts they read must hold at every extent, for every
dtype of their operands, and for every member of a class (issue 36, items 3, 4 and 5). Each
test runs the definition eqsat optimized on small inputs and compares it with hand-written
torch code."""

import math

import pytest
import torch

import eqsat
from eqsat import DataType

INT_MIN = -(2**31)


def _sizes(fd, x, w):
    return fd.ops.size(x, dim=0), fd.ops.size(x, dim=1), fd.ops.size(w, dim=1)


# -- item 3: max/min of an integer term plus a float constant, over an empty axis -------------


def _extremum_of(op: str, red: str, x_dtype: DataType):
    """red_k(op(x[i,k], y[i,j])): x of ``x_dtype``, y Float, constant along k."""

    def define(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=x_dtype)
        y = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        n, k, j = _sizes(fd, x, y)
        xb = fd.ops.broadcast_in_dim(x, shape=[n, k, j], broadcast_dims=[0, 1])
        yb = fd.ops.broadcast_in_dim(y, shape=[n, k, j], broadcast_dims=[0, 2])
        fd.add_output(getattr(fd.ops, red)(getattr(fd.ops, op)(xb, yb), dims=[1]))

    return define


def _extremum_reference(op: str, red: str, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if x.shape[1] == 0:  # nothing to reduce: the max is -inf, the min +inf (Float)
        return torch.full((x.shape[0], y.shape[1]), -math.inf if red == "max" else math.inf)
    z = getattr(torch, op)(x[:, :, None].float(), y[:, None, :])
    return z.amax(1) if red == "max" else z.amin(1)


TORCH = {
    DataType.Int32: torch.int32,
    DataType.Int: torch.int64,
    DataType.Bool: torch.bool,
    DataType.Float: torch.float32,
}
EXTREMA = [
    (op, red, dtype)
    for dtype in (DataType.Int32, DataType.Int, DataType.Bool)
    for op in ("add", "sub")
    for red in ("max", "min")
    if not (dtype is DataType.Bool and op == "sub")
]


@pytest.mark.parametrize("op, red, x_dtype", EXTREMA)
def test_a_max_or_min_of_an_integer_plus_a_float_constant_over_an_empty_axis(op, red, x_dtype):
    """max_k(x_int[i,k] + y_float[i,j]) over an empty k is max of nothing in Float, -inf; the
    rewrite to max_k(x)[i] + y[i,j] gave Int32's INT_MIN plus y, a finite number."""
    big = [
        torch.empty(1024, 1024, dtype=TORCH[x_dtype], device="meta"),
        torch.empty(1024, 256, device="meta"),
    ]
    opt = eqsat.optimize_fusion(_extremum_of(op, red, x_dtype), big, min_gain=0)
    y = torch.tensor([[1.5, -2.0]])
    for k in (0, 1, 3):
        x = (torch.arange(k) - 1).reshape(1, k).to(TORCH[x_dtype])
        got = eqsat.run_fusion(opt.fusion, [x, y], strict=True)[0]
        assert torch.equal(got, _extremum_reference(op, red, x, y)), (k, got)


def test_the_same_max_of_floats_is_still_rewritten():
    big = [torch.empty(1024, 1024, device="meta"), torch.empty(1024, 256, device="meta")]
    opt = eqsat.optimize_fusion(_extremum_of("add", "max", DataType.Float), big, min_gain=0, deadline_s=None)
    assert "max-of-sum-with-constant" in opt.report.rules
    x, y = torch.zeros(1, 0), torch.tensor([[1.5, -2.0]])
    assert torch.equal(
        eqsat.run_fusion(opt.fusion, [x, y], strict=True)[0], _extremum_reference("add", "max", x, y)
    )


# -- item 4: the sign of a max over an axis that may be empty ----------------------------------


def _max_times_max_of_relu(w_dtype: DataType, l_extent: int = -1):
    """max_k(x[i,k] * c[i,j]) with c = max_l(relu(w[i,j,l])), taken as >= 0 before."""

    def define(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        w = fd.define_tensor(shape=[-1, -1, l_extent], contiguity=[True] * 3, dtype=w_dtype)
        c = fd.ops.max(fd.ops.relu(w), dims=[2])
        n, k, j = _sizes(fd, x, w)
        xb = fd.ops.broadcast_in_dim(x, shape=[n, k, j], broadcast_dims=[0, 1])
        cb = fd.ops.broadcast_in_dim(c, shape=[n, k, j], broadcast_dims=[0, 2])
        fd.add_output(fd.ops.max(fd.ops.mul(xb, cb), dims=[1]))

    return define


@pytest.mark.parametrize("w_dtype", [DataType.Int32, DataType.Float])
def test_a_max_of_values_at_least_0_over_an_empty_axis_is_not_taken_as_at_least_0(w_dtype):
    """Over an empty l, max_l(relu(w)) is INT_MIN (Int32) or -inf: max-of-product-with-
    nonnegative-constant flipped the sign of every result (+2147483648 given, -2147483648
    optimized, every input finite)."""
    big = [
        torch.empty(1024, 1024, device="meta"),
        torch.empty(1024, 1024, 64, dtype=TORCH[w_dtype], device="meta"),
    ]
    opt = eqsat.optimize_fusion(_max_times_max_of_relu(w_dtype), big, min_gain=0)
    x = torch.tensor([[-1.0, 1.0]])
    for l in (0, 2):
        w = torch.tensor([3, -5][:l], dtype=TORCH[w_dtype]).reshape(1, 1, l)
        c = (
            w.relu().amax(2)
            if l
            else torch.full((1, 1), INT_MIN if w_dtype is DataType.Int32 else -math.inf, dtype=TORCH[w_dtype])
        )
        want = (x[:, :, None] * c[:, None, :]).amax(1)
        got = eqsat.run_fusion(opt.fusion, [x, w], strict=True)[0]
        assert torch.equal(got, want), (l, got, want)


def test_over_an_axis_of_static_extent_the_max_of_values_at_least_0_is_still_at_least_0():
    """Where the definition fixes the extent (64), the axis is never empty: the rewrite is made."""
    big = [torch.empty(1024, 1024, device="meta"), torch.empty(1024, 1024, 64, device="meta")]
    opt = eqsat.optimize_fusion(_max_times_max_of_relu(DataType.Float, 64), big, min_gain=0, deadline_s=None)
    assert "max-of-product-with-nonnegative-constant" in opt.report.rules
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(3, 4, generator=g), torch.randn(3, 2, 64, generator=g)
    want = (x[:, :, None] * w.relu().amax(2)[:, None, :]).amax(1)
    assert torch.allclose(eqsat.run_fusion(opt.fusion, [x, w], strict=True)[0], want)


# -- item 5: a fact derived from one member of a class must hold for every member --------------


def _max_times_rsqrt(second_output: bool):
    """max_k(x[i,k] * rsqrt(y[i,j])), and with ``second_output`` sum(y, dims=[]) too: a sum
    over no axis is y itself, -0.0 included."""

    def define(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        y = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        n, k, j = _sizes(fd, x, y)
        xb = fd.ops.broadcast_in_dim(x, shape=[n, k, j], broadcast_dims=[0, 1])
        rb = fd.ops.broadcast_in_dim(fd.ops.rsqrt(y), shape=[n, k, j], broadcast_dims=[0, 2])
        fd.add_output(fd.ops.max(fd.ops.mul(xb, rb), dims=[1]))
        if second_output:
            fd.add_output(fd.ops.sum(y, dims=[]))

    return define


@pytest.mark.parametrize("second_output", [False, True])
def test_a_sum_over_no_axis_does_not_make_its_operand_free_of_minus_zero(second_output):
    """rsqrt(-0.0) is -inf, so max_k(x * rsqrt(y)) is +inf for x = [-1, 1], y = -0.0. The
    output sum(y, dims=[]) made the analysis conclude y held no -0.0 ("a sum starts at
    +0.0"), rsqrt(y) >= 0, and the max came out -inf."""
    big = [torch.empty(1024, 1024, device="meta"), torch.empty(1024, 1024, device="meta")]
    opt = eqsat.optimize_fusion(_max_times_rsqrt(second_output), big, min_gain=0)
    x, y = torch.tensor([[-1.0, 1.0]]), torch.tensor([[-0.0, 4.0]])
    want = (x[:, :, None] * torch.rsqrt(y)[:, None, :]).amax(1)
    assert want.tolist() == [[math.inf, 0.5]]
    got = eqsat.run_fusion(opt.fusion, [x, y], strict=True)
    assert torch.equal(got[0], want)
    if second_output:
        assert torch.equal(got[1], y) and got[1].signbit().tolist() == [[True, False]]


def test_a_sum_along_an_axis_still_holds_no_minus_zero():
    """sum_k(y) starts at +0.0: rsqrt of it + 0 is >= 0, and |.| of it is dropped."""
    from eqsat.egraph.explore import explore

    def given(fd):
        y = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.abs(fd.ops.rsqrt(fd.ops.sum(y, dims=[1]))))

    def rewritten(fd):
        y = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.rsqrt(fd.ops.sum(y, dims=[1])))

    assert explore(given, contains=[rewritten]).contains == [True]
    y = torch.tensor([[-0.0, -0.0], [4.0, 0.0]])
    assert eqsat.run_fusion(eqsat.ingest(rewritten), [y], strict=True)[0].tolist() == [math.inf, 0.5]


def test_a_tiny_negative_constant_is_not_taken_for_one_without_minus_zero():
    """-1e-300 is not -0.0 as a Double, but as the Float it meets a Float tensor in it is: x +
    -1e-300 is -0.0 where x is, and rsqrt of it -inf."""
    from eqsat.egraph.explore import explore

    def of(c, outer_abs):
        def define(fd):
            x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
            r = fd.ops.rsqrt(fd.ops.add(x, fd.define_scalar(c, dtype=DataType.Double)))
            fd.add_output(fd.ops.abs(r) if outer_abs else r)

        return define

    x = torch.tensor([-0.0])
    assert eqsat.run_fusion(eqsat.ingest(of(-1e-300, False)), [x], strict=True)[0].tolist() == [-math.inf]
    assert explore(of(-1e-300, True), contains=[of(-1e-300, False)]).contains == [False]
    assert explore(of(2.0, True), contains=[of(2.0, False)]).contains == [True]


# -- the executor: nvFuser's variance divides by max(0, |R| - correction) -----------------------


def test_a_variance_divides_by_the_count_less_the_correction_clamped_at_zero():
    """nvFuser's var is sum((x - mean)^2) * (1 / max(0, |R| - c)) (csrc/ops/normalization.cpp),
    as torch's: over an empty axis NaN whatever c; where c >= |R| > 0, +inf (an H100 gave inf for
    the corpus's var_mean of 2 elements with correction 3)."""

    def define(c):
        def var(fd):
            x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
            fd.add_output(fd.ops.var(x, dims=[1], correction=c))

        return var

    empty = torch.zeros(2, 0)
    for c in (0, 1):
        assert eqsat.run_fusion(eqsat.ingest(define(c)), [empty], strict=True)[0].isnan().all()
    x = torch.tensor([[1.0, 3.0]])
    assert eqsat.run_fusion(eqsat.ingest(define(1)), [x], strict=True)[0].tolist() == [2.0]
    assert eqsat.run_fusion(eqsat.ingest(define(3)), [x], strict=True)[0].tolist() == [float("inf")]
