"""Where a random fusion's choices come from: a :class:`Chooser` gives integers in a range, and
picks and subsets from them; :class:`RandomChooser` draws them from a seed (``bench/fuzz.py``),
:class:`HypothesisChooser` from hypothesis's ``data.draw`` (the tests, which then shrink
failures)."""

from __future__ import annotations

import random
from typing import Any, Sequence


class Chooser:
    def int(self, lo: int, hi: int) -> int:  # inclusive
        raise NotImplementedError

    def pick(self, options: Sequence[Any]) -> Any:
        return options[self.int(0, len(options) - 1)]

    def subset(self, items: Sequence[Any], min_size: int = 0) -> list:
        if len(items) <= min_size:
            return list(items)
        while True:
            out = [x for x in items if self.int(0, 1)]
            if len(out) >= min_size:
                return out
            if len(items) == min_size:
                return list(items)


class RandomChooser(Chooser):
    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def int(self, lo, hi):
        return self.rng.randint(lo, hi)


class HypothesisChooser(Chooser):
    def __init__(self, data):
        from hypothesis import strategies as st  # deferred: hypothesis is a test dependency

        self._data, self._st = data, st

    def int(self, lo, hi):
        return self._data.draw(self._st.integers(lo, hi))
