"""An output's stride order under the nvfuser_direct frontend, on the CPU (issue 37 item 7:
dropping it was caught only by the GPU tests). nvfuser_direct has no ``add_output(t,
stride_order)`` (its binding takes an output and an optional alias input): it prints an
output's layout as ``tvN = fd.ops.stride_order(tvM, stride_order=[...])`` whose result is added
(python/python_direct/python_translate.cpp, runtime.cpp). The references are text in that
print: definitions below, written as nvfuser_direct prints them, and the Thunder corpus files
that use stride_order (printed by nvfuser_direct itself). Checked: the direct text eqsat emits
(``fusion_source(f, "direct")``) and the calls ``to_nvfuser`` makes on a recording stand-in for
nvfuser_direct's FusionDefinition."""

import ast
import sys
import types

import pytest
from conftest import CORPUS_THUNDER, require_corpus, thunder_files

import eqsat
from eqsat.ir.opspec import OPAQUE_OUTPUTS, OPS
from eqsat.lowering import fusion_source
from eqsat.lowering.nvfuser import to_nvfuser

HEADER = "import torch\nfrom {module} import FusionDefinition, DataType\n\n"


def _tensor(t: str, i: int, rank: int) -> str:
    """Line defining input ``{t}{i}``: a contiguous Float tensor of ``rank`` symbolic extents."""
    shape, contiguity = ", ".join(["-1"] * rank), ", ".join(["True"] * rank)
    return (
        f"    {t}{i} = fd.define_tensor(shape=[{shape}], contiguity=[{contiguity}], "
        f"dtype=DataType.Float, is_cpu=False)\n"
    )


# (classic definition with add_output(t, stride_order), the same as nvfuser_direct prints it)
CASES = {
    "column-major": (
        _tensor("T", 0, 2) + "    T1 = fd.ops.exp(T0)\n    fd.add_output(T1, stride_order=[0, 1])\n",
        _tensor("tv", 0, 2) + "    tv1 = fd.ops.exp(tv0)\n"
        "    tv2 = fd.ops.stride_order(tv1, stride_order=[0, 1])\n    fd.add_output(tv2)\n",
    ),
    "two orders and a plain output": (
        _tensor("T", 0, 3)
        + _tensor("T", 1, 3)
        + "    T2 = fd.ops.add(T0, T1)\n    T3 = fd.ops.sum(T2, dims=[2])\n    T4 = fd.ops.mul(T2, T0)\n"
        "    fd.add_output(T2, stride_order=[1, 2, 0])\n    fd.add_output(T3)\n"
        "    fd.add_output(T4, stride_order=[0, 2, 1])\n",
        _tensor("tv", 0, 3)
        + _tensor("tv", 1, 3)
        + "    tv2 = fd.ops.add(tv0, tv1)\n    tv3 = fd.ops.sum(tv2, dims=[2])\n"
        "    tv4 = fd.ops.mul(tv2, tv0)\n"
        "    tv5 = fd.ops.stride_order(tv2, stride_order=[1, 2, 0])\n"
        "    tv6 = fd.ops.stride_order(tv4, stride_order=[0, 2, 1])\n"
        "    fd.add_output(tv5)\n    fd.add_output(tv3)\n    fd.add_output(tv6)\n",
    ),
}


def _definition(module: str, body: str) -> str:
    """A repro file's text importing ``module``, its definition function made of ``body``."""
    name = "nvfuser_fusion_id0" if module == "nvfuser" else "nvfuser_fusion"
    return HEADER.format(module=module) + f"def {name}(fd : FusionDefinition) -> None :\n" + body


def _layouts(text: str) -> tuple[list, list]:
    """From definition text: each ``fd.ops.stride_order`` call, in order, as (the op that made
    its operand, its order); and the outputs (aliases of inputs left out), in the order added,
    each as the order of the stride_order call that made it (None where another op did). An
    ``add_output`` that passes anything but the output and an alias input fails:
    nvfuser_direct takes nothing else."""
    fn = next(
        n
        for n in ast.walk(ast.parse(text))
        if isinstance(n, ast.FunctionDef) and n.name.startswith("nvfuser_fusion")
    )
    made_by, calls, outputs = {}, [], []
    for stmt in fn.body:
        call = stmt.value if isinstance(stmt, (ast.Assign, ast.Expr)) else None
        if not isinstance(call, ast.Call):
            continue
        callee = ast.unparse(call.func)
        if callee == "fd.add_output":
            assert (
                not call.keywords
                and len(call.args) in (1, 2)
                and all(isinstance(a, ast.Name) for a in call.args)
            ), f"nvfuser_direct's add_output takes an output and an alias input: {ast.unparse(call)}"
            if len(call.args) == 1:  # not an alias of an input
                outputs.append(made_by[call.args[0].id][1])
            continue
        kw = {k.arg: k.value for k in call.keywords}
        order = ast.literal_eval(kw["stride_order"]) if callee == "fd.ops.stride_order" else None
        if order is not None:
            calls.append((made_by[call.args[0].id][0], order))
        for target in stmt.targets if isinstance(stmt, ast.Assign) else []:
            for name in target.elts if isinstance(target, ast.Tuple) else [target]:
                made_by[name.id] = (callee.rsplit(".", 1)[-1], order)
    return calls, outputs


def _thunder_stride_order_files():
    return [p for p in thunder_files() if "fd.ops.stride_order(" in p.read_text()]


# -- the direct text -------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(CASES))
def test_the_direct_text_writes_an_output_stride_order_as_nvfuser_direct_prints_it(case):
    """A classic definition's output stride orders, in eqsat's direct text: the same
    stride_order calls (operand op, order) feeding the same outputs as nvfuser_direct's print
    of the definition, and no add_output(t, stride_order); the direct text of the direct
    definition gives them back."""
    classic, direct = CASES[case]
    want = _layouts(_definition("nvfuser_direct", direct))
    assert want[0], "the reference has stride_order calls"
    fusion = eqsat.ingest(_definition("nvfuser", classic))
    assert _layouts(fusion_source(fusion, "direct")) == want
    assert _layouts(fusion_source(eqsat.ingest(_definition("nvfuser_direct", direct)), "direct")) == want


def test_the_direct_text_keeps_the_corpus_stride_orders():
    """Thunder's files that use stride_order (printed by nvfuser_direct), read and written
    again in the direct style: the same stride_order calls, each on the output of the same op
    and with the same order, and the same outputs."""
    require_corpus(CORPUS_THUNDER)
    paths = _thunder_stride_order_files()
    assert paths, f"no file of {CORPUS_THUNDER} uses fd.ops.stride_order"
    for path in paths:
        want = _layouts(path.read_text())
        got = _layouts(fusion_source(eqsat.from_file(path, device="meta").fusion, "direct"))
        assert got == want, path.name


# -- to_nvfuser on nvfuser_direct ------------------------------------------------------------


class _Handle:
    """A value the recording definition made: the call that made it."""

    def __init__(self, op: str, kwargs: dict):
        self.op, self.kwargs = op, kwargs


class _RecordingDefinition:
    """nvfuser_direct's FusionDefinition as far as ``to_nvfuser`` calls it: every call
    recorded; ``add_output`` takes an output and an optional alias input, as nvfuser_direct's
    binding does (a stride_order argument is a TypeError, as it is there)."""

    def __init__(self):
        self.outputs: list[_Handle] = []
        self.stride_orders: list[tuple[str, list]] = []  # (operand's op, order) per call
        self.ops = _RecordingOps(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def _make(self, op: str, args, kwargs):
        if op == "stride_order":
            self.stride_orders.append((args[0].op, list(kwargs["stride_order"])))
        count = OPAQUE_OUTPUTS.get() or (len(OPS[op].outputs) if op in OPS else 1)
        handles = tuple(_Handle(op, kwargs) for _ in range(count))
        return handles[0] if count == 1 else handles

    def define_tensor(self, **kwargs):
        return self._make("define_tensor", (), kwargs)

    def define_scalar(self, *args, **kwargs):
        return self._make("define_scalar", args, kwargs)

    def add_output(self, output, alias_input=None):
        if alias_input is None:
            self.outputs.append(output)


class _RecordingOps:
    def __init__(self, fd: _RecordingDefinition):
        self._fd = fd

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: self._fd._make(name, args, kwargs)


class _DataTypes:
    def __getattr__(self, name: str) -> str:
        return f"DataType.{name}"


@pytest.fixture
def recording_direct(monkeypatch):
    """A stand-in ``nvfuser_direct`` module in ``sys.modules`` whose FusionDefinition records."""
    made = []

    def definition():
        made.append(_RecordingDefinition())
        return made[-1]

    module = types.ModuleType("nvfuser_direct")
    module.FusionDefinition, module.DataType = definition, _DataTypes()
    monkeypatch.setitem(sys.modules, "nvfuser_direct", module)
    return made


def _recorded(fd: _RecordingDefinition) -> tuple[list, list]:
    """The recording as ``_layouts`` gives text: its stride_order calls and its outputs."""
    return fd.stride_orders, [
        h.kwargs["stride_order"] if h.op == "stride_order" else None for h in fd.outputs
    ]


@pytest.mark.parametrize("case", list(CASES))
def test_to_nvfuser_on_nvfuser_direct_makes_the_output_stride_order_calls(case, recording_direct):
    """``to_nvfuser(f, "nvfuser_direct")`` for a classic definition with output stride orders:
    the recorded FusionDefinition got the stride_order calls of nvfuser_direct's print of the
    definition, on the same ops' outputs, and added their results as the outputs."""
    classic, direct = CASES[case]
    to_nvfuser(eqsat.ingest(_definition("nvfuser", classic)), frontend="nvfuser_direct")
    (fd,) = recording_direct
    assert _recorded(fd) == _layouts(_definition("nvfuser_direct", direct))


def test_to_nvfuser_on_nvfuser_direct_makes_the_corpus_stride_order_calls(recording_direct):
    """Thunder's files that use stride_order, read and lowered onto the recording
    nvfuser_direct: the file's stride_order calls, each on the same op's output with the same
    order, and the same outputs."""
    require_corpus(CORPUS_THUNDER)
    paths = _thunder_stride_order_files()
    assert paths, f"no file of {CORPUS_THUNDER} uses fd.ops.stride_order"
    for path in paths:
        to_nvfuser(eqsat.from_file(path, device="meta").fusion, frontend="nvfuser_direct")
        assert _recorded(recording_direct.pop()) == _layouts(path.read_text()), path.name
