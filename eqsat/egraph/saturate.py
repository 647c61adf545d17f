"""Saturation: rulesets, a schedule, and limits that stop it cleanly.

One prepared EGraph, made once per process on a thread of its own (:func:`in_session`),
holds every declaration and compiled ruleset (compiling them takes a fraction of a second);
each fusion is worked on inside ``push``/``pop``. A run alternates one pass of the chosen
rewrite rules with the analysis rules to saturation, and stops when nothing changes or at the
first limit reached (iterations, e-nodes, its own time limit, the caller's deadline); the
e-graph is valid at every stop. Where the deadline cuts the analyses themselves, some classes
have none: extraction leaves those out.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass, field
from concurrent.futures import Future
from typing import Callable, Iterable, TypeVar

from egglog import EGraph, ruleset, set_, unstable_combine_rulesets

from eqsat.deadline import NEVER, Deadline
from eqsat.ir.opspec import RANDOM_OPS

from .analysis import analysis
from .egglog_text import NAME_TABLE, named_program, run_schedule, run_text
from .encode import Encoding
from .registry import RULES
from .terms import INDEXING_TERMS, TermGraph
from .vocabulary import Leaf, dtype_tables, labels

T = TypeVar("T")

# iterations and e-nodes decide where a normal saturation stops (the same on any machine);
# seconds is a backstop for pathological inputs, far above what either corpus, the seeds or
# bench/large.py up to 8000 ops take on a 2-core machine with both cores busy
DEFAULT_LIMITS = {"iterations": 12, "nodes": 20_000, "seconds": 30.0}
INSERT_PART = 2000  # terms inserted between two looks at the deadline (about 0.1 s)


@dataclass
class Limits:
    """Where saturation stops: after ``iterations`` passes of the rules, at ``nodes`` e-nodes
    and analysis rows (or before an iteration that, at the last one's growth, would pass twice
    that), or after ``seconds`` (a backstop, not what decides a normal result)."""

    iterations: int = DEFAULT_LIMITS["iterations"]
    nodes: int = DEFAULT_LIMITS["nodes"]
    seconds: float = DEFAULT_LIMITS["seconds"]


@dataclass
class Saturation:
    """What a run did: ``stop`` is "saturated" or the limit that stopped it ("iteration
    limit", "node limit", "time limit", "deadline")."""

    stop: str
    iterations: int
    nodes: int
    seconds: float
    fired: dict[str, int] = field(default_factory=dict)  # rule -> matches applied
    analysed: bool = True  # False: the deadline cut the analyses of the input itself


def select_rules(
    rules: Iterable[str] | None = None,
    *,
    reassociate: bool = True,
    special_values: bool | None = None,
    exclude: Iterable[str] = (),
) -> list[str]:
    """Rule names: all (or ``rules``), less ``exclude``. ``reassociate=False`` leaves out the
    rules that reorder floating-point sums and products, and (unless ``special_values`` says
    otherwise) those whose sides may differ on NaN, +-inf or overflow; ``special_values=False``
    leaves out only the latter. What remains gives the same NaNs and infinities as the input
    fusion. Unknown names are an error."""
    names = list(RULES) if rules is None else list(rules)
    unknown = [n for n in list(names) + list(exclude) if n not in RULES]
    if unknown:
        raise ValueError(f"unknown rules {unknown}; known: {', '.join(sorted(RULES))}")
    keep_special = reassociate if special_values is None else special_values
    return [
        n
        for n in names
        if n not in set(exclude)
        and (reassociate or not RULES[n].reassociates)
        and (keep_special or not RULES[n].special_values)
    ]


# rule families that match only terms of these constructors (a family's rules are left out
# of a saturation whose e-graph has none of them: they could never fire)
FAMILY_NEEDS = {"indexing": INDEXING_TERMS | {"Iota"}}


def needs(name: str) -> frozenset:
    """The constructors one of which the e-graph must hold for rule ``name`` to fire (empty:
    any e-graph)."""
    return FAMILY_NEEDS.get(RULES[name].family, frozenset())


def applicable(names: Iterable[str], graph: TermGraph) -> tuple[str, ...]:
    """``names`` less the rules that cannot fire on the terms of ``graph`` (:func:`needs`)."""
    present = {n.op for n in graph.nodes}
    return tuple(n for n in names if not needs(n) or needs(n) & present)


class Session:
    """A prepared EGraph (one per process, used on its own thread: :func:`in_session`)."""

    def __init__(self):
        self.eg = EGraph()
        self.eg.register(set_(labels(Leaf(0))).to(0))  # declares the vocabulary
        self.eg.run(1, ruleset=analysis)
        self._rule_sets: dict[str, object] = {}
        self._combined: dict[tuple[str, ...], object] = {}
        self.counter = 0
        self.eg.run(0, ruleset=self.rewrites(tuple(RULES)))  # compiles every rule registered now
        run_text(self.eg, f"(function {NAME_TABLE} (i64 i64) Term :merge old)")

    def rewrites(self, names: tuple[str, ...]):
        for n in names:  # made on first use (and a rule registered later)
            if n not in self._rule_sets:
                self._rule_sets[n] = ruleset(RULES[n].egglog(), name=f"rule:{n}")
        if names not in self._combined:
            self._combined[names] = unstable_combine_rulesets(
                *(self._rule_sets[n] for n in names), name=f"rewrites{len(self._combined)}"
            )
        return self._combined[names]

    def fresh_scope(self) -> int:
        """A number naming one inserted term graph's terms apart from every other's."""
        self.counter += 1
        return self.counter

    def size(self) -> int:
        """E-nodes and analysis rows (the name table is not among the functions counted)."""
        return sum(n for _, n in self.eg.all_function_sizes())

    def insert(self, enc: Encoding, scope: int, deadline: Deadline = NEVER) -> bool:
        """The encoding's terms, named ``scope`` (see :func:`term_ref`), with their facts; in
        parts of ``INSERT_PART`` terms, and False where the ``deadline`` passed before the last
        (the e-graph then holds only some of them)."""
        nonneg = {t for t, n in enumerate(enc.graph.nodes) if n.op in ("Num", "Int") and n.attrs[0] >= 0}
        codes = set(enc.dtype.values()) | {n.attrs[0] for n in enc.graph.nodes if n.op == "Cast"}
        drawn = {t for t, (op, _) in enc.links.items() if op in RANDOM_OPS}
        run_text(self.eg, dtype_tables(codes) + f"\n(set (nonempty_labels) {enc.nonempty})")
        for first in range(0, len(enc.graph.nodes), INSERT_PART):
            if deadline.passed():
                return False
            terms = range(first, min(first + INSERT_PART, len(enc.graph.nodes)))
            run_text(self.eg, named_program(enc.graph, scope, enc.labels, enc.dtype, nonneg, terms, drawn))
        return True

    def insert_terms(self, graph: TermGraph, scope: int) -> None:
        """A term graph's terms, named ``scope``, without facts."""
        run_text(self.eg, named_program(graph, scope, {}, {}))

    def analyse(self, deadline: Deadline = NEVER) -> bool:
        """Run the analysis rules to saturation, or until the ``deadline``; whether they
        saturated. They run in chunks of 8, 16, ... 1024 iterations, the deadline
        looked at between chunks: egglog's saturate cannot be stopped, and a chain's analyses
        take one iteration per op."""
        chunk = 8
        while _changes(self.eg, analysis * chunk):
            if deadline.passed():
                return False
            chunk = min(2 * chunk, 1024)
        return True

    def saturate(self, rules: tuple[str, ...], limits: Limits, deadline: Deadline = NEVER) -> Saturation:
        """Analyse, then alternate one pass of ``rules`` with the analyses until nothing changes
        or a limit is reached; the ``deadline`` also cuts the analyses (``Saturation.analysed``
        False: the input's own are not all known)."""
        eg = self.eg
        start = time.perf_counter()
        clock = _Clock(Deadline(limits.seconds), deadline)
        if not self.analyse(deadline):
            return Saturation("deadline", 0, self.size(), time.perf_counter() - start, analysed=False)
        fired: dict[str, int] = {}
        stop, iterations = "saturated", 0
        if not rules:
            return Saturation(stop, 0, self.size(), time.perf_counter() - start)
        rewrites = self.rewrites(rules)
        nodes, step_s, growth = self.size(), 0.0, 1.0
        while True:
            if iterations >= limits.iterations:
                stop = "iteration limit"
                break
            # An exploding rule set multiplies the e-graph each iteration: stop before an
            # iteration that would, at the last one's growth, pass the time limit or overshoot
            # the node limit twice over, rather than after it.
            stop = clock.passed(step_s * growth, first=not iterations)
            if stop:
                break
            if iterations and nodes * growth >= 2 * limits.nodes:
                stop = "node limit"
                break
            step_start, before = time.perf_counter(), nodes
            report = eg.run(1, ruleset=rewrites)
            iterations += 1
            _count_matches(report, fired)
            analysed = self.analyse(deadline)
            nodes = self.size()
            step_s, growth = time.perf_counter() - step_start, max(1.0, nodes / max(before, 1))
            if not analysed:
                stop = "deadline"
                break
            if not report.updated:
                stop = "saturated"
                break
            if nodes >= limits.nodes:
                stop = "node limit"
                break
            stop = clock.passed(0.0, first=False)
            if stop:
                break
        return Saturation(stop, iterations, self.size(), time.perf_counter() - start, fired)


class _Clock:
    """The time limit of one saturation (``Limits.seconds``, its own backstop) and the deadline
    over it: the one that comes first stops it, and names the stop ("time limit" or
    "deadline")."""

    def __init__(self, limit: Deadline, deadline: Deadline):
        self.limit, self.deadline = limit, deadline

    def passed(self, ahead: float, *, first: bool) -> str:
        """The stop that ``ahead`` seconds from now would pass, or "". The time limit lets a
        first iteration run whatever it is; the deadline does not."""
        if self.deadline.ends_before(self.limit):
            return "deadline" if self.deadline.passed(ahead) else ""
        return "time limit" if not first and self.limit.passed(ahead) else ""


def _changes(eg: EGraph, schedule) -> bool:
    """Run ``schedule``; whether its last iteration changed the e-graph."""
    iterations = run_schedule(eg, schedule).iterations
    return bool(iterations) and iterations[-1].rule_set_report.changed


def _count_matches(report, fired: dict[str, int]) -> None:
    for key, count in report.num_matches_per_rule.items():
        name = getattr(key, "name", None) or str(key)
        if count:
            fired[name] = fired.get(name, 0) + count


class _SessionThread:
    """The process's one e-graph thread: it makes the Session and runs every job on it.

    egglog's Rust e-graph must be used and dropped on the thread that made it. Every copy of
    its state that ``push``/``pop`` discards still points at it, and a copy left in a reference
    cycle is freed by whichever thread's garbage collection finds it: with one e-graph per
    thread, the last of these freed the e-graph of a thread that had ended on another thread,
    an error. Here the e-graph lives as long as the process, held by this thread alone (a
    daemon that never returns), so no collection anywhere drops the last reference to it.
    Jobs run one at a time in the order asked (egglog keeps Python's lock while it works, so
    threads of its own would not run side by side either)."""

    def __init__(self):
        self.pid = os.getpid()
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name="eqsat-egraph", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        s = None
        while True:
            job, done = self.jobs.get()
            if done.set_running_or_notify_cancel():
                try:
                    if s is None:
                        s = Session()
                    done.set_result(job(s))
                except BaseException as e:  # the asking thread raises it
                    done.set_exception(e)
            job = done = None  # nothing of a finished job held here

    def run(self, job: Callable[[Session], T]) -> T:
        if threading.current_thread() is self.thread:
            raise RuntimeError("a session job asked for the session again: run it inside the job")
        done: Future = Future()
        self.jobs.put((job, done))
        return done.result()


_thread_lock = threading.Lock()
_thread: _SessionThread | None = None


def prepare() -> float:
    """Make the process's e-graph session now, if it is not made yet (its declarations and
    every registered rule compiled: about 0.5-1 s), and wait for the session's thread to be
    free. Returns the seconds that took. ``optimize_fusion`` calls it before its deadline
    starts, so no fusion's deadline pays for the set-up."""
    start = time.perf_counter()
    in_session(lambda s: None)
    return time.perf_counter() - start


def in_session(job: Callable[[Session], T]) -> T:
    """``job(session)``, run on the e-graph thread (:class:`_SessionThread`); its result, or
    its exception raised here. A job pushes the e-graph before its work and pops it after."""
    global _thread
    with _thread_lock:
        if _thread is None or _thread.pid != os.getpid():  # none yet, or a forked child
            _thread = _SessionThread()
        worker = _thread
    return worker.run(job)
