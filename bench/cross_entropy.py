"""Cross-entropy forward + backward (issue 17, item 1; ``eqsat.testing.cross_entropy``) on a
GPU, side by side in one run: nvFuser on the naive definitions as given (Thunder's
decomposition: log-softmax, take_along_axis of the masked target, where, sum, divide by the
count; the backward recomputes the log-softmax), nvFuser on eqsat's optimized definitions
(``eqsat.optimize_pair``: the two optimized together, the forward passing the backward the
logsumexp and the count it would recompute; and, for comparison, each optimized apart by
``optimize_fusion``), on the anchor fused by hand, torch eager F.cross_entropy forward + backward, and
torch.compile of it. Each row is one training step's loss work: the forward fusion then the backward one
(bf16 logits, Int targets with ignore_index rows, mean reduction, optional label smoothing).

Per run: ``us`` at steady state (steps issued back to back; the speedups are of this),
``latency_us`` (one step at a time), ``device_us`` (the kernels' own time, torch.profiler),
the kernels, and whether the loss and the gradient agree with torch eager (dtype tolerance).
Every column is measured on its own (one that fails is reported and the others kept). The
target (H200, [8192, 128256]): eqsat >= 2x nvFuser as given, and no slower than torch.compile.

``--form thunder`` takes the forward as Thunder 0.2.6 writes it for ignore_index = -100 (the
target capped at V, the negated log-softmax padded with a zero column, then the take:
``ce.forward_thunder``, static extents) in place of the masked one, for nvFuser as given and
eqsat; its loss is checked against Thunder's own (``ce.torch_forward_thunder``: with label
smoothing and ignored rows, not F.cross_entropy's), the other columns' against torch eager.

    python bench/cross_entropy.py [--shapes 8192x128256,4096x32000] [--label-smoothing 0.1]
                                  [--form masked|thunder] [--runs 20] [--quick] [--min-gain F]
                                  [--json out.json]
"""

from __future__ import annotations

import argparse
import sys
import traceback

import torch
from gpu_timing import timed_run, write_rows

import eqsat
from eqsat.lowering.nvfuser import to_nvfuser
from eqsat.testing import cross_entropy as ce

GIVEN, OURS, APART, ANCHOR = "nvFuser as given", "nvFuser + eqsat", "eqsat, fusions apart", "nvFuser anchor"
FORMS = ("masked", "thunder")
TARGET = 2.0  # eqsat over nvFuser as given, at steady state
FRONTEND = "nvfuser_direct"


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--shapes",
        default="x".join(map(str, ce.DEMO_SHAPE)),
        help="comma-separated N x V (default %(default)s)",
    )
    parser.add_argument("--label-smoothing", type=float, default=0.0)
    parser.add_argument("--ignored", type=float, default=0.1, help="share of rows with ignore_index")
    parser.add_argument(
        "--form",
        choices=FORMS,
        default="masked",
        help="the naive forward: the target masked before the take (masked) or "
        "Thunder's cap-and-pad (thunder); default %(default)s",
    )
    parser.add_argument(
        "--min-gain", type=float, help="optimize_fusion's min_gain (default: the profile's margin)"
    )
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="skip torch.compile")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    args.shapes = [tuple(int(n) for n in s.lower().split("x")) for s in args.shapes.split(",") if s]
    return args


def naive_forward(form: str, eps: float, shape):
    """The naive forward definition of ``form`` (FORMS) at ``shape`` (the Thunder form has
    static extents), and the loss it computes in plain torch."""
    if form == "thunder":
        return ce.forward_thunder(eps, tuple(shape)), ce.torch_forward_thunder(eps)
    if form == "masked":
        return ce.forward(eps), ce.torch_forward(eps)
    raise ValueError(f"unknown form {form!r}; one of {', '.join(FORMS)}")


def _nvfuser_step(fwd, bwd, inputs, pair=None):
    """One step on two nvFuser definitions: the loss, then the gradient; with ``pair`` (an
    ``eqsat.optimize_pair`` result) the backward also reads the values the forward saved."""

    def step():
        outs = fwd.execute(inputs[:2])
        (grad,) = bwd.execute(pair.backward_inputs(inputs, outs) if pair is not None else inputs)
        return outs[0], grad

    return step


def _torch_step(eps, compiled: bool):
    """F.cross_entropy forward + backward (eager, or the loss under torch.compile)."""

    def loss_fn(x, y):
        return torch.nn.functional.cross_entropy(
            x.float(), y, ignore_index=ce.IGNORE_INDEX, reduction="mean", label_smoothing=eps
        )

    fn = torch.compile(loss_fn) if compiled else loss_fn

    def make(inputs):
        x = inputs[0].detach().requires_grad_(True)

        def step():
            x.grad = None
            loss = fn(x, inputs[1])
            loss.backward(inputs[2])
            return loss.detach(), x.grad

        return step

    return make


def steps(shape, eps, min_gain, quick, inputs, form: str = "masked") -> tuple[dict, dict]:
    """The callables of each column (None where building one failed, with the error) and
    eqsat's predictions."""
    out, notes = {}, {}
    n = 2
    forward, _ = naive_forward(form, eps, shape)

    def build(label, make):
        try:
            out[label] = make()
        except Exception as err:  # one column's failure does not lose the others
            traceback.print_exc()
            notes[label] = f"{type(err).__name__}: {err}"

    build(
        GIVEN,
        lambda: _nvfuser_step(
            to_nvfuser(eqsat.from_function(forward), frontend=FRONTEND),
            to_nvfuser(eqsat.from_function(ce.backward(eps)), frontend=FRONTEND),
            inputs,
        ),
    )

    def apart():
        fwd = eqsat.optimize_fusion(forward, inputs[:n], min_gain=min_gain)
        bwd = eqsat.optimize_fusion(ce.backward(eps), inputs, min_gain=min_gain)
        for what, opt in (("forward", fwd), ("backward", bwd)):
            r = opt.report
            notes[f"predicted {what}"] = {
                "before_us": r.before.time_us,
                "after_us": r.after.time_us,
                "kernels": [len(r.before.kernels), len(r.after.kernels)],
                "rules": sorted(r.rules),
            }
            print(
                f"  eqsat {what}: predicted {r.before.time_us:.0f} -> {r.after.time_us:.0f} us, "
                f"{len(r.before.kernels)} -> {len(r.after.kernels)} kernels; rules "
                f"{', '.join(r.rules) or 'none'}"
            )
        return _nvfuser_step(fwd.to_nvfuser(frontend=FRONTEND), bwd.to_nvfuser(frontend=FRONTEND), inputs)

    def ours():
        pair = eqsat.optimize_pair(
            forward, ce.backward(eps), {0: 0, 1: 1}, inputs[:n], inputs, min_gain=min_gain
        )
        notes["predicted pair"] = pair.report.summary()
        print("  eqsat pair: " + str(pair.report).replace("\n", "\n    "))
        return _nvfuser_step(
            pair.forward.to_nvfuser(frontend=FRONTEND),
            pair.backward.to_nvfuser(frontend=FRONTEND),
            inputs,
            pair,
        )

    build(OURS, ours)
    build(APART, apart)
    build(
        ANCHOR,
        lambda: _nvfuser_step(
            to_nvfuser(eqsat.from_function(ce.forward_anchor(eps)), frontend=FRONTEND),
            to_nvfuser(eqsat.from_function(ce.backward_anchor(eps)), frontend=FRONTEND),
            inputs,
        ),
    )
    build("torch eager", lambda: _torch_step(eps, compiled=False)(inputs))
    if not quick:
        build("torch.compile", lambda: _torch_step(eps, compiled=True)(inputs))
    return out, notes


def measure(shape, eps, ignored, runs, quick, min_gain=None, form: str = "masked") -> list[dict]:
    """The rows of one shape: one per column."""
    print(f"\ncross-entropy fwd+bwd {'x'.join(map(str, shape))} bf16, label_smoothing={eps}, {form} forward")
    inputs = ce.make_inputs(*shape, device="cuda", ignored=ignored)
    want = ce.torch_step(eps)(*inputs)
    form_want = (naive_forward(form, eps, shape)[1](*inputs[:2]), want[1])  # the naive form's own loss
    calls, notes = steps(shape, eps, min_gain, quick, inputs, form)
    rows = []
    for label in [GIVEN, OURS, APART, ANCHOR, "torch eager", "torch.compile"]:
        expected = form_want if label in (GIVEN, OURS, APART) else want
        row = {
            "shape": list(shape),
            "label_smoothing": eps,
            "form": form,
            "run": label,
            "predicted": {k: v for k, v in notes.items() if k.startswith("predicted")},
        }
        if label not in calls:
            if label in notes:
                row["error"] = notes[label]
                rows.append(row)
                print(f"  {label:20s} FAILED: {notes[label]}")
            continue
        fn = calls[label]
        try:
            measured = timed_run(label, fn, expected, runs)
        except Exception as err:
            traceback.print_exc()
            row["error"] = f"{type(err).__name__}: {err}"
            rows.append(row)
            print(f"  {label:20s} FAILED: {row['error']}")
            continue
        row.update(measured)
        rows.append(row)
    return rows


def table(rows) -> str:
    """Per shape: each column's steady-state time and speedup over nvFuser as given, and
    whether eqsat meets the target (>= 2x as given, no slower than torch.compile)."""
    cases: dict[tuple, dict] = {}
    for r in rows:
        cases.setdefault(tuple(r["shape"]), {})[r["run"]] = r
    names = list(dict.fromkeys(r["run"] for r in rows))
    lines = [f"{'shape':>12s}  " + "  ".join(f"{n:>20s}" for n in names) + "  verdict"]
    for shape, runs in cases.items():
        base = runs.get(GIVEN, {}).get("us")
        cells = []
        for n in names:
            us = runs.get(n, {}).get("us")
            cells.append(
                f"{'failed' if n in runs else '-':>20s}"
                if us is None
                else f"{us:8.1f} us {base / us:5.2f}x"
                if base
                else f"{us:8.1f} us {'':6s}"
            )
        ours, compiled = runs.get(OURS, {}).get("us"), runs.get("torch.compile", {}).get("us")
        if ours is None or base is None:
            verdict = "no verdict"
        elif base / ours >= TARGET and (compiled is None or ours <= compiled):
            verdict = "target met"
        else:
            verdict = f"target MISSED ({base / ours:.2f}x as given" + (
                f", {ours / compiled:.2f}x torch.compile)" if compiled else ")"
            )
        lines.append(f"{'x'.join(map(str, shape)):>12s}  " + "  ".join(cells) + f"  {verdict}")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("bench/cross_entropy.py needs a CUDA GPU and nvFuser (nvfuser_direct)", file=sys.stderr)
        return 2
    rows = [
        r
        for shape in args.shapes
        for r in measure(
            shape, args.label_smoothing, args.ignored, args.runs, args.quick, args.min_gain, args.form
        )
    ]
    print("\n" + table(rows))
    if args.json:
        write_rows(args.json, rows)
    return 0 if all(r.get("agrees") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
