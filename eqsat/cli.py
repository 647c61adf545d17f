"""The ``eqsat`` command line: optimize, check, show and pair nvFuser repro files; list and
verify the rewrite rules; run the demo.

Each command imports what it needs when it runs (torch and egglog take seconds to import), so
``eqsat --help`` and ``eqsat --version`` answer at once.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from eqsat import __version__
from eqsat import cli_commands as commands
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
    demo.set_defaults(handler=commands.demo_command)
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
    show.set_defaults(handler=commands.show_command)
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
    opt.set_defaults(handler=commands.optimize_command)
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
    pair.set_defaults(handler=commands.pair_command)
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
    chk.set_defaults(handler=commands.check_command)
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
    listing.set_defaults(handler=commands.rules_list_command)
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
    ver.set_defaults(handler=commands.rules_verify_command)


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
