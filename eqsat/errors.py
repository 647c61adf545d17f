"""The one error type that the project raises for bad input."""

from __future__ import annotations

import contextlib
import copy


class FusionError(Exception):
    """A fusion definition, repro file or input list that eqsat cannot accept.

    ``line`` is the definition line (in the user's file or function) and ``op`` the
    call (``fd.ops.add``, ``fd.define_tensor``...) that the problem was found at, where known.
    """

    def __init__(
        self, message: str, *, line: int | None = None, op: str | None = None, filename: str | None = None
    ):
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

    def in_file(self, filename: str | None) -> "FusionError":
        """This error naming ``filename``, where it names no file yet (else itself)."""
        if self.filename is not None or filename is None:
            return self
        err = copy.copy(self)
        FusionError.__init__(err, self.message, line=self.line, op=self.op, filename=filename)
        return err


@contextlib.contextmanager
def naming_file(filename: str | None):
    """Inside, a FusionError that names no file is raised again naming ``filename`` (None:
    as it is)."""
    try:
        yield
    except FusionError as err:
        named = err.in_file(filename)
        if named is err:
            raise
        raise named from None
