"""The map of a training step (issue 38, part 1): where one step's time goes, per model and
variant, side by side in one run on one GPU.

Variants (``--variants``, keys in brackets): eager [eager], torch.compile [compile],
torch.compile mode="reduce-overhead" [compile-ro], Thunder [thunder], Thunder + eqsat
[thunder-eqsat] (``eqsat.thunder.Optimize``), Thunder with eqsat's cuDNN attention executor
listed first [thunder-attn], the same with ``Optimize`` [thunder-eqsat-attn] (whose region
hooks mark the causal masks the executor then runs as ``is_causal``), Thunder with eqsat's
aligned-linear executor [thunder-linear] (``eqsat.thunder.aligned_linear``: a linear layer with
unaligned output features, gpt2's head, on padded operands), Thunder with eqsat's detach
executor [thunder-detach] (``eqsat.thunder.detach_executor``: ``detach`` as a view nvFuser
fuses), all of eqsat with all three executors [thunder-eqsat-all] (and with grouped-query
attention on the key-value heads as they are, ``Optimize(grouped_attention=True)``:
[thunder-eqsat-all-grouped]), and both Thunders under
Thunder's CUDA graphs [thunder-cg, thunder-eqsat-cg] (Thunder 0.2.6 has no ``use_cudagraphs`` option any more:
``thunder.jit`` raises "use_cudagraphs is replaced by using
thunder.transforms.CUDAGraphTransform", so the transform is appended to the transforms, after
eqsat's ``Optimize``, which must see the nvFuser regions before they are regrouped). The models
are bench/thunder.py's (imported, not copied): transformers' models with random weights at
``--layers`` layers (dropout 0, sdpa attention; ``--no-kv-cache`` calls them with
``use_cache=False``, on which Thunder 0.2.6 through Dynamo failed for Phi-3 and Llama on an
H100: an Inductor piece asserts a contiguous stride where Thunder hands it an expanded
tensor) and the ``fp8_current`` blocks. Thunder takes the way bench/thunder.py takes
(transformers' models through torch.compile with Thunder as its backend, the plain-torch
blocks through ``thunder.jit``), and its other variants follow it.

A step is forward + backward + zero_grad(set_to_none). Per (model, variant) row:
- ``first_call_s``: the first step, compilation included (wall clock);
- ``steady_ms``: the median step at steady state (CUDA events around each step, steps issued back
  to back after warm-up); ``latency_ms``: one step alone, waited for; ``host_issue_ms``: the wall
  time the host takes to issue one step (the GPU idle when it starts);
- ``by_class_ms`` / ``kernels_by_class``: device time and kernels of one step by class (GEMM,
  attention, nvFuser, Inductor/Triton, other torch, copies: memcpy/memset), from torch.profiler's
  CUDA events over ``--profile-steps`` steps issued back to back, per step; ``device_ms`` their sum;
  ``gpu_busy_ms`` the union of those intervals, ``gpu_idle_ms`` the span from the first to the last
  GPU event less the busy time (per step);
- ``launch_api``: the host's launch calls per step (cudaLaunchKernel, cuLaunchKernel(Ex),
  cudaGraphLaunch, memcpy/memset calls), from the same profile;
- ``top_kernels``: the kernels with the most device time per step (name, class, us, count), each
  with the torch ops that launched it (from a second profile with CPU activity: the outermost
  aten op over it, ``>``, the innermost op), and for Thunder the trace's ops by executor
  (``thunder.trace_ops``: what the last forward and backward execution traces hold outside
  nvFuser's regions; ``split_reasons``: what Thunder left to Inductor);
- ``peak_mem_gib``: ``torch.cuda.max_memory_allocated`` over one step (``mem_before_gib``: what
  was allocated before it); with ``--memory-at-peak``, ``memory_at_peak``: one more step under
  the allocator's recorder, and what its own allocations held at their peak, grouped by where
  each was made (the Thunder trace's statement, then the innermost file outside torch);
- the loss, and whether it is within 2% of eager's; for Thunder + eqsat, eqsat's report summary
  and per nvFuser region the cost model's segments (kernels), bytes, device and host time of
  Thunder's definition (``eqsat.per_region``); with eqsat's cuDNN attention, how its calls
  ran in the first step (``attention_calls``: "forward causal", "backward masked", ...), and
  with the aligned-linear executor its calls (``linear_calls``);
  for the torch.compile ways, Dynamo's graphs and graph breaks.

An error of one row is recorded in it and the run goes on; memory is freed between rows. The
JSON (``--json``) is written after every row. ``--budget-s`` is a time guard: a row is started
only where ``--min-row-s`` seconds remain, and a row still running when the budget is spent is
stopped by an alarm (recorded as an error): rows not started are recorded as skipped. With
``--resume`` the rows already in ``--json`` without an error are kept and not run again.

Models (``--models``, comma separated, each ``NAME`` or ``NAME@BxS`` for its own batch and
sequence; default: the map of issue 38, in priority order). Without a GPU: ``--plot JSON``
draws one stacked-bar PNG per model (device time by class per variant, GPU idle on top, the
steady step marked) into ``--png-dir``, and ``--table JSON`` prints the markdown table.

    python bench/step_profile.py [--models phi3@4x2048,llama@1x512] [--variants eager,thunder]
        [--batch 4 --seq 2048 --layers 2] [--budget-s 540] [--resume] --json out.json
    python bench/step_profile.py --plot out.json --png-dir docs/images
    python bench/step_profile.py --table out.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import sys
import time
from collections import Counter

# this folder holds bench/thunder.py: with it on the path, `import thunder` is not Lightning Thunder
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
# torch.profiler leaves CUPTI attached after it stops unless Kineto tears it down (bench/gpu_timing.py)
os.environ.setdefault("TEARDOWN_CUPTI", "1")

VARIANTS = {  # key: (label, builds Thunder, eqsat, CUDA graphs, eqsat's executors listed first)
    "eager": ("eager", False, False, False, ()),
    "compile": ("torch.compile", False, False, False, ()),
    "compile-ro": ("torch.compile reduce-overhead", False, False, True, ()),
    "thunder": ("Thunder", True, False, False, ()),
    "thunder-eqsat": ("Thunder+eqsat", True, True, False, ()),
    "thunder-attn": ("Thunder, cuDNN attention", True, False, False, ("attention",)),
    "thunder-eqsat-attn": ("Thunder+eqsat, cuDNN attention", True, True, False, ("attention",)),
    "thunder-linear": ("Thunder, aligned linear", True, False, False, ("linear",)),
    "thunder-detach": ("Thunder, fused detach", True, False, False, ("detach",)),
    "thunder-eqsat-all": (
        "Thunder+eqsat, all of eqsat's executors",
        True,
        True,
        False,
        ("attention", "linear", "detach"),
    ),
    "thunder-eqsat-all-grouped": (
        "Thunder+eqsat, all of eqsat's executors, grouped keys and values as they are",
        True,
        True,
        False,
        ("attention", "linear", "detach"),
    ),
    "thunder-cg": ("Thunder CUDA graphs", True, False, True, ()),
    "thunder-eqsat-cg": ("Thunder+eqsat CUDA graphs", True, True, True, ()),
}
EXECUTORS = ("attention", "linear", "detach")  # eqsat.thunder.executors' keywords
# Optimize(grouped_attention=True): attention on grouped keys and values as they are
GROUPED_KV = ("thunder-eqsat-all-grouped",)
CLASSES = ("GEMM", "attention", "nvFuser", "Inductor/Triton", "other torch", "copies")
DEFAULT_MODELS = (
    "phi3@4x2048,llama@4x2048,fp8_current@4x2048,llama@1x512,gpt2@4x2048,qwen2@4x2048,"
    "phi3@4x1024,llama@4x1024,qwen2@4x1024"
)
LOSS_RTOL = 2e-2
# per nvFuser region, from eqsat's report: the cost model's figures of Thunder's definition
REGION_FIELDS = (
    "trace",
    "region",
    "inputs",
    "status",
    "kernels_before",
    "bytes_before",
    "device_before_us",
    "host_before_us",
    "predicted_before_us",
    "predicted_after_us",
    "causal_masks",
)
GIB = float(1 << 30)


# ----------------------------------------------------------------------------------------------
# kernel classes (no torch needed)


def kernel_class(name: str) -> str:
    """The class of a CUDA kernel (or memcpy/memset) event by its name, as torch.profiler
    reports it (demangled)."""
    low = name.lower()
    if low.startswith(("memcpy", "memset")):
        return "copies"
    if "nvfuser" in low or low.startswith(("nvf::", "void nvf::")):
        return "nvFuser"
    if low.startswith("triton_tem_"):  # Inductor's templates: mm, bmm, addmm
        return "GEMM"
    if low.startswith("triton"):
        return "Inductor/Triton"
    if any(k in low for k in ("flash", "fmha", "attention", "sdpa", "_attn")):
        return "attention"
    if any(
        k in low
        for k in (
            "gemm",
            "nvjet",
            "xmma",
            "cublas",
            "cutlass",
            "gemv",
            "splitkreduce",
            "wgmma",
            "s16816",
            "s1688",
            "hmma",
            "matmul",
        )
    ):
        return "GEMM"
    return "other torch"


def launch_kind(name: str) -> str | None:
    """A host runtime call that launches GPU work, by kind; else None."""
    if "GraphLaunch" in name:
        return "graph"
    if "LaunchKernel" in name or name.startswith("cuLaunch") or name.startswith("cudaLaunch"):
        return "kernel"
    if name.startswith(("cudaMemcpy", "cuMemcpy")):
        return "memcpy"
    if name.startswith(("cudaMemset", "cuMemset")):
        return "memset"
    return None


def live_at_peak(trace: list, where, top: int = 12) -> dict:
    """What the step's own allocations held at their peak, from the CUDA caching allocator's
    trace of one step (``torch.cuda.memory._snapshot()["device_traces"][device]``, recorded from
    the step's start): a block counts from its ``alloc`` to its ``free_completed``; blocks
    allocated before the recording are not in the trace and not counted. The live blocks are
    grouped by ``where(frames)`` (frames innermost first), largest first; ``peak_by`` is where
    the allocation that reached the peak was made."""
    sizes, cur, peak, at = {}, 0, 0, -1
    for i, e in enumerate(trace):
        action = e.get("action")
        if action == "alloc":
            sizes[e["addr"]] = e["size"]
            cur += e["size"]
            if cur > peak:
                peak, at = cur, i
        elif action == "free_completed" and e.get("addr") in sizes:
            cur -= sizes.pop(e["addr"])
    live = {}
    for e in trace[: at + 1]:  # again, up to the event that reached the peak
        if e.get("action") == "alloc":
            live[e["addr"]] = e
        elif e.get("action") == "free_completed":
            live.pop(e.get("addr"), None)
    held, blocks = Counter(), Counter()
    for e in live.values():
        key = where(e.get("frames") or [])
        held[key] += e["size"]
        blocks[key] += 1
    return {
        "peak_added_gib": peak / GIB,
        "peak_by": where(trace[at].get("frames") or []) if at >= 0 else None,
        "live": [
            {"where": k, "mib": v / float(1 << 20), "blocks": blocks[k]} for k, v in held.most_common(top)
        ],
    }


def frame_where(frames: list, text=None) -> str:
    """Where a block was allocated, for :func:`live_at_peak`: the innermost frame of a program
    Python has no file for (Thunder's traces, with the statement where ``text(filename, line)``
    finds it), then the innermost frame outside torch's and Python's own files."""
    generated = next((f for f in frames if not f.get("filename", "").endswith(".py")), None)
    own = next(
        (
            f
            for f in frames
            if f.get("filename", "").endswith(".py")
            and not any(s in f["filename"] for s in ("/torch/", "/python3.", "/lib/python"))
        ),
        None,
    )
    parts = []
    if generated is not None:
        line = (text(generated["filename"], generated["line"]) if text else "") or ""
        parts.append(
            f"{generated['filename']}:{generated['line']} {generated.get('name', '')} {line.strip()[:120]}"
        )
    if own is not None:
        short = "/".join(own["filename"].split("/")[-3:])
        parts.append(f"{short}:{own['line']} {own.get('name', '')}")
    return " | ".join(parts) or "(no frame)"


def card_of(device: str) -> str:
    for c in ("H200", "H100", "A100", "B200", "L40"):
        if c in device:
            return c
    return device


# ----------------------------------------------------------------------------------------------
# on the GPU


def _bench_thunder():
    """bench/thunder.py as a module (its name would be Lightning Thunder's on the path)."""
    import importlib.util

    module = sys.modules.get("bench_thunder")
    if module is None:
        spec = importlib.util.spec_from_file_location("bench_thunder", os.path.join(_HERE, "thunder.py"))
        module = sys.modules["bench_thunder"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


class RowTimeout(BaseException):
    """A BaseException: torch's own `except Exception` cannot swallow the time guard."""


def _alarm(signum, frame):
    raise RowTimeout("the row ran past its time guard")


def parse_model(spec: str, args) -> dict:
    name, _, size = spec.partition("@")
    batch, seq = args.batch, args.seq
    if size:
        b, _, s = size.lower().partition("x")
        batch, seq = int(b), int(s)
    return {
        "model": name,
        "batch": batch,
        "seq": seq,
        "layers": None if name.startswith("fp8") else args.layers,
        "fp8_blocks": args.fp8_blocks if name.startswith("fp8") else None,
    }


def config_key(c: dict) -> str:
    blocks = f"{c['fp8_blocks']} blocks" if c.get("fp8_blocks") else f"{c['layers']} layers"
    return f"{c['model']} {c['batch']}x{c['seq']} {blocks}"


def build(key: str, model, how: str | None, pieces: str = "inductor"):
    """(callable model, eqsat transform or None, ThunderCompiler or None) of variant ``key``."""
    import torch

    torch._dynamo.reset()
    try:
        from torch._dynamo.utils import counters

        counters.clear()
    except Exception:  # counters moved: the Dynamo fields stay empty
        pass
    eqsat_on, graphs, ours = VARIANTS[key][2:]
    if key == "eager":
        return model, None, None
    if key == "compile":
        return torch.compile(model), None, None
    if key == "compile-ro":
        return torch.compile(model, mode="reduce-overhead"), None, None
    import thunder
    import eqsat.thunder

    transforms = []
    opt = None
    if eqsat_on:
        opt = eqsat.thunder.Optimize(grouped_attention=key in GROUPED_KV)
        transforms.append(opt)
    if graphs:
        from thunder.transforms.cudagraph import CUDAGraphTransform

        transforms.append(CUDAGraphTransform())  # after Optimize: it regroups the regions
    options = {"transforms": transforms}
    if ours:  # eqsat's executors (cuDNN attention, aligned linear, detach) before Thunder's own
        options["executors"] = eqsat.thunder.executors(**executor_flags(ours))
    if how == "jit":
        return thunder.jit(model, **options), opt, None
    backend = thunder_compiler(options, pieces)
    return torch.compile(model, backend=backend), opt, backend


def executor_flags(ours: tuple) -> dict:
    """``eqsat.thunder.executors``' keywords for a variant's executors: each one listed, and no other."""
    return {name: name in ours for name in EXECUTORS}


def thunder_compiler(options: dict, pieces: str):
    """Thunder as torch.compile's backend. ``pieces`` says what runs the pieces of Dynamo's graph
    that Thunder does not take: "inductor" (ThunderCompiler's way: ``torch._inductor.compile``)
    or "eager" (the piece's own graph, as torch runs it). Inductor's pieces assert the strides
    eager would give their inputs; Thunder 0.2.6 hands Llama's and Qwen2's pieces other strides
    (docs/step-profile.md), and an eager piece takes any."""
    from thunder.dynamo import ThunderCompiler

    if pieces == "inductor":
        return ThunderCompiler(**options)
    if pieces != "eager":
        raise ValueError(f"pieces: 'inductor' or 'eager', not {pieces!r}")

    class EagerPiecesCompiler(ThunderCompiler):
        # ThunderCompiler.__call__ hands torch._inductor.compile to its splitter when called
        def __call__(self, gm, sample_args):
            import torch._inductor

            inductor_compile = torch._inductor.compile
            torch._inductor.compile = lambda graph_module, example_inputs: graph_module
            try:
                return super().__call__(gm, sample_args)
            finally:
                torch._inductor.compile = inductor_compile

    return EagerPiecesCompiler(**options)


def free() -> None:
    import torch

    torch._dynamo.reset()
    gc.collect()
    torch.cuda.empty_cache()


def memory_at_peak(step, top: int) -> dict:
    """One step under the CUDA caching allocator's recorder (Python stacks): what the step's
    own allocations held at their peak, by where they were made (:func:`live_at_peak`)."""
    import linecache

    import torch

    record = torch.cuda.memory._record_memory_history
    torch.cuda.synchronize()
    try:
        record(enabled="all", context="all", stacks="python", max_entries=1_000_000, clear_history=True)
    except TypeError:  # a torch without clear_history
        record(enabled="all", context="all", stacks="python", max_entries=1_000_000)
    try:
        step()
        torch.cuda.synchronize()
        snapshot = torch.cuda.memory._snapshot()
    finally:
        record(enabled=None)
    trace = snapshot["device_traces"][torch.cuda.current_device()]
    return live_at_peak(trace, lambda frames: frame_where(frames, linecache.getline), top)


def profile_events(step, n: int, cpu: bool):
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CUDA] + ([ProfilerActivity.CPU] if cpu else [])
    torch.cuda.synchronize()
    with profile(activities=activities) as prof:
        for _ in range(n):
            step()
        torch.cuda.synchronize()
    return prof.events()


def device_map(events, n: int) -> dict:
    """Per step (``n`` steps profiled back to back): device time and kernels by class, busy and
    idle GPU time, host launch calls, and each kernel's time and count."""
    import torch

    cuda = torch.autograd.DeviceType.CUDA
    gpu, launches, per_kernel = [], Counter(), {}
    for e in events:
        if e.device_type == cuda:
            start, end = e.time_range.start, e.time_range.end
            gpu.append((start, end, e.name))
        else:
            kind = launch_kind(e.name)
            if kind:
                launches[kind] += 1
    by_class, count_class = Counter(), Counter()
    for start, end, name in gpu:
        c = kernel_class(name)
        by_class[c] += end - start
        count_class[c] += 1
        k = per_kernel.setdefault(name, [0.0, 0])
        k[0] += end - start
        k[1] += 1
    busy, span = 0.0, 0.0
    if gpu:
        intervals = sorted((s, e) for s, e, _ in gpu)
        cur_s, cur_e = intervals[0]
        for s, e in intervals[1:]:
            if s > cur_e:
                busy += cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        busy += cur_e - cur_s
        span = max(e for _, e in intervals) - intervals[0][0]
    kernels = sum(v for c, v in count_class.items() if c != "copies")
    return {
        "device_ms": sum(by_class.values()) / n / 1e3,
        "by_class_ms": {c: by_class.get(c, 0.0) / n / 1e3 for c in CLASSES},
        "kernels_by_class": {c: count_class.get(c, 0) / n for c in CLASSES},
        "kernels": kernels / n,
        "copies": count_class.get("copies", 0) / n,
        "gpu_busy_ms": busy / n / 1e3,
        "gpu_span_ms": span / n / 1e3,
        "gpu_idle_ms": max(span - busy, 0.0) / n / 1e3,
        "launch_api": {k: v / n for k, v in sorted(launches.items())},
        "_per_kernel": {name: (us / n, cnt / n) for name, (us, cnt) in per_kernel.items()},
    }


def kernel_ops(events) -> tuple[dict[str, Counter], Counter]:
    """From a profile of one step with CPU activity (each CPU op holds the kernels launched
    under it): per kernel name, the torch ops that launched it ("[context] outermost aten op >
    innermost op", the context the innermost enclosing range that is not an aten op: an
    autograd node, Inductor's compiled graph); and the device time in us per outermost aten op
    (or context, where no aten op holds the kernel)."""
    import torch

    cpu = torch.autograd.DeviceType.CPU
    out: dict[str, Counter] = {}
    by_op: Counter = Counter()
    for e in events:
        if e.device_type != cpu or not getattr(e, "kernels", None):
            continue
        chain, p = [], e
        while p is not None:
            chain.append(p.name)
            p = p.cpu_parent
        aten = [n for n in chain if n.startswith("aten::")]
        label = e.name if not aten or aten[-1] == e.name else f"{aten[-1]} > {e.name}"
        context = next((n for n in chain[1:] if not n.startswith("aten::")), None)
        if context:
            label = f"[{context[:60]}] {label}"
        for k in e.kernels:
            out.setdefault(k.name, Counter())[label] += 1
            by_op[aten[-1] if aten else e.name[:80]] += k.duration
    return out, by_op


def thunder_fns(fn, backend, how):
    if how == "jit":
        return [fn]
    fns = []
    for info in getattr(backend, "subgraph_infos", []) or []:
        fns += list(info.thunder_compiled_fns or [])
    return fns


def thunder_summary(fn, backend, how) -> dict:
    """What Thunder made: per trace (forward, backward), the ops outside nvFuser's regions by
    executor and name; the nvFuser regions and CUDA graphs; for the Dynamo way, the graphs and
    what Thunder left to Inductor (split reasons)."""
    import thunder
    from thunder.dev_utils.utils import NON_COMPUTATION_PRIMS

    skip_prefix = (
        "unpack",
        "check_",
        "python_",
        "return",
        "del",
        "clear_mutable_collection",
        "assert_",
        "shallow_copy",
        "update_aliases",
    )
    out = {
        "fns": 0,
        "trace_ops": {"forward": Counter(), "backward": Counter()},
        "nvfuser_regions": {"forward": 0, "backward": 0},
        "cuda_graphs": {"forward": 0, "backward": 0},
    }
    fns = thunder_fns(fn, backend, how)
    out["fns"] = len(fns)
    for f in fns:
        for kind, get in (("forward", thunder.last_traces), ("backward", thunder.last_backward_traces)):
            try:
                traces = get(f)
            except Exception:  # no backward, or not a Thunder function
                continue
            if not traces:
                continue
            for b in traces[-1].bound_symbols:
                sym = b.sym
                if sym.id in NON_COMPUTATION_PRIMS or str(sym.name).startswith(skip_prefix):
                    continue
                if sym.is_fusion and str(sym.name).startswith("nvFusion"):
                    out["nvfuser_regions"][kind] += 1
                    continue
                if str(sym.name).startswith("CUDAGraph"):
                    out["cuda_graphs"][kind] += 1
                    continue
                ex = getattr(getattr(sym, "executor", None), "name", None) or "-"
                out["trace_ops"][kind][f"{ex}:{sym.name}"] += 1
    out["trace_ops"] = {k: dict(v.most_common()) for k, v in out["trace_ops"].items()}
    if how != "jit" and backend is not None:
        infos = getattr(backend, "subgraph_infos", []) or []
        out["dynamo_graphs"] = len(infos)
        reasons = []
        for info in infos:
            for r in info.split_reasons or []:
                reasons.append(
                    f"{getattr(r.reason_type, 'name', r.reason_type)}: {str(r.info)[:200]}"
                    + (f" ({str(r.exception)[:160]})" if r.exception else "")
                )
        out["split_reasons"] = reasons[:40]
        out["split_reason_count"] = len(reasons)
    return out


def dynamo_summary() -> dict:
    try:
        from torch._dynamo.utils import counters
    except Exception:  # not there in this torch
        return {}
    stats = counters.get("stats", {})
    breaks = counters.get("graph_break", {})
    return {
        "unique_graphs": stats.get("unique_graphs"),
        "graph_breaks": sum(breaks.values()),
        "graph_break_reasons": [str(k)[:200] for k in list(breaks)[:10]],
    }


def run_row(base, loss_fn, key: str, hows: list, args) -> dict:
    import torch
    import copy

    bt = _bench_thunder()
    errors = []
    for how in hows:
        model = copy.deepcopy(base)
        fn = opt = backend = None
        try:
            fn, opt, backend = build(key, model, how, args.dynamo_pieces)
            mark = key == "compile-ro"

            def step():
                if mark:
                    torch.compiler.cudagraph_mark_step_begin()
                loss = loss_fn(fn)
                loss.backward()
                model.zero_grad(set_to_none=True)
                return loss

            torch.cuda.synchronize()
            calls, linear_calls = _executor_calls("cudnn_attention"), _executor_calls("aligned_linear")
            clock = time.perf_counter()
            loss = float(step().detach())
            torch.cuda.synchronize()
            row = {"how": how, "first_call_s": time.perf_counter() - clock, "loss": loss}
            if backend is not None:  # through Dynamo: what ran the pieces Thunder did not take
                row["dynamo_pieces"] = args.dynamo_pieces
            if "attention" in VARIANTS[key][4]:  # how eqsat's cuDNN attention ran in the first step
                row["attention_calls"] = dict(_executor_calls("cudnn_attention") - calls)
            if "linear" in VARIANTS[key][4]:  # the linear layers eqsat ran padded in the first step
                row["linear_calls"] = dict(_executor_calls("aligned_linear") - linear_calls)
            if opt is not None:
                s = opt.report.summary()
                row["eqsat"] = {
                    "regions": s["regions"],
                    "rewritten": s["rewritten"],
                    "fell_back": s["fell_back"],
                    "eqsat_s": sum(r.get("optimizer_s") or 0.0 for r in s["records"]),
                    "per_region": [{k: r.get(k) for k in REGION_FIELDS} for r in s["records"]],
                }
            if VARIANTS[key][1]:
                try:
                    row["thunder"] = thunder_summary(fn, backend, how)
                except Exception as err:  # the summary is a nicety: the row stands without it
                    row["thunder"] = {"error": f"{type(err).__name__}: {str(err)[:300]}"}
            if key.startswith("compile") or (VARIANTS[key][1] and how != "jit"):
                row["dynamo"] = dynamo_summary()
            row["steady_ms"] = bt.throughput_us(step, args.runs, args.warmup) / 1e3
            row["latency_ms"] = bt.time_us(step, runs=5, warmup=1) / 1e3
            row["host_issue_ms"] = bt.host_issue_ms(step)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            step()
            torch.cuda.synchronize()
            row.update(mem_before_gib=before / GIB, peak_mem_gib=torch.cuda.max_memory_allocated() / GIB)
            if args.memory_at_peak:
                try:
                    row["memory_at_peak"] = memory_at_peak(step, args.top + 8)
                except Exception as err:  # a diagnosis: the row stands without it
                    row["memory_at_peak"] = {"error": f"{type(err).__name__}: {str(err)[:300]}"}
            try:
                dm = device_map(profile_events(step, args.profile_steps, cpu=False), args.profile_steps)
            except Exception as err:  # the timings above stand without the profile
                row["profile_error"] = f"{type(err).__name__}: {str(err)[:300]}"
                return row
            per_kernel = dm.pop("_per_kernel")
            row.update(dm)
            try:
                ops, by_op = kernel_ops(profile_events(step, 1, cpu=True))
                row["by_op_ms"] = {op: us / 1e3 for op, us in by_op.most_common(args.top + 8)}
                row["attributed_ms"] = sum(by_op.values()) / 1e3
            except Exception as err:  # attribution is best effort
                ops, row["attribution_error"] = {}, f"{type(err).__name__}: {str(err)[:200]}"
            top = sorted(per_kernel.items(), key=lambda kv: -kv[1][0])[: args.top]
            row["top_kernels"] = [
                {
                    "name": name[:200],
                    "class": kernel_class(name),
                    "us": us,
                    "count": cnt,
                    "ops": [f"{op} (x{c})" for op, c in ops.get(name, Counter()).most_common(3)],
                }
                for name, (us, cnt) in top
            ]
            return row
        except Exception as err:  # any failure of this variant: recorded, the run goes on
            errors.append(f"{how or key}: {type(err).__name__}: {str(err).strip()[:500]}")
        finally:
            fn = opt = backend = step = model = None
            free()
    return {"error": "; ".join(errors)}


def _executor_calls(name: str) -> Counter:
    """The calls so far of eqsat's executor module ``eqsat.thunder.<name>`` (its ``CALLS``)."""
    module = sys.modules.get(f"eqsat.thunder.{name}")
    return Counter(module.CALLS) if module is not None else Counter()


def write_json(path: str, doc: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)


def measure(args) -> int:
    import torch

    if not torch.cuda.is_available():
        print("bench/step_profile.py profiles training steps on a CUDA GPU: none here", file=sys.stderr)
        return 2
    bt = _bench_thunder()
    clock0 = time.monotonic()
    keys = [k for k in args.variants.split(",") if k]
    if bad := [k for k in keys if k not in VARIANTS]:
        print(f"unknown variants {bad}; known: {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
    configs = [parse_model(m, args) for m in args.models.split(",") if m]
    if bad := [c["model"] for c in configs if c["model"] not in bt.MODELS]:
        print(f"unknown models {bad}; known: {', '.join(bt.MODELS)}", file=sys.stderr)
        return 2
    device = torch.cuda.get_device_name(0)
    doc = {
        "device": device,
        "card": card_of(device),
        "versions": {
            m: bt.version(m) for m in ("torch", "thunder", "transformers", "nvfuser_direct", "triton")
        },
        "args": vars(args),
        "classes": list(CLASSES),
        "variants": {k: v[0] for k, v in VARIANTS.items()},
        "rows": [],
    }
    if args.resume and args.json and os.path.exists(args.json):
        with open(args.json) as f:
            old = json.load(f)
        if old.get("device") == device:
            doc["rows"] = [r for r in old.get("rows", []) if "error" not in r and "skipped" not in r]
        else:
            print(f"--resume: {args.json} was measured on {old.get('device')}, not {device}: starting anew")
    done = {(r["config"], r["variant"]) for r in doc["rows"]}
    print(f"{device}  {doc['versions']}", flush=True)
    signal.signal(signal.SIGALRM, _alarm)

    def save():
        if args.json:
            doc["elapsed_s"] = time.monotonic() - clock0
            write_json(args.json, doc)

    for c in configs:
        key = config_key(c)
        todo = [k for k in keys if (key, k) not in done]
        if not todo:
            continue
        left = args.budget_s - (time.monotonic() - clock0)
        if left < args.min_row_s:
            doc["rows"] += [_not_started(key, c, k) for k in todo]
            save()
            continue
        ns = argparse.Namespace(
            batch=c["batch"],
            seq=c["seq"],
            layers=c["layers"] or args.layers,
            fp8_blocks=c["fp8_blocks"] or args.fp8_blocks,
            use_cache=False if args.no_kv_cache else None,
        )
        base = loss_fn = None
        try:
            base, loss_fn = bt.make(c["model"], ns)
        except Exception as err:  # a model this transformers lacks, out of memory, ...
            msg = f"{type(err).__name__}: {str(err)[:400]}"
            print(f"{key}: cannot build: {msg}", flush=True)
            for k in todo:
                doc["rows"].append(
                    {"config": key, **c, "variant": k, "label": VARIANTS[k][0], "error": f"build: {msg}"}
                )
            save()
            continue
        order = ["jit", "dynamo"] if c["model"].startswith("fp8") else ["dynamo", "jit"]
        thunder_how = None
        eager_loss = next(
            (r.get("loss") for r in doc["rows"] if r["config"] == key and r["variant"] == "eager"), None
        )
        for k in todo:
            left = args.budget_s - (time.monotonic() - clock0)
            if left < args.min_row_s:
                doc["rows"].append(_not_started(key, c, k))
                save()
                continue
            hows = [None]
            if VARIANTS[k][1]:
                prior = next(
                    (
                        r.get("how")
                        for r in doc["rows"]
                        if r["config"] == key and r["variant"] == "thunder" and "how" in r
                    ),
                    None,
                )
                hows = (
                    [thunder_how or prior]
                    if (thunder_how or prior)
                    else (order if k == "thunder" else order[:1])
                )
            signal.alarm(max(5, int(min(args.row_limit_s, left - 10))))
            clock = time.monotonic()
            try:
                r = run_row(base, loss_fn, k, hows, args)
            except RowTimeout as err:
                r = {"error": str(err)}
                free()
            finally:
                signal.alarm(0)
            r = {
                "config": key,
                **c,
                "variant": k,
                "label": VARIANTS[k][0],
                **r,
                "row_s": time.monotonic() - clock,
            }
            if k == "thunder" and "how" in r:
                thunder_how = r["how"]
            if k == "eager" and "loss" in r:
                eager_loss = r["loss"]
            if "loss" in r and eager_loss is not None:
                r["loss_ok"] = abs(r["loss"] - eager_loss) <= LOSS_RTOL * abs(eager_loss)
            doc["rows"].append(r)
            save()
            if "error" in r:
                print(f"  {key} / {VARIANTS[k][0]}: ERROR {r['error'][:300]}", flush=True)
            elif "by_class_ms" not in r:
                print(
                    f"  {key} / {VARIANTS[k][0]}: {r['steady_ms']:.2f} ms steady; no profile: "
                    f"{r.get('profile_error')}",
                    flush=True,
                )
            else:
                cls = ", ".join(f"{c_} {v:.2f}" for c_, v in r["by_class_ms"].items() if v)
                print(
                    f"  {key} / {VARIANTS[k][0]}: {r['steady_ms']:.2f} ms steady, device "
                    f"{r['device_ms']:.2f} "
                    f"({cls}), {r['kernels']:.0f} kernels, host {r['host_issue_ms']:.2f} ms, "
                    f"idle {r['gpu_idle_ms']:.2f} ms, peak {r['peak_mem_gib']:.2f} GiB, "
                    f"first {r['first_call_s']:.1f} s, row {r['row_s']:.0f} s",
                    flush=True,
                )
        base = loss_fn = None
        free()
    save()
    print("\n" + table(doc))
    return 0


# ----------------------------------------------------------------------------------------------
# without a GPU: the table and the plots


def _rows_by_config(doc: dict) -> dict:
    by: dict = {}
    for r in doc["rows"]:
        by.setdefault(r["config"], {})[r["variant"]] = r
    return by


def table(doc: dict) -> str:
    card = doc.get("card", doc.get("device", "?"))
    short = {
        "GEMM": "GEMM",
        "attention": "attn",
        "nvFuser": "nvFuser",
        "Inductor/Triton": "Triton",
        "other torch": "other torch",
        "copies": "copies",
    }
    head = (
        "| model | variant | steady ms | device ms | "
        + " | ".join(short[c] for c in CLASSES)
        + " | kernels | host issue ms | GPU idle ms | peak GiB | step GiB |"
    )
    lines = [
        f"All times on one {card} ({doc.get('device', '')}); device ms by class per step (torch.profiler).",
        "",
        head,
        "|" + "---|" * (head.count("|") - 1),
    ]
    for cfg, rs in _rows_by_config(doc).items():
        for k in VARIANTS:
            r = rs.get(k)
            if r is None:
                continue
            if "steady_ms" not in r:
                why = r.get("error") or r.get("skipped") or "?"
                lines.append(
                    f"| {cfg} | {VARIANTS[k][0]} | {'skipped' if 'skipped' in r else 'error'}: "
                    f"{why[:120].replace('|', '/')} |" + " |" * (head.count("|") - 4)
                )
                continue
            if "by_class_ms" not in r:
                lines.append(
                    f"| {cfg} | {VARIANTS[k][0]} | {r['steady_ms']:.2f} | no profile: "
                    f"{r.get('profile_error', '?')[:100].replace('|', '/')} |" + " |" * (head.count("|") - 5)
                )
                continue
            cls = " | ".join(f"{r['by_class_ms'][c]:.2f}" for c in CLASSES)
            lines.append(
                f"| {cfg} | {VARIANTS[k][0]} | {r['steady_ms']:.2f} | {r['device_ms']:.2f} | {cls} | "
                f"{r['kernels']:.0f} | {r['host_issue_ms']:.2f} | {r['gpu_idle_ms']:.2f} | "
                f"{r['peak_mem_gib']:.2f} | {_step_mem(r)} |"
            )
    return "\n".join(lines)


def cost_model_check(doc: dict) -> str:
    """The cost model against the GPU, per step, on regions it was not fitted on: for each
    config with a row with eqsat's report, the sum over Thunder's nvFuser regions of the cost
    model's kernels and device time (``eqsat.per_region``: Thunder's own definitions), against
    the nvFuser kernels and device time torch.profiler measured in a Thunder row without eqsat
    that made as many regions (:func:`_measured_as_given`). Empty where no config has both."""
    lines = []
    for cfg, rows in _rows_by_config(doc).items():
        report = next((r for r in rows.values() if (r.get("eqsat") or {}).get("per_region")), None)
        if report is None:
            continue
        regions = report["eqsat"]["per_region"]
        measured = _measured_as_given(rows, report, len(regions))
        if measured is None:
            continue
        kernels = sum(r.get("kernels_before") or 0 for r in regions)
        device = sum(r.get("device_before_us") or 0.0 for r in regions)
        got_k = measured["kernels_by_class"].get("nvFuser", 0)
        got_us = measured["by_class_ms"].get("nvFuser", 0.0) * 1e3
        off = f"{(device - got_us) / got_us:+.0%}" if got_us else ""
        lines.append(
            f"| {cfg} | {len(regions)} | {kernels} / {got_k:.0f} | {device:,.0f} / {got_us:,.0f} ({off}) |"
        )
    if not lines:
        return ""
    head = "| config | regions | kernels, predicted / measured | device us, predicted / measured |"
    return "\n".join([head, "|---|---|---|---|", *lines])


def _measured_as_given(rows: dict, report: dict, regions: int) -> dict | None:
    """The Thunder row without eqsat whose nvFuser regions are the ones eqsat's ``report`` was
    given: as many regions, made with the same executors of eqsat's where such a row ran (the
    detach executor joins fp8_current's 50 regions into 18: Thunder alone's row measures
    other regions)."""

    def count(row):
        made = (row.get("thunder") or {}).get("nvfuser_regions") or {}
        return sum(len(v) if isinstance(v, (list, dict)) else int(v) for v in made.values())

    ours = VARIANTS.get(report.get("variant"), ("",) * 5)[4]
    alike = [
        r
        for k, r in rows.items()
        if k in VARIANTS and VARIANTS[k][1] and not VARIANTS[k][2] and "kernels_by_class" in r
        if count(r) == regions
    ]
    alike.sort(key=lambda r: VARIANTS[r["variant"]][4] != ours)
    return alike[0] if alike else None


def _step_mem(row: dict) -> str:
    """What one step allocates at its peak beyond what was allocated before it: a variant's own
    memory, apart from what earlier rows of the same process left allocated (``peak GiB``
    includes that)."""
    if row.get("peak_mem_gib") is None or row.get("mem_before_gib") is None:
        return ""
    return f"{row['peak_mem_gib'] - row['mem_before_gib']:.2f}"


def plot(doc: dict, png_dir: str, prefix: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {
        "GEMM": "#4c72b0",
        "attention": "#8172b3",
        "nvFuser": "#55a868",
        "Inductor/Triton": "#dd8452",
        "other torch": "#c44e52",
        "copies": "#937860",
    }
    card = doc.get("card", doc.get("device", "?"))
    os.makedirs(png_dir, exist_ok=True)
    paths = []
    for cfg, rs in _rows_by_config(doc).items():
        keys = [k for k in VARIANTS if k in rs and "by_class_ms" in rs[k]]
        if not keys:
            continue
        fig, ax = plt.subplots(figsize=(10, 4.8))
        xs = range(len(keys))
        bottom = [0.0] * len(keys)
        for c in CLASSES:
            vals = [rs[k]["by_class_ms"][c] for k in keys]
            ax.bar(xs, vals, bottom=bottom, color=colors[c], label=c)
            bottom = [b + v for b, v in zip(bottom, vals)]
        idle = [rs[k]["gpu_idle_ms"] for k in keys]
        ax.bar(xs, idle, bottom=bottom, color="white", edgecolor="gray", hatch="//", label="GPU idle")
        ax.scatter(
            list(xs),
            [rs[k]["steady_ms"] for k in keys],
            marker="_",
            s=900,
            color="black",
            zorder=3,
            label="steady step",
        )
        ax.set_xticks(list(xs))
        ax.set_xticklabels([VARIANTS[k][0].replace(" ", "\n", 1) for k in keys], fontsize=8)
        ax.set_ylabel("ms per training step")
        ax.set_title(f"{cfg}, bf16: device time by class per step, one {card}")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.tight_layout()
        name = prefix + cfg.replace(" ", "_").replace("/", "_") + ".png"
        path = os.path.join(png_dir, name)
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--models", default=DEFAULT_MODELS, help="NAME or NAME@BxS, comma separated (default %(default)s)"
    )
    p.add_argument("--variants", default=",".join(VARIANTS), help="of %(default)s")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument(
        "--layers", type=int, default=2, help="layers of transformers' models (default %(default)s)"
    )
    p.add_argument(
        "--fp8-blocks", type=int, default=4, help="blocks of the fp8_current models (default %(default)s)"
    )
    p.add_argument(
        "--no-kv-cache",
        action="store_true",
        help="call transformers' models with use_cache=False (Thunder 0.2.6 then fails on Phi-3 and Llama)",
    )
    p.add_argument(
        "--dynamo-pieces",
        choices=("inductor", "eager"),
        default="inductor",
        help="what runs the pieces of Dynamo's graph Thunder does not take (default %(default)s: "
        "ThunderCompiler's; eager gets Llama and Qwen2 past Inductor's stride asserts)",
    )
    p.add_argument("--runs", type=int, default=15, help="steady-state steps timed (default %(default)s)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument(
        "--profile-steps", type=int, default=3, help="steps profiled back to back (default %(default)s)"
    )
    p.add_argument("--top", type=int, default=12, help="top kernels kept per row (default %(default)s)")
    p.add_argument(
        "--memory-at-peak",
        action="store_true",
        help="record one more step's allocations and keep what was live at its peak, by where it "
        "was allocated (row's memory_at_peak)",
    )
    p.add_argument(
        "--budget-s", type=float, default=540.0, help="time guard for the whole run (default %(default)s)"
    )
    p.add_argument("--min-row-s", type=float, default=40.0, help="start a row only with this much left")
    p.add_argument("--row-limit-s", type=float, default=180.0, help="stop one row after this long")
    p.add_argument(
        "--resume", action="store_true", help="keep the rows already in --json (same GPU), run the rest"
    )
    p.add_argument("--json", help="write the rows there (after every row)")
    p.add_argument("--plot", metavar="JSON", help="draw the PNGs of a recorded run (no GPU needed)")
    p.add_argument("--png-dir", default="docs/images")
    p.add_argument("--png-prefix", default="step_profile_")
    p.add_argument(
        "--table", metavar="JSON", help="print the markdown table of a recorded run (no GPU needed)"
    )
    return p.parse_args(argv)


def _not_started(key: str, config: dict, variant: str) -> dict:
    """The row of a (config, variant) the time guard did not start."""
    label = VARIANTS[variant][0]
    return {"config": key, **config, "variant": variant, "label": label, "skipped": "time guard: not started"}


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.plot or args.table:
        with open(args.plot or args.table) as f:
            doc = json.load(f)
        if args.table:
            print(table(doc))
            check = cost_model_check(doc)
            if check:
                print("\nThe cost model on the regions of Thunder's step (not fitted on them):\n\n" + check)
        if args.plot:
            for path in plot(doc, args.png_dir, args.png_prefix):
                print(path)
        return 0
    return measure(args)


if __name__ == "__main__":
    sys.exit(main())
