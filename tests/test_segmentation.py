"""The cost model's segmentation: how many kernels nvFuser (0.2.35) makes of a fusion, rule by
rule, as estimate_fusion predicts it. Each fusion is written here; the counts are the ones
nvFuser's segmenter gives such fusions (its scheduler rules, a method each in
eqsat/cost/segmenter.py), and the corpus benchmark checks the model against nvFuser's real
counts."""

import importlib
from dataclasses import replace

import pytest
import torch
from helpers import BENCH

import eqsat
from eqsat import DataType
from eqsat.cost.profile import load_profile

F32 = DataType.Float


def _tensor(fd, rank):
    return fd.define_tensor(shape=[-1] * rank, contiguity=[True] * rank, dtype=F32)


def kernels(definition, *shapes) -> int:
    inputs = [torch.empty(*s, device="meta") for s in shapes]
    return len(eqsat.estimate_fusion(definition, inputs).kernels)


def test_a_slice_of_an_input_fuses_with_what_follows():
    def fusion(fd):
        x = _tensor(fd, 2)
        s = fd.ops.slice(x, start_indices=[0, 0], end_indices=[64, 32], strides=[1, 1])
        fd.add_output(fd.ops.mul(fd.ops.exp(s), s))

    assert kernels(fusion, (128, 64)) == 1


def test_two_halves_computed_on_apart_are_two_kernels():
    """No one reference tensor covers both halves: a resize lies between them."""

    def fusion(fd):
        x = _tensor(fd, 1)
        fd.add_output(fd.ops.exp(fd.ops.slice(x, start_indices=[0], end_indices=[512], strides=[1])))
        fd.add_output(fd.ops.exp(fd.ops.slice(x, start_indices=[512], end_indices=[1024], strides=[1])))

    assert kernels(fusion, (1024,)) == 2


def test_slices_of_a_computed_tensor_are_views_of_what_its_kernel_writes():
    def fusion(fd):
        y = fd.ops.exp(_tensor(fd, 1))
        fd.add_output(fd.ops.slice(y, start_indices=[0], end_indices=[512], strides=[1]))
        fd.add_output(fd.ops.slice(y, start_indices=[512], end_indices=[1024], strides=[1]))

    assert kernels(fusion, (1024,)) == 1


def test_an_output_before_a_resize_and_one_after_it_are_two_kernels():
    def fusion(fd):
        x = _tensor(fd, 1)
        y = fd.ops.exp(x)
        fd.add_output(y)
        fd.add_output(fd.ops.pad(y, [2, 2], fd.define_scalar(0.0)))

    assert kernels(fusion, (1024,)) == 2


def test_a_slice_of_a_reduction_input_computed_in_the_kernel_splits_it():
    """The resize scheduler takes no reductions, and the reduction scheduler takes a slice
    only of a kernel input."""

    def fusion(fd):
        x = _tensor(fd, 2)
        s = fd.ops.slice(fd.ops.exp(x), start_indices=[0, 0], end_indices=[128, 32], strides=[1, 1])
        fd.add_output(fd.ops.sum(s, dims=[1]))

    assert kernels(fusion, (128, 64)) == 2


def test_index_select_of_a_computed_tensor_takes_it_from_another_kernel():
    def fusion(fd):
        x = _tensor(fd, 2)
        i = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        fd.add_output(fd.ops.index_select(fd.ops.exp(x), i, dim=0))

    inputs = [torch.empty(64, 32, device="meta"), torch.empty(8, dtype=torch.int64, device="meta")]
    assert len(eqsat.estimate_fusion(fusion, inputs).kernels) == 2


def test_outputs_broadcast_to_two_different_extents_are_two_kernels():
    def fusion(fd):
        a = _tensor(fd, 1)
        x = fd.define_tensor(shape=[4, -1], contiguity=[True, True], dtype=F32)
        y = fd.define_tensor(shape=[5, -1], contiguity=[True, True], dtype=F32)
        fd.add_output(fd.ops.add(x, fd.ops.broadcast_in_dim(a, shape=x.shape(), broadcast_dims=[1])))
        fd.add_output(fd.ops.add(y, fd.ops.broadcast_in_dim(a, shape=y.shape(), broadcast_dims=[1])))

    assert kernels(fusion, (64,), (4, 64), (5, 64)) == 2


@pytest.mark.parametrize("back, want", [(False, 2), (True, 1)])
def test_row_and_column_sums_share_a_kernel_only_when_persistent(back, want):
    """Sums along both axes of one tensor: two reduction kernels, unless a sum is broadcast back
    and used (a norm backward: nvFuser's inner-outer persistent kernel)."""

    def fusion(fd):
        x = _tensor(fd, 2)
        rows = fd.ops.sum(x, dims=[1])
        fd.add_output(fd.ops.sum(x, dims=[0]))
        if back:
            fd.add_output(fd.ops.sub(x, fd.ops.broadcast_in_dim(rows, shape=x.shape(), broadcast_dims=[0])))
        else:
            fd.add_output(rows)

    assert kernels(fusion, (4096, 1024)) == want


def test_an_inner_outer_kernel_takes_its_row_cost_per_row_the_outer_reduction_reduces():
    """A norm backward's column sum in the inner-outer kernel: each block folds its rows into
    the column accumulators in turn, so the kernel takes the normalization kind's
    inner_outer_row_ns per row reduced, beyond its bytes (4096 rows here)."""

    def fusion(fd):
        x = _tensor(fd, 2)
        rows = fd.ops.sum(x, dims=[1])
        fd.add_output(fd.ops.sum(x, dims=[0]))
        fd.add_output(fd.ops.sub(x, fd.ops.broadcast_in_dim(rows, shape=x.shape(), broadcast_dims=[0])))

    profile = load_profile()
    inputs = [torch.empty(4096, 1024, device="meta")]

    def kernel(row_ns):
        norm = replace(profile.kinds["normalization"], inner_outer_row_ns=row_ns)
        (k,) = eqsat.estimate_fusion(
            fusion, inputs, profile=replace(profile, kinds={**profile.kinds, "normalization": norm})
        ).kernels
        return k

    assert kernel(10.0).time_us - kernel(0.0).time_us == pytest.approx(4096 * 10.0e-3)
    assert profile.kinds["normalization"].inner_outer_row_ns > 0
    assert all(c.inner_outer_row_ns == 0 for k, c in profile.kinds.items() if k != "normalization")


@pytest.mark.parametrize("inner, want", [(True, 2), (False, 1)])
def test_an_epilogue_reading_another_tensor_after_an_inner_reduction_is_its_own_kernel(inner, want):
    def fusion(fd):
        x = _tensor(fd, 2)
        b = _tensor(fd, 1)
        s = fd.ops.sum(x, dims=[1 if inner else 0])
        fd.add_output(fd.ops.add(s, b))

    assert kernels(fusion, (1024, 1024), (1024,)) == want
    if inner:  # the sums cross from the reduction kernel to the epilogue: written, then read
        est = eqsat.estimate_fusion(
            fusion, [torch.empty(1024, 1024, device="meta"), torch.empty(1024, device="meta")]
        )
        reduction = next(k for k in est.kernels if k.kind == "reduction")
        assert reduction.bytes_written == 1024 * 4


def test_views_alone_are_no_kernel():
    def fusion(fd):
        x = _tensor(fd, 2)
        r = fd.ops.reshape(x, new_shape=[64, 32, 2])
        s = fd.ops.slice(r, start_indices=[0, 0, 0], end_indices=[64, 32, 1], strides=[1, 1, 1])
        fd.add_output(fd.ops.sum(s, dims=[2]))  # over an extent-1 axis: a squeeze

    assert kernels(fusion, (64, 64)) == 0


def test_an_output_that_views_a_value_costs_a_segment_of_the_host_s():
    """nvFuser puts the outputs that view a value (an input, or one computed) behind a
    segment_set and runs those views as a segment of their own on the host: no kernel, no
    bytes, a segment's host cost (one per value viewed)."""

    def plain(fd):
        x, y = _tensor(fd, 2), _tensor(fd, 2)
        fd.add_output(fd.ops.neg(x))
        fd.add_output(fd.ops.exp(y))

    def viewing(*views):
        def fusion(fd):
            x, y = _tensor(fd, 2), _tensor(fd, 2)
            n = fd.ops.neg(x)
            fd.add_output(n)
            fd.add_output(fd.ops.exp(y))
            for v in views:
                src = {"x": x, "y": y, "n": n}[v[0]]
                fd.add_output(
                    fd.ops.permute(src, dims=[1, 0])
                    if v[1] == "permute"
                    else fd.ops.reshape(src, new_shape=[64 * 64])
                )

        return fusion

    shapes = [torch.empty(64, 64, device="meta")] * 2
    host = load_profile(None).host
    base = eqsat.estimate_fusion(plain, shapes)
    for views, segments in (
        ((("y", "reshape"),), 1),
        ((("n", "permute"),), 1),
        ((("n", "permute"), ("n", "reshape")), 1),
        ((("x", "reshape"), ("n", "permute")), 2),
    ):
        est = eqsat.estimate_fusion(viewing(*views), shapes)
        assert len(est.kernels) == len(base.kernels) and est.bytes == base.bytes, views
        extra = est.host_us - base.host_us
        ops = extra - segments * host.per_segment_us - len(views) * host.per_output_us
        assert ops == pytest.approx(host.per_op_us * len([v for v in views if v[1] == "reshape"])), views


def test_a_fusion_of_views_alone_still_costs_an_execute_on_the_host():
    """A fusion whose outputs only view its inputs runs no kernel, but nvFuser's execute still
    runs its expression evaluator's segment on the host (about 30 us at steady state on the
    H200 for ../shared/corpus's fe_tensor_shape_expand_bcast). It costs what the same views
    cost beside a kernel, less that kernel's segment and op."""

    def views(fd):
        x, y = _tensor(fd, 2), _tensor(fd, 2)
        fd.add_output(fd.ops.permute(x, dims=[1, 0]))
        fd.add_output(fd.ops.broadcast_in_dim(y, shape=[4, 64, 64], broadcast_dims=[1, 2]))

    shapes = [torch.empty(64, 64, device="meta")] * 2
    host = load_profile(None).host
    est = eqsat.estimate_fusion(views, shapes)
    assert est.kernels == [] and est.device_us == 0
    assert est.host_us == pytest.approx(
        host.cost_us(segments=2, inputs=2, outputs=2, ops=0, resizes=0, grids=0)
    )
    assert est.host_us > host.base_us


def test_an_output_cast_to_its_own_dtype_is_a_view():
    """nvFuser's castOp makes a cast to the dtype a value has a ``set``, which its alias
    analysis follows as a view: an output that is one runs in no kernel, in a segment of the
    host's, as the broadcast alone does (Gemma's keys and values, expanded for its heads)."""

    def viewed(cast):
        def fusion(fd):
            x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=eqsat.DataType.BFloat16)
            wide = fd.ops.broadcast(x, [False, True, False])
            fd.add_output(fd.ops.cast(wide, dtype=eqsat.DataType.BFloat16) if cast else wide)

        return fusion

    inputs = [torch.empty(64, 128, device="meta", dtype=torch.bfloat16)]
    cast, plain = (eqsat.estimate_fusion(viewed(c), inputs) for c in (True, False))
    assert cast.kernels == plain.kernels == []
    assert cast.host_us == pytest.approx(plain.host_us)
    assert cast.host_us > load_profile(None).host.cost_us(segments=0, inputs=1, outputs=1, ops=0, resizes=0)


@pytest.mark.parametrize(
    "dims, shape, want",
    [
        ([0, 1], (1024, 1024), "grid_reduction"),
        ([1], (1024, 1024), "reduction"),
        ([0, 1], (64, 64), "reduction"),
        ([1], (4, 65536), "grid_reduction"),
        ([1], (64, 65536), "grid_reduction"),
        ([1], (128, 65536), "reduction"),
        ([1], (4, 4096), "reduction"),
    ],
)
def test_a_reduction_to_few_elements_of_many_is_a_grid_reduction(dims, shape, want):
    """nvFuser reduces a large tensor to one element, or to fewer than its blocks fill half the
    SMs with (reduction_non_tma.cpp), across blocks, combining their partial results through
    global memory (a grid reduction: slower per byte, bench/calibrate.py); a reduction that
    keeps many elements, or reduces few into each, stays within blocks."""

    def fusion(fd):
        fd.add_output(fd.ops.sum(_tensor(fd, 2), dims=dims))

    [k] = eqsat.estimate_fusion(fusion, [torch.empty(*shape, device="meta")]).kernels
    assert k.kind == want


def test_values_beside_an_inner_reduction_stay_in_its_kernel():
    """An FP8 cast of the tensor an innermost reduction reads is no epilogue (it reads no
    reduction): one kernel, as nvFuser runs the amax of y as given."""

    def fusion(fd):
        x, s = _tensor(fd, 2), fd.define_tensor(shape=[], contiguity=[], dtype=F32)
        fd.add_output(fd.ops.max(fd.ops.abs(x), dims=[0, 1]))
        fd.add_output(fd.ops.cast(fd.ops.mul(x, s), dtype=DataType.Float8_e4m3fn))

    inputs = [torch.empty(1024, 1024, device="meta"), torch.empty((), device="meta")]
    assert len(eqsat.estimate_fusion(fusion, inputs).kernels) == 1


def test_an_output_written_into_an_input_is_copied_in_a_segment_of_its_own():
    def fusion(fd):
        x = _tensor(fd, 1)
        y = _tensor(fd, 1)
        fd.add_output(fd.ops.add(x, y), x)
        fd.add_output(fd.ops.mul(x, y))

    assert kernels(fusion, (1024,), (1024,)) == 2


def test_no_kernel_spans_a_matmul():
    """(x + 1) @ w, then + (x + 1): the two pointwise kernels on either side of the matmul
    cannot merge (the merged kernel would both feed and wait on it)."""

    def fusion(fd):
        x = _tensor(fd, 2)
        w = _tensor(fd, 2)
        h = fd.ops.add(x, fd.define_scalar(1.0))
        fd.add_output(fd.ops.add(fd.ops.matmul(h, w), h))

    assert kernels(fusion, (256, 256), (256, 256)) == 2


def test_a_factory_op_is_recomputed_in_each_kernel_that_reads_it():
    """Two outputs over unrelated axes that both read one full(): not one kernel."""

    def fusion(fd):
        x = _tensor(fd, 1)
        y = _tensor(fd, 1)
        c = fd.ops.full(shape=[1], fill_value=fd.define_scalar(2.0), dtype=F32)
        fd.add_output(fd.ops.mul(x, fd.ops.broadcast_in_dim(c, shape=x.shape(), broadcast_dims=[0])))
        fd.add_output(fd.ops.mul(y, fd.ops.broadcast_in_dim(c, shape=y.shape(), broadcast_dims=[0])))

    assert kernels(fusion, (1024,), (512,)) == 2


def test_a_group_norm_with_reshaped_weights_is_one_kernel():
    """x [N, C, HW] reshaped to [N, G, C/G, HW], normalized per group, and scaled by a weight
    [C] reshaped to [G, C/G]: nvFuser's persistent kernel takes it whole. The reshape's extent
    C/G comes from the number of elements."""

    def fusion(fd):
        x = _tensor(fd, 3)
        w = _tensor(fd, 1)
        n, c, hw = fd.ops.size(x, dim=0), fd.ops.size(x, dim=1), fd.ops.size(x, dim=2)
        groups = fd.define_scalar(8, dtype=DataType.Int)
        per = fd.ops.div(c, groups)
        g = fd.ops.reshape(x, new_shape=[n, groups, per, hw])
        var, mean = fd.ops.var_mean(g, dims=[2, 3], correction=0)
        shape = fd.ops.shape(g)
        y = fd.ops.mul(
            fd.ops.sub(g, fd.ops.broadcast_in_dim(mean, shape=shape, broadcast_dims=[0, 1])),
            fd.ops.broadcast_in_dim(fd.ops.rsqrt(var), shape=shape, broadcast_dims=[0, 1]),
        )
        wg = fd.ops.reshape(w, new_shape=[groups, per])
        y = fd.ops.mul(y, fd.ops.broadcast_in_dim(wg, shape=shape, broadcast_dims=[1, 2]))
        fd.add_output(fd.ops.reshape(y, new_shape=[n, c, hw]))

    est = eqsat.estimate_fusion(
        fusion, [torch.empty(16, 64, 1024, device="meta"), torch.empty(64, device="meta")]
    )
    assert len(est.kernels) == 1
    assert est.bytes == 2 * 16 * 64 * 1024 * 4 + 64 * 4  # x read, y written, w read: no extent guessed


def test_a_layer_norm_by_welford_is_one_normalization_kernel():
    """welford is a reduction to nvFuser's schedulers (Thunder's layer norms use it), no barrier."""

    def fusion(fd):
        x = _tensor(fd, 2)
        avg, var, _ = fd.ops.welford(x, dims=[1])
        inv = fd.ops.rsqrt(fd.ops.add(fd.ops.div(var, fd.define_scalar(1024.0)), fd.define_scalar(1e-5)))
        y = fd.ops.mul(
            fd.ops.sub(x, fd.ops.broadcast(avg, [False, True])), fd.ops.broadcast(inv, [False, True])
        )
        fd.add_output(y)
        fd.add_output(avg)

    est = eqsat.estimate_fusion(fusion, [torch.empty(4096, 1024, device="meta")])
    assert [k.kind for k in est.kernels] == ["normalization"]


@pytest.mark.parametrize("stride_order, want", [([3, 1, 2, 0], 0), ([3, 2, 1, 0], 1)])
def test_a_stride_order_copies_only_where_the_layout_changes(stride_order, want):
    """Thunder's head split: permute, stride_order [] (row-major), reshape. Where the input is
    laid out so the permuted tensor is row-major already, nvFuser aliases it (no kernel);
    otherwise the stride order is a copy."""

    def fusion(fd):
        x = fd.define_tensor(
            shape=[4, 16, 256, 64], contiguity=[True] * 4, dtype=F32, stride_order=stride_order
        )
        y = fd.ops.stride_order(fd.ops.permute(x, dims=[0, 2, 1, 3]), stride_order=[])
        fd.add_output(fd.ops.stride_order(fd.ops.reshape(y, new_shape=[4, 256, 1024]), stride_order=[]))

    assert len(eqsat.estimate_fusion(fusion).kernels) == want


def test_a_causal_mask_of_one_iota_is_two_kernels():
    """One axis of the iota on both dims of the mask: nvFuser computes the iota's vectors in
    one kernel and compares them in another (as in Thunder's attention masks)."""

    def fusion(fd):
        i = fd.ops.cast(fd.ops.add(fd.ops.iota(length=512, start=0, step=1), 0), dtype=DataType.Int)
        rows = fd.ops.expand(fd.ops.broadcast(i, [False, True]), shape=[512, 512])
        cols = fd.ops.expand(fd.ops.broadcast(i, [True, False]), shape=[512, 512])
        fd.add_output(fd.ops.le(cols, rows))

    assert len(eqsat.estimate_fusion(fusion).kernels) == 2


def _rope_halves(fd, x, rows, n):
    """cat(-x[:, n:], x[:, :n]) written with manual padding, as Thunder writes it."""
    lo = fd.ops.slice(x, start_indices=[0, 0], end_indices=[rows, n], strides=[1, 1])
    hi = fd.ops.slice(x, start_indices=[0, n], end_indices=[rows, 2 * n], strides=[1, 1])
    zero = fd.define_scalar(0.0)
    return fd.ops.cat(
        [fd.ops.pad(fd.ops.neg(hi), [0, n, 0, 0], zero), fd.ops.pad(lo, [n, 0, 0, 0], zero)],
        dim=1,
        manual_padding=True,
    )


def test_a_cat_of_one_tensor_twice_is_a_repeat_not_a_resize():
    """nvFuser turns cat([pad(t), pad(t)]) into broadcast, expand and reshape before it
    segments: the table and its repeat share a kernel with an output before it."""

    def fusion(fd):
        t = fd.ops.cos(_tensor(fd, 2))
        zero = fd.define_scalar(0.0)
        fd.add_output(t)
        fd.add_output(
            fd.ops.cat(
                [fd.ops.pad(t, [0, 64, 0, 0], zero), fd.ops.pad(t, [64, 0, 0, 0], zero)],
                dim=1,
                manual_padding=True,
            )
        )

    assert kernels(fusion, (1024, 64)) == 1


def test_a_rope_table_read_by_two_rotations_is_a_kernel_of_its_own():
    """A small table (an output) broadcast into two rotations: each rotation is a resize
    kernel, which cannot write the table (an output before its resizes), so the table is a
    third kernel, as nvFuser segments Thunder's RoPE."""

    def fusion(fd):
        table = fd.ops.cos(_tensor(fd, 1))
        fd.add_output(table)
        wide = fd.ops.broadcast(table, [True, False])
        for _ in range(2):
            x = fd.define_tensor(shape=[4096, 128], contiguity=[True, True], dtype=F32)
            fd.add_output(fd.ops.add(fd.ops.mul(x, wide), _rope_halves(fd, x, 4096, 64)))

    assert kernels(fusion, (128,), (4096, 128), (4096, 128)) == 3


def test_a_full_that_is_an_output_is_written_by_a_kernel():
    def fusion(fd):
        fd.add_output(fd.ops.exp(_tensor(fd, 2)))
        fd.add_output(fd.ops.full(shape=[64, 64], fill_value=fd.define_scalar(1.0), dtype=F32))

    assert kernels(fusion, (1024, 1024)) == 2


def test_slices_pads_and_cats_of_symbolic_inputs_take_their_extents_from_the_inputs():
    """A slice with constant indices, a pad and a cat of a symbolic input have extents the
    bound inputs give (not the default extent the optimizer assumes for unknown ones)."""

    def fusion(fd):
        x = _tensor(fd, 2)
        head = fd.ops.slice(x, start_indices=[0, 0], end_indices=[8, 64], strides=[1, 1])
        wide = fd.ops.pad(head, [0, 64], fd.define_scalar(0.0))
        fd.add_output(fd.ops.cat([wide, head], dim=1))

    est = eqsat.estimate_fusion(fusion, [torch.empty(8, 100, device="meta")])
    # writes 8 x (128 + 64) floats
    assert [k.bytes_written for k in est.kernels] == [8 * 192 * 4]


def test_the_values_outputs_view_are_found_through_chains_of_views():
    """alias_output_sources: a chain of views ends at the input or the first value computed; a
    stride order that lays its input out anew is a copy, not a view; an output written into an
    input is no view."""
    from eqsat.ir.layout import alias_output_sources

    def fusion(fd):
        x, y = _tensor(fd, 2), _tensor(fd, 2)
        n = fd.ops.neg(x)
        fd.add_output(fd.ops.permute(fd.ops.reshape(n, new_shape=[32, 128]), dims=[1, 0]))  # views n
        fd.add_output(fd.ops.slice(y, start_indices=[0, 0], end_indices=[8, 64], strides=[1, 1]))  # views y
        fd.add_output(fd.ops.stride_order(fd.ops.exp(x), stride_order=[0, 1]))  # a copy
        fd.add_output(fd.ops.abs(y), y)  # into y

    f = eqsat.ingest(fusion)
    producer = f.producer
    got = {
        producer[v].op if v in producer and not producer[v].is_input else "input"
        for v in alias_output_sources(f)
    }
    assert got == {"neg", "input"} and len(alias_output_sources(f)) == 2


def test_a_shape_query_of_a_computed_value_writes_nothing():
    """``fd.ops.shape(t)`` reads t's extents, not its elements (nvFuser's classic benchmarks
    write softmax so): the kernel reads the bf16 input and writes the bf16 output, and the
    float32 value whose shape was asked is written nowhere; an output so queried still is."""

    def softmax(fd, shape_of_output):
        x = fd.ops.cast(
            fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16), F32
        )
        shape = fd.ops.shape(x)
        m = fd.ops.broadcast_in_dim(fd.ops.max(x, dims=[1]), shape=shape, broadcast_dims=[0])
        e = fd.ops.exp(fd.ops.sub(x, m))
        s = fd.ops.broadcast_in_dim(fd.ops.sum(e, dims=[1]), shape=shape, broadcast_dims=[0])
        y = fd.ops.cast(fd.ops.div(e, s), DataType.BFloat16)
        fd.add_output(y)
        if shape_of_output:
            fd.ops.shape(y)

    inputs = [torch.empty(1024, 4096, device="meta", dtype=torch.bfloat16)]
    for queried in (False, True):
        est = eqsat.estimate_fusion(lambda fd: softmax(fd, queried), inputs)
        assert len(est.kernels) == 1
        assert (est.kernels[0].bytes_read, est.kernels[0].bytes_written) == (1024 * 4096 * 2, 1024 * 4096 * 2)


def test_what_reads_an_output_joins_the_kernel_after_it_not_the_one_that_writes_it():
    """nvFuser's segmenter merges no two groups across a fusion output until its final merge
    of whole groups: a chain that reads a normalization's output and feeds a reduction which
    cannot share the normalization's kernel (a sum over a reshaped [4, R/4, C] view) is that
    reduction's prologue. The normalization writes its bf16 output alone, and the reduction
    reads it (not an fp32 value the chain computed), as OPT's backward ran on the H200."""

    def fusion(fd):
        x = fd.ops.cast(
            fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16), F32
        )
        ss = fd.ops.sum(fd.ops.mul(x, x), dims=[1])
        inv = fd.ops.rsqrt(fd.ops.add(fd.ops.mul(ss, 1.0 / 1024), 1e-6))
        y = fd.ops.cast(
            fd.ops.mul(x, fd.ops.broadcast_in_dim(inv, shape=[4096, 1024], broadcast_dims=[0])),
            DataType.BFloat16,
        )
        fd.add_output(y)
        z = fd.ops.mul(fd.ops.cast(fd.ops.reshape(y, new_shape=[4, 1024, 1024]), F32), 2.0)
        fd.add_output(fd.ops.cast(fd.ops.sum(z, dims=[0, 1]), DataType.BFloat16))

    est = eqsat.estimate_fusion(fusion, [torch.empty(4096, 1024, device="meta", dtype=torch.bfloat16)])
    by_kind = {k.kind: k for k in est.kernels}
    assert sorted(by_kind) == ["normalization", "outer_reduction"]
    elements = 4096 * 1024
    assert by_kind["normalization"].bytes_written == elements * 2
    assert by_kind["outer_reduction"].bytes_read == elements * 2


def rotation_of_exp(dtypes, stride_order):
    """exp of a [4096, 128] input laid out by ``stride_order``, and its rotation (RoPE's
    halves swapped) added to it, written row-major: a fusion of nvFuser's DataType or eqsat's."""

    def fusion(fd):
        x = fd.define_tensor(
            shape=[-1, -1], contiguity=[True, True], dtype=dtypes.Float, stride_order=stride_order
        )
        y = fd.ops.exp(x)
        fd.add_output(fd.ops.add(y, _rope_halves(fd, y, 4096, 64)))

    return fusion


def table_into_two(dtypes, independent):
    """A table broadcast into the rows of q and k, the products joined by a cat: k an input of
    its own (``independent``) or ``-q``."""

    def fusion(fd):
        f32 = dict(contiguity=[True, True], dtype=dtypes.Float)
        table = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtypes.Float)
        q = fd.define_tensor(shape=[-1, -1], **f32)
        k = fd.define_tensor(shape=[-1, -1], **f32) if independent else fd.ops.neg(q)
        wide = fd.ops.broadcast(table, [True, False])
        fd.add_output(fd.ops.cat([fd.ops.mul(q, wide), fd.ops.mul(k, wide)], dim=0))

    return fusion


def rotation_of_a_view(dtypes):
    """q, a slice (a view) of a [4096, 256] input, times a column-major table, plus q's
    rotation times the table: Phi-3's rotary embedding of one head, as Thunder writes it."""

    def fusion(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtypes.Float)
        table = fd.define_tensor(
            shape=[-1, -1], contiguity=[True, True], dtype=dtypes.Float, stride_order=[0, 1]
        )
        q = fd.ops.slice(x, start_indices=[0, 0], end_indices=[4096, 128], strides=[1, 1])
        rotated = _rope_halves(fd, q, 4096, 64)
        fd.add_output(fd.ops.add(fd.ops.mul(q, table), fd.ops.mul(rotated, table)))

    return fusion


def stacked_gradient(dtypes):
    """Three [4096, 128] inputs each given a leading broadcast dim, cast to the dtype they have
    (nvFuser's ``set``), padded along it to 3 and summed: q, k and v's gradients stacked, as
    Thunder writes ViT's qkv gradient."""

    def fusion(fd):
        bf16 = dict(contiguity=[True, True], dtype=dtypes.BFloat16)
        parts = [fd.define_tensor(shape=[-1, -1], **bf16) for _ in range(3)]
        total = None
        for i, part in enumerate(parts):
            wide = fd.ops.cast(fd.ops.broadcast(part, [True, False, False]), dtype=dtypes.BFloat16)
            padded = fd.ops.cast(fd.ops.pad(wide, [0, 0, 0, 0, i, 2 - i]), dtype=dtypes.Float)
            total = padded if total is None else fd.ops.add(total, padded)
        fd.add_output(fd.ops.cast(total, dtype=dtypes.BFloat16))

    return fusion


def set_of_an_input_beside_a_kernel(dtypes):
    """An output that is an input broadcast, cast to its own dtype and expanded (a view: no
    kernel), beside an output that one kernel computes."""

    def fusion(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtypes.BFloat16)
        wide = fd.ops.cast(fd.ops.broadcast(x, [False, True, False]), dtype=dtypes.BFloat16)
        fd.add_output(fd.ops.expand(wide, shape=[64, 8, 128]))
        fd.add_output(fd.ops.exp(fd.ops.cast(x, dtype=dtypes.Float)))

    return fusion


def class_token_and_norm(dtypes):
    """A class token padded before the patches, the patches (a view of an input) padded after
    it, joined by a cat with manual padding, then centred along the last dim: ViT's embeddings
    and the start of its first LayerNorm, as Thunder writes them."""

    def fusion(fd):
        bf16 = dtypes.BFloat16
        patches = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=bf16)
        token = fd.define_tensor(shape=[1, 1, -1], contiguity=[None, None, True], dtype=bf16)
        token = fd.ops.expand(token, shape=[8, 1, 768])
        zero = fd.define_scalar(0.0, dtype=bf16)
        head = fd.ops.pad(token, [0, 0, 0, 196, 0, 0], zero)
        body = fd.ops.pad(fd.ops.permute(patches, dims=[0, 2, 1]), [0, 0, 1, 0, 0, 0], zero)
        x = fd.ops.cast(fd.ops.cat([head, body], dim=1, manual_padding=True), dtype=dtypes.Float)
        mean = fd.ops.broadcast(fd.ops.sum(x, dims=[2]), [False, False, True])
        fd.add_output(fd.ops.cast(fd.ops.sub(x, fd.ops.div(mean, 768.0)), dtype=bf16))

    return fusion


def iota_set_output(dtypes):
    """An iota broadcast and cast to its own dtype, as an output: a view of a factory, which a
    kernel still writes (Thunder's OPT position ids)."""

    def fusion(fd):
        ids = fd.ops.iota(length=1024, start=0, step=1, dtype=dtypes.Int)
        fd.add_output(fd.ops.cast(fd.ops.broadcast(ids, [True, False]), dtype=dtypes.Int))

    return fusion


def repeated_keys_and_values(dtypes):
    """Grouped keys and values, [b, 2, s, d] each, repeated to 8 heads as Thunder writes
    ``repeat_kv``: broadcast, cast to their own dtype, expanded to [b, 2, 4, s, d] and reshaped
    to [b, 8, s, d]. The reshape merges the expanded axis with the heads: not a view, a kernel
    that writes the repeated tensor, one per output (nvFuser's count in session 45's Llama
    region ``thunder_llama_06``, H100: 2 pointwise kernels beside the labels' pad)."""

    def fusion(fd):
        for _ in range(2):
            part = fd.define_tensor(shape=[2, 2, 256, 64], contiguity=[True] * 4, dtype=dtypes.BFloat16)
            wide = fd.ops.cast(
                fd.ops.broadcast(part, [False, False, True, False, False]), dtype=dtypes.BFloat16
            )
            heads = fd.ops.expand(wide, shape=[2, 2, 4, 256, 64])
            fd.add_output(fd.ops.reshape(heads, new_shape=[2, 8, 256, 64]))

    return fusion


def rotary_backward_of_q_and_k(dtypes):
    """The rotary embedding's backward for q [2, 4, 64, 32] (laid out [b, s, h, d]) and k
    [2, 1, 64, 32], as Thunder writes it for Gemma (``thunder_gemma_20``): each side multiplies
    the same two bf16 tables [1, 1, 64, 32], expanded to its own heads and cast to float, with
    its gradient, swaps the product's halves (slices, a negation, pads) and adds; the results
    are permuted to [b, s, h, d] and flattened. eqsat's IR casts each table once for both sides;
    nvFuser casts it in each kernel (its definition expands and casts per side), so neither
    side's kernel writes the cast for the other."""

    def fusion(fd):
        bf16 = dtypes.BFloat16
        q = fd.define_tensor(
            shape=[2, 4, 64, 32], contiguity=[True] * 4, dtype=bf16, stride_order=[3, 1, 2, 0]
        )
        k = fd.define_tensor(shape=[2, 1, 64, 32], contiguity=[True, None, True, True], dtype=bf16)
        tables = [
            fd.define_tensor(
                shape=[1, 1, 64, 32],
                contiguity=[None, True, None, True],
                dtype=bf16,
                stride_order=[3, 1, 2, 0],
            )
            for _ in range(2)
        ]

        def side(x, heads):
            shape = [2, heads, 64, 32]
            cos, sin = (fd.ops.cast(fd.ops.expand(t, shape=shape), dtype=dtypes.Float) for t in tables)
            xf = fd.ops.cast(x, dtype=dtypes.Float)
            prod = fd.ops.cast(fd.ops.mul(cos, xf), dtype=bf16)
            first = fd.ops.slice(prod, start_indices=[0, 0, 0, 0], end_indices=[2, heads, 64, 16])
            first = fd.ops.cast(fd.ops.neg(fd.ops.cast(first, dtype=dtypes.Float)), dtype=bf16)
            second = fd.ops.slice(prod, start_indices=[0, 0, 0, 16], end_indices=[2, heads, 64, 32])
            swapped = fd.ops.add(
                fd.ops.cast(fd.ops.pad(first, [16, 0, 0, 0, 0, 0, 0, 0]), dtype=dtypes.Float),
                fd.ops.cast(fd.ops.pad(second, [0, 16, 0, 0, 0, 0, 0, 0]), dtype=dtypes.Float),
            )
            out = fd.ops.cast(fd.ops.add(swapped, fd.ops.mul(sin, xf)), dtype=bf16)
            flat = fd.ops.reshape(fd.ops.permute(out, dims=[0, 2, 1, 3]), new_shape=[128, heads * 32])
            fd.add_output(flat)
            fd.add_output(fd.ops.permute(flat, dims=[1, 0]))

        side(q, 4)
        side(k, 1)

    return fusion


def permuted_input_flattened(dtypes, padded):
    """k's gradient [2, 4, 64, 32], permuted to [b, s, h, d] and flattened to [2, 64, 128]: an
    output as it is (no strides view it: a kernel writes it), or ``padded`` first into a wider
    row (the pad's kernel reads the input through the reshape)."""

    def fusion(fd):
        x = fd.define_tensor(shape=[2, 4, 64, 32], contiguity=[True] * 4, dtype=dtypes.BFloat16)
        flat = fd.ops.reshape(fd.ops.permute(x, dims=[0, 2, 1, 3]), new_shape=[2, 64, 128])
        fd.add_output(fd.ops.pad(flat, [128, 0, 0, 0, 0, 0]) if padded else flat)

    return fusion


# name -> (fusion of a DataType, its inputs' shapes (a transposed one as (rows, cols, "t"), one
# [b, h, s, d] laid out [b, s, h, d] as (b, h, s, d, "bshd"), "bf16" last where not float32),
# the kernels nvFuser makes of it (H100, nvFuser 0.2.35, as given on nvfuser_direct:
# test_nvfuser_makes_the_kernels_the_model_predicts), and where the model is
# known to predict another count, why)
LAYOUT_AND_BROADCAST_CASES = {
    "rotation of a row-major input": (lambda d: rotation_of_exp(d, [1, 0]), [(4096, 128)], 1, None),
    "rotation of a column-major input": (
        lambda d: rotation_of_exp(d, [0, 1]),
        [(4096, 128, "t")],
        1,
        "2 predicted: nvFuser lays the output out as its column-major input (AllocationDomainPass) "
        "and takes the whole fusion as one resize kernel; the model, merging pair by pair, splits "
        "off the exp, which would be written row-major for the rotation",
    ),
    # the table's broadcast is concretized to the rows the cat pads: no resize kernel takes both
    "a table into mapped rows": (lambda d: table_into_two(d, False), [(128,), (16, 128)], 2, None),
    "a table into unmapped rows": (lambda d: table_into_two(d, True), [(128,), (16, 128), (4, 128)], 3, None),
    "rotation of a view of an input": (
        rotation_of_a_view,
        [(4096, 256), (4096, 128, "t")],
        3,
        "2 predicted: nvFuser's segments of it were not logged; the products with the "
        "column-major table are likely a transpose kernel of their own",
    ),
    "stacked gradients (casts to the same dtype)": (stacked_gradient, [(4096, 128, "bf16")] * 3, 1, None),
    "a cast of an input to its own dtype as an output": (
        set_of_an_input_beside_a_kernel,
        [(64, 128, "bf16")],
        1,
        None,
    ),
    "a class token cat and a norm": (
        class_token_and_norm,
        [(8, 768, 196, "bf16"), (1, 1, 768, "bf16")],
        1,
        None,
    ),
    "an iota cast to its own dtype as an output": (iota_set_output, [], 1, None),
    "grouped keys and values repeated to every head": (
        repeated_keys_and_values,
        [(2, 2, 256, 64, "bf16")] * 2,
        2,
        None,
    ),
    # 1 as nvFuser ran Llama's k gradient of this form (thunder_llama_20's first kernel, H100,
    # session 45) and Phi-3's padded one (thunder_phi3_18, H200: one kernel in all); these
    # reduced cases have not yet run on the GPU
    "a permuted input flattened as an output": (
        lambda d: permuted_input_flattened(d, False),
        [(2, 4, 64, 32, "bf16")],
        1,
        None,
    ),
    "a permuted input flattened and padded": (
        lambda d: permuted_input_flattened(d, True),
        [(2, 4, 64, 32, "bf16")],
        1,
        None,
    ),
    # 2 as nvFuser ran Gemma's region of this form (thunder_gemma_20, H100, session 44); this
    # reduced case has not yet run on the GPU
    "the rotary backward of q and k sharing the tables": (
        rotary_backward_of_q_and_k,
        [
            (2, 4, 64, 32, "bshd", "bf16"),
            (2, 1, 64, 32, "bf16"),
            (1, 1, 64, 32, "bf16"),
            (1, 1, 64, 32, "bf16"),
        ],
        2,
        None,
    ),
}


def _inputs(shapes, device):
    def one(s):
        dtype = torch.bfloat16 if s[-1] == "bf16" else torch.float32
        s = s[:-1] if s[-1] == "bf16" else s
        if s[-1] == "t":
            return torch.randn(s[1], s[0], device=device, dtype=dtype).t()
        if s[-1] == "bshd":  # [b, h, s, d] laid out [b, s, h, d]
            b, h, n, d = s[:-1]
            return torch.randn(b, n, h, d, device=device, dtype=dtype).transpose(1, 2)
        return torch.randn(*s, device=device, dtype=dtype)

    return [one(s) for s in shapes]


@pytest.mark.parametrize("case", LAYOUT_AND_BROADCAST_CASES)
def test_resize_layouts_and_unmapped_broadcasts(case):
    """nvFuser's resize scheduler rejects a kernel whose inputs and outputs have innermost dims
    that are not mapped ("Transpose-like patterns not supported"), and one that resizes an axis
    a value of the kernel is broadcast along ("Resize of a broadcast ID is not allowed"). Every
    scheduler rejects a kernel that concretizes one broadcast to two axes not mapped within it
    (hasNonUniqueBcast): a table broadcast into the rows of two independent inputs, which meet
    only in a cat. A view of an input is no kernel's: each kernel that reads it reads the input
    (nvFuser's expression-evaluator segments alias it), so no kernel writes it for another; a
    cast to the dtype a value has is such a view (nvFuser's castOp makes it a ``set``); a cat of
    values padded already resizes nothing itself; a view of an iota is a kernel's; a reshape
    that merges an expanded axis is no view."""
    definition, shapes, want, known_miss = LAYOUT_AND_BROADCAST_CASES[case]
    if known_miss:
        pytest.xfail(f"nvFuser makes {want} kernels; {known_miss}")
    inputs = [x.to("meta") for x in _inputs(shapes, "cpu")]
    assert len(eqsat.estimate_fusion(definition(eqsat.DataType), inputs).kernels) == want


@pytest.mark.gpu
@pytest.mark.parametrize("case", LAYOUT_AND_BROADCAST_CASES)
def test_nvfuser_makes_the_kernels_the_model_predicts(case, monkeypatch):
    """The cases above as given on nvfuser_direct: its kernels, counted by torch.profiler."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device and nvfuser_direct")
    pytest.importorskip("nvfuser_direct", reason="needs nvfuser_direct")
    monkeypatch.syspath_prepend(str(BENCH))
    gpu_timing = importlib.import_module("gpu_timing")
    definition, shapes, want, _ = LAYOUT_AND_BROADCAST_CASES[case]
    fd = gpu_timing.direct_definition(definition)
    inputs = _inputs(shapes, "cuda")
    assert gpu_timing.kernel_count(lambda: fd.execute(inputs)) == want


def test_a_column_major_input_flattened_after_thousands_of_permutes_is_one_copy_kernel():
    """The layout is followed through the whole chain without recursion (1500 permutes: deeper
    than Python's recursion limit), and the flattened column-major input, an output, is
    written by one kernel."""

    def fusion(fd):
        x = fd.define_tensor(
            shape=[64, 32], contiguity=[True, True], dtype=eqsat.DataType.Float, stride_order=[0, 1]
        )
        t = x
        for _ in range(1500):
            t = fd.ops.permute(t, dims=[1, 0])
        fd.add_output(fd.ops.reshape(t, new_shape=[2048]))

    x = torch.randn(32, 64).t().to("meta")
    assert len(eqsat.estimate_fusion(fusion, [x]).kernels) == 1


def test_a_copying_reshape_costs_the_same_with_symbolic_extents_as_with_static_ones():
    """Which reshapes copy is decided once, at the encoding's extents (the inputs' where the
    definition's are symbolic), for the kernels and for the host's alias segments alike: a
    symbolic definition is not charged an alias segment on top of the copy kernel."""

    def flattened(shape):
        def fusion(fd):
            x = fd.define_tensor(shape=shape, contiguity=[True] * 4, dtype=eqsat.DataType.BFloat16)
            fd.add_output(fd.ops.reshape(fd.ops.permute(x, dims=[0, 2, 1, 3]), new_shape=[2, 64, 128]))

        return fusion

    x = torch.randn(2, 4, 64, 32, dtype=torch.bfloat16).to("meta")
    static, symbolic = (eqsat.estimate_fusion(flattened(s), [x]) for s in ([2, 4, 64, 32], [-1] * 4))
    assert len(static.kernels) == len(symbolic.kernels) == 1
    assert symbolic.time_us == static.time_us
