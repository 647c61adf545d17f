"""The dtype rules on dtype codes (:mod:`eqsat.egraph.terms`), as nvFuser applies them: what the
e-graph's dtype analysis tables hold and what the rule verifier computes with."""

from __future__ import annotations

from eqsat.ir import dtypes as dt
from eqsat.ir.axes import ScalarType, TensorType
from eqsat.ir.value_types import result_dtype

from .terms import DTYPE_CODE, DTYPES, WEAK_BOOL, WEAK_COMPLEX, WEAK_FLOAT, WEAK_INT

D = dt.DataType
WEAK = {WEAK_BOOL: True, WEAK_INT: 1, WEAK_FLOAT: 1.0, WEAK_COMPLEX: 1j}  # weak code -> an example


def has_torch(code: int) -> bool:
    try:
        dt.to_torch(DTYPES[code])
        return True
    except ValueError:
        return False


def floatify_code(c: int) -> int:
    """Float math (exp, rsqrt, mean...): integers to Float, bf16/fp16 computed in Float."""
    if c in WEAK:
        return WEAK_FLOAT if c in (WEAK_BOOL, WEAK_INT) else c
    d = DTYPES[c]
    return DTYPE_CODE[dt.compute_type(d)] if dt.is_float(d) or d in dt.COMPLEX_TYPES else DTYPE_CODE[D.Float]


def compute_code(c: int) -> int:
    """Arithmetic (add, mul, neg...) on one operand of code ``c``: bf16/fp16 give Float."""
    return c if c in WEAK else DTYPE_CODE[dt.compute_type(DTYPES[c])]


def abs_code(c: int) -> int:
    """``abs``: a complex dtype's real counterpart (nvFuser: |z| is real), any other dtype kept."""
    if c in WEAK:
        return WEAK_FLOAT if c == WEAK_COMPLEX else c
    return DTYPE_CODE[dt.real_type(DTYPES[c])]


def sum_code(c: int) -> int:
    """A sum or product: integers and bools give Int, floats keep their dtype."""
    if c in WEAK:
        return WEAK_INT if c in (WEAK_BOOL, WEAK_INT) else c
    d = DTYPES[c]
    return DTYPE_CODE[D.Int] if d in dt.INT_TYPES or d is D.Bool else c


def _operand(c: int):
    if c in WEAK:
        return ScalarType(
            {WEAK_BOOL: D.Bool, WEAK_INT: D.Int, WEAK_FLOAT: D.Double, WEAK_COMPLEX: D.ComplexDouble}[c]
        )
    return TensorType(DTYPES[c], ())


def promote_code(a: int, b: int) -> int:
    """Arithmetic promotion, as nvFuser does it (see axes.result_dtype)."""
    if a in WEAK and b in WEAK:
        return max(a, b)
    return DTYPE_CODE[result_dtype(_operand(a), _operand(b), arithmetic=True)]


def result_code(rule: str, codes: list[int]) -> int:
    """The dtype code of a term whose dtype follows ``rule`` (a :data:`~.terms.DTYPE_RULES`
    rule that reads its kids) from its kids' ``codes``: what the dtype analysis derives, for
    the rule verifier to compute with."""
    if rule == "same":
        return codes[0]
    if rule == "compute":
        return compute_code(codes[0])
    if rule == "abs":
        return abs_code(codes[0])
    if rule == "float":
        return floatify_code(codes[0])
    if rule == "sum":
        return sum_code(codes[0])
    if rule == "promote":
        out = codes[0]
        for c in codes[1:]:
            out = promote_code(out, c)
        return out
    raise ValueError(f"the dtype rule {rule!r} does not follow from the kids' dtypes alone")


def exact_widenings() -> list[tuple[int, int]]:
    """(narrow, wide) pairs where a cast narrow -> wide -> narrow is exact, bit for bit, in
    nvFuser: wide holds every value of narrow (NaN, +-inf, signed zeros; an integer type's
    whole range), and the cast back returns it. Not Float8_e5m2: nvFuser converts to FP8 with
    ``cvt.rn.satfinite`` (``runtime/casts.cu`` ``__float2e5m2``; the torch executor's
    ``cast_tensor`` does the same), which turns +-inf into +-57344, so an e5m2 infinity does
    not come back (e4m3fn has none; its NaN stays NaN). Not Float8 ->
    Double: the inline PTX of nvFuser's ``__e4m32double`` names a register it never declares.
    Float8_e4m3fn <-> BFloat16 goes through Half in nvFuser, which holds every e4m3fn value.
    Not Int -> Double, nor Int32 -> Float: the wide type's mantissa is shorter than the
    integer."""
    pairs = [
        (D.Half, D.Float),
        (D.Half, D.Double),
        (D.BFloat16, D.Float),
        (D.BFloat16, D.Double),
        (D.Float, D.Double),
        (D.Float8_e4m3fn, D.Half),
        (D.Float8_e4m3fn, D.BFloat16),
        (D.Float8_e4m3fn, D.Float),
        (D.Bool, D.Int32),
        (D.Bool, D.Int),
        (D.Int32, D.Int),
        (D.Int32, D.Double),
        (D.Bool, D.Float),
        (D.Bool, D.Double),
    ]
    return [(DTYPE_CODE[a], DTYPE_CODE[b]) for a, b in pairs]
