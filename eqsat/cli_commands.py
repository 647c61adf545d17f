"""The ``eqsat`` commands, one function each (``eqsat.cli`` parses the command line and calls
them): each imports what it needs when it runs, so ``eqsat --help`` answers at once."""

from __future__ import annotations

import json
import os
import sys

from eqsat import __version__


def demo_command(args) -> int:
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


def load_with_inputs(path, device, trust=False):
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


def options_of(args, verify: str | None = None, cache_dir: str | None = None):
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


def estimate_json(estimate, estimated: bool) -> dict | None:
    if not estimated:
        return None
    return {"kernels": len(estimate.kernels), "bytes": estimate.bytes, "time_us": round(estimate.time_us, 3)}


def optimize_command(args) -> int:
    from eqsat.cost.drawing import check_drawable, draw_kernels  # deferred: graphviz is only needed here
    from eqsat.lowering.source import MODULES, style_of  # deferred: torch loads slowly
    from eqsat.pipeline.driver import optimize  # deferred: torch and egglog load slowly

    if args.draw:
        check_drawable(args.draw)  # a bad suffix, or no `dot` to draw it, fails before optimizing
    # shapes are all the optimizer needs; verifying on the GPU runs the file's inputs
    repro = load_with_inputs(args.file, "cpu" if args.verify_on_gpu else "meta", args.trust)
    fusion = repro.fusion.with_frontend(args.frontend or repro.frontend)
    opt = optimize(
        fusion,
        repro.inputs,
        options_of(args, verify="gpu" if args.verify_on_gpu else None, cache_dir=args.cache_dir),
    )
    if args.output:
        _write_repro(args, repro, opt)
    if args.draw:
        drawn = draw_kernels(opt, args.draw, title=args.file)
        print(f"eqsat: drew the predicted kernels before and after in {drawn}", file=sys.stderr)
    if args.json:
        print(json.dumps(_optimized_json(args, opt), indent=1))
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


def _write_repro(args, repro, opt) -> None:
    """The file at ``args.output``: the repro with its definition optimized, under a header
    line saying what eqsat did."""
    from eqsat.lowering.source import spliced_repro, style_of  # deferred: torch loads slowly

    r = opt.report
    b, a = r.before.time_us, r.after.time_us
    header = [
        f"optimized by eqsat {__version__} from {os.path.basename(args.file)}: "
        + (f"{b:.1f} -> {a:.1f} us predicted" if r.estimated else "not estimated")
        + (f"; rules: {', '.join(r.rules)}" if r.rules else "")
        + ("" if r.changed else f"; unchanged: {r.unchanged}")
    ]
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(spliced_repro(repro.source, repro.definition, opt.fusion, style_of(opt.fusion), header))


def _optimized_json(args, opt) -> dict:
    """What ``eqsat optimize --json`` prints."""
    r = opt.report
    summary = r.summary()
    return {
        "before": estimate_json(r.before, r.estimated),
        "after": estimate_json(r.after, r.estimated),
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
    }


def pair_command(args) -> int:
    from eqsat.crossfusion import LinkError, optimize_pair  # deferred: torch and egglog load slowly
    from eqsat.errors import FusionError  # deferred: as above

    # shapes are all the optimizer needs: the inputs are built on the meta device
    fwd, bwd = (load_with_inputs(path, "meta", args.trust) for path in (args.forward, args.backward))
    links = dict(args.link)
    try:
        pair = optimize_pair(
            fwd.fusion.with_frontend(args.frontend or fwd.frontend),
            bwd.fusion.with_frontend(args.frontend or bwd.frontend),
            links,
            fwd.inputs,
            bwd.inputs,
            options=options_of(args),
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


def check_command(args) -> int:
    from eqsat.pipeline.driver import optimize  # deferred: torch and egglog load slowly
    from eqsat.pipeline.options import Options  # deferred: as above
    from eqsat.reference.compare import mismatch  # deferred: as above
    from eqsat.reference.devices import fresh_copies  # deferred: as above
    from eqsat.reference.torch_executor import run_fusion  # deferred: as above

    repro = load_with_inputs(args.file, "meta" if args.meta else "cpu", args.trust)  # torch runs on CPU
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


def show_command(args) -> int:
    from eqsat.frontend.ingest import from_file  # deferred: torch loads slowly
    from eqsat.ir.printing import fusion_summary  # deferred: as above
    from eqsat.lowering.source import fusion_source  # deferred: as above
    from eqsat.reference.torch_executor import run_fusion  # deferred: as above

    # --run runs the file's inputs (on the CPU): a file without them is an error, as for check
    repro = (
        load_with_inputs(args.file, "cpu", args.trust)
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


def rules_list_command(args) -> int:
    from eqsat.rules import RULES  # deferred: egglog loads slowly

    for rule in RULES.values():
        flags = "".join(f" [{f}]" for f in rule.flags)
        print(f"{rule.name} ({rule.family}){flags}")
        if args.verbose:
            print("    " + rule.doc.replace("\n", "\n    "))
            if rule.special_values:
                print(f"    Not exact on special values: {rule.special_values}.")
    return 0


def rules_verify_command(args) -> int:
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
