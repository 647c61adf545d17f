"""Rewrites stay exact where integers wrap around: sign facts that need no overflow are stated
for floating values only (issue 14's repro: Int32 y = 46341, y*y wraps to -2147479015)."""

import torch

import eqsat
from eqsat import DataType


def max_times_a_square(fd):
    a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int32)
    y = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int32)
    c = fd.ops.broadcast(fd.ops.mul(y, y), is_broadcast_dim=[False, True])
    fd.add_output(fd.ops.max(fd.ops.mul(a, c), dims=[1]))


def max_first(dtype):
    def define(fd):
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        y = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtype)
        fd.add_output(fd.ops.mul(fd.ops.max(a, dims=[1]), fd.ops.mul(y, y)))

    return define


def test_a_wrapped_integer_square_is_not_taken_as_nonnegative():
    from eqsat.egraph.explore import explore

    # max_j(a * y*y) and max_j(a) * y*y differ in Int32 (y*y may wrap): never made equal
    result = explore(eqsat.from_function(max_times_a_square), contains=[max_first(DataType.Int32)])
    assert result.fired.get("max-of-product-with-nonnegative-constant", 0) == 0
    assert result.contains == [False]


def test_optimized_int32_results_are_exact():
    a = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32)
    y = torch.tensor([46341, 2], dtype=torch.int32)
    want = (a * (y * y)[:, None]).amax(1)  # torch wraps int32 as nvFuser does
    assert want.tolist()[0] == 0
    fusion = eqsat.from_function(max_times_a_square)
    opt = eqsat.optimize_fusion(fusion, [a, y])
    assert "max-of-product-with-nonnegative-constant" not in opt.report.rules
    assert eqsat.run_fusion(opt.fusion, [a, y], strict=True)[0].tolist() == want.tolist()


def test_the_same_pattern_in_floats_is_still_rewritten_where_it_pays():
    def floats(fd):
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        y = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        c = fd.ops.broadcast(fd.ops.mul(y, y), is_broadcast_dim=[False, True])
        fd.add_output(fd.ops.max(fd.ops.mul(a, c), dims=[1]))

    from eqsat.egraph.explore import explore

    result = explore(eqsat.from_function(floats), contains=[max_first(DataType.Float)])
    assert result.fired.get("max-of-product-with-nonnegative-constant", 0) > 0
    assert result.contains == [True]


def test_an_optimized_output_is_never_the_callers_input():
    def max_over_a_unit_axis(fd):  # and seed 1's pattern beside it, which pays for a change
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.max(fd.ops.broadcast(x, is_broadcast_dim=[False, True]), dims=[1]))
        ab = fd.ops.mul(
            fd.ops.broadcast(a, is_broadcast_dim=[False, False, True]),
            fd.ops.broadcast(b, is_broadcast_dim=[False, True, False]),
        )
        fd.add_output(fd.ops.sum(ab, dims=[1]))

    big = [
        torch.empty(4096, device="meta"),
        torch.empty(4096, 2048, device="meta"),
        torch.empty(4096, 1024, device="meta"),
    ]
    opt = eqsat.optimize_fusion(eqsat.from_function(max_over_a_unit_axis), big)
    assert opt.report.changed and "max" not in opt.fusion.ops()  # the identity rewrite
    x = torch.randn(5)
    out = eqsat.run_fusion(opt.fusion, [x, torch.randn(5, 3), torch.randn(5, 2)], strict=True)[0]
    assert torch.equal(out, x) and out.data_ptr() != x.data_ptr()
    out.zero_()
    assert not torch.equal(out, x)

    def the_input_itself(fd):  # where the original returns its input, so does eqsat
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(x)

    opt = eqsat.optimize_fusion(eqsat.from_function(the_input_itself), [x], relower=True)
    assert eqsat.run_fusion(opt.fusion, [x], strict=True)[0].data_ptr() == x.data_ptr()


def test_minus_zero_and_zero_stay_two_constants():
    def define(fd):
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        a = fd.ops.reciprocal(fd.ops.mul(x, 0.0))
        b = fd.ops.reciprocal(fd.ops.mul(x, -0.0))
        fd.add_output(fd.ops.add(fd.ops.mul(a, 1.0), fd.ops.mul(b, 1.0)))
        fd.add_output(a)
        fd.add_output(b)

    x = torch.tensor([1.0, 2.0])
    want = [1 / (x * 0.0) + 1 / (x * -0.0), 1 / (x * 0.0), 1 / (x * -0.0)]  # nan, +inf, -inf
    fusion = eqsat.from_function(define)
    opt = eqsat.optimize_fusion(fusion, [x])
    for got in (eqsat.run_fusion(fusion, [x], strict=True), eqsat.run_fusion(opt.fusion, [x], strict=True)):
        for g, w in zip(got, want, strict=True):
            assert torch.equal(g.isnan(), w.isnan()) and torch.equal(g[~g.isnan()], w[~w.isnan()])
    from eqsat.lowering.from_terms import lower_encoding
    from eqsat.egraph.encode import encode

    lowered = eqsat.run_fusion(lower_encoding(encode(fusion)), [x], strict=True)
    assert lowered[1].tolist() == [float("inf")] * 2 and lowered[2].tolist() == [float("-inf")] * 2


def max_and_sum_over_a_broadcast(fd):
    x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
    y = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    xb = fd.ops.broadcast_in_dim(x, shape=fd.ops.shape(y), broadcast_dims=[0])
    fd.add_output(fd.ops.max(xb, dims=[1], keepdim=False, dtype=DataType.Null))
    fd.add_output(fd.ops.min(xb, dims=[1], keepdim=False, dtype=DataType.Null))
    fd.add_output(fd.ops.sum(xb, dims=[1], keepdim=False, dtype=DataType.Null))


def test_a_symbolic_definition_stays_right_when_a_reduced_broadcast_axis_is_empty():
    # optimized for extents >= 1, the emitted definition keeps y's extents symbolic, so it must
    # hold at every extent: the max over an empty axis is -inf (nvFuser's init), not x
    fusion = eqsat.from_function(max_and_sum_over_a_broadcast)
    big = [torch.empty(8192, device="meta"), torch.empty(8192, 8192, device="meta")]
    opt = eqsat.optimize_fusion(fusion, big, min_gain=0.0)
    x = torch.tensor([1.0, -2.0, 3.0])
    for inputs in ([x, torch.ones(3, 0)], [x, torch.ones(3, 2)]):
        want = [
            torch.amax(inputs[0][:, None].expand(inputs[1].shape), 1)
            if inputs[1].shape[1]
            else torch.full((3,), float("-inf")),
            torch.amin(inputs[0][:, None].expand(inputs[1].shape), 1)
            if inputs[1].shape[1]
            else torch.full((3,), float("inf")),
            inputs[0][:, None].expand(inputs[1].shape).sum(1),
        ]
        for got, w in zip(eqsat.run_fusion(opt.fusion, inputs, strict=True), want, strict=True):
            assert torch.equal(got, w), (inputs[1].shape, got, w)


def test_a_max_over_a_broadcast_axis_of_static_extent_is_still_dropped():
    from eqsat.egraph.explore import explore

    def static(fd):
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        y = fd.define_tensor(shape=[8192, 8192], contiguity=[True, True], dtype=DataType.Float)
        xb = fd.ops.broadcast_in_dim(x, shape=fd.ops.shape(y), broadcast_dims=[0])
        fd.add_output(fd.ops.max(xb, dims=[1], keepdim=False, dtype=DataType.Null))

    def dropped(fd):
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.define_tensor(shape=[8192, 8192], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.set(x))

    result = explore(eqsat.from_function(static), contains=[dropped])
    assert result.fired.get("max-over-axes-it-lacks", 0) > 0
    symbolic = explore(eqsat.from_function(max_and_sum_over_a_broadcast))
    assert symbolic.fired.get("max-over-axes-it-lacks", 0) == 0
