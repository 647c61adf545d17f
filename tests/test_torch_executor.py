"""The torch executor follows nvFuser's semantics; it is every test's reference."""

import pytest
import torch
from helpers import check

import eqsat
from eqsat import DataType, FusionError
from eqsat.reference.torch_executor import TorchOps


def run(fn, *inputs, **kw):
    return eqsat.run_fusion(eqsat.from_function(fn), list(inputs), strict=True, **kw)


def test_double_scalar_does_not_lift_a_float_tensor_but_lifts_an_int_one_to_double():
    # as nvFuser 0.2.35 does it (probed on an H200): int32 * Double scalar -> float64
    def f(fd):
        a = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        i = fd.define_tensor(shape=[-1], dtype=DataType.Int)
        s = fd.define_scalar(2, dtype=DataType.Double)
        fd.add_output(fd.ops.mul(a, s))
        fd.add_output(fd.ops.mul(i, s))

    a, i = torch.ones(3), torch.arange(3)
    fa, fi = run(f, a, i)
    assert fa.dtype == torch.float32 and fi.dtype == torch.float64
    assert fi.tolist() == [0.0, 2.0, 4.0]


def test_integer_div_truncates():
    def f(fd):
        a = fd.define_tensor(shape=[-1], dtype=DataType.Int)
        fd.add_output(fd.ops.div(a, fd.define_scalar(2, dtype=DataType.Int)))

    (out,) = run(f, torch.tensor([-3, 3, 5]))
    assert out.tolist() == [-1, 1, 2] and out.dtype == torch.int64


def test_half_sum_accumulates_in_fp32_and_returns_the_input_dtype():
    def f(fd):
        a = fd.define_tensor(shape=[-1], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.sum(a, dims=[0]))

    x = torch.full((4096,), 1.0, dtype=torch.bfloat16) + torch.randn(4096).to(torch.bfloat16) * 0.01
    (out,) = run(f, x)
    assert out.dtype == torch.bfloat16
    assert out.item() == pytest.approx(x.float().sum().to(torch.bfloat16).item())


def test_integer_sum_gives_int64():
    def f(fd):
        a = fd.define_tensor(shape=[-1], dtype=DataType.Bool)
        fd.add_output(fd.ops.sum(a, dims=[0]))

    (out,) = run(f, torch.tensor([True, True, False]))
    assert out.dtype == torch.int64 and out.item() == 2


def test_var_mean_and_welford():
    def f(fd):
        a = fd.define_tensor(shape=[-1, -1])
        var, mean = fd.ops.var_mean(a, dims=[1], correction=1)
        avg, var_sum, n = fd.ops.welford(a, [1])
        for t in (var, mean, avg, var_sum, n):
            fd.add_output(t)

    check(
        f,
        [torch.randn(5, 7)],
        lambda x: [x.var(1), x.mean(1), x.mean(1), x.var(1, unbiased=False) * 7, torch.full((5,), 7)],
    )


def test_broadcast_in_dim_expands_and_max_over_empty_dims_is_identity():
    def f(fd):
        a = fd.define_tensor(shape=[-1])
        b = fd.ops.broadcast_in_dim(a, shape=[3, fd.ops.size(a, 0)], broadcast_dims=[1])
        fd.add_output(b)
        fd.add_output(fd.ops.max(b, dims=[0]))

    x = torch.randn(4)
    b, m = run(f, x)
    assert b.shape == (3, 4) and b.stride() == (0, 1)
    torch.testing.assert_close(m, x)


def test_aliased_output_is_written_into_its_input_and_not_returned():
    def f(fd):
        a = fd.define_tensor(shape=[-1])
        acc = fd.define_tensor(shape=[], contiguity=[])
        fd.add_output(fd.ops.sum(a, dims=[0]), acc)
        fd.add_output(fd.ops.neg(a))

    x, acc = torch.randn(6), torch.zeros(())
    outs = run(f, x, acc)
    assert len(outs) == 1
    assert acc.item() == pytest.approx(x.sum().item(), rel=1e-6)


def test_output_stride_order():
    def f(fd):
        a = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.neg(a), stride_order=[0, 1])

    (out,) = run(f, torch.randn(3, 4))
    assert out.stride() == (1, 3)


@pytest.mark.parametrize(
    "inputs, message",
    [
        ([torch.randn(3, 4)], "takes 2 inputs, got 1"),
        ([torch.randn(3), torch.randn(3, 4)], "rank 2 \\(got 1\\)"),
        ([torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4)], "dtype Float"),
    ],
)
def test_inputs_that_do_not_match_the_definition(inputs, message):
    def f(fd):
        a = fd.define_tensor(shape=[-1, -1])  # FIRST
        b = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.add(a, b))

    with pytest.raises(FusionError, match=message):
        run(f, *inputs)


def test_random_ops_follow_the_seed():
    def f(fd):
        s = fd.define_scalar(0.0, dtype=DataType.Double)
        e = fd.define_scalar(1.0, dtype=DataType.Double)
        fd.add_output(fd.ops.uniform(s, e, shape=[1000], dtype=DataType.Float))

    (a,), (b,), (c,) = run(f, seed=1), run(f, seed=1), run(f, seed=2)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert 0.0 <= a.min() and a.max() <= 1.0


def test_reduced_precision_arithmetic_comes_out_in_fp32():
    # nvFuser 0.2.35: add/neg/exp of bf16 give fp32; abs, where and max keep bf16
    def f(fd):
        a = fd.define_tensor(shape=[-1], dtype=DataType.BFloat16)
        for t in (
            fd.ops.add(a, a),
            fd.ops.neg(a),
            fd.ops.exp(a),
            fd.ops.abs(a),
            fd.ops.where(fd.ops.gt(a, a), a, a),
            fd.ops.max(a, dims=[0]),
        ):
            fd.add_output(t)

    x = torch.randn(8).to(torch.bfloat16)
    outs = run(f, x)
    assert [o.dtype for o in outs] == [torch.float32] * 3 + [torch.bfloat16] * 3
    torch.testing.assert_close(outs[0], x.float() * 2)


@pytest.mark.parametrize("half", [DataType.BFloat16, DataType.Half])
def test_a_half_tensor_is_compared_with_a_float_scalar_in_fp32(half):
    # nvFuser casts both operands of a comparison to Float (the scalar is not rounded to the
    # tensor's dtype, as torch rounds it): bf16 0.8984375 < 0.9 holds there (seen on the H200,
    # a dropout mask `lt(uniform_bf16, 0.9)`), where torch's `t < 0.9` rounds 0.9 to bf16 first
    def f(fd):
        u = fd.define_tensor(shape=[-1], dtype=half)
        fd.add_output(fd.ops.lt(u, 0.9))
        fd.add_output(fd.ops.ge(u, 0.9))
        fd.add_output(fd.ops.eq(u, 0.9))

    torch_half = {DataType.BFloat16: torch.bfloat16, DataType.Half: torch.float16}[half]
    below = torch.tensor(0.9).to(torch_half)  # the half value nearest 0.9
    x = torch.stack([below, torch.tensor(0.5, dtype=torch_half)])
    lt, ge, eq = run(f, x)
    want = x.float() < 0.9  # fp32 compare, by hand
    assert lt.tolist() == want.tolist() and ge.tolist() == (~want).tolist()
    assert eq.tolist() == [False, False]


def test_strict_finds_a_wrong_dtype_that_the_default_casts_away(monkeypatch):
    # an executor that forgot nvFuser's upcast: exp of bf16 computed (and returned) in bf16
    def f(fd):
        a = fd.define_tensor(shape=[-1], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.exp(a))

    fusion = eqsat.from_function(f)
    x = torch.randn(8).to(torch.bfloat16)
    monkeypatch.setattr(TorchOps, "_cat_unary", lambda self, name, arg: torch.exp(arg))
    (cast,) = eqsat.run_fusion(fusion, [x])
    assert cast.dtype == torch.float32  # repaired silently by default
    with pytest.raises(FusionError, match="dtype torch.bfloat16, the IR has Float") as info:
        eqsat.run_fusion(fusion, [x], strict=True)
    assert info.value.op == "fd.ops.exp"
    assert info.value.line == fusion.nodes[-1].line


def test_strict_finds_a_wrong_extent(monkeypatch):
    def f(fd):
        a = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.add(fd.ops.neg(a), a))

    fusion = eqsat.from_function(f)
    monkeypatch.setattr(TorchOps, "_cat_unary", lambda self, name, arg: arg[:, :1])
    with pytest.raises(FusionError, match="dim 1 has extent 1") as info:
        eqsat.run_fusion(fusion, [torch.randn(3, 4)], strict=True)
    assert info.value.op == "fd.ops.neg"


# -- the tests' own check (tests/helpers.py) --------------------------------------------------------


def _neg_and_exp(fd):
    a = fd.define_tensor(shape=[-1, -1])
    fd.add_output(fd.ops.neg(a))
    fd.add_output(fd.ops.exp(a))


def test_check_compares_with_torch_written_by_hand():
    check(_neg_and_exp, [torch.randn(4, 5)], lambda a: [-a, a.exp()])


@pytest.mark.parametrize(
    "reference, message",
    [
        (lambda a: [-a, a.exp(), a.abs()], "2 outputs, the reference has 3"),  # one output short
        (lambda a: [-a, a.exp().double()], "output 1 has dtype torch.float32, the reference torch.float64"),
        (lambda a: [-a, a.exp()[:, :1]], "output 1 has shape"),
        (lambda a: [-a, a.exp() * 1.01], "output 1: max |difference|"),
    ],
)
def test_check_fails_where_the_definition_differs_from_the_reference(reference, message):
    with pytest.raises(AssertionError, match=message):
        check(_neg_and_exp, [torch.randn(4, 5)], reference)
