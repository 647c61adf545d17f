"""The picture of the predicted kernels (``eqsat.cost.drawing``, ``eqsat optimize --draw``) and what the
cost model records for it (``Kernel.reads``/``writes``, ``Estimate.tensors``).

LayerNorm + amax (the demo's seed) at 16384x4096: as given, the layer norm's kernel writes
``|y|`` in float32 (268 MB) for a grid reduction to read back; eqsat takes the rows' maxima in
the layer norm's kernel, which hands 16384 floats (65.5 KB) on instead."""

import re
import shutil

import pytest
import torch

import eqsat
from eqsat.cli import main
from eqsat.cost.profile import load_profile
from eqsat.cost.drawing import check_drawable, draw_kernels, kernel_graph_dot
from eqsat.errors import FusionError
from eqsat.lowering.source import repro_source
from eqsat.testing.seeds import SEEDS

SEED = SEEDS["layernorm_amax"]
HAS_DOT = shutil.which("dot") is not None
NO_DOT = "Graphviz's dot program is not installed here (apt-get install graphviz)"


@pytest.fixture(scope="module")
def opt():
    return eqsat.optimize_fusion(
        SEED.model_ref, SEED.make_inputs(*SEED.demo_shape, device="meta"), deadline_s=None
    )


def _side(dot: str, side: str) -> str:
    """The DOT text of one side's cluster (``before`` or ``after``)."""
    start = dot.index(f"subgraph cluster_{side}")
    end = dot.index("subgraph cluster_after") if side == "before" else len(dot)
    return dot[start:end]


def _edges(text: str, tail: str, head: str) -> list[str]:
    """The labels' text of the arrows from node ``tail`` to node ``head``."""
    return re.findall(rf"\b{tail} -> {head} \[label=<.*<TD>(.*)</TD></TR></TABLE>> [a-z]+=", text)


def test_the_kernels_record_the_tensors_behind_their_bytes(opt):
    """Each kernel's ``reads``/``writes`` add up to its bytes, and each tensor is described:
    the layer norm's kernel hands ``|y|`` (T27, float32, 268 MB) to the grid reduction as
    given, the rows' maxima (T28, 16384 floats) as optimized."""
    report = opt.report
    assert report.changed
    for est in (report.before, report.after):
        for k in est.kernels:
            assert sum(k.reads.values()) == k.bytes_read and sum(k.writes.values()) == k.bytes_written
            assert set(k.reads) | set(k.writes) <= set(est.tensors)
        inputs = sorted(t.name for t in est.tensors.values() if t.source == "input")
        assert inputs == ["T0", "T1", "T2", "T3", "T4"]
    (norm, amax) = report.before.kernels
    (handed,) = set(norm.writes) & set(amax.reads)
    t = report.before.tensors[handed]
    assert (t.name, t.dtype, t.shape, t.bytes, t.output) == ("T27", "Float", (16384, 4096), 268435456, False)
    (norm, amax) = report.after.kernels
    (handed,) = set(norm.writes) & set(amax.reads)
    t = report.after.tensors[handed]
    assert (t.name, t.dtype, t.shape, t.bytes) == ("T28", "Float", (16384,), 65536)
    # what bounds each kernel: its bytes at the kind's bandwidth, or its arithmetic (no draws here)
    kinds = load_profile(None).kinds
    for k in report.before.kernels + report.after.kernels:
        c = kinds[k.kind]
        memory_us, compute_us = k.bytes / (c.bandwidth_GBps * 1e3), k.flops / (c.gflops * 1e3)
        assert k.bound == ("compute" if compute_us > memory_us else "memory") and k.drawn == 0
    assert {k.bound for k in report.before.kernels + report.after.kernels} == {"compute", "memory"}


def test_the_dot_text_shows_both_sides_their_kernels_tensors_and_rules(opt):
    report = opt.report
    dot = kernel_graph_dot(opt, title="LayerNorm + amax")
    assert "LayerNorm + amax" in dot and f"{report.before.time_us / report.after.time_us:.2f}× faster" in dot
    sides = (("before", report.before, "As given"), ("after", report.after, "Optimized by eqsat"))
    for side, est, heading in sides:
        text = _side(dot, side)
        assert heading in text
        assert f"{len(est.kernels)} kernels" in text and f"{est.time_us:.1f} µs predicted" in text
        for i, k in enumerate(est.kernels):
            box = re.search(rf"\b{side[0]}_k{i} \[label=<(.*)> [a-z]+=", text).group(1)
            assert f"kernel {i}</B> · {k.kind}" in box and f"{k.time_us:.1f} µs" in box
            assert all(op in box for op in k.ops)
        for name in ("T0", "T1", "T2", "T3", "T4"):
            assert f"<B>{name}</B> bf16[" in text
    before, after = _side(dot, "before"), _side(dot, "after")
    assert "940 MB moved" in before and "403 MB moved" in after
    # the tensor the first kernel hands the second: its name, dtype, shape and bytes
    assert _edges(before, "b_k0", "b_k1") == ["T27 f32[16384, 4096]<BR/><B>268 MB</B>"]
    assert _edges(after, "a_k0", "a_k1") == ["T28 f32[16384]<BR/><B>65.5 KB</B>"]
    assert _edges(before, "b_in0", "b_k0") == ["<B>134 MB</B>"]  # T0, bf16[16384, 4096]
    assert "<B>T29</B> bf16[16384, 4096]<BR/>output" in before and "<B>T26</B> bf16[16384, 4096]" in after
    assert report.rules and all(rule in after for rule in report.rules)
    assert not any(rule in before for rule in report.rules)


def linear_after_a_transpose(fd) -> None:
    """nvFuser issue 2317 (the corpus' fe_issue2317_linear_transpose): a copy of a transpose, a
    reshape of it (a view: in no kernel), and two linears (run outside the priced kernels)."""
    t0 = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=[True] * 4, dtype=eqsat.DataType.BFloat16)
    t1 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=eqsat.DataType.BFloat16)
    t2 = fd.define_tensor(shape=[-1, -1], contiguity=[True] * 2, dtype=eqsat.DataType.BFloat16)
    t4 = fd.ops.stride_order(fd.ops.permute(t0, dims=[0, 2, 1, 3]), stride_order=[3, 2, 1, 0])
    t6 = fd.ops.reshape(t4, new_shape=fd.ops.shape(t1))
    t9 = fd.ops.cast(fd.ops.add(fd.ops.linear(t6, t2), t1), dtype=eqsat.DataType.BFloat16)
    fd.add_output(fd.ops.add(fd.ops.linear(t9, t2), t9))


def test_every_box_is_connected_through_views_and_ops_outside_the_kernels():
    """Each kernel's tensors, the view no kernel computes and the ops nvFuser runs apart
    (linear) are joined by arrows: every box but the inputs has one in, every kernel one out."""
    shapes = [(16, 25, 128, 64), (16, 128, 1600), (1600, 1600)]
    opt = eqsat.optimize_fusion(
        linear_after_a_transpose,
        [torch.empty(s, dtype=torch.bfloat16, device="meta") for s in shapes],
        deadline_s=None,
    )
    est = opt.report.before
    assert [op for op, _ in est.barriers.values()] == ["linear", "linear"]
    (view,) = [t for t in est.tensors.values() if t.source == "reshape"]
    assert view.of and all(n in est.tensors for n in view.of)
    assert est.tensors[next(n for n, t in est.tensors.items() if t.name == "T2")].shape == (1600, 1600)
    text = _side(kernel_graph_dot(opt), "before")
    boxes = set(re.findall(r"^\t\t\t?(b_\w+) \[label=", text, re.M))
    heads = set(re.findall(r"-> (b_\w+) \[label=", text))
    tails = set(re.findall(r"(b_\w+) -> b_\w+ \[label=", text))
    assert {b for b in boxes if not b.startswith("b_in")} == heads and len(boxes) == 3 + 3 + 2 + 1 + 1
    assert {f"b_k{i}" for i in range(len(est.kernels))} <= tails
    assert "reshape, in no kernel" in text and text.count("run by nvFuser outside the priced kernels") == 2


def test_a_fusion_kept_as_given_says_why():
    kept = eqsat.optimize_fusion(
        SEED.model_ref, SEED.make_inputs(*SEED.demo_shape, device="meta"), deadline_s=None, min_gain=0.9
    )
    assert not kept.report.changed
    after = _side(kernel_graph_dot(kept), "after")
    assert "eqsat kept it as given" in after and "why:" in after and "min_gain=0.9" in after


def test_an_op_eqsat_does_not_model_is_drawn_and_leaves_the_estimate_alone():
    # its output has no type the analyses know: the picture shows no shape for it, and the
    # cost model still estimates the fusion (describing the tensors once failed on it)
    def define(fd):
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=eqsat.DataType.Float)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=eqsat.DataType.Float)
        n, k, m = fd.ops.size(a, dim=0), fd.ops.size(a, dim=1), fd.ops.size(b, dim=1)
        ab = fd.ops.broadcast_in_dim(a, shape=[n, k, m], broadcast_dims=[0, 1])
        bb = fd.ops.broadcast_in_dim(b, shape=[n, k, m], broadcast_dims=[0, 2])
        fd.add_output(fd.ops.sum(fd.ops.mul(ab, bb), dims=[1]))
        fd.add_output(fd.ops.threshold(a, 3.0, 0.0))  # nvFuser's; eqsat does not model it

    opt = eqsat.optimize_fusion(define, [torch.empty(512, 512, device="meta")] * 2, min_gain=0.05)
    assert opt.report.estimated and opt.report.changed
    dot = kernel_graph_dot(opt)
    assert "<B>opaque</B>" in dot and "?[?]" in dot


@pytest.mark.skipif(not HAS_DOT, reason=NO_DOT)
@pytest.mark.parametrize("suffix, head", [(".svg", b"<?xml"), (".png", b"\x89PNG"), (".dot", b"digraph")])
def test_the_picture_is_written_as_its_suffix_says(opt, tmp_path, suffix, head):
    path = draw_kernels(opt, tmp_path / f"kernels{suffix}", title="LayerNorm + amax")
    assert path == tmp_path / f"kernels{suffix}" and path.read_bytes().startswith(head)
    if suffix == ".svg":
        assert "Optimized by eqsat" in path.read_text() and "kernel 1" in path.read_text()


def test_the_dot_text_needs_no_graphviz(opt, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot on PATH
    path = draw_kernels(opt.report, tmp_path / "kernels.gv")
    assert path.read_text() == kernel_graph_dot(opt)


@pytest.mark.parametrize("name", ["kernels.jpg", "kernels", "kernels.svg.txt"])
def test_an_unknown_suffix_is_a_clear_error(name):
    with pytest.raises(FusionError, match=r"must end in one of \.dot, \.gv, \.svg, \.png, \.pdf"):
        check_drawable(name)


def test_without_dot_a_drawn_picture_is_a_clear_error(opt, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(
        FusionError,
        match=r"needs Graphviz's `dot` program.*apt-get install graphviz"
        r".*\.dot file",
    ):
        draw_kernels(opt, tmp_path / "kernels.svg")
    # dot found where it then does not run: the same advice
    monkeypatch.setattr(shutil, "which", lambda name: "/nowhere/dot")
    with pytest.raises(FusionError, match=r"`dot` program, which did not run.*apt-get install"):
        draw_kernels(opt, tmp_path / "kernels.png")
    assert not list(tmp_path.iterdir())


def _repro(tmp_path):
    path = tmp_path / "layernorm_amax.py"
    path.write_text(
        repro_source(eqsat.from_function(SEED.model_ref), SEED.make_inputs(*SEED.demo_shape, device="meta"))
    )
    return path


def test_the_cli_draws_the_kernels(tmp_path, capsys):
    path = _repro(tmp_path)
    out = tmp_path / "kernels.dot"
    assert main(["optimize", str(path), "--json", "--deadline", "none", "--draw", str(out)]) == 0
    captured = capsys.readouterr()
    assert f"drew the predicted kernels before and after in {out}" in captured.err
    dot = out.read_text()
    assert str(path) in dot and "Optimized by eqsat" in dot and "split-max-lowest-axis-first" in dot


def test_the_cli_refuses_a_bad_picture_before_optimizing(tmp_path, capsys, monkeypatch):
    path = _repro(tmp_path)
    import eqsat.pipeline.driver as driver  # the optimize command imports it when it runs

    monkeypatch.setattr(driver, "optimize", lambda *a, **k: pytest.fail("optimized"))
    assert main(["optimize", str(path), "--draw", str(tmp_path / "kernels.jpeg")]) == 2
    assert "must end in one of" in capsys.readouterr().err
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["optimize", str(path), "--draw", str(tmp_path / "kernels.svg")]) == 2
    assert "apt-get install graphviz" in capsys.readouterr().err
