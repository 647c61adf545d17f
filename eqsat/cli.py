"""The ``eqsat`` command line."""
from __future__ import annotations

import argparse
import json
import re
import sys

from eqsat.frontend.ingest import from_file, from_function
from eqsat.ir.fusion import FRONTENDS
from eqsat.lowering.source import fusion_source
from eqsat.reference.compare import mismatch
from eqsat.reference.devices import fresh_copies
from eqsat.reference.torch_executor import run_fusion
from eqsat.rules.verify import verify
from eqsat.testing.seeds import SEEDS

from .crossfusion import LinkError, optimize_pair
from .errors import FusionError
from .optimize import DEADLINE_S, MIN_GAIN, optimize_fusion
from .rules import RULES


def _demo(args) -> int:
    status = 0
    for seed in SEEDS.values():
        fusion = from_function(seed.model_ref)
        shape = seed.demo_shape
        print(f"== {seed.name}: {seed.summary}, at {'x'.join(map(str, shape))}")
        opt = optimize_fusion(fusion, seed.make_inputs(*shape, device="meta"))
        print(opt.explain())
        print("\noptimized definition:")
        print(opt.source)
        inputs = seed.make_inputs(*seed.check_shape)
        want = seed.torch_reference(*inputs)
        want = want if isinstance(want, list) else [want]
        got = run_fusion(optimize_fusion(fusion, seed.make_inputs(*shape, device="meta")).fusion, inputs)
        problems = [f"{len(got)} outputs instead of {len(want)}"] if len(got) != len(want) else \
            [p for p in (mismatch(g, w) for g, w in zip(got, want, strict=True)) if p is not None]
        ok = not problems
        status |= not ok
        print(f"check at {'x'.join(map(str, seed.check_shape))} against plain torch: "
              f"{'agrees' if ok else problems}\n")
    return status


def _load_with_inputs(path, device, trust=False):
    repro = from_file(path, device=device, trust=trust)
    if repro.inputs is None:
        raise FusionError("the file has no `inputs = [...]` list", filename=path)
    return repro


def _optimize_cmd(args) -> int:
    # shapes are all the optimizer needs; verifying on the GPU runs the file's inputs
    repro = _load_with_inputs(args.file, "cpu" if args.verify_on_gpu else "meta", args.trust)
    fusion = repro.fusion.with_frontend(args.frontend or repro.frontend)
    opt = optimize_fusion(fusion, repro.inputs, profile=args.profile,
                          reassociate=not args.no_reassociate, min_gain=args.min_gain,
                          recompute=not args.no_recompute, deadline_s=args.deadline,
                          verify="gpu" if args.verify_on_gpu else None,
                          cache_dir=args.cache_dir)
    if args.json:
        summary = opt.report.summary()
        keep = ("kernels", "bytes", "time_us")
        print(json.dumps({"before": {k: summary["before"][k] for k in keep},
                          "after": {k: summary["after"][k] for k in keep},
                          "rules": summary["rules"], "changed": summary["changed"],
                          "rejected": summary["rejected"], "verification": summary["verification"],
                          "frontend": opt.frontend, "source": opt.source}, indent=1))
    else:
        print(opt.explain())
        print("\noptimized definition:")
        print(opt.source)
    return 0


def _pair_cmd(args) -> int:
    # shapes are all the optimizer needs: the inputs are built on the meta device
    fwd, bwd = (_load_with_inputs(path, "meta", args.trust) for path in (args.forward, args.backward))
    links = dict(args.link)
    try:
        pair = optimize_pair(fwd.fusion.with_frontend(args.frontend or fwd.frontend),
                             bwd.fusion.with_frontend(args.frontend or bwd.frontend), links, fwd.inputs,
                             bwd.inputs, profile=args.profile, min_gain=args.min_gain,
                             reassociate=not args.no_reassociate, recompute=not args.no_recompute,
                             deadline_s=args.deadline)
    except LinkError as err:
        if err.filename is None and err.line is not None:      # the line is the backward's
            raise FusionError(err.message, line=err.line, op=err.op, filename=args.backward) from None
        raise
    passed = [{"forward_output": s.forward_output, "backward_input": s.backward_input, "value": str(s)}
              for s in pair.saved]
    if args.json:
        print(json.dumps({**pair.report.summary(), "passed": passed,
                          "forward_source": pair.forward.source, "backward_source": pair.backward.source},
                         indent=1))
        return 0
    print(pair.report)
    print("\noptimized forward definition:")
    print(pair.forward.source)
    print("\noptimized backward definition:")
    print(pair.backward.source)
    own = len(pair.backward.fusion.inputs) - len(pair.saved)
    if pair.saved:
        print(f"\nrun the forward, then the backward on its own {own} inputs followed by:")
        for s in pair.saved:
            print(f"  backward input {s.backward_input} = forward output {s.forward_output} "
                  f"({s.op} -> {s.dtype}{list(s.shape)})")
    else:
        print("\nnothing passed: the backward takes its own inputs")
    return 0


def _check_cmd(args) -> int:
    repro = _load_with_inputs(args.file, "meta" if args.meta else "cpu", args.trust)   # torch runs on CPU
    opt = optimize_fusion(repro.fusion, repro.inputs, reassociate=not args.no_reassociate,
                          deadline_s=args.deadline)

    want = run_fusion(repro.fusion, fresh_copies(repro.inputs), seed=0)   # strides kept: an
    got = run_fusion(opt.fusion, fresh_copies(repro.inputs), seed=0)      # expanded input stays one
    if len(got) != len(want):
        problems = [f"{len(got)} outputs instead of {len(want)}"]
    else:
        problems = [f"output {i}: {p}" for i, (g, w) in enumerate(zip(got, want, strict=True))
                    if (p := mismatch(g, w)) is not None]
    changed = "optimized" if opt.report.changed else "unchanged"
    if problems:
        for p in problems:
            print(f"{args.file}: {p}")
        return 1
    estimate = (f"{opt.report.before.time_us:.1f} -> {opt.report.after.time_us:.1f} us estimated"
                if opt.report.estimated else "not estimated")
    print(f"{args.file}: {changed}, {len(want)} outputs agree ({estimate})")
    for note in opt.report.notes:
        if note.startswith("the deadline"):
            print(f"{args.file}: {note}")
    return 0


def _show(args) -> int:
    repro = from_file(args.file, inputs=args.run, trust=args.trust)
    print(repro.fusion)
    if args.source:
        print()
        print(fusion_source(repro.fusion, args.style))
    if args.run and repro.inputs is not None:
        for i, out in enumerate(run_fusion(repro.fusion, repro.inputs, seed=0)):
            print(f"output {i}: {out.dtype} {tuple(out.shape)}")
    return 0


def _rules_list(args) -> int:
    for rule in RULES.values():
        flags = "".join(f" [{f}]" for f in rule.flags)
        print(f"{rule.name} ({rule.family}){flags}")
        if args.verbose:
            print("    " + rule.doc.replace("\n", "\n    "))
            if rule.special_values:
                print(f"    Not exact on special values: {rule.special_values}.")
    return 0


def _rules_verify(args) -> int:
    try:
        verdicts = verify(args.names, cases=args.cases, seed=args.seed)
    except ValueError as err:
        print(f"eqsat: {err}", file=sys.stderr)
        return 2
    width = max(len(v.rule) for v in verdicts)
    for v in verdicts:
        status = "pass" if v.passed else f"FAIL: {v.problem}"
        print(f"{v.rule:<{width}}  cases {v.cases:4d}  worst error {v.worst_error:9.2e}  "
              f"{v.values:<13}  {status}")
    failed = [v for v in verdicts if not v.passed]
    print(f"{len(verdicts) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


_NO_REASSOCIATE = ("leave out rules that reorder floating-point sums and products, and rules "
                   "whose result may differ on NaN, +-inf or overflow ([reassociates] and "
                   "[special values] in `eqsat rules list`)")


def _seconds(text: str) -> float | None:
    """A deadline: seconds (0 or more), or "none"."""
    if text.strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds, or none; got {text}")
    return value


def _fraction(text: str) -> float:
    """A saving: a number >= 0 and < 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be a fraction >= 0 and < 1, got {text}")
    return value


def _rewrite_options(parser, written: str, default: str, min_gain_help: str) -> None:
    """The options ``optimize`` and ``pair`` share: the frontend written for, the profile,
    reassociation, the least saving kept and recomputation."""
    parser.add_argument("--frontend", choices=list(FRONTENDS),
                        help=f"the nvFuser frontend to write the optimized {written} for (default: "
                             f"{default}, classic where it imports both or neither)")
    parser.add_argument("--profile", help="a calibration profile (JSON) instead of the packaged H200 one")
    parser.add_argument("--no-reassociate", action="store_true", help=_NO_REASSOCIATE)
    parser.add_argument("--min-gain", type=_fraction, default=None, help=min_gain_help)
    parser.add_argument("--no-recompute", action="store_true",
                        help="lower each value once: never give a kernel its own copy of an elementwise "
                             "chain of the inputs that another kernel computes (recompute_chains)")


def _link(text: str) -> tuple[int, int]:
    """A link B:F: backward input B is forward input F (input positions, 0 or more)."""
    match = re.fullmatch(r"\s*([+-]?[0-9]+)\s*:\s*([+-]?[0-9]+)\s*", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"not B:F (backward input position : forward input position, "
                                         f"as 1:0): {text!r}")
    b, f = int(match[1]), int(match[2])
    if b < 0 or f < 0:
        raise argparse.ArgumentTypeError(f"input positions are 0 or more, got {text!r}")
    return b, f


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="eqsat", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="optimize the seed fusions and show what changed")
    demo.set_defaults(handler=_demo)
    show = sub.add_parser("show", help="ingest a repro file and print its Fusion IR")
    show.add_argument("file")
    show.add_argument("--source", action="store_true", help="also print the re-emitted definition")
    show.add_argument("--style", choices=["classic", "direct"],
                      help="print style of --source (default: that of the file's frontend)")
    show.add_argument("--run", action="store_true", help="run it on the file's inputs (torch executor)")
    show.set_defaults(handler=_show)
    opt = sub.add_parser("optimize", help="optimize a repro file (definition + inputs); print the "
                                          "report and the optimized definition")
    opt.add_argument("file")
    opt.add_argument("--json", action="store_true", help="print before/after, rules and source as JSON")
    _rewrite_options(opt, "definition", "the one the file imports",
                     "least predicted time saving (a fraction) worth a change, instead of the cost "
                     "model's measured error on a saving at the fusion's size and kernel count (the "
                     f"profile's error table; {MIN_GAIN} where it has none)")
    opt.add_argument("--verify-on-gpu", action="store_true",
                     help="compile the input and the best few candidates with nvFuser, check their "
                          "outputs agree on the file's inputs and time them on this machine's GPU; keep "
                          "the fastest (the input where none is more than 1%% faster). The decision is "
                          "cached per definition, shapes, GPU and versions")
    opt.add_argument("--cache-dir", help="the folder of eqsat's cache for --verify-on-gpu (default "
                                         "$EQSAT_CACHE_DIR, else ~/.cache/eqsat)")
    opt.set_defaults(handler=_optimize_cmd)
    pair = sub.add_parser("pair", help="optimize a forward and a backward repro file together: the "
                                        "forward writes small values the backward recomputes from a "
                                        "shared input (a logsumexp, say) as extra outputs, the backward "
                                        "reads them as extra inputs; print the report and both definitions",
                          description="Optimize a forward and a backward repro file together "
                                      "(eqsat.optimize_pair). The values passed are the forward's own, so "
                                      "the step computes the same function. GPU verification is not "
                                      "offered: each fusion would be timed apart, not the pair.")
    pair.add_argument("forward", help="the forward's repro file (definition + inputs)")
    pair.add_argument("backward", help="the backward's repro file (definition + inputs)")
    pair.add_argument("--link", type=_link, action="append", required=True, metavar="B:F",
                      help="backward input B is the same tensor as forward input F (positions from 0); "
                           "repeat for each shared input, at least once")
    pair.add_argument("--json", action="store_true",
                      help="print the report's summary, the values passed and both definitions as JSON")
    _rewrite_options(pair, "definitions", "the one each file imports",
                     "least predicted saving (a fraction) of the pair over the two fusions optimized "
                     f"apart worth passing values (default {MIN_GAIN}); where given, also the margin of "
                     "each fusion's own optimization (by default the cost model's measured error, as in "
                     "optimize)")
    pair.add_argument("--deadline", type=_seconds, default=DEADLINE_S, metavar="SECONDS",
                      help="seconds for each optimization of a fusion (each is optimized alone, then "
                           "the best pair found is optimized again); where it cuts a stage the result "
                           f"is the best found by then, or the input (default {DEADLINE_S:g}; none: no "
                           "deadline)")
    pair.set_defaults(handler=_pair_cmd)
    chk = sub.add_parser("check", help="run a repro file as given and optimized through the torch "
                                       "executor; exit 1 if they differ beyond dtype tolerance")
    chk.add_argument("file")
    chk.add_argument("--meta", action="store_true", help="build the inputs on meta tensors (shapes only)")
    chk.add_argument("--no-reassociate", action="store_true", help=_NO_REASSOCIATE)
    chk.set_defaults(handler=_check_cmd)
    rules = sub.add_parser("rules", help="list or verify the rewrite rules")
    rules_sub = rules.add_subparsers(dest="rules_command", required=True)
    listing = rules_sub.add_parser("list", help="the rules, by family: [reassociates] reorders "
                                                "floating-point sums or products, [special values] "
                                                "may change NaN, +-inf or overflow, [signed zeros] "
                                                "keeps the sign of zeros")
    listing.add_argument("-v", "--verbose", action="store_true", help="with their docstrings")
    listing.set_defaults(handler=_rules_list)
    ver = rules_sub.add_parser("verify", help="check both sides of each rule agree on random "
                                              "shapes and values, NaN, +-inf, +-0.0, huge and tiny "
                                              "floats and integers near their limits among them "
                                              "(torch executor)")
    ver.add_argument("names", nargs="*", help="rules to verify (default: all)")
    ver.add_argument("--cases", type=_positive, default=100, help="cases per rule (default 100)")
    ver.add_argument("--seed", type=int, default=0)
    ver.set_defaults(handler=_rules_verify)
    for command in (opt, chk):
        command.add_argument("--deadline", type=_seconds, default=DEADLINE_S, metavar="SECONDS",
                             help="seconds for encoding, saturation, extraction and lowering "
                                  "together, counted once the file is read; where it cuts a stage "
                                  f"the result is the best found by then, or the input (default "
                                  f"{DEADLINE_S:g}; none: no deadline)")
    for command in (show, opt, pair, chk):
        command.add_argument("--trust", action="store_true",
                             help="run the file as Python (by default it is read, and nothing in it runs)")
    args = parser.parse_args(argv)
    if args.command == "pair":
        linked: dict[int, int] = {}
        for b, f in args.link:
            if linked.setdefault(b, f) != f:
                pair.error(f"argument --link: backward input {b} is linked to forward inputs "
                           f"{linked[b]} and {f}")
    try:
        return args.handler(args)
    except FusionError as err:
        print(f"eqsat pair: error: {err}" if args.command == "pair" else f"eqsat: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
