"""The one error type that the project raises for bad input."""
from __future__ import annotations


class FusionError(Exception):
    """A fusion definition, repro file or input list that eqsat cannot accept.

    ``line`` is the definition line (in the user's file or function) and ``op`` the
    call (``fd.ops.add``, ``fd.define_tensor``...) that the problem was found at, where known.
    """

    def __init__(self, message: str, *, line: int | None = None, op: str | None = None,
                 filename: str | None = None):
        self.message = message
        self.line = line
        self.op = op
        self.filename = filename
        where = []
        if filename:
            where.append(str(filename))
        if line is not None:
            where.append(f"line {line}")
        prefix = ":".join(where)
        if op:
            prefix = f"{prefix}: {op}" if prefix else op
        super().__init__(f"{prefix}: {message}" if prefix else message)
