"""The tests' check of a definition against torch written by hand, in the style of nvFuser's
python tests (``exec_nvfuser``): the definition is recorded, run through eqsat as read and as
optimized, and every output compared with an independent torch reference. Comparing eqsat's
optimized fusion with eqsat's own run of the input would pass a bug both share; torch written
by hand shares none."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

import eqsat
from eqsat.ir.dtypes import DataType
from eqsat.reference.compare import mismatch, output_rtols
from eqsat.reference.devices import fresh_copies


def as_list(outputs: Any) -> list:
    """A reference's outputs as a list: a tuple or list as it is, anything else as one output."""
    return list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]


def returned_rtols(fusion: eqsat.Fusion) -> list[float]:
    """Per output that ``run_fusion`` returns (aliased ones are written into their input
    instead): the tolerance of the least precise dtype it is computed through."""
    return [
        rtol
        for rtol, out in zip(output_rtols(fusion), fusion.outputs, strict=True)
        if out.alias_input is None
    ]


def assert_outputs_match(
    got: Sequence[Any], want: Sequence[Any], rtols: Sequence[float | None], what: str
) -> None:
    """``got`` has as many outputs as ``want``, each of its dtype and shape, and values within
    ``rtols`` (per output; None: the dtype's tolerance) of it."""
    assert len(got) == len(want), f"{what}: {len(got)} outputs, the reference has {len(want)}"
    for i, (g, w, rtol) in enumerate(zip(got, want, rtols, strict=True)):
        if isinstance(w, torch.Tensor):
            assert isinstance(g, torch.Tensor), f"{what}: output {i} is a {type(g).__name__}, not a tensor"
            assert g.dtype == w.dtype, f"{what}: output {i} has dtype {g.dtype}, the reference {w.dtype}"
            assert g.shape == w.shape, (
                f"{what}: output {i} has shape {list(g.shape)}, the reference {list(w.shape)}"
            )
        problem = mismatch(g, w, rtol)
        assert problem is None, f"{what}: output {i}: {problem}"


def check(
    definition: Callable | Any,
    inputs: Sequence[Any],
    torch_reference: Callable[..., Any],
    *,
    rtol: float | None = None,
    **options,
) -> eqsat.OptimizedFusion:
    """Record ``definition`` (a function of ``fd``, or anything ``eqsat.ingest`` reads), run it
    through the torch executor as read and as optimized (``optimize_fusion(definition, inputs,
    **options)``), both with ``strict=True`` (no result cast to the IR's dtype), and compare each
    with ``torch_reference(*inputs)`` (a tensor or a list of them): the same number of outputs,
    each of the reference's dtype and shape, and values within the tolerance of the least
    precise dtype the output is computed through (``rtol``, where given, instead). Every run gets
    its own copies of ``inputs`` (a fusion may write into an aliased input). Returns the
    optimized fusion, for the test to look further."""
    fusion = eqsat.ingest(definition)
    want = as_list(torch_reference(*fresh_copies(inputs)))
    rtols = [rtol] * len(want) if rtol is not None else returned_rtols(fusion)
    assert_outputs_match(eqsat.run_fusion(fusion, fresh_copies(inputs), strict=True), want, rtols, "as read")
    opt = eqsat.optimize_fusion(fusion, inputs, **options)
    assert_outputs_match(
        eqsat.run_fusion(opt.fusion, fresh_copies(inputs), strict=True), want, rtols, "optimized"
    )
    return opt


def long_sum(fd):
    """A sum of 40 products of three [M, N] inputs: what the exploding rule blows up."""
    xs = [fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float) for _ in range(3)]
    acc = xs[0]
    for i in range(40):
        acc = fd.ops.add(acc, fd.ops.mul(xs[i % 3], xs[(i + 1) % 3]))
    fd.add_output(fd.ops.sum(acc, dims=[1]))


BENCH = Path(__file__).resolve().parent.parent / "bench"


def load_bench(monkeypatch, name: str):
    """bench/NAME.py imported as its command line runs it (bench/ on the path, for gpu_timing),
    so that a test can call its ``main`` and ``parse_args``."""
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
