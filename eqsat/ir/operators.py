"""Python operators on definition values (``a + b``, ``-a``, ``a < b``...), as nvFuser's
Tensor and Scalar have them: each calls the definition's ``fd.ops``. Shared by the recorder's
values and the eager executor's."""


class Operators:
    """Python operators on fd values, as nvFuser's Tensor and Scalar have them; ``_fd.ops``
    does the work."""

    __slots__ = ()

    def _bin(op, swap=False):  # noqa: N805
        def method(self, other):
            a, b = (other, self) if swap else (self, other)
            return getattr(self._fd.ops, op)(a, b)

        return method

    __add__, __radd__ = _bin("add"), _bin("add", True)
    __sub__, __rsub__ = _bin("sub"), _bin("sub", True)
    __mul__, __rmul__ = _bin("mul"), _bin("mul", True)
    __truediv__, __rtruediv__ = _bin("div"), _bin("div", True)
    __pow__, __rpow__ = _bin("pow"), _bin("pow", True)
    __mod__ = _bin("fmod")
    __and__, __or__, __xor__ = _bin("bitwise_and"), _bin("bitwise_or"), _bin("bitwise_xor")
    __lt__, __le__, __gt__, __ge__ = _bin("lt"), _bin("le"), _bin("gt"), _bin("ge")
    del _bin

    def __neg__(self):
        return self._fd.ops.neg(self)

    def __abs__(self):
        return self._fd.ops.abs(self)

    __hash__ = object.__hash__
