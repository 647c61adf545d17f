"""eqsat.thunder.aligned_linear on the CPU: the padded forward and backward against torch's own
linear and its gradients written by hand, and which calls are claimed. The Thunder executor
needs Thunder and a GPU (tests/test_thunder_attention.py runs it in a training step there)."""

import pytest
import torch

from eqsat.thunder import aligned_linear as al


def _operands(dtype, n=1001, k=64, bias=True, shape=(2, 5)):
    torch.manual_seed(0)
    x = torch.randn(*shape, k, dtype=dtype)
    w = torch.randn(n, k, dtype=dtype)
    b = torch.randn(n, dtype=dtype) if bias else None
    return x, w, b


@pytest.mark.parametrize("n, padded", [(50257, 50264), (1001, 1008), (1008, 1008), (1, 8)])
def test_output_features_are_padded_to_16_bytes(n, padded):
    assert al.padded_features(n) == padded
    assert al.padded_features(n, itemsize=4) == -(-n // 4) * 4


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
@pytest.mark.parametrize("bias", [True, False])
def test_the_padded_linear_and_its_gradients_equal_torch_linear(dtype, bias):
    x, w, b = _operands(dtype, bias=bias)
    out = al.forward_impl(x, w, b)
    want = x @ w.t() + (0 if b is None else b)  # by hand
    assert out.shape == (2, 5, 1001) and out.is_contiguous()  # eager's layout: Inductor asserts it
    tol = {} if dtype == torch.float64 else {"rtol": 2e-2, "atol": 2e-1}
    torch.testing.assert_close(out, want, **tol)

    g = torch.randn_like(want)
    grads = al.backward_impl(g, x, w, bias)
    g2 = g.reshape(-1, 1001)
    want_grads = [(g2 @ w).reshape(x.shape), g2.t() @ x.reshape(-1, 64)]  # by hand
    if bias:
        want_grads.append(g2.sum(0))
    assert len(grads) == len(want_grads)
    for got, expected in zip(grads, want_grads):
        assert got.shape == expected.shape and got.is_contiguous()
        torch.testing.assert_close(got, expected, **tol)


def test_the_padding_is_exact_zeros_with_infinities_and_nans_in_the_operands():
    """Zero rows add 0 * x to nothing the caller sees: an inf or a NaN in x reaches only the
    padded features, which are cut off."""
    x, w, b = _operands(torch.float64, n=9, k=8, shape=(3,))
    x[0, 1] = float("inf")
    x[1, 2] = float("nan")
    out = al.forward_impl(x, w, b)
    torch.testing.assert_close(out, torch.nn.functional.linear(x, w, b), equal_nan=True)


class _Proxy:  # what the checker sees of Thunder's proxies
    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype


@pytest.mark.parametrize(
    "x, w, bias, on_cuda, why",
    [
        ((4096, 1024), (50257, 1024), None, False, "CUDA"),
        ((4096, 1024), (50257, 1024), None, True, None),  # gpt2's head
        ((4096, 1024), (50304, 1024), None, True, "aligned already"),  # gpt_neox's
        ((4096, 1021), (50257, 1021), None, True, "input features"),
        ((4096, 64), (1001, 64), None, True, "fewer than"),
        ((4096, 1024), (50257, 1024), (50257,), True, None),
        ((4096, 512), (50257, 1024), None, True, "input features"),
        ((4096, 1024), (50257, 1024, 1), None, True, "2-D"),
    ],
)
def test_what_is_claimed(x, w, bias, on_cuda, why):
    bf16 = "torch.bfloat16"
    args = _Proxy(x, bf16), _Proxy(w, bf16), None if bias is None else _Proxy(bias, bf16)
    reason = al.aligned_linear_takes(*args, on_cuda=on_cuda)
    assert (reason is None) if why is None else (reason is not None and why in reason), reason


def test_float32_and_mixed_dtypes_are_not_claimed():
    for xd, wd in (("torch.float32", "torch.float32"), ("torch.bfloat16", "torch.float16")):
        reason = al.aligned_linear_takes(_Proxy((8, 1024), xd), _Proxy((50257, 1024), wd), None, on_cuda=True)
        assert reason is not None and "bf16" in reason
