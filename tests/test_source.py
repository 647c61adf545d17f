"""The source emitter: IR -> nvFuser repro text, which re-ingests to an equal IR."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import eqsat
from eqsat import DataType
from eqsat.lowering import fusion_source, repro_source
from eqsat.testing.seeds import SEEDS


def test_classic_and_direct_styles():
    fusion = eqsat.from_function(SEEDS["layernorm_amax"].model_ref)
    classic = fusion_source(fusion)
    direct = fusion_source(fusion, style="direct")
    assert classic.startswith("def nvfuser_fusion_id0(fd : FusionDefinition) -> None :")
    assert direct.startswith("def nvfuser_fusion(fd : FusionDefinition) -> None :")
    assert "define_vector" not in direct
    assert eqsat.ingest(classic) == fusion
    inputs = SEEDS["layernorm_amax"].make_inputs()
    for a, b in zip(
        eqsat.run_fusion(fusion, inputs, strict=True),
        eqsat.run_fusion(eqsat.ingest(direct), inputs, strict=True),
    ):
        assert torch.equal(a, b)


def test_repro_file_round_trip():
    seed = SEEDS["reduction_broadcast"]
    fusion = eqsat.from_function(seed.model_ref)
    inputs = seed.make_inputs(4, 3, 2)
    text = repro_source(fusion, inputs)
    assert "fd.execute(inputs)" in text
    repro = eqsat.from_source(text, device="cpu")
    assert repro.fusion == fusion
    assert [t.shape for t in repro.inputs] == [t.shape for t in inputs]


def test_special_float_values_print_as_python():
    """The emitted definition and the printed IR write a float constant alike."""

    def f(fd):
        t = fd.define_tensor(shape=[-1])
        fd.add_output(fd.ops.maximum(t, fd.define_scalar(float("-inf"), dtype=DataType.Double)))

    def g(fd):
        fd.add_output(fd.ops.mul(fd.define_tensor(shape=[-1]), float("nan")))

    fusion = eqsat.from_function(f)
    assert eqsat.ingest(fusion_source(fusion)) == fusion
    for special, value in ((fusion, 'float("-inf")'), (eqsat.from_function(g), 'float("nan")')):
        for text in (fusion_source(special), fusion_source(special, style="direct"), str(special)):
            assert value in text


_UNARY = ["neg", "abs", "exp", "tanh", "relu", "sigmoid"]
_BINARY = ["add", "sub", "mul", "maximum"]
_REDUCE = ["sum", "max", "min"]


@st.composite
def chains(draw):
    """Random straight-line definitions of elementwise ops and reductions on 2-D inputs."""
    steps = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["u", "b", "r"]), st.integers(0, 5), st.integers(0, 5), st.integers(0, 2)
            ),
            min_size=1,
            max_size=8,
        )
    )

    def f(fd):
        vals = [fd.define_tensor(shape=[-1, -1]), fd.define_tensor(shape=[-1, -1])]
        for kind, i, j, k in steps:
            a, b = vals[i % len(vals)], vals[j % len(vals)]
            if kind == "u":
                vals.append(getattr(fd.ops, _UNARY[(i + k) % len(_UNARY)])(a))
            elif kind == "b" and a.ndim == b.ndim:
                vals.append(getattr(fd.ops, _BINARY[(j + k) % len(_BINARY)])(a, b))
            elif a.ndim == 2:
                vals.append(getattr(fd.ops, _REDUCE[k])(a, dims=[k % 2], keepdim=True))
        fd.add_output(vals[-1])

    return f


@settings(max_examples=60, deadline=None)
@given(chains())
def test_emitted_source_reingests_equal_and_runs_the_same(fn):
    fusion = eqsat.from_function(fn)
    again = eqsat.ingest(fusion_source(fusion))
    assert again == fusion
    inputs = [torch.randn(3, 4), torch.randn(3, 4)]
    for a, b in zip(
        eqsat.run_fusion(fusion, inputs, strict=True), eqsat.run_fusion(again, inputs, strict=True)
    ):
        torch.testing.assert_close(a, b, equal_nan=True, rtol=0, atol=0)
