"""The constructs nvfuser_direct's printer emits (what Thunder's fusions are made of), each
written in that print style and checked against torch code written by hand, not eqsat's executor.

The meanings are nvFuser's (python/python_direct/ops.cpp, csrc/ops/*.cpp at 0.2.35-0.2.36):
Python numbers as operands; integer scalar arithmetic used as pad widths; cat over inputs
already padded to the output (``manual_padding``); slices whose indices are used as given
(``manual_normalization``); expand with -1 and leading dims; index_select with an index of the
input's rank; an empty stride_order; welford; iota; random ops with seed and offset (Philox);
static extents.
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import eqsat
from eqsat.lowering import fusion_source

HEADER = "import torch\nfrom nvfuser_direct import FusionDefinition, DataType\n\n"


def read(body: str) -> eqsat.Fusion:
    """A definition in the direct print style (``body``: its indented lines)."""
    text = HEADER + "def nvfuser_fusion(fd : FusionDefinition) -> None :\n" + body
    return eqsat.from_source(text, "<direct>", inputs=False).fusion


def run(fusion, *inputs):
    return eqsat.run_fusion(fusion, list(inputs), strict=True)


def optimized_agrees(fusion, inputs, want):
    opt = eqsat.optimize_fusion(fusion, list(inputs))
    got = eqsat.run_fusion(opt.fusion, list(inputs), strict=True)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


def test_the_frontend_is_read_from_the_file():
    assert (
        read(
            "    tv0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, is_cpu=False)\n"
            "    fd.add_output(tv0)\n"
        ).frontend
        == "nvfuser_direct"
    )
    both = (
        "try:\n    from nvfuser import FusionDefinition, DataType\nexcept ImportError:\n"
        "    from nvfuser_direct import FusionDefinition, DataType\n\n"
        "def nvfuser_fusion(fd) -> None:\n    T0 = fd.define_tensor(shape=[-1], contiguity=[True])\n"
        "    fd.add_output(T0)\n"
    )
    assert eqsat.from_source(both, inputs=False).frontend is None
    classic = (
        "def nvfuser_fusion_id0(fd : FusionDefinition) -> None :\n"
        "    T0 = fd.define_tensor(shape=[-1], contiguity=[True])\n    fd.add_output(T0)\n"
    )
    assert eqsat.from_source(classic, inputs=False).frontend == "nvfuser"


def test_python_numbers_as_operands_and_scalar_arithmetic():
    f = read(
        "    tv0 = fd.define_tensor(shape=[4, 6], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)\n"
        "    tv1 = fd.ops.mul(tv0, 1.50000)\n"
        "    c2 = fd.ops.add(0, 3)\n"
        "    c3 = fd.ops.cast(c2, dtype=DataType.Double)\n"
        "    tv4 = fd.ops.sub(tv1, c3)\n"
        "    tv5 = fd.ops.cast(tv4, dtype=DataType.BFloat16)\n"
        "    fd.add_output(tv5)\n"
    )
    x = torch.randn(4, 6).to(torch.bfloat16)
    want = (x.float() * 1.5 - 3.0).to(torch.bfloat16)
    torch.testing.assert_close(run(f, x)[0], want, rtol=0, atol=0)
    # the classic frontend takes no numbers there: its source defines them first
    classic = fusion_source(f, "classic")
    assert "fd.define_scalar(1.5, dtype=DataType.Double)" in classic
    assert "fd.ops.mul(" in classic and "1.5)" not in classic
    torch.testing.assert_close(run(eqsat.ingest(classic), x)[0], want, rtol=0, atol=0)


def test_a_python_bool_operand_is_an_int():
    f = read(
        "    tv0 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.Int32, is_cpu=False)\n"
        "    tv1 = fd.ops.add(tv0, True)\n"
        "    fd.add_output(tv1)\n"
    )
    x = torch.tensor([1, 2, 3], dtype=torch.int32)
    out = run(f, x)[0]
    assert out.dtype == torch.int32 and out.tolist() == [2, 3, 4]


ROPE = (
    "    tv0 = fd.define_tensor(shape=[2, 3, 8], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False)\n"
    "    tv1 = fd.ops.slice(tv0, start_indices=[0, 0, 4], end_indices=[2, 3, 8], strides=[1, 1, 1], manual_normalization=True)\n"
    "    tv2 = fd.ops.cast(tv1, dtype=DataType.Float)\n"
    "    tv3 = fd.ops.neg(tv2)\n"
    "    tv4 = fd.ops.cast(tv3, dtype=DataType.BFloat16)\n"
    "    c5 = fd.define_scalar(0.00000, dtype=DataType.BFloat16)\n"
    "    tv6 = fd.ops.pad(tv4, pad_widths=[0, 4, 0, 0, 0, 0], value=c5)\n"
    "    tv7 = fd.ops.slice(tv0, start_indices=[0, 0, 0], end_indices=[2, 3, 4], strides=[1, 1, 1], manual_normalization=True)\n"
    "    c8 = fd.ops.add(0, 4)\n"
    "    c9 = fd.define_scalar(0.00000, dtype=DataType.BFloat16)\n"
    "    tv10 = fd.ops.pad(tv7, pad_widths=[c8, 0, 0, 0, 0, 0], value=c9)\n"
    "    tv11 = fd.ops.cat([tv6, tv10], dim=2, manual_padding=True)\n"
    "    fd.add_output(tv11)\n"
)


def test_cat_over_inputs_already_padded_is_rotate_half():
    f = read(ROPE)
    x = torch.randn(2, 3, 8).to(torch.bfloat16)
    want = torch.cat([-x[..., 4:], x[..., :4]], dim=-1)  # rotate_half of RoPE
    got = run(f, x)[0]
    assert got.shape == (2, 3, 8)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    optimized_agrees(f, [x], [want])
    # -0.0 stays -0.0 in bf16 (nvFuser ORs the padded halves' bits)
    x = torch.zeros(2, 3, 8, dtype=torch.bfloat16)
    assert torch.signbit(run(f, x)[0][..., :4]).all()


def test_manual_padding_needs_pads_and_one_dtype():
    base = (
        "    tv0 = fd.define_tensor(shape=[2, 4], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n"
        "    tv1 = fd.define_tensor(shape=[2, 4], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n"
    )
    with pytest.raises(eqsat.FusionError, match=r"line \d+.*fd.ops.cat.*made by fd.ops.pad"):
        read(base + "    tv2 = fd.ops.cat([tv0, tv1], dim=1, manual_padding=True)\n    fd.add_output(tv2)\n")
    with pytest.raises(eqsat.FusionError, match="same dtype"):
        read(
            base + "    tv2 = fd.ops.cast(tv1, dtype=DataType.Half)\n"
            "    tv3 = fd.ops.cat([tv0, tv2], dim=1)\n    fd.add_output(tv3)\n"
        )


def test_manual_normalization_takes_indices_as_they_are():
    f = read(
        "    tv0 = fd.define_tensor(shape=[5, 6], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n"
        "    tv1 = fd.ops.slice(tv0, start_indices=[1, 2], end_indices=[4, 6], strides=[1, 1], manual_normalization=True)\n"
        "    fd.add_output(tv1)\n"
    )
    x = torch.randn(5, 6)
    torch.testing.assert_close(run(f, x)[0], x[1:4, 2:6], rtol=0, atol=0)
    for start, end, why in (
        ("[-1, 0]", "[4, 6]", "must not be negative"),
        ("[0, 2]", "[4, 7]", "past the extent"),
        ("[3, 0]", "[2, 6]", "before start"),
    ):
        with pytest.raises(eqsat.FusionError, match=why):
            read(
                "    tv0 = fd.define_tensor(shape=[5, 6], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n"
                f"    tv1 = fd.ops.slice(tv0, start_indices={start}, end_indices={end}, strides=[1, 1], "
                "manual_normalization=True)\n    fd.add_output(tv1)\n"
            )
    with pytest.raises(eqsat.FusionError, match="steps of 1"):
        read(
            "    tv0 = fd.define_tensor(shape=[5], contiguity=[True], dtype=DataType.Float, is_cpu=False)\n"
            "    tv1 = fd.ops.slice(tv0, start_indices=[0], end_indices=[5], strides=[2])\n    fd.add_output(tv1)\n"
        )


def test_expand_with_minus_one_and_leading_dims():
    f = read(
        "    tv0 = fd.define_tensor(shape=[1, 5], contiguity=[None, True], dtype=DataType.Float, is_cpu=False)\n"
        "    tv1 = fd.ops.expand(tv0, shape=[2, 3, -1])\n"
        "    tv2 = fd.ops.expand(tv0, shape=[3, 5])\n"
        "    fd.add_output(tv1)\n    fd.add_output(tv2)\n"
    )
    x = torch.randn(1, 5)
    a, b = run(f, x)
    torch.testing.assert_close(a, x.reshape(1, 1, 5).repeat(2, 3, 1), rtol=0, atol=0)
    torch.testing.assert_close(b, x.repeat(3, 1), rtol=0, atol=0)


def test_index_select_with_an_index_of_the_inputs_rank_is_an_embedding():
    f = read(
        "    tv0 = fd.define_tensor(shape=[2, 3], contiguity=[True, True], dtype=DataType.Int, is_cpu=False)\n"
        "    tv1 = fd.define_tensor(shape=[10, 4], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)\n"
        "    tv2 = fd.ops.reshape(tv0, new_shape=[6])\n"
        "    tv3 = fd.ops.broadcast(tv2, is_broadcast_dim=[False, True])\n"
        "    tv4 = fd.ops.index_select(tv1, tv3, dim=0)\n"
        "    tv5 = fd.ops.reshape(tv4, new_shape=[2, 3, 4])\n"
        "    fd.add_output(tv5)\n"
    )
    ids = torch.tensor([[0, 9, 3], [3, 3, 1]])
    weight = torch.randn(10, 4).to(torch.bfloat16)
    want = torch.nn.functional.embedding(ids, weight)
    torch.testing.assert_close(run(f, ids, weight)[0], want, rtol=0, atol=0)
    optimized_agrees(f, [ids, weight], [want])
    with pytest.raises(eqsat.FusionError, match="index must be 1-D, 0-D, or of the input's rank"):
        read(
            "    tv0 = fd.define_tensor(shape=[2, 3], contiguity=[True, True], dtype=DataType.Int, is_cpu=False)\n"
            "    tv1 = fd.define_tensor(shape=[10, 4], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n"
            "    tv2 = fd.ops.index_select(tv1, tv0, dim=0)\n    fd.add_output(tv2)\n"
        )


def test_an_empty_stride_order_is_a_row_major_copy():
    f = read(
        "    tv0 = fd.define_tensor(shape=[3, 4], contiguity=[True, True], dtype=DataType.Float, is_cpu=False, stride_order=[0, 1])\n"
        "    tv1 = fd.ops.stride_order(tv0, stride_order=[])\n"
        "    fd.add_output(tv1)\n"
    )
    x = torch.randn(4, 3).t()
    out = run(f, x)[0]
    torch.testing.assert_close(out, x, rtol=0, atol=0)
    assert out.is_contiguous() and out.data_ptr() != x.data_ptr()
    classic = fusion_source(f, "classic")  # the classic frontend needs a full order
    assert (
        "fd.ops.set(" in classic
        and "stride_order(" not in classic.split("define_tensor")[-1].split("\n", 1)[1]
    )
    again = run(eqsat.ingest(classic), x)[0]
    torch.testing.assert_close(again, x, rtol=0, atol=0)
    assert again.is_contiguous()


def test_welford_gives_mean_sum_of_squared_deviations_and_count():
    f = read(
        "    tv0 = fd.define_tensor(shape=[3, 7], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n"
        "    tv1, tv2, tv3 = fd.ops.welford(tv0, dims=[1])\n"
        "    fd.add_output(tv1)\n    fd.add_output(tv2)\n    fd.add_output(tv3)\n"
    )
    x = torch.randn(3, 7)
    mean, m2, n = run(f, x)
    torch.testing.assert_close(mean, x.mean(1))
    torch.testing.assert_close(m2, ((x - x.mean(1, keepdim=True)) ** 2).sum(1))
    assert n.tolist() == [7, 7, 7]


def test_iota_and_a_causal_mask_of_one_value_against_itself():
    f = read(
        "    tv0 = fd.ops.iota(length=5, start=0, step=1)\n"
        "    tv1 = fd.ops.broadcast(tv0, is_broadcast_dim=[True, False])\n"
        "    tv2 = fd.ops.expand(tv1, shape=[5, 5])\n"
        "    tv3 = fd.ops.broadcast(tv0, is_broadcast_dim=[False, True])\n"
        "    tv4 = fd.ops.expand(tv3, shape=[5, 5])\n"
        "    tv5 = fd.ops.le(tv2, tv4)\n"
        "    fd.add_output(tv5)\n"
    )
    i = torch.arange(5)
    want = i[None, :] <= i[:, None]
    got = run(f)[0]
    assert got.tolist() == want.tolist()
    opt = eqsat.optimize_fusion(f, [])
    assert run(opt.fusion)[0].tolist() == want.tolist()


def test_static_extents_are_checked():
    f = read(
        "    tv0 = fd.define_tensor(shape=[4, 1024], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n"
        "    tv1 = fd.ops.sum(tv0, dims=[1])\n    fd.add_output(tv1)\n"
    )
    torch.testing.assert_close(run(f, torch.ones(4, 1024))[0], torch.full((4,), 1024.0))
    with pytest.raises(eqsat.FusionError, match="shape"):
        run(f, torch.ones(4, 1000))


def _philox_one(seed: int, subsequence: int, offset: int) -> list[int]:
    """Philox4x32-10 for one counter, in plain Python integers (Random123's reference)."""
    m = 0xFFFFFFFF
    key = [seed & m, seed >> 32]
    ctr = [offset & m, offset >> 32, subsequence & m, subsequence >> 32]
    for r in range(10):
        p0, p1 = 0xD2511F53 * ctr[0], 0xCD9E8D57 * ctr[2]
        ctr = [(p1 >> 32) ^ ctr[1] ^ key[0], p1 & m, (p0 >> 32) ^ ctr[3] ^ key[1], p0 & m]
        key = [(key[0] + 0x9E3779B9) & m, (key[1] + 0xBB67AE85) & m]
    return ctr


def test_philox_known_answers():
    from eqsat.reference.philox import philox

    assert _philox_one(0, 0, 0) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]  # Random123
    ones = (1 << 64) - 1
    assert list(philox(ones, np.array([ones], dtype=np.uint64), ones)[0]) == [
        0x408F276D,
        0x41C83B0E,
        0xA20BC7C6,
        0x6D5451FD,
    ]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**64 - 1), offset=st.integers(0, 2**64 - 1), first=st.integers(0, 2**64 - 8))
def test_philox_vectorized_equals_the_plain_reference(seed, offset, first):
    from eqsat.reference.philox import philox

    subs = np.arange(first, first + 8, dtype=np.uint64)
    got = philox(seed, subs, offset)
    for k in range(8):
        assert list(got[k]) == _philox_one(seed, first + k, offset)


@pytest.mark.parametrize("dtype", ["Float", "BFloat16", "Double"])
def test_uniform_with_seed_and_offset_gives_nvfusers_numbers(dtype):
    f = read(
        "    c0 = fd.define_scalar(None, dtype=DataType.Int)\n"
        "    c1 = fd.define_scalar(None, dtype=DataType.Int)\n"
        f"    tv2 = fd.ops.uniform(0, 1, [3, 5], rng_seed=c1, rng_offset=c0, dtype=DataType.{dtype})\n"
        "    fd.add_output(tv2)\n"
    )
    seed, offset = 2**40 + 7, 3
    got = run(f, offset, seed)[0]
    want = []
    for i in range(15):  # nvFuser: element i takes word i % m of philox(seed, i // m, offset)
        if dtype == "Double":
            w = _philox_one(seed, i // 2, offset)
            z = w[2 * (i % 2)] ^ (w[2 * (i % 2) + 1] << 21)
            u = z * 2.0**-53 + 2.0**-54
        else:
            w = _philox_one(seed, i // 4, offset)[i % 4]
            u = float(np.float32(np.float32(w) * np.float32(2.0**-32) + np.float32(2.0**-33)))
        want.append(u)
    torch_dtype = {"Float": torch.float32, "BFloat16": torch.bfloat16, "Double": torch.float64}[dtype]
    want = torch.tensor(want, dtype=torch.float64).to(torch_dtype)
    want = torch.where(want == 1, torch.zeros_like(want), want).reshape(3, 5)
    assert got.dtype == torch_dtype
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    again = run(f, offset, seed)[0]
    torch.testing.assert_close(again, got, rtol=0, atol=0)
    assert not torch.equal(run(f, offset + 1, seed)[0], got)


def test_uniform_over_a_range_rounds_once():
    f = read(
        "    tv0 = fd.ops.uniform(-2.00000, 3.00000, [64], rng_seed=5, rng_offset=0, dtype=DataType.Float)\n"
        "    fd.add_output(tv0)\n"
    )
    got = run(f)[0]
    from fractions import Fraction

    for i in range(64):
        w = _philox_one(5, i // 4, 0)[i % 4]
        u = np.float32(np.float32(w) * np.float32(2.0**-32) + np.float32(2.0**-33))
        exact = Fraction(5) * Fraction(float(u)) + Fraction(-2)  # fma: one rounding
        near = np.float32(float(exact))
        candidates = [np.nextafter(near, np.float32(-9)), near, np.nextafter(near, np.float32(9))]
        best = min(
            candidates,
            key=lambda v: (
                abs(Fraction(float(v)) - exact),  # ties to even
                int(np.float32(v).view(np.int32)) & 1,
            ),
        )
        assert float(got[i]) == float(best), i


def test_normal_with_seed_is_box_muller_on_the_same_words():
    f = read(
        "    tv0 = fd.ops.normal(0, 1, [8], rng_seed=11, rng_offset=2, dtype=DataType.Float)\n"
        "    fd.add_output(tv0)\n"
    )
    got = run(f)[0]
    for i in range(8):
        w = _philox_one(11, i // 4, 2)
        first = (i % 4) // 2 * 2
        u = float(np.float32(w[first]) * np.float32(2.0**-32) + np.float32(2.0**-33))
        v = float(np.float32(w[first + 1]) * np.float32(2.0**-32) + np.float32(2.0**-33)) * 6.2831855
        z = (-2 * np.log(u)) ** 0.5 * (np.sin(v) if i % 2 == 0 else np.cos(v))
        assert abs(float(got[i]) - z) <= 1e-5 * max(1.0, abs(z)), i


def test_an_unmodelled_keyword_is_an_error_at_its_line():
    with pytest.raises(eqsat.FusionError, match=r"line 6: fd.ops.cat: unexpected argument 'iter_type'"):
        read(
            "    tv0 = fd.define_tensor(shape=[2], contiguity=[True], dtype=DataType.Float, is_cpu=False)\n"
            "    tv1 = fd.ops.cat([tv0, tv0], dim=0, iter_type=1)\n    fd.add_output(tv1)\n"
        )


def test_clamp_lowers_to_the_classic_frontend_as_max_then_min():
    # the classic frontend's clamp(Tensor, Scalar, Scalar) refuses every call (seen on the H200,
    # nvFuser 0.2.35: "Attempting to add to a completed definition!"); its source writes clamp
    # as nvFuser's runtime defines it, min(max(x, low), high), in the input's dtype
    def f(fd):
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=eqsat.DataType.BFloat16)
        fd.add_output(fd.ops.clamp(x, -0.9, 2.0))

    fusion = eqsat.from_function(f)
    classic = fusion_source(fusion, "classic")
    assert "fd.ops.clamp(" not in classic and "fd.ops.maximum(" in classic and "fd.ops.minimum(" in classic
    x = torch.tensor([-3.0, -0.8984375, -0.90234375, 0.5, 2.5, float("nan"), float("inf")]).to(torch.bfloat16)
    (got,) = run(eqsat.ingest(classic), x)
    want = torch.clamp(x.float(), -0.9, 2.0).to(torch.bfloat16)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got.float().nan_to_num(7.0), want.float().nan_to_num(7.0))
