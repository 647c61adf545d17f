"""Saturation: rulesets, a schedule, and limits that stop it cleanly.

One prepared EGraph per thread holds every declaration and compiled ruleset (compiling them
takes a fraction of a second, once); each fusion is worked on inside ``push``/``pop``. A run
alternates one pass of the chosen rewrite rules with the analysis rules to saturation, and
stops when nothing changes or at the first limit reached (iterations, e-nodes, wall time);
the e-graph is valid at every stop.
"""
from __future__ import annotations

import gc
import threading
import time
from dataclasses import dataclass, field
from typing import Iterable

from egglog import EGraph, ruleset, set_, unstable_combine_rulesets

from .analysis import analysis
from .egglog_text import program, run_text
from .egraph import Leaf, dtype_tables, labels
from .encode import Encoding

DEFAULT_LIMITS = {"iterations": 12, "nodes": 20_000, "seconds": 1.0}


@dataclass
class Limits:
    iterations: int = DEFAULT_LIMITS["iterations"]
    nodes: int = DEFAULT_LIMITS["nodes"]
    seconds: float = DEFAULT_LIMITS["seconds"]


@dataclass
class Saturation:
    """What a run did: ``stop`` is "saturated" or the limit that stopped it."""

    stop: str
    iterations: int
    nodes: int
    seconds: float
    fired: dict[str, int] = field(default_factory=dict)    # rule -> matches applied


def select_rules(rules: Iterable[str] | None = None, *, reassociate: bool = True,
                 exclude: Iterable[str] = ()) -> list[str]:
    """Rule names: all (or ``rules``), less the reassociating ones if ``reassociate`` is False,
    less ``exclude``. Unknown names are an error."""
    from .rules import RULES

    names = list(RULES) if rules is None else list(rules)
    unknown = [n for n in list(names) + list(exclude) if n not in RULES]
    if unknown:
        raise ValueError(f"unknown rules {unknown}; known: {', '.join(sorted(RULES))}")
    return [n for n in names if n not in set(exclude) and (reassociate or not RULES[n].reassociates)]


class Session:
    """A prepared EGraph (one per thread: egglog's EGraph is not thread-safe)."""

    def __init__(self):
        from .rules import RULES

        self.eg = EGraph()
        self.eg.register(set_(labels(Leaf(0))).to(0))       # declares the vocabulary
        self.eg.run(1, ruleset=analysis)
        self._rule_sets = {name: ruleset(rule.egglog(), name=f"rule:{name}") for name, rule in RULES.items()}
        self._combined: dict[tuple[str, ...], object] = {}
        self.counter = 0
        self.eg.run(0, ruleset=self.rewrites(tuple(RULES)))      # compiles every rule once

    def rewrites(self, names: tuple[str, ...]):
        from .rules import RULES

        for n in names:                     # a rule registered after this session began
            if n not in self._rule_sets:
                self._rule_sets[n] = ruleset(RULES[n].egglog(), name=f"rule:{n}")
        if names not in self._combined:
            self._combined[names] = unstable_combine_rulesets(*(self._rule_sets[n] for n in names),
                                                              name=f"rewrites{len(self._combined)}")
        return self._combined[names]

    def fresh_prefix(self) -> str:
        self.counter += 1
        return f"f{self.counter}_"

    def size(self) -> int:
        return sum(n for _, n in self.eg.all_function_sizes())

    def insert(self, enc: Encoding, prefix: str) -> None:
        nonneg = {t for t, n in enumerate(enc.graph.nodes) if n.op in ("Num", "Int") and n.attrs[0] >= 0}
        codes = set(enc.dtype.values()) | {n.attrs[0] for n in enc.graph.nodes if n.op == "Cast"}
        run_text(self.eg, dtype_tables(codes) + "\n" + program(enc.graph, prefix, enc.labels, enc.dtype, nonneg))

    def saturate(self, rules: tuple[str, ...], limits: Limits) -> Saturation:
        eg = self.eg
        start = time.perf_counter()
        eg.run(analysis.saturate())
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
            if iterations and time.perf_counter() - start + step_s * growth >= limits.seconds:
                stop = "time limit"
                break
            if iterations and nodes * growth >= 2 * limits.nodes:
                stop = "node limit"
                break
            step_start, before = time.perf_counter(), nodes
            report = eg.run(1, ruleset=rewrites)
            iterations += 1
            for key, count in report.num_matches_per_rule.items():
                name = getattr(key, "name", None) or str(key)
                if count:
                    fired[name] = fired.get(name, 0) + count
            eg.run(analysis.saturate())
            nodes = self.size()
            step_s, growth = time.perf_counter() - step_start, max(1.0, nodes / max(before, 1))
            if not report.updated:
                break
            if nodes >= limits.nodes:
                stop = "node limit"
                break
            if time.perf_counter() - start >= limits.seconds:
                stop = "time limit"
                break
        return Saturation(stop, iterations, self.size(), time.perf_counter() - start, fired)


class _SessionHolder:
    """Holds one thread's Session. egglog's EGraph must be dropped on the thread that made it;
    the holder is released when its thread ends (on that thread), and collects the session's
    reference cycles there, before the garbage collector could free them on another thread."""

    def __init__(self):
        self.session = Session()

    def __del__(self):
        self.session = None
        gc.collect()


_local = threading.local()


def session() -> Session:
    holder = getattr(_local, "holder", None)
    if holder is None:
        holder = _local.holder = _SessionHolder()
    return holder.session
