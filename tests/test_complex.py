"""Complex numbers end to end: recorded, run, optimized and checked against torch written by
hand, with nvFuser's ``real``/``imag``/``complex`` (csrc/ops/arith.cpp: the part of a complex
value has its real dtype; ``real`` of a real value is a copy; ``imag`` of one is an error)."""

import pytest
import torch
from helpers import check

import eqsat
from eqsat import DataType, FusionError
from eqsat.cli import main


def rotate_and_sum(fd):
    a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.ComplexFloat)
    w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.ComplexFloat)
    wb = fd.ops.broadcast_in_dim(w, shape=fd.ops.shape(a), broadcast_dims=[1])
    s = fd.ops.sum(fd.ops.mul(a, wb), dims=[1])
    fd.add_output(s)
    fd.add_output(fd.ops.real(s))
    fd.add_output(fd.ops.imag(fd.ops.add(a, a)))
    fd.add_output(fd.ops.complex(fd.ops.imag(a), fd.ops.real(a)))


def reference(a, w):
    s = (a * w).sum(1)
    return [s, s.real, (a + a).imag, torch.complex(a.imag, a.real)]


def test_complex_values_run_optimize_and_agree_with_torch():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(16, 8, dtype=torch.complex64, generator=g)
    w = torch.randn(8, dtype=torch.complex64, generator=g)
    assert [t.dtype for t in reference(a, w)] == [
        torch.complex64,
        torch.float32,
        torch.float32,
        torch.complex64,
    ]
    check(rotate_and_sum, [a, w], reference)  # the same dtypes, as read and optimized


def test_real_of_a_real_tensor_is_a_copy_and_imag_of_one_is_an_error_at_its_line():
    def real_of_float(fd):
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        fd.add_output(fd.ops.real(x))

    x = torch.randn(4)
    (out,) = eqsat.run_fusion(eqsat.from_function(real_of_float), [x], strict=True)
    assert torch.equal(out, x) and out.data_ptr() != x.data_ptr()

    def imag_of_float(fd):
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        fd.add_output(fd.ops.imag(x))

    with pytest.raises(FusionError, match=r"line \d+: fd.ops.imag: imag takes a complex value, not Float"):
        eqsat.from_function(imag_of_float)

    def complex_of_mixed(fd):
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        y = fd.define_tensor(shape=[-1], dtype=DataType.Double)
        fd.add_output(fd.ops.complex(x, y))

    with pytest.raises(
        FusionError, match="complex takes two Float or two Double values, not Float and Double"
    ):
        eqsat.from_function(complex_of_mixed)


def test_eqsat_check_runs_a_complex_repro(tmp_path, capsys):
    path = tmp_path / "complex_repro.py"
    path.write_text(
        "import torch\n"
        "from nvfuser_direct import FusionDefinition, DataType\n\n"
        "def nvfuser_fusion(fd : FusionDefinition) -> None :\n"
        "    tv0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], "
        "dtype=DataType.ComplexFloat, is_cpu=False)\n"
        "    tv1 = fd.ops.sum(fd.ops.mul(tv0, tv0), dims=[1], keepdim=False, dtype=DataType.Null)\n"
        "    fd.add_output(fd.ops.real(tv1))\n\n"
        "inputs = [\n"
        "    torch.randn(8, 4, dtype=torch.complex64),\n"
        "]\n"
    )
    assert main(["check", str(path)]) == 0, capsys.readouterr()
