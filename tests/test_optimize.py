"""optimize_fusion end to end: the seeds, the API, the CLI."""

import json

import pytest
import torch
from helpers import as_list, assert_outputs_match, check

import eqsat
from eqsat import DataType, FusionError, optimize_fusion
from eqsat.cli import main
from eqsat.cost.profile import load_profile
from eqsat.optimize import MIN_GAIN
from eqsat.testing.seeds import SEEDS

# What the rewrites are, tested apart from whether the cost model's measured error lets them
# be kept (the packaged error table; test_margin.py): the flat margin of a profile without one.
FLAT = {"min_gain": MIN_GAIN}


def _ops(fusion):
    return [n.op for n in fusion.nodes]


@pytest.mark.parametrize("shape", [(512, 512, 512), (4096, 2048, 1024)])
def test_seed_one_sums_before_multiplying(shape):
    seed = SEEDS["reduction_broadcast"]
    opt = optimize_fusion(seed.model_ref, seed.make_inputs(*shape, device="meta"), **FLAT)
    assert opt.report.changed
    ops = _ops(opt.fusion)
    assert ops.index("sum") < ops.index("mul")
    sum_node = next(n for n in opt.fusion.nodes if n.op == "sum")
    assert sum_node.arg("arg").id == opt.fusion.inputs[0]  # sums x itself
    assert opt.report.after.flops < opt.report.before.flops / 50  # the arithmetic drop
    assert "sum" in opt.source.split("fd.ops.mul")[0]


def test_seed_one_is_kept_where_a_second_segment_costs_more_host_time_than_the_arithmetic_saves():
    """With nvFuser's host cost per segment (the packaged h200_host_fit profile, fitted by
    bench/host_cost.py): at 256^3 the input's one kernel does 17 M multiply-adds (a few µs on
    the H200), the rewrite runs a reduction and a pointwise kernel, and a segment costs about
    7 µs of host time: the input is kept. At 512^3 the arithmetic outweighs it."""
    seed = SEEDS["reduction_broadcast"]
    small = optimize_fusion(
        seed.model_ref, seed.make_inputs(256, 256, 256, device="meta"), profile="h200_host_fit", **FLAT
    )
    assert not small.report.changed and small.fusion == small.original
    assert not small.report.rejected  # estimated dearer: no candidate to reject
    large = optimize_fusion(
        seed.model_ref, seed.make_inputs(512, 512, 512, device="meta"), profile="h200_host_fit", **FLAT
    )
    assert large.report.changed
    assert len(large.report.after.kernels) == 2 and len(large.report.before.kernels) == 1
    # the second segment's host cost is in the estimate
    assert large.report.after.host_us - large.report.before.host_us == pytest.approx(
        load_profile("h200_host_fit").host.per_segment_us
    )
    flat = optimize_fusion(seed.model_ref, seed.make_inputs(256, 256, 256, device="meta"), profile="h200")
    assert flat.report.after.host_us == flat.report.before.host_us


def test_seed_two_reduces_the_hidden_axis_first_inside_the_normalization_kernel():
    seed = SEEDS["layernorm_amax"]
    opt = optimize_fusion(seed.model_ref, seed.make_inputs(16384, 4096, device="meta"), **FLAT)
    maxes = [n for n in opt.fusion.nodes if n.op == "max"]
    assert [m.arg("dims") for m in maxes] == [(1,), (0,)]
    after, before = opt.report.after, opt.report.before
    assert after.bytes < before.bytes
    norm = [k for k in after.kernels if k.kind == "normalization"]
    assert len(norm) == 1 and "Max" in norm[0].ops and "Var" in norm[0].ops


def test_fp8_current_scaling_takes_its_amax_inside_the_norm_kernel_and_casts_to_e4m3():
    seed = SEEDS["rmsnorm_fp8"]
    opt = optimize_fusion(seed.model_ref, seed.make_inputs(16384, 4096, device="meta"))
    assert [m.arg("dims") for m in opt.fusion.nodes if m.op == "max"] == [(1,), (0,)]
    assert opt.report.after.time_us < opt.report.before.time_us
    norm = [k for k in opt.report.after.kernels if k.kind == "normalization"]
    assert len(norm) == 1 and {"Rsqrt", "Max"} <= set(norm[0].ops)
    inputs = seed.make_inputs()
    got, want = eqsat.run_fusion(opt.fusion, inputs, strict=True), seed.torch_reference(*inputs)
    assert len(got) == len(want) == 2
    assert got[0].dtype == torch.float8_e4m3fn
    assert torch.equal(got[0].float(), want[0].float())  # the same e4m3 values, bit for bit
    torch.testing.assert_close(got[1], want[1], rtol=1e-5, atol=0)


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_optimized_seed_agrees_with_torch(name):
    seed = SEEDS[name]
    inputs = seed.make_inputs()
    opt = check(seed.model_ref, inputs, seed.torch_reference)
    assert_outputs_match(
        opt.run_reference(inputs, strict=True),
        as_list(seed.torch_reference(*inputs)),
        [None] * len(opt.fusion.outputs),
        "run_reference",
    )


def test_an_unprofitable_rewrite_is_not_made():
    seed = SEEDS["reduction_broadcast"]
    opt = optimize_fusion(seed.model_ref, seed.make_inputs(8, 8, 8))  # launch-bound: one kernel wins
    assert not opt.report.changed and opt.fusion == opt.original
    assert opt.report.after.time_us == opt.report.before.time_us


def test_source_reingests_and_runs_the_same():
    seed = SEEDS["layernorm_amax"]
    opt = optimize_fusion(seed.model_ref, seed.make_inputs(256, 512, device="meta"))
    again = eqsat.ingest(opt.source)
    assert again == opt.fusion


def test_reoptimizes_per_input_shape_and_caches():
    seed = SEEDS["reduction_broadcast"]
    opt = optimize_fusion(seed.model_ref, **FLAT)
    small, large = seed.make_inputs(8, 8, 8, device="meta"), seed.make_inputs(512, 512, 512, device="meta")
    a, b = opt.for_inputs(small), opt.for_inputs(large)
    assert a is not b and opt.for_inputs(large) is b
    assert not a.report.changed and b.report.changed


def test_execute_and_to_nvfuser_say_what_is_missing():
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here; the GPU tests cover execute")
    opt = optimize_fusion(SEEDS["reduction_broadcast"].model_ref)
    with pytest.raises(FusionError, match="CUDA"):
        opt.execute(SEEDS["reduction_broadcast"].make_inputs())
    try:
        import nvfuser  # noqa: F401
    except Exception:
        with pytest.raises(FusionError, match="nvFuser is not available"):
            opt.to_nvfuser()


def test_inputs_that_do_not_match_are_rejected_with_the_line():
    seed = SEEDS["reduction_broadcast"]
    with pytest.raises(FusionError, match="dtype Float") as info:
        optimize_fusion(seed.model_ref, [torch.zeros(2, 2, dtype=torch.float64), torch.zeros(2, 2)])
    assert info.value.line is not None


def test_profile_from_a_path_and_a_bad_profile(tmp_path):
    from eqsat.cost.profile import load_profile

    good = tmp_path / "p.json"
    data = {
        "host_us": 10,
        "kinds": {
            k: {"launch_us": 1, "bandwidth_GBps": 1000, "gflops": 1000}
            for k in ("pointwise", "reduction", "normalization")
        },
    }
    good.write_text(json.dumps(data))
    opt = optimize_fusion(SEEDS["reduction_broadcast"].model_ref, profile=str(good))
    assert opt.report.before.host_us == 10
    # written before grid reductions were told apart: they take the reduction's constants
    assert load_profile(str(good)).kinds["grid_reduction"] == load_profile(str(good)).kinds["reduction"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"host_us": 1}))
    with pytest.raises(FusionError, match="not a cost-model profile"):
        load_profile(str(bad))
    typo = {**data, "kinds": {**data["kinds"], "grid_reductoin": data["kinds"]["reduction"]}}
    with pytest.raises(FusionError, match=r"unknown kinds \['grid_reductoin'\]"):
        load_profile(typo)


def _seed_file(tmp_path, shape=(256, 256, 256)):
    from eqsat.lowering import repro_source

    seed = SEEDS["reduction_broadcast"]
    path = tmp_path / "seed1.py"
    path.write_text(repro_source(eqsat.from_function(seed.model_ref), seed.make_inputs(*shape)))
    return path


def test_cli_optimize_json(tmp_path, capsys):
    assert main(["optimize", str(_seed_file(tmp_path, (1024, 1024, 1024))), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"before", "after", "rules", "source"}
    assert set(out["before"]) == {"kernels", "bytes", "time_us"}
    assert "sum-of-product-factor-right" in out["rules"]
    assert out["after"]["time_us"] < out["before"]["time_us"]


def test_cli_optimize_writes_for_the_files_frontend_or_the_one_asked(tmp_path, capsys):
    path = _seed_file(tmp_path)  # a classic repro (imports nvfuser)
    assert main(["optimize", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["frontend"] == "nvfuser" and out["source"].startswith("def nvfuser_fusion_id0(")
    assert main(["optimize", str(path), "--json", "--frontend", "nvfuser_direct"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["frontend"] == "nvfuser_direct" and out["source"].startswith("def nvfuser_fusion(")
    with pytest.raises(SystemExit):  # not a frontend: argparse refuses it
        main(["optimize", str(path), "--frontend", "nvfuser_classic"])


def test_cli_check_keeps_expanded_inputs_expanded(tmp_path, capsys):
    from eqsat.lowering import repro_source

    def define(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, None], dtype=eqsat.DataType.Float)
        fd.add_output(fd.ops.sum(fd.ops.mul(t0, t0), dims=[0]))

    path = tmp_path / "expanded.py"  # expanded innermost: a dense copy breaks dim 0's stride
    path.write_text(repro_source(eqsat.from_function(define), [torch.randn(3, 1).expand(3, 4)]))
    assert main(["check", str(path)]) == 0, capsys.readouterr().err


def test_cli_check_passes_and_fails(tmp_path, capsys, monkeypatch):
    path = _seed_file(tmp_path)
    assert main(["check", str(path)]) == 0
    import eqsat.pipeline.driver as driver  # the check command imports it when it runs

    real = driver.optimize

    def broken(*args, **kwargs):  # an optimizer that changes the result
        opt = real(*args, **kwargs)

        def wrong(fd):
            x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
            b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
            fd.add_output(fd.ops.mul(x, b))

        opt.fusion = eqsat.from_function(wrong)
        return opt

    monkeypatch.setattr(driver, "optimize", broken)
    assert main(["check", str(path)]) == 1
    assert "output 0" in capsys.readouterr().out


def test_cli_check_fails_on_an_output_too_many(tmp_path, capsys, monkeypatch):
    import eqsat.pipeline.driver as driver  # the check command imports it when it runs

    path = _seed_file(tmp_path)
    real = driver.optimize

    def one_more(*args, **kwargs):  # the right output, and one that was not asked for
        opt = real(*args, **kwargs)

        def extra(fd):
            x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
            b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
            fd.add_output(
                fd.ops.mul(
                    fd.ops.broadcast_in_dim(
                        fd.ops.sum(x, dims=[1]), shape=fd.ops.shape(b), broadcast_dims=[0]
                    ),
                    b,
                )
            )
            fd.add_output(b)

        opt.fusion = eqsat.from_function(extra)
        return opt

    monkeypatch.setattr(driver, "optimize", one_more)
    assert main(["check", str(path)]) == 1
    assert "2 outputs instead of 1" in capsys.readouterr().out


def test_a_sum_over_a_broadcast_dim_is_a_squeeze_not_a_kernel():
    """nvFuser turns a reduction over extent-1 dims into a squeeze: a norm backward that sums a
    [N, 1] keepdim result again is still one kernel (the H200 corpus run: layernorm backward
    was predicted at 4 kernels, nvFuser made 1, and the 'optimized' one ran 27% slower)."""

    def fusion(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        s = fd.ops.sum(x, dims=[1], keepdim=True)  # [N, 1]
        t = fd.ops.sum(s, dims=[1])  # over the extent-1 dim
        fd.add_output(fd.ops.sub(x, fd.ops.broadcast_in_dim(t, shape=x.shape(), broadcast_dims=[0])))

    est = eqsat.estimate_fusion(fusion, [torch.empty(1024, 4096, device="meta")])
    assert [k.kind for k in est.kernels] == ["normalization"]


def test_static_extents_are_lowered_as_numbers_not_size_ops():
    # as Thunder writes its fusions: every extent static, slices' too. The optimized definition
    # writes them as numbers, leaving nvFuser no size to evaluate on the host for each call
    n, k, j = 2048, 1024, 512

    def static(fd):
        x0 = fd.define_tensor(shape=[n, k + 8], contiguity=[True, True], dtype=DataType.Float)
        x = fd.ops.slice(x0, start_indices=[0, 8], end_indices=[n, k + 8], strides=[1, 1])
        b = fd.define_tensor(shape=[n, j], contiguity=[True, True], dtype=DataType.Float)
        xb = fd.ops.broadcast_in_dim(x, shape=[n, k, j], broadcast_dims=[0, 1])
        bb = fd.ops.broadcast_in_dim(b, shape=[n, k, j], broadcast_dims=[0, 2])
        fd.add_output(fd.ops.sum(fd.ops.mul(xb, bb), dims=[1]))
        fd.add_output(fd.ops.broadcast_in_dim(fd.ops.sum(x, dims=[1]), shape=[n, k], broadcast_dims=[0]))

    def reference(x0, b):
        rows = x0[:, 8:].double().sum(1, keepdim=True)
        return [(rows * b.double()).float(), rows.expand(n, k).float()]

    opt = check(static, [torch.randn(n, k + 8), torch.randn(n, j)], reference)
    assert opt.report.changed and "size" not in opt.fusion.ops()


def test_the_report_gives_where_saturation_stopped_as_fields_and_as_before_as_text():
    opt = optimize_fusion(SEEDS["reduction_broadcast"].model_ref, deadline_s=None)
    sat = opt.report.saturation
    assert sat.stop == "saturated" and sat.ran and sat.iterations >= 1 and sat.e_nodes > 0
    assert f"\nsaturation: saturated after {sat.iterations} iterations, {sat.e_nodes} e-nodes; " in str(
        opt.report
    )
    assert opt.report.summary()["saturation"] == {
        "stop": "saturated",
        "iterations": sat.iterations,
        "e_nodes": sat.e_nodes,
    }


def test_the_report_says_saturation_was_skipped_where_nothing_was_encoded():
    def wide(fd):  # 70 unrelated axes: more labels than the masks hold
        out = None
        for _ in range(70):
            b = fd.ops.sum(fd.define_tensor(shape=[-1]), dims=[0])
            out = b if out is None else fd.ops.add(out, b)
        fd.add_output(out)

    report = optimize_fusion(wide).report
    assert (report.saturation.stop, report.saturation.ran, report.saturation.e_nodes) == (
        "skipped",
        False,
        None,
    )
    assert "\nsaturation: skipped; " in str(report)
    assert report.summary()["saturation"] == {"stop": "skipped", "iterations": None, "e_nodes": None}
