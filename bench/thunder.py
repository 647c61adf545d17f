"""Training steps of real models under Lightning Thunder, with and without eqsat, side by side
in one run (issue 18): torch eager, torch.compile (inductor), Thunder alone and Thunder + eqsat
(``eqsat.thunder.Optimize``: every nvFuser region, forward and backward, optimized by eqsat at
its first call), all in bf16 from the same weights and inputs.

Models: transformers' models with random weights at the configs of
``shared/gpu/thunder_capture.py`` (``--layers`` layers, dropout 0, sdpa attention), and
``fp8_current``: blocks written the way users write FP8 current scaling in plain PyTorch (an
RMSNorm whose output's amax sets the scale of the next Linear's input: s = 448 / amax|x|,
x8 = (x * s).to(float8_e4m3fn), the Linear in bf16 on x8.to(bf16) / s, the cast skipped by the
gradient; ``fp8_current_emu``: the cast emulated by a clamp to +-448). Thunder runs transformers'
models through torch.compile with Thunder as its backend (``ThunderCompiler``) first, then
``thunder.jit`` (Thunder 0.2.6's jit fails on transformers 5), the plain-torch model by
``thunder.jit`` first; Thunder + eqsat takes the way Thunder alone took.

A step is forward + backward + zero_grad(set_to_none). Per (model, variant): ``first_call_s``
(the first step, compilation and eqsat included, wall clock), ``steady_ms`` (the median step at
steady state: CUDA events around each, steps issued back to back after warm-up,
``eqsat.verification.timing.throughput_us``), the loss and whether it is within 2% (bf16) of
eager's, the first step's gradients against eager's (``grad_deviation``: the largest
difference of a parameter's gradient norm or of its dot with a fixed +-1 pattern, relative to
eager's norm; ``grads_ok`` within 5%), ``latency_ms`` (one step alone), ``device_ms`` / ``nvfuser_ms`` (the
kernels of one step alone, all and nvFuser's, from torch.profiler), and for Thunder + eqsat the per-region
report (rewritten, fell back, each region's record) and ``eqsat_s``, eqsat's own time over all
regions. The first step of Thunder + eqsat runs after Thunder alone's, whose nvFuser kernels may
still be cached, so compile overhead is eqsat's own time against Thunder alone's first step. An error of one
(model, variant) is recorded in its row and the run goes on; memory is freed between runs. The table:
steady-state ms per variant, eqsat's speedup over Thunder alone (over the mean of its two timings with
--again), eqsat's compile-time overhead (eqsat's own time, % of Thunder alone's first step), regions
rewritten.

    python bench/thunder.py [--models M,..] [--batch 4 --seq 2048 --layers 2] [--verify gpu] [--min-gain F]
                            [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import sys
import time

# this file is named thunder.py: without its folder on the path, `import thunder` is Lightning Thunder
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from eqsat.testing.thunder_models import RMSNorm  # noqa: E402
from eqsat.verification.timing import throughput_us, time_us  # noqa: E402

LOSS_RTOL = 2e-2
GRAD_RTOL = 5e-2  # of each parameter's gradient norm (bf16 steps, reduced in other orders)
VARIANTS = ("eager", "torch.compile", "Thunder", "Thunder+eqsat")
AGAIN = "Thunder (again)"  # --again: Thunder alone timed once more, after Thunder + eqsat
FP8_MAX = 448.0


def hf_configs(n: int) -> dict:
    """thunder_capture.py's transformers configs, with ``n`` layers: (config class, model class, kwargs)."""

    def dec(hidden, inter, heads, kv, vocab, **kw):
        return dict(
            hidden_size=hidden,
            intermediate_size=inter,
            num_hidden_layers=n,
            num_attention_heads=heads,
            **({} if kv is None else {"num_key_value_heads": kv}),
            vocab_size=vocab,
            **kw,
        )

    causal = "ForCausalLM"
    return {
        "llama": ("LlamaConfig", "Llama" + causal, dec(2048, 5632, 16, 4, 32000)),
        "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(n_embd=1024, n_layer=n, n_head=16, vocab_size=50257)),
        "qwen2": ("Qwen2Config", "Qwen2" + causal, dec(1536, 8960, 12, 2, 32000)),
        "gemma": ("GemmaConfig", "Gemma" + causal, dec(2048, 8192, 8, 1, 32000, head_dim=256)),
        "bert": ("BertConfig", "BertForMaskedLM", dec(1024, 4096, 16, None, 30522)),
        "phi3": ("Phi3Config", "Phi3" + causal, dec(2048, 5632, 16, 16, 32064)),
        "gpt_neox": ("GPTNeoXConfig", "GPTNeoX" + causal, dec(1024, 4096, 16, None, 50304)),
        "opt": (
            "OPTConfig",
            "OPT" + causal,
            dict(
                hidden_size=1024,
                ffn_dim=4096,
                word_embed_proj_dim=1024,
                num_hidden_layers=n,
                num_attention_heads=16,
                vocab_size=50272,
            ),
        ),
        "falcon": (
            "FalconConfig",
            "Falcon" + causal,
            dict(hidden_size=1024, num_hidden_layers=n, num_attention_heads=16, vocab_size=65024),
        ),
        "starcoder2": ("Starcoder2Config", "Starcoder2" + causal, dec(1536, 6144, 12, 4, 49152)),
        "t5": (
            "T5Config",
            "T5ForConditionalGeneration",
            dict(d_model=768, d_ff=3072, num_layers=n, num_decoder_layers=n, num_heads=12, vocab_size=32128),
        ),
        "mistral": ("MistralConfig", "Mistral" + causal, dec(2048, 7168, 16, 8, 32000)),
    }


MODELS = (*hf_configs(1), "fp8_current", "fp8_current_emu")


def fp8_current(x, emulate: bool):
    """x through FP8 with current scaling, as users write it: the scale from x's own amax (not
    differentiated, as in Transformer Engine), the cast to float8_e4m3fn (a clamp where
    ``emulate``), back to x's dtype and unscaled; the gradient skips the cast (straight through)."""
    s = FP8_MAX / x.abs().amax().float().clamp(min=1e-12).detach()
    xs = x * s
    x8 = xs.clamp(-FP8_MAX, FP8_MAX) if emulate else xs.to(torch.float8_e4m3fn).to(x.dtype)
    return (xs + (x8 - xs).detach()) / s


class FP8Block(nn.Module):
    """h + down(fp8(silu(up(fp8(rmsnorm(h)))))): each Linear's input scaled by its own amax."""

    def __init__(self, dim, hidden, emulate):
        super().__init__()
        self.norm, self.emulate = RMSNorm(dim), emulate
        self.up, self.down = nn.Linear(dim, hidden, bias=False), nn.Linear(hidden, dim, bias=False)

    def forward(self, h):
        a = F.silu(self.up(fp8_current(self.norm(h), self.emulate)))
        return h + self.down(fp8_current(a, self.emulate))


class FP8Model(nn.Module):
    def __init__(self, blocks, dim=2048, hidden=5632, emulate=False):
        super().__init__()
        self.dim = dim
        self.blocks = nn.ModuleList(FP8Block(dim, hidden, emulate) for _ in range(blocks))

    def forward(self, h0):
        h = h0
        for b in self.blocks:
            h = b(h)
        return (h - h0).float().pow(2).mean()  # what the blocks added: the loss depends on each


def make(name: str, args):
    """(the model on the GPU in bf16, its loss as a function of the model), seeded."""
    torch.manual_seed(0)
    if name.startswith("fp8_current"):
        m = FP8Model(args.fp8_blocks, emulate=name.endswith("_emu")).to("cuda", torch.bfloat16)
        h = torch.randn(args.batch, args.seq, m.dim, device="cuda", dtype=torch.bfloat16)
        return m, lambda mm: mm(h)
    import transformers

    config_cls, model_cls, kwargs = hf_configs(args.layers)[name]
    config = getattr(transformers, config_cls)(**kwargs)
    config._attn_implementation = "sdpa"
    for k, v in config.to_dict().items():
        if isinstance(v, float) and ("dropout" in k or "pdrop" in k):
            setattr(config, k, 0.0)  # deterministic: every variant's loss comparable
        elif k in ("max_position_embeddings", "n_positions") and isinstance(v, int) and v < args.seq:
            setattr(config, k, args.seq)
    model = getattr(transformers, model_cls)(config).to("cuda", torch.bfloat16)
    ids = torch.randint(0, config.vocab_size, (args.batch, args.seq), device="cuda")
    extra = {} if getattr(args, "use_cache", None) is None else {"use_cache": args.use_cache}
    return model, lambda mm: mm(input_ids=ids, labels=ids, **extra).loss


def build(variant: str, model, how, args):
    """(the callable model of ``variant``, its eqsat transform or None)."""
    torch._dynamo.reset()
    if variant == "eager":
        return model, None
    if variant == "torch.compile":
        return torch.compile(model), None
    import thunder

    import eqsat.thunder

    opt = None
    if variant == "Thunder+eqsat":
        opt = eqsat.thunder.Optimize(
            verify=args.verify,
            min_gain=args.min_gain,
            **({} if args.deadline_s is None else {"deadline_s": args.deadline_s}),
        )
    transforms = [opt] if opt else []
    if how == "jit":
        return thunder.jit(model, transforms=transforms), opt
    from thunder.dynamo import ThunderCompiler

    return torch.compile(model, backend=ThunderCompiler(transforms=transforms)), opt


def free() -> None:
    torch._dynamo.reset()
    gc.collect()
    torch.cuda.empty_cache()


def grad_fingerprint(model) -> list[float]:
    """Per parameter, in order: its gradient's norm and its dot with a fixed pattern of +-1
    (seeded by the parameter's position), so that two variants' gradients are compared
    without keeping them (a parameter without a gradient gives zeros)."""
    out = []
    for i, p in enumerate(model.parameters()):
        if p.grad is None:
            out += [0.0, 0.0]
            continue
        g = p.grad.detach().float().flatten()
        gen = torch.Generator(device=g.device).manual_seed(i)
        signs = torch.randint(0, 2, g.shape, generator=gen, device=g.device).float() * 2 - 1
        out += [float(g.norm()), float(g @ signs)]
    return out


def grad_deviation(got: list[float], want: list[float]) -> float:
    """The largest difference of two fingerprints' entries, relative to the parameter's
    gradient norm in ``want`` (inf where the parameter counts differ)."""
    if len(got) != len(want):
        return float("inf")
    worst = 0.0
    for i in range(0, len(want), 2):
        scale = max(abs(want[i]), 1e-12)
        worst = max(worst, abs(got[i] - want[i]) / scale, abs(got[i + 1] - want[i + 1]) / scale)
    return worst


def run_variant(base, loss_fn, variant: str, hows, args) -> dict:
    """One variant's row: the first step's wall time, the steady-state step, the loss, the
    eqsat report; or the error of each way of compiling tried."""
    errors = []
    for how in hows:
        model = copy.deepcopy(base)
        try:
            fn, opt = build(variant, model, how, args)

            def step(fingerprint=None):
                loss = loss_fn(fn)
                loss.backward()
                if fingerprint is not None:
                    fingerprint += grad_fingerprint(model)
                model.zero_grad(set_to_none=True)
                return loss

            torch.cuda.synchronize()
            clock = time.perf_counter()
            grads: list[float] = []
            loss = float(step(grads).detach())
            torch.cuda.synchronize()
            row = {
                "how": how,
                "first_call_s": time.perf_counter() - clock,
                "loss": loss,
                "grad_fingerprint": grads,
            }
            if opt is not None:
                print(f"  {opt.report}", flush=True)
                s = opt.report.summary()
                row.update(
                    regions=s["regions"],
                    rewritten=s["rewritten"],
                    fell_back=s["fell_back"],
                    report=s["records"],
                    eqsat_s=sum(r["optimizer_s"] or 0.0 for r in s["records"]),
                )
            row["steady_ms"] = throughput_us(step, args.runs, args.warmup) / 1e3
            row["latency_ms"] = time_us(step, runs=5, warmup=1) / 1e3
            row["host_ms"] = host_issue_ms(step)
            kernels = _gpu_timing().profile_kernels(step)
            row.update(
                device_ms=sum(k.us for k in kernels) / 1e3,
                kernels=len(kernels),
                nvfuser_ms=sum(k.us for k in kernels if k.is_nvfuser) / 1e3,
                nvfuser_kernels=sum(k.is_nvfuser for k in kernels),
            )
            return row
        except Exception as err:  # any failure of this variant: recorded, the run goes on
            errors.append(f"{how or variant}: {type(err).__name__}: {str(err).strip()[:400]}")
        finally:
            fn = opt = step = model = None
            free()
    return {"error": "; ".join(errors)}


def host_issue_ms(step, runs: int = 5) -> float:
    """The median wall time the host takes to issue one step, the GPU idle when it starts: where
    it exceeds the step's device time, the steady state waits on the host."""
    samples = []
    for _ in range(runs):
        torch.cuda.synchronize()
        clock = time.perf_counter()
        step()
        samples.append((time.perf_counter() - clock) * 1e3)
    torch.cuda.synchronize()
    return sorted(samples)[len(samples) // 2]


def _gpu_timing():
    """bench/gpu_timing.py (this folder is off the path: see above)."""
    import importlib.util

    module = sys.modules.get("gpu_timing")
    if module is None:
        spec = importlib.util.spec_from_file_location("gpu_timing", os.path.join(_HERE, "gpu_timing.py"))
        module = sys.modules["gpu_timing"] = importlib.util.module_from_spec(
            spec
        )  # its dataclass needs it there
        spec.loader.exec_module(module)
    return module


def version(module: str) -> str:
    try:
        m = __import__(module)
        return str(getattr(m, "__version__", None) or m.version())
    except Exception as err:  # not installed, or no CUDA for it
        return f"unavailable ({type(err).__name__})"


def table(rows: list[dict]) -> str:
    by = {}
    for r in rows:
        by.setdefault(r["model"], {})[r["variant"]] = r

    def ms(r):
        return f"{r['steady_ms']:9.2f}" if r and "steady_ms" in r else f"{'ERR' if r else '-':>9s}"

    head = (
        f"{'model':16s} " + " ".join(f"{v:>13s}" for v in VARIANTS) + "  eqsat/Thunder  compile +%  rewritten"
    )
    lines = [
        head,
        "  (steady-state ms per training step; speedup = Thunder / Thunder+eqsat; compile +% = eqsat's own"
        " time, % of Thunder alone's first step)",
    ]
    for name, rs in by.items():
        t, e = rs.get("Thunder", {}), rs.get("Thunder+eqsat", {})
        both = "steady_ms" in t and "steady_ms" in e
        thunder = [r["steady_ms"] for r in (t, rs.get(AGAIN, {})) if "steady_ms" in r]
        speed = f"{sum(thunder) / len(thunder) / e['steady_ms']:12.3f}x" if both else f"{'-':>13s}"
        over = (
            f"{100 * e['eqsat_s'] / t['first_call_s']:+10.1f}%" if both and "eqsat_s" in e else f"{'-':>11s}"
        )
        rew = (
            f"{e['rewritten']}/{e['regions']}"
            + (f" ({e['fell_back']} fell back)" if e.get("fell_back") else "")
            if "regions" in e
            else "-"
        )
        bad = [v for v, r in rs.items() if r.get("loss_ok") is False]
        off = [v for v, r in rs.items() if r.get("grads_ok") is False]
        lines.append(
            f"{name:16s} "
            + " ".join(f"{ms(rs.get(v, rs.get('build'))):>13s}" for v in VARIANTS)
            + f"  {speed}  {over}  {rew}"
            + (f"  LOSS OFF: {', '.join(bad)}" if bad else "")
            + (f"  GRADIENTS OFF: {', '.join(off)}" if off else "")
        )
    again = [
        f"{name}: {rs[AGAIN]['steady_ms']:.2f}" for name, rs in by.items() if "steady_ms" in rs.get(AGAIN, {})
    ]
    if again:
        lines.append(
            f"Thunder alone timed again after Thunder + eqsat, ms (the speedup is over the mean): "
            f"{', '.join(again)}"
        )
    lines += [
        "",
        "device time per step, ms: all kernels (nvFuser's), from torch.profiler; latency: one step alone, ms",
    ]
    for name, rs in by.items():
        lines.append(
            f"{name:16s} "
            + " ".join(
                f"{r['device_ms']:6.2f} ({r['nvfuser_ms']:5.2f}) {r['latency_ms']:6.2f}"
                if "device_ms" in r
                else f"{'-':>21s}"
                for r in (rs.get(v, {}) for v in VARIANTS)
            )
        )
    return "\n".join(lines)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--models", default="llama,gpt2,fp8_current", help=f"of {', '.join(MODELS)} (default %(default)s)"
    )
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument(
        "--layers", type=int, default=2, help="layers of transformers' models (default %(default)s)"
    )
    p.add_argument(
        "--fp8-blocks", type=int, default=4, help="blocks of the fp8_current models (default %(default)s)"
    )
    p.add_argument(
        "--verify", choices=["gpu"], help="Optimize(verify='gpu'): rewrites kept where timed faster"
    )
    p.add_argument("--min-gain", type=float, help="Optimize's min_gain (default: the cost model's error)")
    p.add_argument("--deadline-s", type=float, help="Optimize's deadline_s per region (default: eqsat's)")
    p.add_argument("--runs", type=int, default=20, help="steady-state steps timed (default %(default)s)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="skip torch.compile")
    p.add_argument(
        "--again",
        action="store_true",
        help="time Thunder alone again after Thunder + eqsat (row 'Thunder (again)'): the "
        "speedup is then over the mean of the two, so drift of the GPU or host between "
        "variants shows and does not decide it",
    )
    p.add_argument("--json", help="write the rows there (after each model)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    names = [m for m in args.models.split(",") if m]
    if unknown := [m for m in names if m not in MODELS]:
        print(f"unknown models {unknown}; known: {', '.join(MODELS)}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print(
            "bench/thunder.py times training steps on a CUDA GPU (Thunder, nvFuser): none here",
            file=sys.stderr,
        )
        return 2
    variants = [v for v in VARIANTS if not (args.quick and v == "torch.compile")]
    meta = {
        "device": torch.cuda.get_device_name(0),
        "args": vars(args),
        "versions": {m: version(m) for m in ("torch", "thunder", "transformers", "nvfuser_direct")},
    }
    print(f"{meta['device']}  {meta['versions']}  batch {args.batch} x seq {args.seq}", flush=True)
    rows = []
    for name in names:
        done, base, order = {}, None, ["jit", "dynamo"] if name.startswith("fp8") else ["dynamo", "jit"]
        try:
            base, loss_fn = make(name, args)
        except Exception as err:  # a model transformers lacks, out of memory, ...
            rows.append(
                {"model": name, "variant": "build", "error": f"{type(err).__name__}: {str(err)[:400]}"}
            )
            print(f"{name}: cannot build: {rows[-1]['error']}", flush=True)
        for v in (variants + [AGAIN] * args.again) if base is not None else ():
            hows = order if "Thunder" in v else [None]
            r = {
                "model": name,
                "variant": v,
                **run_variant(base, loss_fn, "Thunder" if v == AGAIN else v, hows, args),
            }
            order = [r["how"]] if v == "Thunder" and "how" in r else order  # eqsat as Thunder alone ran
            eager = done.get("eager", {}).get("loss")
            if "loss" in r and eager is not None:
                r["loss_ok"] = abs(r["loss"] - eager) <= LOSS_RTOL * abs(eager)
                r["grad_deviation"] = grad_deviation(r["grad_fingerprint"], done["eager"]["grad_fingerprint"])
                r["grads_ok"] = r["grad_deviation"] <= GRAD_RTOL
            print(
                f"  {name} / {v}: "
                + (
                    f"ERROR {r['error']}"
                    if "error" in r
                    else f"{r['steady_ms']:.2f} ms steady, first step {r['first_call_s']:.1f} s, "
                    f"loss {r['loss']:.5f}"
                    + ("" if r.get("loss_ok", True) else f" (eager {eager:.5f}: OFF)")
                    + (
                        ""
                        if r.get("grads_ok", True)
                        else f", gradients {r['grad_deviation']:.3g} off eager's"
                    )
                ),
                flush=True,
            )
            rows.append(r)
            done[v] = r
        base = loss_fn = None
        free()
        if args.json:
            with open(args.json, "w") as f:
                json.dump({**meta, "rows": rows}, f, indent=1)
    print("\n" + table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
