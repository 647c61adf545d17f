"""Terms and analysis facts as egglog program text.

Adding a few hundred terms through egglog's Python expression API costs about a millisecond
each; parsing one program text costs tens of microseconds a command. This module writes
that text, and is the one module on egglog's private API (``EGraph._egraph``, its
``_state``): :func:`run_text` parses and runs program text, :func:`run_schedule` runs a
schedule without the per-rule Python report, :func:`frozen` reads every table back.
"""

from __future__ import annotations

import math

from egglog import EGraph

from .terms import SIGNATURES, TermGraph


def f64_literal(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(float(value))


def attr_literal(kind: str, value) -> str:
    if kind == "f64":
        return f64_literal(value)
    if kind == "String":
        return '"' + str(value).replace('"', '\\"') + '"'
    return str(int(value))


def term_text(graph: TermGraph, tid: int, name) -> str:
    node = graph[tid]
    kinds, _ = SIGNATURES[node.op]
    parts = [attr_literal(k, a) for k, a in zip(kinds, node.attrs)] + [name(c) for c in node.kids]
    return f"({node.op}{''.join(' ' + p for p in parts)})"


# Terms are named by rows of one table, (scope, term id) -> class, rather than by a ``let``
# each: egglog makes every let a function of its own, and each later command and iteration
# then costs time in proportion to the lets made (16 000 lets: 9 s to insert, not 0.8 s).
NAME_TABLE = "term_name"


def term_ref(scope: int, tid: int) -> str:
    """The egglog expression of term ``tid`` of the graph inserted as ``scope``."""
    return f"({NAME_TABLE} {scope} {tid})"


def named_program(
    graph: TermGraph,
    scope: int,
    labels: dict[int, int],
    dtypes: dict[int, int],
    nonneg: set[int] = frozenset(),
    terms: range | None = None,
    drawn: set[int] = frozenset(),
) -> str:
    """Each term of ``graph`` (or of ``terms``, ids in order) set as its name's row, and the
    facts given for them (``nonneg``, ``drawn``: the terms each relation holds for)."""
    name = lambda t: term_ref(scope, t)  # noqa: E731
    lines = []
    for tid in range(len(graph.nodes)) if terms is None else terms:
        lines.append(f"(set {name(tid)} {term_text(graph, tid, name)})")
        if tid in labels:
            lines.append(f"(set (labels {name(tid)}) {int(labels[tid])})")
        if tid in dtypes:
            lines.append(f"(set (dtype {name(tid)}) {int(dtypes[tid])})")
        if tid in nonneg:
            lines.append(f"(nonneg {name(tid)})")
        if tid in drawn:
            lines.append(f"(drawn {name(tid)})")
    return "\n".join(lines)


# Commands per parse: egglog's parse_program and run_program grow faster than linearly in the
# number of commands of one call (4000 lets: 5 s in one call, 0.3 s in chunks of 100); with
# terms named by table rows, 25 is quicker still (a 20 000-op chain: 1.38 s to encode in
# chunks of 100, 0.95 s in chunks of 25; bench/large.py).
CHUNK = 25


def run_text(eg: EGraph, text: str) -> None:
    """Parse and run egglog commands on ``eg``, in chunks of about ``CHUNK`` lines cut only
    where the parentheses balance (outside string literals)."""
    chunk, depth = [], 0
    for line in text.splitlines():
        chunk.append(line)
        depth += _paren_balance(line)
        if depth == 0 and len(chunk) >= CHUNK:
            _run(eg, "\n".join(chunk))
            chunk = []
    _run(eg, "\n".join(chunk))


def _run(eg: EGraph, text: str) -> None:
    if text.strip():
        eg._egraph.run_program(*eg._egraph.parse_program(text))


def _paren_balance(line: str) -> int:
    if '"' not in line:
        return line.count("(") - line.count(")")
    balance, quoted, escaped = 0, False, False
    for ch in line:
        if quoted:
            quoted = escaped or ch != '"'
            escaped = not escaped and ch == "\\"
        elif ch == '"':
            quoted = True
        elif ch == "(":
            balance += 1
        elif ch == ")":
            balance -= 1
    return balance


def run_schedule(eg: EGraph, schedule):
    """Run ``schedule`` (a ruleset or ``ruleset * n``); egglog's run report of it.
    (``EGraph.run`` also makes a Python report of every rule in every iteration: 3 s for the
    16 000 analysis iterations of a 16 000-op chain.)"""
    eg._add_decls(schedule)
    (out,) = eg._egraph.run_program(eg._state.run_schedule_to_egg(schedule.schedule))
    return out.report


class Frozen:
    """A read-only copy of an e-graph's tables: ``functions`` (name -> its ``rows``, each with
    ``inputs``, ``output`` and ``subsumed``), values read by :meth:`i64` and by sort name
    (``convert``), a class's id by :meth:`class_id`."""

    def __init__(self, eg: EGraph):
        raw = eg._egraph
        self.functions = raw.freeze().functions
        self.i64 = raw.value_to_i64
        self.convert = {"i64": raw.value_to_i64, "f64": raw.value_to_f64, "String": raw.value_to_string}

    @staticmethod
    def class_id(value) -> int:
        text = str(value)  # "Value(14)"
        return int(text[text.index("(") + 1 : -1])


def frozen(eg: EGraph) -> Frozen:
    """Every table of ``eg`` as it is now."""
    return Frozen(eg)
