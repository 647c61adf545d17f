"""Disjoint sets of hashable items (labels, or (node, label) pairs), for the segmenter's rules
that ask which axes nvFuser maps to one another within a kernel."""

from __future__ import annotations

from collections.abc import Hashable


class UnionFind:
    """Sets that start as singletons; :meth:`union` joins two, :meth:`find` names one's set."""

    def __init__(self) -> None:
        self.parent: dict[Hashable, Hashable] = {}

    def find(self, x: Hashable) -> Hashable:
        """The representative of ``x``'s set (``x`` itself if never joined)."""
        root = x
        while (up := self.parent.get(root, root)) != root:
            root = up
        while x != root:  # path compression
            self.parent[x], x = root, self.parent.get(x, x)
        return root

    def union(self, x: Hashable, y: Hashable) -> None:
        """Join ``x``'s set and ``y``'s."""
        x, y = self.find(x), self.find(y)
        if x != y:
            self.parent[x] = y
