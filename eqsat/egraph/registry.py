"""The rule registry: every rewrite rule by name. ``eqsat.rules`` (and a user's own rule
modules) register into it with ``@rule``; saturation reads it. It lives here, below both, so
that the e-graph does not import the rules written in its vocabulary (importing ``eqsat``
imports ``eqsat.rules``, so the packaged rules are always registered)."""

from __future__ import annotations

from typing import Any

RULES: dict[str, Any] = {}  # name -> eqsat.rules.rule.Rule
