"""bench/step_profile.py without a GPU: kernel classes, launch calls, the per-step device map
from profiler events (busy, idle, classes), model specs, and the table of a recorded run."""

from types import SimpleNamespace

import pytest
import torch

from helpers import load_bench


@pytest.fixture
def sp(monkeypatch):
    return load_bench(monkeypatch, "step_profile")


@pytest.mark.parametrize(
    "name, cls",
    [
        ("nvf::nvfuser_pointwise_f0_c1_r0_g0(nvf::Tensor<__bfloat, 3, 3>)", "nvFuser"),
        ("nvfuser_inner_persistent_f0_c1_r0_g1", "nvFuser"),
        ("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NNT", "GEMM"),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas", "GEMM"),
        (
            "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>(x)",
            "GEMM",
        ),
        (
            "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4> >"
            "(Flash_fwd_params)",
            "attention",
        ),
        ("fmha_cutlassB_bf16_aligned_64x64_k128_sm80", "attention"),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3", "attention"),
        ("triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0", "Inductor/Triton"),
        ("triton_red_fused__log_softmax_1", "Inductor/Triton"),
        ("triton_tem_fused_mm_0", "GEMM"),
        ("Memcpy DtoD (Device -> Device)", "copies"),
        ("Memset (Device)", "copies"),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16> >"
            "(int)",
            "other torch",
        ),
        (
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>(float*)",
            "other torch",
        ),
    ],
)
def test_kernel_class(sp, name, cls):
    assert sp.kernel_class(name) == cls


def test_launch_kind(sp):
    assert sp.launch_kind("cudaLaunchKernel") == "kernel"
    assert sp.launch_kind("cuLaunchKernelEx") == "kernel"
    assert sp.launch_kind("cudaGraphLaunch") == "graph"
    assert sp.launch_kind("cudaMemcpyAsync") == "memcpy"
    assert sp.launch_kind("cudaMemsetAsync") == "memset"
    assert sp.launch_kind("aten::mm") is None


def test_parse_model(sp):
    args = SimpleNamespace(batch=4, seq=2048, layers=2, fp8_blocks=4)
    assert sp.parse_model("llama@1x512", args) == {
        "model": "llama",
        "batch": 1,
        "seq": 512,
        "layers": 2,
        "fp8_blocks": None,
    }
    c = sp.parse_model("fp8_current", args)
    assert (c["batch"], c["seq"], c["layers"], c["fp8_blocks"]) == (4, 2048, None, 4)
    assert sp.config_key(c) == "fp8_current 4x2048 4 blocks"


def _event(name, device, start, end, parent=None, kernels=()):
    return SimpleNamespace(
        name=name,
        device_type=device,
        time_range=SimpleNamespace(start=start, end=end),
        cpu_parent=parent,
        kernels=list(kernels),
    )


def test_device_map_per_step(sp):
    cuda, cpu = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU
    # two steps: a GEMM and an nvFuser kernel that overlap, a copy, a gap of 50 us
    events = [
        _event("nvjet_a", cuda, 0, 100),
        _event("nvf::nvfuser_x", cuda, 80, 120),
        _event("Memcpy DtoD", cuda, 170, 180),
        _event("nvjet_a", cuda, 180, 280),
        _event("cudaLaunchKernel", cpu, 0, 1),
        _event("cudaLaunchKernel", cpu, 2, 3),
        _event("cudaGraphLaunch", cpu, 4, 5),
        _event("aten::mm", cpu, 0, 1),
    ]
    m = sp.device_map(events, 2)
    assert m["by_class_ms"]["GEMM"] == pytest.approx(0.1)
    assert m["by_class_ms"]["nvFuser"] == pytest.approx(0.02)
    assert m["by_class_ms"]["copies"] == pytest.approx(0.005)
    assert m["kernels"] == 1.5 and m["copies"] == 0.5
    assert m["gpu_span_ms"] == pytest.approx(0.14)
    assert m["gpu_busy_ms"] == pytest.approx(0.115)  # (120 + 110) us busy over two steps
    assert m["gpu_idle_ms"] == pytest.approx(0.025)
    assert m["launch_api"] == {"graph": 0.5, "kernel": 1.0}
    assert m["_per_kernel"]["nvjet_a"] == (100.0, 1.0)


def test_kernel_ops_names_the_launching_op(sp):
    cpu = torch.autograd.DeviceType.CPU
    node = _event("autograd::engine::evaluate_function: MmBackward0", cpu, 0, 10)
    linear = _event("aten::linear", cpu, 0, 5, node)
    mm = _event("aten::mm", cpu, 0, 1, linear, [SimpleNamespace(name="nvjet_a", duration=40.0)])
    ops, by_op = sp.kernel_ops([node, linear, mm])
    assert (
        ops["nvjet_a"].most_common(1)[0][0]
        == "[autograd::engine::evaluate_function: MmBackward0] aten::linear > aten::mm"
    )
    assert by_op == {"aten::linear": 40.0}


def test_table_of_a_recorded_run(sp):
    classes = dict.fromkeys(sp.CLASSES, 0.0) | {"GEMM": 10.0}
    ok = {
        "config": "llama 1x512 2 layers",
        "variant": "eager",
        "steady_ms": 12.5,
        "device_ms": 10.0,
        "by_class_ms": classes,
        "kernels": 300.0,
        "host_issue_ms": 9.0,
        "gpu_idle_ms": 2.5,
        "peak_mem_gib": 3.0,
        "mem_before_gib": 0.75,
    }
    bad = {"config": "llama 1x512 2 layers", "variant": "thunder-cg", "error": "dynamo: AssertionError: x|y"}
    text = sp.table({"device": "NVIDIA H100 80GB HBM3", "card": "H100", "rows": [ok, bad]})
    assert "| llama 1x512 2 layers | eager | 12.50 | 10.00 | 10.00 |" in text
    assert text.splitlines()[4].endswith("| 3.00 | 2.25 |")  # peak, and the step's own: peak - before
    assert "error: dynamo: AssertionError: x/y" in text
    assert "H100" in text.splitlines()[0]


def test_the_cost_model_check_sums_thunders_regions_against_the_measured_nvfuser_kernels(sp):
    """The regions eqsat was given are measured in the Thunder row without eqsat that made as
    many (the detach executor joins regions: Thunder alone's row measures other ones)."""
    classes = dict.fromkeys(sp.CLASSES, 0.0)

    def thunder_row(variant, regions, ms, kernels):
        return {
            "config": "fp8_current 4x2048 4 blocks",
            "variant": variant,
            "by_class_ms": classes | {"nvFuser": ms},
            "kernels_by_class": dict.fromkeys(sp.CLASSES, 0.0) | {"nvFuser": kernels},
            "thunder": {
                "nvfuser_regions": {"forward": [0] * (regions // 2), "backward": [0] * (regions // 2)}
            },
        }

    alone, detached = thunder_row("thunder", 6, 6.0, 30.0), thunder_row("thunder-detach", 2, 2.0, 12.0)
    regions = [
        {"kernels_before": 4, "device_before_us": 600.0},
        {"kernels_before": 6, "device_before_us": 900.0},
    ]
    with_eqsat = {
        "config": "fp8_current 4x2048 4 blocks",
        "variant": "thunder-eqsat-all",
        "eqsat": {"per_region": regions},
        "thunder": {"nvfuser_regions": {"forward": [0], "backward": [0]}},
    }
    other = {"config": "llama 1x512 2 layers", "variant": "thunder", "error": "dynamo: ..."}
    text = sp.cost_model_check({"rows": [alone, detached, with_eqsat, other]})
    assert text.splitlines()[2] == "| fp8_current 4x2048 4 blocks | 2 | 10 / 12 | 1,500 / 2,000 (-25%) |"
    assert len(text.splitlines()) == 3  # the config without both rows is left out
    assert sp.cost_model_check({"rows": [alone, with_eqsat]}) == ""  # no row made those regions
    assert sp.cost_model_check({"rows": [other]}) == ""


def test_each_variant_asks_for_its_own_executors_and_no_other(sp):
    # session 45: the detach executor came with every variant that listed any executor of eqsat's
    assert sp.executor_flags(("attention",)) == {"attention": True, "linear": False, "detach": False}
    assert sp.executor_flags(("linear",)) == {"attention": False, "linear": True, "detach": False}
    assert sp.executor_flags(sp.VARIANTS["thunder-eqsat-all"][4]) == dict.fromkeys(sp.EXECUTORS, True)


def test_eager_pieces_run_dynamos_graph_where_inductor_would_compile_it(sp, monkeypatch):
    import sys
    import types

    import torch._inductor

    class ThunderCompiler:  # stands in for Thunder's: its splitter compiles a piece with Inductor
        def __init__(self, **options):
            self.options = options

        def __call__(self, gm, sample_args):
            return torch._inductor.compile(gm, sample_args)

    dynamo = types.ModuleType("thunder.dynamo")
    dynamo.ThunderCompiler = ThunderCompiler
    monkeypatch.setitem(sys.modules, "thunder", types.ModuleType("thunder"))
    monkeypatch.setitem(sys.modules, "thunder.dynamo", dynamo)
    inductor_compile = torch._inductor.compile
    piece = torch.fx.symbolic_trace(torch.nn.ReLU())

    backend = sp.thunder_compiler({"transforms": []}, "eager")
    assert isinstance(backend, ThunderCompiler) and backend.options == {"transforms": []}
    assert backend(piece, [torch.zeros(2)]) is piece
    assert torch._inductor.compile is inductor_compile
    assert type(sp.thunder_compiler({}, "inductor")) is ThunderCompiler
    with pytest.raises(ValueError, match="pieces"):
        sp.thunder_compiler({}, "triton")


def test_memory_at_peak_lists_what_the_steps_allocations_held_when_they_peaked(sp):
    def alloc(addr, size, name):
        return {
            "action": "alloc",
            "addr": addr,
            "size": size,
            "frames": [{"filename": "x.py", "line": 1, "name": name}],
        }

    def free(addr, size):
        return {"action": "free_completed", "addr": addr, "size": size}

    trace = [
        free(99, 7 << 20),  # allocated before the recording: not counted
        alloc(1, 4 << 20, "saved"),
        alloc(2, 8 << 20, "workspace"),
        free(2, 8 << 20),
        alloc(3, 2 << 20, "saved"),
        alloc(4, 8 << 20, "grad"),  # the peak: 4 + 2 + 8 MiB
        free(4, 8 << 20),
        free(1, 4 << 20),
        alloc(5, 1 << 20, "late"),
    ]
    out = sp.live_at_peak(trace, lambda frames: frames[0]["name"], top=5)
    assert out["peak_added_gib"] * 1024 == 14
    assert out["peak_by"] == "grad"
    assert [(g["where"], g["mib"], g["blocks"]) for g in out["live"]] == [("grad", 8, 1), ("saved", 6, 2)]


def test_where_a_block_was_allocated_names_thunders_statement_then_the_first_file_outside_torch(sp):
    frames = [  # innermost first
        {"filename": "/venv/lib/python3.12/site-packages/torch/_ops.py", "line": 10, "name": "__call__"},
        {"filename": "/work/eqsat/thunder/cudnn_attention.py", "line": 159, "name": "backward_impl"},
        {"filename": "thunder.backward_fn_3", "line": 42, "name": "backward_fn"},
        {"filename": "/work/model.py", "line": 5, "name": "step"},
    ]
    text = {("thunder.backward_fn_3", 42): "  (t1, t2) = cudnn_sdpa_bwd(q, k, v)\n"}
    where = sp.frame_where(frames, lambda f, n: text.get((f, n), ""))
    assert where == (
        "thunder.backward_fn_3:42 backward_fn (t1, t2) = cudnn_sdpa_bwd(q, k, v) | "
        "eqsat/thunder/cudnn_attention.py:159 backward_impl"
    )
    assert sp.frame_where([]) == "(no frame)"


def test_the_eager_capture_runs_the_capture_script_with_inductors_compile_returning_the_graph(
    monkeypatch, tmp_path
):
    import torch._inductor

    from helpers import load_bench

    capture = load_bench(monkeypatch, "thunder_capture_eager")
    script = tmp_path / "capture.py"
    out = tmp_path / "out.txt"
    script.write_text(
        "import sys, torch._inductor\n"
        f"open({str(out)!r}, 'w').write(repr((sys.argv[1:], torch._inductor.compile('graph', []))))\n"
    )
    monkeypatch.setenv("CAPTURE", str(script))
    monkeypatch.setattr(torch._inductor, "compile", lambda gm, example_inputs: "inductor")
    monkeypatch.setattr("sys.argv", ["x"])
    capture.main(["OUTDIR", "llama"])
    assert out.read_text() == repr((["OUTDIR", "llama"], "graph"))
