"""The deadline: a point in time the work on one fusion must end by, handed to every stage that
can stop (inserting the terms, the analyses, saturation, a cost-model estimate, extraction,
lowering). A stage the deadline stops raises or returns a :class:`Cut` naming the stage.

A backstop for pathological inputs, never what decides a normal result: work limits do
(docs/limits-and-deadline.md). A module of its own, importing nothing of eqsat's, since every
stage imports it.
"""

from __future__ import annotations

import time


class Cut(Exception):
    """The deadline stopped ``stage`` (as the report names it: "encoding", "extraction", ...);
    raised where a stage stops at once, returned where it ends with what it had."""

    def __init__(self, stage: str):
        super().__init__(stage)
        self.stage = stage


class Deadline:
    """``seconds`` from now (None: never). ``at`` is the ``time.perf_counter`` time it passes
    (None: never); ``began`` when it was made."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.began = time.perf_counter()
        self.at = None if seconds is None else self.began + seconds

    @classmethod
    def at_time(cls, at: float | None) -> "Deadline":
        """The deadline that passes at ``at`` (a ``perf_counter`` time; None: never)."""
        made = cls(None)
        if at is not None:
            made.seconds, made.at = at - made.began, at
        return made

    def passed(self, ahead: float = 0.0) -> bool:
        """Whether it has passed, or will have ``ahead`` seconds from now."""
        return self.at is not None and time.perf_counter() + ahead >= self.at

    def left(self) -> float:
        """Seconds until it passes (negative once passed; infinite where it never does)."""
        return float("inf") if self.at is None else self.at - time.perf_counter()

    def check(self, stage: str) -> None:
        """Raise ``Cut(stage)`` once it has passed."""
        if self.passed():
            raise Cut(stage)

    def earlier(self, seconds: float) -> "Deadline":
        """The deadline ``seconds`` before this one (what must stop early to leave them)."""
        return Deadline.at_time(None if self.at is None else self.at - seconds)

    def share(self, fraction: float) -> "Deadline":
        """The deadline by which ``fraction`` of the time left now will have passed."""
        if self.at is None:
            return Deadline(None)
        now = time.perf_counter()
        return Deadline.at_time(now + max(0.0, self.at - now) * fraction)

    def ends_before(self, other: "Deadline") -> bool:
        """Whether this one passes first (never: it does not)."""
        return self.at is not None and (other.at is None or self.at < other.at)


NEVER = Deadline(None)  # the default of a stage given no deadline
