"""Ingestion of repro text in both of nvFuser's print styles, and of whole repro files."""

import textwrap

import pytest
import torch

import eqsat
from eqsat import FusionError

CLASSIC = textwrap.dedent("""\
    import torch
    from nvfuser import FusionDefinition, DataType

    def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
        T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, is_cpu=False, stride_order=[1, 0])
        S1 = fd.define_scalar(2.00000, dtype=DataType.Double)
        T2 = fd.ops.mul(T0, S1)
        T3 = fd.ops.sum(T2, dims=[1], keepdim=False, dtype=DataType.Null)
        S4 = fd.ops.size(T0, dim=0)
        V5 = fd.define_vector([S4, 1], dtype=DataType.Int)
        T6 = fd.ops.broadcast_in_dim(T3, shape=V5, broadcast_dims=[0])
        fd.add_output(T6)

    with FusionDefinition() as fd:
        nvfuser_fusion_id0(fd)

    inputs = [
        torch.testing.make_tensor((4, 5), dtype=torch.float32, device='cuda:0'),
    ]
    fd.execute(inputs)
    """)

DIRECT = textwrap.dedent("""\
    import torch
    from nvfuser_direct import FusionDefinition, DataType
    def nvfuser_fusion(fd : FusionDefinition) -> None :
        T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
        T1, T2, T3 = fd.ops.welford(T0, dims=[1])
        T4 = fd.ops.broadcast(T1, is_broadcast_dim=[False, True])
        T5 = fd.ops.expand(T4, shape=[4, 5])
        T6 = fd.ops.sub(T0, T5)
        fd.add_output(T6)
    with FusionDefinition() as fd:
        nvfuser_fusion(fd)
    inputs = [torch.randn(20, dtype=torch.float32, device='cuda:0').as_strided((4, 5), (5, 1))]
    fd.execute(inputs)
    """)


def test_classic_repro_ingests_without_nvfuser_and_without_executing(monkeypatch):
    repro = eqsat.from_source(CLASSIC, device="cpu")
    assert repro.function == "nvfuser_fusion_id0"
    assert repro.fusion.ops() == [
        "define_tensor",
        "define_scalar",
        "mul",
        "sum",
        "size",
        "define_vector",
        "broadcast_in_dim",
    ]
    (x,) = repro.inputs
    assert x.shape == (4, 5) and x.device.type == "cpu"
    (out,) = eqsat.run_fusion(repro.fusion, repro.inputs, strict=True)
    torch.testing.assert_close(out, (x * 2).sum(1, keepdim=True))


def test_direct_repro_with_welford_and_broadcast_expand():
    repro = eqsat.from_source(DIRECT, device="cpu")
    (x,) = repro.inputs
    (out,) = eqsat.run_fusion(repro.fusion, repro.inputs, strict=True)
    torch.testing.assert_close(out, x - x.mean(1, keepdim=True))


def test_inputs_on_meta_tensors():
    repro = eqsat.from_source(CLASSIC, device="meta")
    assert repro.inputs[0].device.type == "meta"
    (out,) = eqsat.run_fusion(repro.fusion, repro.inputs, strict=True)
    assert out.shape == (4, 1) and out.device.type == "meta"


def test_function_only_text():
    text = CLASSIC.split("with FusionDefinition")[0]
    assert eqsat.ingest(text) == eqsat.from_source(CLASSIC, inputs=False).fusion


def test_file_path(tmp_path):
    path = tmp_path / "repro.py"
    path.write_text(CLASSIC)
    assert eqsat.ingest(str(path)) == eqsat.from_source(CLASSIC, inputs=False).fusion


def test_syntax_error_names_the_line():
    with pytest.raises(FusionError) as info:
        eqsat.from_source("def nvfuser_fusion(fd):\n    T0 = fd.define_tensor(shape=[-1]\n")
    assert info.value.line == 2 and "does not parse" in str(info.value)


def test_error_inside_the_definition_names_the_file_line():
    bad = CLASSIC.replace("dims=[1], keepdim", "dims=[7], keepdim")
    with pytest.raises(FusionError) as info:
        eqsat.from_source(bad, filename="repro.py", inputs=False)
    err = info.value
    assert (err.filename, err.line, err.op) == ("repro.py", 8, "fd.ops.sum")
    assert "out of range" in str(err)


def test_no_definition_function():
    with pytest.raises(FusionError, match="no definition function"):
        eqsat.from_source("x = 1\n")


def test_unknown_dtype_in_text():
    with pytest.raises(FusionError, match="line 5.*DataType"):
        eqsat.from_source(CLASSIC.replace("DataType.Float, is_cpu", "DataType.Flaot, is_cpu"), inputs=False)
