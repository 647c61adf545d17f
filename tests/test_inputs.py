"""Inputs that do not match the definition are refused at `optimize_fusion`, `.for_inputs`,
`.run_reference` and `.execute` alike, with the definition line of the input, the op and what
was expected; ops eqsat does not model leave the rest of the fusion optimizable."""

import inspect

import pytest
import torch

import eqsat
from eqsat import DataType, FusionDefinition, FusionError
from eqsat.ir import layout


def scaled_row_sums(fd):
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
    wb = fd.ops.broadcast_in_dim(w, shape=x.shape(), broadcast_dims=[1])
    fd.add_output(fd.ops.sum(fd.ops.mul(x, wb), dims=[1]))


FIRST = inspect.getsourcelines(scaled_row_sums)[1] + 1  # the line defining x
SECOND = FIRST + 1  # the line defining w


@pytest.mark.parametrize(
    "inputs, line, message",
    [
        ([torch.randn(4, 8)], None, "takes 2 inputs, got 1"),
        (
            [torch.randn(4, 8, dtype=torch.float64), torch.randn(8)],
            FIRST,
            r"dtype Float \(got torch.float64\)",
        ),
        ([torch.randn(4, 8), torch.randn(8, 1)], SECOND, r"rank 1 \(got 2\)"),
        ([torch.randn(4, 8), [1.0] * 8], SECOND, "expected a Float tensor of rank 1, got list"),
        (
            [torch.randn(4, 8), torch.randn(4)],
            SECOND,
            "input 1 dim 0 has extent 4, but the fusion uses it as the same axis as input 0 dim 1, "
            "of extent 8",
        ),
        (
            [torch.randn(8, 4).t(), torch.randn(8)],
            FIRST,
            r"dim 1 is declared contiguous, which needs stride 1, but has stride 4.*\.contiguous\(\)",
        ),
        ([torch.randn(4, 16)[:, ::2], torch.randn(8)], FIRST, "dim 1 is declared contiguous"),
    ],
)
@pytest.mark.parametrize("entry", ["optimize_fusion", "run_reference"])
def test_inputs_that_do_not_match_are_refused_with_line_op_and_expectation(inputs, line, message, entry):
    with pytest.raises(FusionError, match=message) as info:
        if entry == "optimize_fusion":
            eqsat.optimize_fusion(scaled_row_sums, inputs)
        else:
            eqsat.optimize_fusion(scaled_row_sums).run_reference(inputs)
    assert info.value.line == line
    if line is not None:
        assert info.value.op == "fd.define_tensor"
        assert f"line {line}: fd.define_tensor: input" in str(info.value)


def test_layouts_the_definition_allows_are_accepted():
    def strided(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[False, True], dtype=DataType.Float)
        # column-major: dim 0 innermost
        y = fd.define_tensor(
            shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, stride_order=[0, 1]
        )
        fd.add_output(fd.ops.add(x, y))

    x = torch.randn(4, 16)[:, :8]  # rows padded: not contiguous across dim 0
    y = torch.randn(8, 4).t()
    (out,) = eqsat.optimize_fusion(strided).run_reference([x, y])
    torch.testing.assert_close(out, x + y)
    # a size-1 dim carries no stride, and a dense tensor passes either way
    (out,) = eqsat.optimize_fusion(strided).run_reference([torch.randn(1, 8), torch.randn(1, 8)])
    assert out.shape == (1, 8)
    with pytest.raises(FusionError, match="dim 0 is declared contiguous"):
        eqsat.optimize_fusion(strided).run_reference([x, torch.randn(4, 8)])


def test_an_unmodelled_op_leaves_the_rest_optimized_and_its_error_names_its_line():
    def fusion(fd):
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        n, k, m = fd.ops.size(a, dim=0), fd.ops.size(a, dim=1), fd.ops.size(b, dim=1)
        ab = fd.ops.broadcast_in_dim(a, shape=[n, k, m], broadcast_dims=[0, 1])
        bb = fd.ops.broadcast_in_dim(b, shape=[n, k, m], broadcast_dims=[0, 2])
        fd.add_output(fd.ops.sum(fd.ops.mul(ab, bb), dims=[1]))
        fd.add_output(fd.ops.threshold(a, 3.0, 0.0))  # nvFuser's; eqsat does not model it

    # the flat margin: what is tested is the rewrite, not whether the measured error lets it be kept
    opt = eqsat.optimize_fusion(fusion, [torch.empty(512, 512, device="meta")] * 2, min_gain=0.05)
    assert opt.report.changed and "sum-of-product-factor-right" in opt.report.rules
    assert "fd.ops.threshold(T0, 3.0, 0.0)" in opt.source
    with pytest.raises(FusionError, match="threshold.*not modelled") as info:
        opt.run_reference([torch.randn(4, 4), torch.randn(4, 4)])
    assert info.value.line == inspect.getsourcelines(fusion)[1] + 7


# -- layouts (eqsat.ir.layout): stride order and contiguity <-> strides, against torch's ----------


@pytest.mark.parametrize(
    "tensor, contiguity, stride_order",
    [
        (torch.empty(2, 3, 4), (True, True, True), None),  # strides (12, 4, 1)
        (torch.empty(2, 3, 4).permute(2, 0, 1), (True, True, True), (0, 2, 1)),  # strides (1, 12, 4)
        (torch.empty(4, 3).t(), (True, True), (0, 1)),  # column-major
        (torch.empty(4, 16)[:, ::2], (True, False), None),  # strides (16, 2)
        (torch.empty(4, 16)[:, :8], (False, True), None),  # rows padded: (16, 1)
        (torch.empty(3, 1).expand(3, 5), (True, None), None),  # stride 0: a broadcast
        (torch.empty(4, 1), (None, True), (0, 1)),  # extent 1: a broadcast, placed outermost
    ],
)
def test_the_layout_of_torch_strides(tensor, contiguity, stride_order):
    """What nvFuser's from_pytorch declares for a tensor: the contiguity per allocation place
    (outermost first) and the stride order (dim j's rank by stride, 0 innermost; None for
    row-major); and the tensor's strides satisfy it."""
    sizes, strides = list(tensor.shape), list(tensor.stride())
    assert layout.layout_of(sizes, strides) == (contiguity, stride_order)
    assert layout.stride_problem(sizes, strides, contiguity, stride_order) is None
    with FusionDefinition() as fd:
        t = fd.from_pytorch(tensor)
        fd.add_output(t)
    node = fd.fusion.nodes[0]
    assert (node.arg("contiguity"), node.arg("stride_order")) == (contiguity, stride_order)


@pytest.mark.parametrize(
    "sizes, stride_order, strides",
    [
        ((2, 3, 4), None, (12, 4, 1)),
        ((2, 3, 4), (2, 1, 0), (12, 4, 1)),  # row-major
        ((2, 3, 4), (0, 1, 2), (1, 2, 6)),  # column-major
        ((2, 3, 4), (0, 2, 1), (1, 8, 2)),  # dim 1 outermost, then 2, then 0
        ((2, 3, 4), (1, 2, 0), (4, 8, 1)),  # dim 1 outermost, then 0, then 2
    ],
)
def test_an_output_stride_order_gives_the_dense_strides(sizes, stride_order, strides):
    """An output written in a stride order (the torch executor's ``add_output``) keeps its
    values and has the dense strides of that order, which declare that stride order again."""
    assert tuple(layout.dense_strides(sizes, stride_order)) == strides
    x = torch.randn(sizes)
    laid_out = layout.with_stride_order(x, stride_order or ())
    assert laid_out.stride() == strides and torch.equal(laid_out, x)
    row_major = stride_order in (None, (2, 1, 0))
    assert layout.layout_of(list(sizes), list(strides)) == ((True,) * 3, None if row_major else stride_order)


@pytest.mark.parametrize(
    "order, old, new, apart",
    [
        ([0, 2, 1, 3], [4, 1024, 4, 128], [4, 1024, 512], True),  # [b, h, s, d] permuted: h, d apart
        ([0, 1, 2, 3], [4, 1024, 4, 128], [4, 1024, 512], False),  # row-major: a view
        ([0, 2, 1, 3], [4, 1024, 4, 128], [4096, 512], True),  # b and s apart too
        ([0, 2, 1, 3], [4, 1024, 1, 256], [4096, 256], False),  # the extent-1 head lies anywhere
        ([1, 0], [64, 32], [2048], True),  # column-major flattened
        ([1, 0], [64, 32], [64, 32], False),  # nothing merged
        ([0, 1], [4096, 512], [4, 1024, 512], False),  # a split
        ([0, 2, 1, 3], [4, None, 4, 128], [4, 1024, 512], False),  # an extent not known
    ],
)
def test_a_reshape_merges_dims_apart_in_memory_only_where_they_are_not_neighbours(order, old, new, apart):
    assert layout.merges_apart(order, old, new) is apart
