"""The torch executor on hostile values (issue 36): integer arithmetic where C++ traps or leaves
the result undefined (INT_MIN / -1, division by zero, negative integer powers), complex abs,
FP8 casts that overflow, and outputs that must not be the caller's input. Whatever might trap
runs in a child process, so that a SIGFPE fails a test instead of killing pytest."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import eqsat
from eqsat import DataType
from eqsat.reference import torch_arithmetic
from eqsat.reference import torch_executor as tx

ROOT = Path(__file__).resolve().parent.parent
I32_MIN, I32_MAX = -(2**31), 2**31 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def run_isolated(body: str) -> dict:
    """Run ``body`` (which fills the dict ``out``) in a fresh interpreter; its ``out`` as JSON.
    A signal (a trap of the CPU's integer division) fails the test and names the case last begun."""
    script = (
        "import json, sys, torch, eqsat\nfrom eqsat import DataType\nout = {}\n"
        "def begin(name):\n    print('begin', name, file=sys.stderr, flush=True)\n"
        + textwrap.dedent(body)
        + "\nprint(json.dumps(out))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    last = [ln for ln in done.stderr.splitlines() if ln.startswith("begin ")][-1:]
    assert done.returncode == 0, f"the child died (rc {done.returncode}) at {last}:\n{done.stderr[-2000:]}"
    return json.loads(done.stdout.splitlines()[-1])


# -- item 2: integer division at INT_MIN / -1 and by zero -------------------------------------------
def test_integer_div_fmod_remainder_at_int_min_by_minus_one_give_nvfusers_values_without_a_trap():
    out = run_isolated("""
        def binary(op, dtype):
            def define(fd):
                a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtype)
                b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtype)
                fd.add_output(getattr(fd.ops, op)(a, b))
            return eqsat.from_function(define)

        for name, dtype, tdt in (("Int32", DataType.Int32, torch.int32), ("Int", DataType.Int, torch.int64)):
            info = torch.iinfo(tdt)
            a = torch.tensor([info.min, info.min, 7, -7, info.max, 0], dtype=tdt)
            b = torch.tensor([-1, 1, -2, 2, -1, 3], dtype=tdt)
            for op in ("div", "fmod", "remainder", "truediv"):
                begin(f"{op} {name}")
                (r,) = eqsat.run_fusion(binary(op, dtype), [a, b], strict=True)
                out[f"{op} {name}"] = [str(r.dtype), r.tolist()]

        def with_number(op):             # a tensor and a Python number: the number does not lift
            def define(fd):
                a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int32)
                fd.add_output(getattr(fd.ops, op)(a, -1))
            return eqsat.from_function(define)

        for op in ("div", "fmod", "remainder"):
            begin(f"{op} number")
            x = torch.tensor([-2**31, 6], dtype=torch.int32)
            (r,) = eqsat.run_fusion(with_number(op), [x], strict=True)
            out[f"{op} number"] = r.tolist()

        def scalars(op):                 # define_scalar arithmetic, added to a tensor
            def define(fd):
                x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
                s = getattr(fd.ops, op)(fd.define_scalar(-2**63, dtype=DataType.Int),
                                        fd.define_scalar(-1, dtype=DataType.Int))
                fd.add_output(fd.ops.add(x, s))
            return eqsat.from_function(define)

        for op in ("div", "fmod", "remainder"):
            begin(f"scalar {op}")
            try:
                (r,) = eqsat.run_fusion(scalars(op), [torch.zeros(2, dtype=torch.int64)], strict=True)
                out[f"scalar {op}"] = r.tolist()
            except eqsat.FusionError as err:
                out[f"scalar {op}"] = f"FusionError: {err}"
    """)
    for name, lo, hi in (("Int32", I32_MIN, I32_MAX), ("Int", I64_MIN, I64_MAX)):
        dtype = {"Int32": "torch.int32", "Int": "torch.int64"}[name]
        # CUDA's `/` and `%` wrap: INT_MIN / -1 is INT_MIN, INT_MIN % -1 is 0 (runtime/helpers.cu)
        assert out[f"div {name}"] == [dtype, [lo, lo, -3, -3, -hi, 0]]
        assert out[f"fmod {name}"] == [dtype, [0, 0, 1, -1, 0, 0]]
        assert out[f"remainder {name}"] == [dtype, [0, 0, -1, 1, 0, 0]]
        # truediv promotes to Float first (TypePromotion::float_op_config)
        a = torch.tensor([lo, lo, 7, -7, hi, 0]).float()
        want = (a / torch.tensor([-1, 1, -2, 2, -1, 3]).float()).tolist()
        assert out[f"truediv {name}"] == ["torch.float32", want]
    assert out["div number"] == [I32_MIN, -6]
    assert out["fmod number"] == [0, 0] and out["remainder number"] == [0, 0]
    # nvFuser evaluates scalar arithmetic in C++ on the host, where INT64_MIN / -1 is undefined
    assert (
        out["scalar div"].startswith("FusionError: line ")
        and "fd.ops.div" in out["scalar div"]
        and "INT64_MIN / -1" in out["scalar div"]
    )
    assert out["scalar fmod"] == [0, 0] and out["scalar remainder"] == [0, 0]


@pytest.mark.parametrize("op", ["div", "fmod", "remainder"])
@pytest.mark.parametrize("dtype", [DataType.Int32, DataType.Int])
def test_integer_division_by_zero_is_an_error_at_its_line(op, dtype):
    def define(fd):
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtype)
        b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtype)
        fd.add_output(getattr(fd.ops, op)(a, b))

    tdt = tx.dt.to_torch(dtype)
    fusion = eqsat.from_function(define)
    with pytest.raises(eqsat.FusionError, match=rf"line \d+: fd.ops.{op}: integer {op} by zero"):
        eqsat.run_fusion(fusion, [torch.tensor([7, 1], dtype=tdt), torch.tensor([0, 1], dtype=tdt)])
    (ok,) = eqsat.run_fusion(fusion, [torch.tensor([7, 1], dtype=tdt), torch.tensor([2, 1], dtype=tdt)])
    assert ok.tolist() == {"div": [3, 1], "fmod": [1, 0], "remainder": [1, 0]}[op]


def test_division_by_zero_gives_values_where_int_by_zero_says(monkeypatch):
    # the one place to change if the GPU's values are wanted instead of an error
    monkeypatch.setitem(
        torch_arithmetic.INT_BY_ZERO, "fmod", lambda op, a: torch.where(a >= 0, 2**32 - 1, -1)
    )

    def define(fd):
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        fd.add_output(fd.ops.fmod(a, b))

    a, b = torch.tensor([7, -7, I64_MIN, 9]), torch.tensor([0, 0, -1, 4])
    (r,) = eqsat.run_fusion(eqsat.from_function(define), [a, b], strict=True)
    assert r.tolist() == [2**32 - 1, -1, 0, 1]


def test_scalar_integer_division_by_zero_is_an_error_at_its_line():
    def define(fd):
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        s = fd.ops.remainder(fd.define_scalar(7, dtype=DataType.Int), fd.define_scalar(0, dtype=DataType.Int))
        fd.add_output(fd.ops.add(x, s))

    with pytest.raises(eqsat.FusionError, match=r"line \d+: fd.ops.remainder: integer remainder by zero"):
        eqsat.run_fusion(eqsat.from_function(define), [torch.zeros(2, dtype=torch.int64)])


def test_integer_pow_with_a_negative_exponent_gives_nvfusers_value():
    # runtime/helpers.cu pow<T>: b < 0 gives 1 for a == 1, +-1 for a == -1, else 0
    def define(fd):
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int32)
        fd.add_output(fd.ops.pow(a, -1))
        fd.add_output(fd.ops.pow(a, -2))
        two, minus_one = fd.define_scalar(2, dtype=DataType.Int), fd.define_scalar(-1, dtype=DataType.Int)
        fd.add_output(fd.ops.pow(two, minus_one))

    a = torch.tensor([2, 1, -1, 0, -3], dtype=torch.int32)
    m1, m2, s = eqsat.run_fusion(eqsat.from_function(define), [a], strict=True)
    assert m1.dtype == torch.int32 and m1.tolist() == [0, 1, -1, 0, 0]
    assert m2.tolist() == [0, 1, 1, 0, 0]
    assert s == 0 and type(s) is int


def test_shifts_past_the_width_and_abs_neg_of_int_min_match_cuda():
    # PTX shl/shr clamp the shift amount (an unsigned register) to the width: a left shift gives
    # 0, a right shift the sign; abs and neg of INT_MIN wrap to INT_MIN (runtime/helpers.cu abs)
    def define(fd):
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int32)
        b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int32)
        fd.add_output(fd.ops.bitwise_left_shift(a, b))
        fd.add_output(fd.ops.bitwise_right_shift(a, b))
        fd.add_output(fd.ops.abs(a))
        fd.add_output(fd.ops.neg(a))

    a = torch.tensor([1, -1, 5, -5, I32_MIN], dtype=torch.int32)
    b = torch.tensor([32, 32, -1, 64, 1], dtype=torch.int32)
    shl, shr, ab, ng = eqsat.run_fusion(eqsat.from_function(define), [a, b], strict=True)
    assert shl.tolist() == [0, 0, 0, 0, 0]
    assert shr.tolist() == [0, -1, 0, -1, I32_MIN // 2]
    assert ab.tolist()[-1] == I32_MIN and ng.tolist()[-1] == I32_MIN


def test_an_int64_shift_amount_counts_by_its_low_32_bits():
    # PTX shl.b64/shr.s64 take a 32-bit amount: the Int amount is truncated, then clamped to 64
    # (an H100 gave 1 << 2**32 == 1, -8 >> (2**32 + 1) == -4; torch's own shifts give 0 and -1)
    def define(fd):
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        fd.add_output(fd.ops.bitwise_left_shift(a, b))
        fd.add_output(fd.ops.bitwise_right_shift(a, b))

    a = torch.tensor([1, 1, 5, -8, -8, -5])
    b = torch.tensor([2**32, 2**32 + 3, 64, 2**32 + 1, -1, 128])
    shl, shr = eqsat.run_fusion(eqsat.from_function(define), [a, b], strict=True)
    assert shl.tolist() == [1, 8, 0, -16, 0, 0]
    assert shr.tolist() == [1, 0, 0, -4, -1, -1]


# -- item 8: abs of a complex tensor is real ----------------------------------------------------------
@pytest.mark.parametrize(
    "dtype, real, tdt",
    [
        (DataType.ComplexFloat, DataType.Float, torch.complex64),
        (DataType.ComplexDouble, DataType.Double, torch.complex128),
    ],
)
def test_abs_of_a_complex_tensor_is_its_real_dtype(dtype, real, tdt):
    def define(fd):
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtype)
        m = fd.ops.abs(a)
        fd.add_output(m)
        fd.add_output(fd.ops.mul(m, 2.0))

    fusion = eqsat.from_function(define)
    assert [fusion.types[o.value].dtype for o in fusion.outputs] == [real, real]
    z = torch.tensor([3 + 4j, -1j, 0], dtype=tdt)
    m, m2 = eqsat.run_fusion(fusion, [z], strict=True)
    assert m.dtype == m2.dtype == tx.dt.to_torch(real)
    assert m.tolist() == [5.0, 1.0, 0.0] and m2.tolist() == [10.0, 2.0, 0.0]
    opt = eqsat.optimize_fusion(fusion, [z])
    got = eqsat.run_fusion(opt.fusion, [z], strict=True)
    assert [g.dtype for g in got] == [m.dtype, m.dtype] and got[1].tolist() == [10.0, 2.0, 0.0]


def test_the_egraph_types_abs_of_a_complex_value_real():
    from eqsat.egraph.dtype_codes import abs_code, result_code
    from eqsat.egraph.terms import DTYPE_CODE, TERMS, WEAK_COMPLEX, WEAK_FLOAT

    assert result_code(TERMS["Abs"].dtype, [DTYPE_CODE[DataType.ComplexFloat]]) == DTYPE_CODE[DataType.Float]
    assert abs_code(DTYPE_CODE[DataType.ComplexDouble]) == DTYPE_CODE[DataType.Double]
    assert abs_code(WEAK_COMPLEX) == WEAK_FLOAT
    assert abs_code(DTYPE_CODE[DataType.Half]) == DTYPE_CODE[DataType.Half]


# -- item 9: FP8 casts saturate --------------------------------------------------------------------
@pytest.mark.parametrize(
    "target, top, tdt",
    [
        (DataType.Float8_e5m2, 57344.0, torch.float8_e5m2),
        (DataType.Float8_e4m3fn, 448.0, torch.float8_e4m3fn),
    ],
)
@pytest.mark.parametrize("source", [DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16])
def test_a_cast_to_fp8_saturates_to_the_largest_finite_value(target, top, tdt, source):
    # runtime/casts.cu converts with cvt.rn.satfinite: beyond the largest finite value and +-inf
    # give +-max; NaN stays NaN
    def define(fd):
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=source)
        q = fd.ops.cast(a, dtype=target)
        fd.add_output(q)
        fd.add_output(fd.ops.cast(q, dtype=DataType.Float))

    big = 60000.0 if source is DataType.Half else 1e6
    x = torch.tensor(
        [big, -big, top, 1.5, float("inf"), -float("inf"), float("nan")], dtype=tx.dt.to_torch(source)
    )
    q, back = eqsat.run_fusion(eqsat.from_function(define), [x], strict=True)
    assert q.dtype == tdt
    assert back[:-1].tolist() == [top, -top, top, 1.5, top, -top] and back[-1].isnan()


def test_fp8_ops_that_keep_fp8_saturate_too():
    # a sum of FP8 values is accumulated in Float and cast back with the same conversion
    def define(fd):
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float8_e5m2)
        fd.add_output(fd.ops.sum(a, dims=[0]))
        fd.add_output(fd.ops.full([2], 1e6, dtype=DataType.Float8_e5m2))

    a = torch.tensor([57344.0, 57344.0, -8.0]).to(torch.float8_e5m2)
    s, f = eqsat.run_fusion(eqsat.from_function(define), [a], strict=True)
    assert s.dtype == f.dtype == torch.float8_e5m2
    assert s.float().item() == 57344.0 and f.float().tolist() == [57344.0, 57344.0]


def test_the_rule_verifier_rounds_to_fp8_as_the_executor_does():
    from eqsat.egraph.terms import DTYPE_CODE
    from eqsat.rules.evaluation import rounded as _rounded

    t = torch.tensor([1e6, -float("inf"), 3.0], dtype=torch.float64)
    assert _rounded(t, DTYPE_CODE[DataType.Float8_e5m2]).tolist() == [57344.0, -57344.0, 3.0]


# -- item 15: outputs are never the caller's input ---------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda fd, x: fd.ops.cast(x, dtype=DataType.Float),
        lambda fd, x: fd.ops.sum(x, dims=[]),
        lambda fd, x: fd.ops.max(x, dims=[]),
        lambda fd, x: fd.ops.min(x, dims=[]),
        lambda fd, x: fd.ops.prod(x, dims=[]),
        lambda fd, x: fd.ops.where(True, x, 0.0),
    ],
    ids=["cast-same-dtype", "sum-no-dims", "max-no-dims", "min-no-dims", "prod-no-dims", "where-constant"],
)
def test_an_output_computed_from_an_input_is_a_fresh_tensor(make):
    def define(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(make(fd, x))

    x = torch.randn(3, 4)
    keep = x.clone()
    (out,) = eqsat.run_fusion(eqsat.from_function(define), [x], strict=True)
    assert torch.equal(out, keep)
    out.fill_(7.0)
    assert torch.equal(x, keep), "writing into the output changed the input"


def test_real_and_imag_of_a_complex_input_are_fresh_tensors():
    # nvFuser computes them in a kernel (UnaryOp Real/Imag); torch.real and torch.imag are views
    def define(fd):
        z = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.ComplexFloat)
        fd.add_output(fd.ops.real(z))
        fd.add_output(fd.ops.imag(z))

    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    keep = z.clone()
    re, im = eqsat.run_fusion(eqsat.from_function(define), [z], strict=True)
    assert re.tolist() == [1.0, 3.0] and im.tolist() == [2.0, -4.0] and re.is_contiguous()
    re.zero_()
    im.zero_()
    assert torch.equal(z, keep)


def test_views_of_an_input_stay_views_as_nvfuser_returns_them():
    # nvFuser returns a reshape, permute, broadcast or expand of an input as a view of it
    # (csrc/scheduler/mark_aliases.cpp; tests/cpp/test_alias.cpp AliasTest.View, Broadcast)
    def define(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.permute(x, dims=[1, 0]))
        fd.add_output(
            fd.ops.broadcast_in_dim(x, shape=[2, fd.ops.size(x, 0), fd.ops.size(x, 1)], broadcast_dims=[1, 2])
        )

    x = torch.randn(3, 4)
    p, b = eqsat.run_fusion(eqsat.from_function(define), [x], strict=True)
    assert p.data_ptr() == x.data_ptr() and b.stride() == (0, 4, 1)


# -- against nvFuser itself: the values an H100 gave (bench/semantics_probe.py) -------------------

PROBE = Path(__file__).resolve().parent.parent / "bench" / "results" / "h100_semantics_probe_035_s37.json"


@pytest.mark.parametrize("dtype", ["Int32", "Int"])
@pytest.mark.parametrize(
    "op", ["div", "fmod", "remainder", "truediv", "bitwise_left_shift", "bitwise_right_shift"]
)
def test_the_executor_gives_what_nvfuser_gave_on_an_h100(op, dtype):
    recorded = json.loads(PROBE.read_text())["nvfuser_direct"]["cases"][f"{op}_{dtype}"][0]["values"]
    tdt = torch.int32 if dtype == "Int32" else torch.int64
    info = torch.iinfo(tdt)
    if "shift" in op:  # bench/semantics_probe.py's _shift operands
        a = torch.tensor([1, -1, 5, -5, 1, -8], dtype=tdt)
        b = torch.tensor([info.bits, info.bits, info.bits + 1, 2 * info.bits, -1, 1], dtype=tdt)
    else:  # its _binary operands; a division by zero is an error here instead
        a = torch.tensor([info.min, info.min, 7, -7, 7, -7, 0, info.max], dtype=tdt)
        b = torch.tensor([-1, 1, 0, 0, -2, 2, 0, -1], dtype=tdt)
    keep = [i for i in range(len(a)) if op in ("truediv",) or "shift" in op or b[i] != 0]

    def define(fd):
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=getattr(DataType, dtype))
        y = fd.define_tensor(shape=[-1], contiguity=[True], dtype=getattr(DataType, dtype))
        fd.add_output(getattr(fd.ops, op)(x, y))

    (got,) = eqsat.run_fusion(eqsat.from_function(define), [a[keep], b[keep]], strict=True)
    want = [recorded[i] for i in keep]
    assert [v if v == v else "nan" for v in got.tolist()] == [v if v == v else "nan" for v in want]
