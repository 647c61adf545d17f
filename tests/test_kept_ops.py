"""Ops eqsat keeps as they are (sorts, scans, scatter, embedding, grouped matmul; what Thunder
0.2.6's nvFuser executor emits for MoE routing, position ids and embeddings with max_norm):
read exactly, typed, run through the torch executor against torch written by hand, written
back as nvfuser_direct prints them, and kernel boundaries for the cost model."""

import pytest
import torch
import torch.nn.functional as F
from helpers import check

import eqsat
from eqsat import DataType, FusionError

F32, BF16 = DataType.Float, DataType.BFloat16


def _tensor(fd, shape, dtype=F32):
    return fd.define_tensor(shape=[-1] * len(shape), contiguity=[True] * len(shape), dtype=dtype)


def test_a_router_top_k_of_a_softmax_and_its_scatter_back():
    """MoE routing: the top 2 of 8 experts' softmax probabilities, renormalized, and written
    back into a zero [tokens, experts] map."""

    def f(fd):
        logits = _tensor(fd, [64, 8], BF16)
        p = fd.ops.exp(fd.ops.cast(logits, dtype=F32))
        p = fd.ops.div(p, fd.ops.broadcast_in_dim(fd.ops.sum(p, dims=[1]), shape=[64, 8], broadcast_dims=[0]))
        top, idx = fd.ops.topk(p, 2, dim=-1, sorted=True)
        top = fd.ops.div(
            top, fd.ops.broadcast_in_dim(fd.ops.sum(top, dims=[1]), shape=[64, 2], broadcast_dims=[0])
        )
        routed = fd.ops.scatter(fd.ops.full(shape=[64, 8], fill_value=0.0, dtype=F32), idx, top, dim=1)
        fd.add_output(routed)
        fd.add_output(idx)

    def torch_ref(logits):
        p = logits.float().softmax(-1)
        top, idx = p.topk(2, dim=-1)
        top = top / top.sum(-1, keepdim=True)
        return [torch.zeros(64, 8).scatter(1, idx, top), idx]

    opt = check(f, [torch.randn(64, 8).to(torch.bfloat16)], torch_ref)
    fusion = eqsat.ingest(f)
    values, indices = (
        fusion.types[v] for v in fusion.nodes[[n.op for n in fusion.nodes].index("topk")].outputs
    )
    assert values.dtype is F32 and indices.dtype is DataType.Int
    # nvfuser_direct binds topk's k as a Val alone: the written definition defines it first
    assert "= fd.define_scalar(2, dtype=DataType.Int)" in opt.source and ", sorted=True)" in opt.source


@pytest.mark.parametrize("descending", [False, True])
def test_argsort_is_stable_and_gives_int64_indices(descending):
    def f(fd):
        x = _tensor(fd, [6, 40])
        fd.add_output(fd.ops.argsort(fd.ops.floor(x), dim=1, descending=descending))

    x = torch.randn(6, 40) * 3  # floor: many ties, which a stable sort keeps in order
    check(f, [x], lambda x: torch.argsort(x.floor(), dim=1, descending=descending, stable=True))


@pytest.mark.parametrize("op", ["cumsum", "cumprod", "cummin", "cummax"])
def test_scans_keep_the_input_dtype(op):
    def f(fd):
        x = _tensor(fd, [4, 33], DataType.Int32)
        fd.add_output(getattr(fd.ops, op)(x, dim=-1))

    def torch_ref(x):
        out = getattr(torch, op)(x, 1)
        return (out.values if op in ("cummin", "cummax") else out).to(torch.int32)

    x = torch.randint(-3, 4, (4, 33), dtype=torch.int32)
    check(f, [x], torch_ref)


def test_position_ids_from_a_mask_by_cumsum():
    """HF's position ids of a padded batch: cumsum(mask) - 1, where the mask is 1."""

    def f(fd):
        mask = _tensor(fd, [2, 16], DataType.Int)
        pos = fd.ops.sub(fd.ops.cumsum(mask, dim=1), 1)
        fd.add_output(fd.ops.where(fd.ops.eq(mask, 0), 1, pos))

    mask = torch.ones(2, 16, dtype=torch.int64)
    mask[1, :5] = 0
    check(f, [mask], lambda m: (m.cumsum(-1) - 1).masked_fill(m == 0, 1))


def test_embedding_with_max_norm_leaves_the_weight_as_it_was():
    def f(fd):
        ids = _tensor(fd, [3, 7], DataType.Int)
        w = _tensor(fd, [50, 16])
        fd.add_output(fd.ops.embedding_fwd(ids, w, None, 1.0, 2.0, False, False))

    ids, w = torch.randint(0, 50, (3, 7)), torch.randn(50, 16) * 3
    before = w.clone()
    (out,) = eqsat.run_fusion(eqsat.ingest(f), [ids, w], strict=True)
    torch.testing.assert_close(out, F.embedding(ids, before.clone(), max_norm=1.0))
    assert torch.equal(w, before) and out.norm(dim=-1).max() <= 1.0 + 1e-5


@pytest.mark.parametrize("form", ["split k", "split n", "split m"])
def test_grouped_mm_in_each_of_its_forms(form):
    ends = torch.tensor([3, 3, 10, 16], dtype=torch.int32)  # an empty group among them
    shapes = {"split k": ([5, 16], [16, 6]), "split n": ([4, 5, 8], [8, 16]), "split m": ([16, 8], [4, 8, 6])}
    a_shape, b_shape = shapes[form]

    def f(fd):
        a, b = _tensor(fd, a_shape, BF16), _tensor(fd, b_shape, BF16)
        fd.add_output(fd.ops.grouped_mm(a, b, _tensor(fd, [4], DataType.Int32)))

    def torch_ref(a, b, ends):
        a, b, cuts = a.float(), b.float(), list(zip([0, 3, 3, 10], [3, 3, 10, 16]))
        if form == "split k":
            return torch.stack([a[:, s:e] @ b[s:e] for s, e in cuts]).bfloat16()
        if form == "split n":
            return torch.cat([a[i] @ b[:, s:e] for i, (s, e) in enumerate(cuts)], dim=1).bfloat16()
        return torch.cat([a[s:e] @ b[i] for i, (s, e) in enumerate(cuts)], dim=0).bfloat16()

    check(f, [torch.randn(*a_shape).bfloat16(), torch.randn(*b_shape).bfloat16(), ends], torch_ref)


def test_the_scaled_grouped_mm_is_opaque_and_keeps_its_three_outputs():
    text = """
def nvfuser_fusion(fd : FusionDefinition) -> None :
    tv0 = fd.define_tensor(shape=[16, 8], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    tv1 = fd.define_tensor(shape=[4, 8, 6], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    tv2 = fd.define_tensor(shape=[4], contiguity=[True], dtype=DataType.Int32, is_cpu=False)
    tv3 = fd.define_tensor(shape=[16, 1], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    tv4 = fd.define_tensor(shape=[4, 1, 6], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
    tv5, _, _ = fd.ops.grouped_mm(tv0, tv1, tv2, tv3, tv4, dtype=DataType.BFloat16)
    tv6 = fd.ops.relu(tv5)
    fd.add_output(tv6)
"""
    fusion = eqsat.from_source(text).fusion
    (node,) = [n for n in fusion.nodes if n.op == "grouped_mm"]
    assert node.opaque and len(node.outputs) == 3
    again = eqsat.from_source(eqsat.optimize_fusion(fusion).source).fusion
    assert [n.opaque for n in again.nodes if n.op == "grouped_mm"] == [True]


def test_sorts_and_scans_are_kernel_boundaries():
    """What feeds a topk is written by a kernel, and what reads its values is another."""

    def f(fd):
        x = _tensor(fd, [256, 1024])
        top, _ = fd.ops.topk(fd.ops.exp(x), 8, dim=1)
        fd.add_output(fd.ops.mul(top, 2.0))

    opt = eqsat.optimize_fusion(f, [torch.empty(256, 1024, device="meta")])
    assert len(opt.report.before.kernels) == 2


def test_bad_calls_name_the_line_and_what_was_expected():
    def k_too_large(fd):
        x = fd.define_tensor(shape=[4, 5], contiguity=[True, True], dtype=F32)
        fd.add_output(fd.ops.topk(x, 6, dim=1)[0])

    with pytest.raises(FusionError, match=r"k = 6 is outside 0\.\.5"):
        eqsat.ingest(k_too_large)

    def scan_with_init(fd):
        fd.add_output(fd.ops.cumsum(_tensor(fd, [4, 5]), dim=1, init=1.0))

    with pytest.raises(FusionError, match="init"):
        eqsat.ingest(scan_with_init)

    def grouped_3d_3d(fd):
        a, b = _tensor(fd, [2, 4, 5]), _tensor(fd, [2, 5, 3])
        fd.add_output(fd.ops.grouped_mm(a, b, _tensor(fd, [2], DataType.Int32)))

    with pytest.raises(FusionError, match=r"ranks \(2, 2\), \(3, 2\) or \(2, 3\), got \(3, 3\)"):
        eqsat.ingest(grouped_3d_3d)

    def float_index(fd):
        fd.add_output(fd.ops.scatter(_tensor(fd, [4, 5]), _tensor(fd, [4, 2]), 0.0, dim=1))

    with pytest.raises(FusionError, match="index must be an integer tensor"):
        eqsat.ingest(float_index)


def _router(fd):
    logits = _tensor(fd, [64, 8], BF16)
    top, idx = fd.ops.topk(fd.ops.cast(logits, dtype=F32), 2, dim=1, sorted=True)
    fd.add_output(fd.ops.scatter(fd.ops.full(shape=[64, 8], fill_value=0.0, dtype=F32), idx, top, dim=1))
    fd.add_output(idx)


def _sort_and_scans(fd):
    x = _tensor(fd, [8, 300])
    fd.add_output(fd.ops.argsort(x, dim=1, descending=True))
    fd.add_output(fd.ops.cumsum(x, dim=1))
    fd.add_output(fd.ops.cummax(x, dim=0))
    fd.add_output(fd.ops.cumsum(_tensor(fd, [8, 300], DataType.Int32), dim=1))


def _grouped(fd):
    a, b = _tensor(fd, [64, 32], BF16), _tensor(fd, [4, 32, 48], BF16)
    fd.add_output(fd.ops.grouped_mm(a, b, _tensor(fd, [4], DataType.Int32)))


ON_GPU = {
    "router": (_router, lambda: [torch.randn(64, 8).bfloat16()]),
    "sort_and_scans": (
        _sort_and_scans,
        lambda: [torch.randn(8, 300), torch.randint(-9, 9, (8, 300), dtype=torch.int32)],
    ),
    "grouped_mm": (
        _grouped,
        lambda: [
            torch.randn(64, 32).bfloat16(),
            torch.randn(4, 32, 48).bfloat16(),
            torch.tensor([16, 16, 40, 64], dtype=torch.int32),
        ],
    ),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(ON_GPU))
def test_kept_ops_run_on_nvfuser_as_the_torch_executor_runs_them(name):
    """nvfuser_direct against eqsat's reading of the same definition (inputs without ties, so
    that any sort's order is the one answer)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device and nvfuser_direct")
    pytest.importorskip("nvfuser_direct", reason="needs a CUDA device and nvfuser_direct")
    from eqsat.lowering.nvfuser import to_nvfuser
    from eqsat.reference.compare import mismatch

    definition, make = ON_GPU[name]
    fusion = eqsat.ingest(definition)
    inputs = [x.cuda() for x in make()]
    want = eqsat.run_fusion(fusion, inputs, strict=True)
    got = to_nvfuser(fusion, "nvfuser_direct").execute(inputs)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert (g.shape, g.dtype) == (w.shape, w.dtype), f"output {i}"
        assert mismatch(g, w) is None, f"output {i}: {mismatch(g, w)}"


def test_the_scaled_grouped_mm_written_in_python_returns_its_three_outputs():
    def f(fd):
        a, b = _tensor(fd, [16, 8], BF16), _tensor(fd, [4, 8, 6], BF16)
        out, scales, gamma = fd.ops.grouped_mm(
            a, b, _tensor(fd, [4], DataType.Int32), _tensor(fd, [16, 1]), _tensor(fd, [4, 1, 6]), dtype=BF16
        )
        fd.add_output(fd.ops.relu(out))

    (node,) = [n for n in eqsat.ingest(f).nodes if n.op == "grouped_mm"]
    assert node.opaque and len(node.outputs) == 3


def test_a_bool_scattered_into_a_bool_tensor_is_defined_as_a_bool():
    """scatter's scalar src is a Val in nvfuser_direct: the written definition defines it, as
    the Bool it is (an operand's bool would be read as an Int)."""

    def f(fd):
        m = _tensor(fd, [4, 6], DataType.Bool)
        fd.add_output(fd.ops.scatter(m, _tensor(fd, [4, 2], DataType.Int), True, dim=1))

    m, idx = torch.zeros(4, 6, dtype=torch.bool), torch.tensor([[0, 5]] * 4)
    opt = check(f, [m, idx], lambda m, idx: m.scatter(1, idx, True))
    assert "= fd.define_scalar(True, dtype=DataType.Bool)" in opt.source
