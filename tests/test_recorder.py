"""The recorder: nvFuser's FusionDefinition protocol recorded into the Fusion IR."""

import pytest
import torch
from helpers import check

import eqsat
import eqsat.testing.seeds
from eqsat import DataType, FusionDefinition, FusionError
from eqsat.ir.axes import TensorType


def record(fn):
    return eqsat.from_function(fn)


def test_ports_by_changing_the_import():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
        t1 = fd.ops.sum(t0, dims=[1], keepdim=False, dtype=DataType.Null)
        fd.add_output(t1)
    fusion = fd.fusion
    assert fusion.ops() == ["define_tensor", "sum"]
    assert fusion.inputs == (0,)
    check(fusion, [torch.randn(3, 5)], lambda t: t.sum(1))


def test_positional_and_keyword_calls_record_the_same_node():
    def kw(fd):
        t = fd.define_tensor(shape=[-1, -1, -1])
        fd.add_output(fd.ops.sum(t, dims=[-1], keepdim=False))

    def pos(fd):
        t = fd.define_tensor(shape=[-1, -1, -1])
        fd.add_output(fd.ops.sum(t, [2]))

    assert record(kw) == record(pos)
    check(pos, [torch.randn(2, 3, 4)], lambda t: t.sum(-1))


def test_reduction_without_dims_and_with_dtype_in_second_place():
    def f(fd):
        t = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.prod(t, DataType.Float))

    node = record(f).nodes[-1]
    assert node.arg("dims") == (0, 1) and node.arg("dtype") is DataType.Float
    x = (1 + torch.rand(3, 4) / 8).to(torch.bfloat16)
    check(f, [x], lambda t: t.float().prod())  # a 0-dim Float, not bf16


def test_named_axes_unify_through_elementwise_ops_and_broadcasts():
    fusion = record(eqsat.testing.seeds.reduction_broadcast_ref)
    types = fusion.types
    x, b = (types[v] for v in fusion.inputs)
    prod = types[fusion.nodes[-2].outputs[0]]
    out = types[fusion.outputs[0].value]
    assert x.layout[0] == b.layout[0]  # the shared i axis
    assert prod.labels == x.labels | b.labels  # i, k, j
    assert out.labels == prod.labels - {x.layout[1]}  # the sum removed k
    bb = types[fusion.nodes[-3].outputs[0]]  # b broadcast along k
    assert bb.dims[1].broadcast and bb.dims[1].label == x.layout[1]


def test_keepdim_reduction_leaves_a_broadcast_dim():
    def f(fd):
        t = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.max(t, dims=[0], keepdim=True))

    fusion = record(f)
    out = fusion.types[fusion.outputs[0].value]
    assert isinstance(out, TensorType) and out.rank == 2 and out.dims[0].broadcast
    assert fusion.types.extents[out.dims[0].label] == 1
    check(f, [torch.randn(3, 5)], lambda t: t.amax(0, keepdim=True))


def test_define_vector_of_size_makes_scalar_inputs_as_nvfuser_direct_does():
    def f(fd):
        t = fd.define_tensor(shape=[-1])
        v = fd.define_vector(2)
        fd.add_output(fd.ops.broadcast_in_dim(t, shape=v, broadcast_dims=[1]))

    fusion = record(f)
    assert [n.op for n in fusion.nodes[:3]] == ["define_tensor", "define_scalar", "define_scalar"]
    assert len(fusion.inputs) == 3


def test_an_op_eqsat_does_not_model_becomes_an_opaque_node_that_keeps_its_arguments():
    def f(fd):
        t = fd.define_tensor(shape=[-1, -1])
        u = fd.ops.threshold(t, 3, flag=True)  # nvFuser's op; eqsat has no spec for it
        fd.add_output(fd.ops.add(u, t))

    fusion = record(f)
    node = fusion.nodes[1]
    assert node.opaque and node.op == "threshold"
    assert node.args[1:] == (("_1", 3), ("flag", True))
    assert not fusion.types[fusion.outputs[0].value].known


def test_operators_on_values():
    def f(fd):
        a = fd.define_tensor(shape=[-1])
        fd.add_output(-(a * 2.0 + a) / a)

    assert record(f).ops()[1:] == ["mul", "add", "neg", "div"]  # unary minus binds tighter than /
    check(f, [torch.rand(6) + 0.5], lambda a: -(a * 2.0 + a) / a)


# -- bad input: the error names the line, the op and what was expected ------------------------------


def _line_of(fn, marker):
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if marker in line)


def test_unknown_dtype_is_rejected_at_its_line():
    def f(fd):
        fd.define_tensor(shape=[-1], dtype="Float17")  # BAD

    with pytest.raises(FusionError) as info:
        record(f)
    assert info.value.line == _line_of(f, "# BAD")
    assert info.value.op == "fd.define_tensor"
    assert "Float17" in str(info.value) and "BFloat16" in str(info.value)


def test_mismatched_extents_are_rejected_at_the_op():
    def f(fd):
        a = fd.define_tensor(shape=[4, 8])
        b = fd.define_tensor(shape=[4, 6])
        fd.add_output(fd.ops.add(a, b))  # BAD

    with pytest.raises(FusionError) as info:
        record(f)
    assert info.value.line == _line_of(f, "# BAD")
    assert info.value.op == "fd.ops.add"
    assert "8 vs 6" in str(info.value)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda fd, t: fd.ops.sum(t, dims=[2]), "out of range"),
        (lambda fd, t: fd.ops.broadcast_in_dim(t, shape=[2, 3, 4], broadcast_dims=[0]), "one per input dim"),
        (lambda fd, t: fd.ops.permute(t, dims=[0, 0]), "not a permutation"),
        (lambda fd, t: fd.ops.sum(t, dimz=[0]), "unexpected argument 'dimz'"),
        (lambda fd, t: fd.ops.cast(t), "missing argument 'dtype'"),
        (lambda fd, t: fd.ops.reshape(t, new_shape=[5, 5]), "cannot reshape 12 elements"),
    ],
)
def test_bad_calls_say_what_was_expected(call, message):
    def f(fd):
        t = fd.define_tensor(shape=[3, 4])
        fd.add_output(call(fd, t))

    with pytest.raises(FusionError, match=message):
        record(f)


def test_nothing_is_half_built_after_an_error():
    fd = FusionDefinition()
    with pytest.raises(FusionError):
        with fd:
            t = fd.define_tensor(shape=[3])
            fd.add_output(t)
            fd.ops.sum(t, dims=[5])
    with pytest.raises(FusionError, match="failed"):
        fd.fusion
    with pytest.raises(FusionError, match="already failed"):
        fd.ops.neg(t)


def test_a_value_from_another_definition_is_rejected():
    other = FusionDefinition()
    foreign = other.define_tensor(shape=[-1])
    with pytest.raises(FusionError, match="another FusionDefinition"):
        with FusionDefinition() as fd:
            fd.add_output(fd.ops.neg(foreign))
