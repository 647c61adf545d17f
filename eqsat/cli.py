"""The ``eqsat`` command line: optimize, check, show and pair nvFuser repro files; list and
verify the rewrite rules; run the demo.

Each command imports what it needs when it runs (torch and egglog take seconds to import), so
``eqsat --help`` and ``eqsat --version`` answer at once.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from eqsat import __version__
from eqsat.defaults import DEADLINE_S, MIN_GAIN

DEADLINE_HELP = (
    "seconds for encoding, saturation, extraction and lowering together, counted once "
    "the file is read and typed (reading and typing are outside it: about 10 s for a "
    "100,000-op file); a backstop for pathological inputs, not what decides a normal "
    "result (iteration, e-node and search limits do). Where it cuts a stage the result "
    "is the best found by then, or the input, and the report says which stage "
    "(default {default:g}; none: no deadline)"
)
NO_REASSOCIATE = (
    "leave out rules that reorder floating-point sums and products, and rules whose "
    "result may differ on NaN, +-inf or overflow ([reassociates] and [special values] "
    "in `eqsat rules list`)"
)


def _demo(args) -> int:
    from eqsat.frontend.ingest import from_function  # deferred: torch and egglog load slowly
    from eqsat.pipeline.driver import optimize  # deferred: as above
    from eqsat.pipeline.options import Options  # deferred: as above
    from eqsat.reference.compare import mismatch  # deferred: as above
    from eqsat.reference.torch_executor import run_fusion  # deferred: as above
    from eqsat.testing.seeds import SEEDS  # deferred: as above

    status = 0
    for seed in SEEDS.values():
        fusion = from_function(seed.model_ref)
        shape = seed.demo_shape
        print(f"== {seed.name}: {seed.summary}, at {'x'.join(map(str, shape))}")
        opt = optimize(fusion, seed.make_inputs(*shape, device="meta"), Options())
        print(opt.explain())
        print("\noptimized definition:")
        print(opt.source)
        inputs = seed.make_inputs(*seed.check_shape)
        want = seed.torch_reference(*inputs)
        want = want if isinstance(want, list) else [want]
        got = run_fusion(opt.fusion, inputs)  # the fusion shown above, at a small shape
        problems = (
            [f"{len(got)} outputs instead of {len(want)}"]
            if len(got) != len(want)
            else [p for p in (mismatch(g, w) for g, w in zip(got, want, strict=True)) if p is not None]
        )
        status |= bool(problems)
        print(
            f"check at {'x'.join(map(str, seed.check_shape))} against plain torch: {problems or 'agrees'}\n"
        )
    return status


def _load_with_inputs(path, device, trust=False):
    """The repro file at ``path`` with its inputs, checked against its definition (an error
    names the file)."""
    from eqsat.errors import FusionError, naming_file  # deferred: keeps --help fast
    from eqsat.frontend.ingest import from_file  # deferred: torch loads slowly
    from eqsat.reference.inputs import check_inputs  # deferred: as above

    repro = from_file(path, device=device, trust=trust)
    if repro.inputs is None:
        raise FusionError("the file has no `inputs = [...]` list", filename=path)
    with naming_file(path):
        check_inputs(repro.fusion, repro.inputs)
    return repro


def _options(args, verify: str | None = None, cache_dir: str | None = None):
    """The options of ``optimize`` and ``pair``, from their flags."""
    from eqsat.pipeline.options import Options  # deferred: keeps --help fast

    return Options(
        profile=args.profile,
        reassociate=not args.no_reassociate,
        min_gain=args.min_gain,
        recompute=not args.no_recompute,
        deadline_s=args.deadline,
        verify=verify,
        cache_dir=cache_dir,
    )


def _estimate_json(estimate, estimated: bool) -> dict | None:
    if not estimated:
        return None
    return {"kernels": len(estimate.kernels), "bytes": estimate.bytes, "time_us": round(estimate.time_us, 3)}


def _optimize_cmd(args) -> int:
    from eqsat.cost.drawing import check_drawable, draw_kernels  # deferred: graphviz is only needed here
    from eqsat.lowering.source import MODULES, spliced_repro, style_of  # deferred: torch loads slowly
    from eqsat.pipeline.driver import optimize  # deferred: torch and egglog load slowly

    if args.draw:
        check_drawable(args.draw)  # a bad suffix, or no `dot` to draw it, fails before optimizing
    # shapes are all the optimizer needs; verifying on the GPU runs the file's inputs
    repro = _load_with_inputs(args.file, "cpu" if args.verify_on_gpu else "meta", args.trust)
    fusion = repro.fusion.with_frontend(args.frontend or repro.frontend)
    opt = optimize(
        fusion,
        repro.inputs,
        _options(args, verify="gpu" if args.verify_on_gpu else None, cache_dir=args.cache_dir),
    )
    r = opt.report
    if args.output:
        b, a = r.before.time_us, r.after.time_us
        header = [
            f"optimized by eqsat {__version__} from {os.path.basename(args.file)}: "
            + (f"{b:.1f} -> {a:.1f} us predicted" if r.estimated else "not estimated")
            + (f"; rules: {', '.join(r.rules)}" if r.rules else "")
            + ("" if r.changed else f"; unchanged: {r.unchanged}")
        ]
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(spliced_repro(repro.source, repro.definition, opt.fusion, style_of(opt.fusion), header))
    if args.draw:
        drawn = draw_kernels(opt, args.draw, title=args.file)
        print(f"eqsat: drew the predicted kernels before and after in {drawn}", file=sys.stderr)
    if args.json:
        summary = r.summary()
        print(
            json.dumps(
                {
                    "before": _estimate_json(r.before, r.estimated),
                    "after": _estimate_json(r.after, r.estimated),
                    "estimated": r.estimated,
                    "changed": r.changed,
                    "unchanged": r.unchanged,
                    "cut": r.cut,
                    "rules": r.rules,
                    "rejected": summary["rejected"],
                    "verification": summary["verification"],
                    "frontend": opt.frontend,
                    "source": opt.source,
                    "output": args.output,
                    "draw": args.draw,
                },
                indent=1,
            )
        )
        return 0
    print(opt.explain())
    print("\noptimized definition:")
    print(opt.source)
    if args.output:
        module = MODULES[style_of(opt.fusion)]
        print(
            f"wrote {args.output}: the file with its definition optimized (runs with {module}; "
            f"`eqsat check {args.output}` checks it against itself)"
        )
    return 0


def _pair_cmd(args) -> int:
    from eqsat.crossfusion import LinkError, optimize_pair  # deferred: torch and egglog load slowly
    from eqsat.errors import FusionError  # deferred: as above

    # shapes are all the optimizer needs: the inputs are built on the meta device
    fwd, bwd = (_load_with_inputs(path, "meta", args.trust) for path in (args.forward, args.backward))
    links = dict(args.link)
    try:
        pair = optimize_pair(
            fwd.fusion.with_frontend(args.frontend or fwd.frontend),
            bwd.fusion.with_frontend(args.frontend or bwd.frontend),
            links,
            fwd.inputs,
            bwd.inputs,
            options=_options(args),
        )
    except LinkError as err:
        if err.filename is None and err.line is not None:  # the line is the backward's
            raise FusionError(err.message, line=err.line, op=err.op, filename=args.backward) from None
        raise
    passed = [
        {"forward_output": s.forward_output, "backward_input": s.backward_input, "value": str(s)}
        for s in pair.saved
    ]
    if args.json:
        print(
            json.dumps(
                {
                    **pair.report.summary(),
                    "passed": passed,
                    "forward_source": pair.forward.source,
                    "backward_source": pair.backward.source,
                },
                indent=1,
            )
        )
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
            print(
                f"  backward input {s.backward_input} = forward output {s.forward_output} "
                f"({s.op} -> {s.dtype}{list(s.shape)})"
            )
    else:
        print("\nnothing passed: the backward takes its own inputs")
    return 0


def _check_cmd(args) -> int:
    from eqsat.pipeline.driver import optimize  # deferred: torch and egglog load slowly
    from eqsat.pipeline.options import Options  # deferred: as above
    from eqsat.reference.compare import mismatch  # deferred: as above
    from eqsat.reference.devices import fresh_copies  # deferred: as above
    from eqsat.reference.torch_executor import run_fusion  # deferred: as above

    repro = _load_with_inputs(args.file, "meta" if args.meta else "cpu", args.trust)  # torch runs on CPU
    opt = optimize(
        repro.fusion, repro.inputs, Options(reassociate=not args.no_reassociate, deadline_s=args.deadline)
    )
    want = run_fusion(repro.fusion, fresh_copies(repro.inputs), seed=0)  # strides kept: an
    got = run_fusion(opt.fusion, fresh_copies(repro.inputs), seed=0)  # expanded input stays one
    if len(got) != len(want):
        problems = [f"{len(got)} outputs instead of {len(want)}"]
    else:
        problems = [
            f"output {i}: {p}"
            for i, (g, w) in enumerate(zip(got, want, strict=True))
            if (p := mismatch(g, w)) is not None
        ]
    r = opt.report
    compared = "shapes and dtypes" if args.meta else "values"
    outputs = f"{len(want)} output{'s' if len(want) != 1 else ''}"
    verdict = f"{outputs}: the {compared} agree" if not problems else f"{outputs}: they differ"
    estimate = (
        f"{r.before.time_us:.1f} -> {r.after.time_us:.1f} us estimated" if r.estimated else "not estimated"
    )
    if args.json:
        print(
            json.dumps(
                {
                    "file": args.file,
                    "changed": r.changed,
                    "unchanged": r.unchanged,
                    "compared": compared,
                    "outputs": len(want),
                    "agree": not problems,
                    "problems": problems,
                    "estimated": r.estimated,
                    "cut": r.cut,
                    "before_us": round(r.before.time_us, 3) if r.estimated else None,
                    "after_us": round(r.after.time_us, 3) if r.estimated else None,
                },
                indent=1,
            )
        )
        return 1 if problems else 0
    for p in problems:
        print(f"{args.file}: {p}")
    print(f"{args.file}: {'optimized' if r.changed else 'unchanged'}, {verdict} ({estimate})")
    if r.cut:
        print(f"{args.file}: " + next(n for n in r.notes if n.startswith("the deadline")))
    return 1 if problems else 0


def _show(args) -> int:
    from eqsat.frontend.ingest import from_file  # deferred: torch loads slowly
    from eqsat.ir.printing import fusion_summary  # deferred: as above
    from eqsat.lowering.source import fusion_source  # deferred: as above
    from eqsat.reference.torch_executor import run_fusion  # deferred: as above

    # --run runs the file's inputs (on the CPU): a file without them is an error, as for check
    repro = (
        _load_with_inputs(args.file, "cpu", args.trust)
        if args.run
        else from_file(args.file, inputs=False, trust=args.trust)
    )
    ran = None
    if args.run:
        ran = [
            {"dtype": str(out.dtype).removeprefix("torch."), "shape": list(out.shape)}
            for out in run_fusion(repro.fusion, repro.inputs, seed=0)
        ]
    if args.json:
        out = {"file": args.file, **fusion_summary(repro.fusion), "text": str(repro.fusion)}
        if args.source:
            out["source"] = fusion_source(repro.fusion, args.style)
        if args.run:
            out["run"] = ran
        print(json.dumps(out, indent=1))
        return 0
    print(repro.fusion)
    if args.source:
        print()
        print(fusion_source(repro.fusion, args.style))
    for i, out in enumerate(ran or ()):
        print(f"output {i}: {out['dtype']} {tuple(out['shape'])}")
    return 0


def _rules_list(args) -> int:
    from eqsat.rules import RULES  # deferred: egglog loads slowly

    for rule in RULES.values():
        flags = "".join(f" [{f}]" for f in rule.flags)
        print(f"{rule.name} ({rule.family}){flags}")
        if args.verbose:
            print("    " + rule.doc.replace("\n", "\n    "))
            if rule.special_values:
                print(f"    Not exact on special values: {rule.special_values}.")
    return 0


def _rules_verify(args) -> int:
    from eqsat.rules import RULES  # deferred: egglog loads slowly
    from eqsat.rules.verify import verify  # deferred: as above

    names = list(args.names) or list(RULES)
    unknown = [n for n in names if n not in RULES]
    if unknown:
        print(f"eqsat: unknown rules {unknown}; known: {', '.join(sorted(RULES))}", file=sys.stderr)
        return 2
    width = max(len(n) for n in names)
    failed = 0
    for i, name in enumerate(names, 1):  # a line per rule as it is verified
        (v,) = verify([name], cases=args.cases, seed=args.seed)
        status = "pass" if v.passed else f"FAIL: {v.problem}"
        failed += not v.passed
        print(
            f"[{i:>{len(str(len(names)))}}/{len(names)}] {v.rule:<{width}}  cases {v.cases:4d}  "
            f"worst error {v.worst_error:9.2e}  {v.values:<13}  {status}",
            flush=True,
        )
    print(f"{len(names) - failed} passed, {failed} failed")
    return 1 if failed else 0


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


def _link(text: str) -> tuple[int, int]:
    """A link B:F: backward input B is forward input F (input positions, 0 or more)."""
    match = re.fullmatch(r"\s*([+-]?[0-9]+)\s*:\s*([+-]?[0-9]+)\s*", text)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"not B:F (backward input position : forward input position, as 1:0): {text!r}"
        )
    b, f = int(match[1]), int(match[2])
    if b < 0 or f < 0:
        raise argparse.ArgumentTypeError(f"input positions are 0 or more, got {text!r}")
    return b, f


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def _rewrite_options(parser, written: str, default: str, min_gain_help: str) -> None:
    """The options ``optimize`` and ``pair`` share: the frontend written for, the profile,
    reassociation, the least saving kept and recomputation."""
    parser.add_argument(
        "--frontend",
        choices=["nvfuser", "nvfuser_direct"],
        help=f"the nvFuser frontend to write the optimized {written} for (default: "
        f"{default}, classic where it imports both or neither)",
    )
    parser.add_argument("--profile", help="a calibration profile (JSON) instead of the packaged H200 one")
    parser.add_argument("--no-reassociate", action="store_true", help=NO_REASSOCIATE)
    parser.add_argument("--min-gain", type=_fraction, default=None, help=min_gain_help)
    parser.add_argument(
        "--no-recompute",
        action="store_true",
        help="lower each value once: never give a kernel its own copy of an elementwise "
        "chain of the inputs that another kernel computes (recompute_chains)",
    )


def _parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The command line's parser, and its ``pair`` subparser (whose links main checks)."""
    parser = argparse.ArgumentParser(prog="eqsat", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"eqsat {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="optimize the seed fusions and show what changed")
    demo.set_defaults(handler=_demo)
    _show_parser(sub)
    _optimize_parser(sub)
    pair = _pair_parser(sub)
    _check_parser(sub)
    _rules_parser(sub)
    return parser, pair


def _file_options(command, deadline: str | None = None) -> None:
    """``--deadline`` (where ``deadline`` is given: what it adds to the help) and ``--trust``."""
    if deadline is not None:
        command.add_argument(
            "--deadline",
            type=_seconds,
            default=DEADLINE_S,
            metavar="SECONDS",
            help=DEADLINE_HELP.format(default=DEADLINE_S) + deadline,
        )
    command.add_argument(
        "--trust",
        action="store_true",
        help="run the file as Python (by default it is read, and nothing in it runs)",
    )


def _show_parser(sub) -> None:
    show = sub.add_parser("show", help="read a repro file (nothing in it runs) and print its Fusion IR")
    show.add_argument("file")
    show.add_argument("--source", action="store_true", help="also print the re-emitted definition")
    show.add_argument(
        "--style",
        choices=["classic", "direct"],
        help="print style of --source (default: that of the file's frontend)",
    )
    show.add_argument("--run", action="store_true", help="run it on the file's inputs (torch executor)")
    show.add_argument(
        "--json", action="store_true", help="print the IR (inputs, ops, outputs, types) as JSON"
    )
    show.set_defaults(handler=_show)
    _file_options(show)


def _optimize_parser(sub) -> None:
    opt = sub.add_parser(
        "optimize",
        help="optimize a repro file (definition + inputs); print the report and the optimized definition",
    )
    opt.add_argument("file")
    opt.add_argument(
        "-o",
        "--output",
        metavar="OUT.py",
        help="write the file with its definition optimized: its imports and inputs kept, "
        "so `eqsat check OUT.py` and `python OUT.py` take it as they take the file",
    )
    opt.add_argument(
        "--draw",
        metavar="OUT.svg",
        help="also draw the predicted kernels as given and optimized, side by side: "
        ".svg, .png or .pdf (drawn by Graphviz's dot), or .dot (Graphviz's text)",
    )
    opt.add_argument(
        "--json",
        action="store_true",
        help="print before/after (null where not estimated), rules, why unchanged and the source as JSON",
    )
    _rewrite_options(
        opt,
        "definition",
        "the one the file imports",
        "least predicted time saving (a fraction) worth a change, instead of the cost "
        "model's measured error on a saving at the fusion's size and kernel count (the "
        f"profile's error table; {MIN_GAIN} where it has none)",
    )
    opt.add_argument(
        "--verify-on-gpu",
        action="store_true",
        help="compile the input and the best few candidates with nvFuser, check their "
        "outputs agree on the file's inputs and time them on this machine's GPU; keep "
        "the fastest (the input where none is more than 1%% faster). The decision is "
        "cached per definition, shapes, GPU and versions",
    )
    opt.add_argument(
        "--cache-dir",
        help="the folder of eqsat's cache for --verify-on-gpu (default "
        "$EQSAT_CACHE_DIR, else ~/.cache/eqsat)",
    )
    opt.set_defaults(handler=_optimize_cmd)
    _file_options(opt, "")


def _pair_parser(sub) -> argparse.ArgumentParser:
    pair = sub.add_parser(
        "pair",
        help="optimize a forward and a backward repro file together: the "
        "forward writes small values the backward recomputes from a "
        "shared input (a logsumexp, say) as extra outputs, the backward "
        "reads them as extra inputs; print the report and both definitions",
        description="Optimize a forward and a backward repro file together "
        "(eqsat.optimize_pair). The values passed are the forward's own, so "
        "the step computes the same function. GPU verification is not "
        "offered: each fusion would be timed apart, not the pair.",
    )
    pair.add_argument("forward", help="the forward's repro file (definition + inputs)")
    pair.add_argument("backward", help="the backward's repro file (definition + inputs)")
    pair.add_argument(
        "--link",
        type=_link,
        action="append",
        required=True,
        metavar="B:F",
        help="backward input B is the same tensor as forward input F (positions from 0); "
        "repeat for each shared input, at least once",
    )
    pair.add_argument(
        "--json",
        action="store_true",
        help="print the report's summary, the values passed and both definitions as JSON",
    )
    _rewrite_options(
        pair,
        "definitions",
        "the one each file imports",
        "least predicted saving (a fraction) of the pair over the two fusions optimized "
        f"apart worth passing values (default {MIN_GAIN}); where given, also the margin of "
        "each fusion's own optimization (by default the cost model's measured error, as in "
        "optimize)",
    )
    pair.set_defaults(handler=_pair_cmd)
    _file_options(
        pair,
        " (each fusion is optimized alone, then the best pair found again; the deadline is per optimization)",
    )
    return pair


def _check_parser(sub) -> None:
    chk = sub.add_parser(
        "check",
        help="run a repro file as given and optimized through the torch "
        "executor; exit 1 if they differ beyond dtype tolerance",
    )
    chk.add_argument("file")
    chk.add_argument(
        "--meta",
        action="store_true",
        help="build the inputs on meta tensors: compares shapes and dtypes only, no values",
    )
    chk.add_argument("--no-reassociate", action="store_true", help=NO_REASSOCIATE)
    chk.add_argument("--json", action="store_true", help="print the verdict as JSON")
    chk.set_defaults(handler=_check_cmd)
    _file_options(chk, "")


def _rules_parser(sub) -> None:
    rules = sub.add_parser("rules", help="list or verify the rewrite rules")
    rules_sub = rules.add_subparsers(dest="rules_command", required=True)
    listing = rules_sub.add_parser(
        "list",
        help="the rules, by family: [reassociates] reorders "
        "floating-point sums or products, [special values] "
        "may change NaN, +-inf or overflow, [signed zeros] "
        "keeps the sign of zeros",
    )
    listing.add_argument("-v", "--verbose", action="store_true", help="with their docstrings")
    listing.set_defaults(handler=_rules_list)
    ver = rules_sub.add_parser(
        "verify",
        help="check both sides of each rule agree on random "
        "shapes and values, NaN, +-inf, +-0.0, huge and tiny "
        "floats and integers near their limits among them "
        "(torch executor); a line per rule as it is checked",
    )
    ver.add_argument("names", nargs="*", help="rules to verify (default: all)")
    ver.add_argument("--cases", type=_positive, default=100, help="cases per rule (default 100)")
    ver.add_argument("--seed", type=int, default=0)
    ver.set_defaults(handler=_rules_verify)


def main(argv=None) -> int:
    parser, pair = _parser()
    args = parser.parse_args(argv)
    if args.command == "pair":
        linked: dict[int, int] = {}
        for b, f in args.link:
            if linked.setdefault(b, f) != f:
                pair.error(
                    f"argument --link: backward input {b} is linked to forward inputs {linked[b]} and {f}"
                )
    from eqsat.errors import FusionError, naming_file  # deferred: after parsing, so --help stays fast

    try:
        with naming_file(getattr(args, "file", None)):  # every error about a file names it
            status = args.handler(args)
            sys.stdout.flush()  # a closed pipe shows here, not at the interpreter's exit
        return status
    except FusionError as err:
        print(
            f"eqsat {args.command}: error: {err}" if args.command == "pair" else f"eqsat: {err}",
            file=sys.stderr,
        )
        return 2
    except BrokenPipeError:
        # the reader of our output went away (``eqsat optimize F | head``): end quietly, as a
        # command killed by SIGPIPE does, with nothing more written to the closed pipe
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
