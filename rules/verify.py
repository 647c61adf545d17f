"""``eqsat rules verify``: every rule's two sides, instantiated on random shapes, extents and
values, evaluated through the torch executor's ops, and compared.

Each value carries its dtype code, computed as the e-graph's dtype analysis does
(:mod:`eqsat.egraph.dtype_codes`: bf16/fp16 arithmetic gives Float, sums keep a float dtype...), and
is rounded to that dtype after every op: a rule whose sides differ in dtype fails, and one
that moves a rounding (a half-type sum where fp32 was accumulated) fails on its error.
Floating values are held in float64 (rounded to their dtype); integer values (Int32, Int64)
in their own dtype, so that they wrap around as nvFuser's do.

A rule's function is called with :class:`EvalNamespace`: its constructors evaluate
named-axis tensors (a torch tensor and the labels of its dims) with the torch executor's
op implementations, aligning operands by label; conditions evaluate to booleans. Variables
are drawn at random (tensors over random label subsets, in random dim orders, with extents
0 to 5: an optimized definition keeps symbolic extents symbolic and runs at any of them, an
empty axis and a size-1 one included; label masks; dtypes: floats, Int32/Int64 and Bool,
mixed among a rule's operands), cases whose conditions fail are drawn again, and a rule
whose conditions never held fails rather than passing vacuously. ``never_empty(R)`` holds
where every axis of R has an extent of 1 or more in the case drawn (in the e-graph: a static
extent, which every run has).

Special values are drawn into the tensors, per dtype (:func:`special_values`): NaN, +-inf,
+-0.0, huge and tiny floats; integers at and near their dtype's limits (INT_MIN, INT_MAX,
their neighbours, -1, 0). Which a rule gets follows what it claims (:func:`values_for`): a
rule exact on special values gets them all and must give NaN in the same places and the
same infinities (and, where it claims ``signed_zeros``, zeros of the same sign); a
reassociating rule gets NaN, +-inf and +-0.0 but no float that overflows; a rule flagged
``special_values`` gets finite floats only. Integers get their limits whatever the rule's
flags: the flags speak of floating-point NaN, inf and rounding, and integer results (which
wrap around, in any order alike) must agree exactly, so a rule that integer wrap-around
breaks fails whatever it is flagged.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch

from eqsat.egraph.dtype_codes import WEAK
from eqsat.egraph.terms import DTYPES
from eqsat.reference.compare import rtol_of

from . import RULES
from .evaluation import (
    BOOL_CODE,
    DOUBLE_CODE,
    EvalNamespace,
    FLOAT_CODES,
    INT_CODES,
    Named,
    WIDENS,
    is_float_code,
    rounded,
    torch_dtype,
)
from .rule import Axes, Axis, Correction, DType, Index, Term


@dataclass
class Verdict:
    rule: str
    cases: int
    worst_error: float
    passed: bool
    problem: str = ""
    values: str = ""  # the values drawn (VALUE_KINDS)


# what a rule's floating-point values may hold, from most to least: "all special" (every
# special value); "no overflow" (NaN, +-inf and +-0.0 but nothing that overflows: no huge and
# tiny floats); "finite only" (normal, nonzero values alone). Integers are drawn at their
# limits in every kind (see the module).
VALUE_KINDS = ("all special", "no overflow", "finite only")


def values_for(rule) -> str:
    """The floating-point values a rule is verified on: what it claims to be exact on
    (integers get their limits in every kind)."""
    if rule.special_values:
        return "finite only"
    return "no overflow" if rule.reassociates else "all special"


def special_values(code: int, kind: str, nonneg: bool = False, theme=None) -> dict[str, list]:
    """The special values drawn into a tensor of dtype ``code`` for ``kind`` (VALUE_KINDS), by
    category (:func:`_categories`), of the categories in ``theme`` (default: all); ``nonneg``:
    only those the sign analysis calls >= 0 (-0.0 and NaN among them)."""
    out = {}
    for name, values in _categories(code, kind).items():
        kept = [v for v in values if not nonneg or v >= 0 or math.isnan(v)]
        if kept and (theme is None or name in theme):
            out[name] = kept
    return out


CATEGORIES = ("zeros", "nan", "inf", "huge", "tiny", "limits")


def _categories(code: int, kind: str) -> dict[str, list]:
    """The special values of a dtype, by category. Integers: their limits, whatever ``kind``
    (wrap-around must agree exactly in every rule), 0 among them but where ``kind`` is finite
    only (a 0 divisor or factor of a float makes the special values that kind leaves out);
    bools none (False and True are drawn as normal values). Floats: none where ``kind`` is finite only; else
    zeros (+-0.0), NaN and
    +-inf, and where it is all special huge and tiny values."""
    if code == BOOL_CODE:
        return {}
    if not is_float_code(code):  # finite only: no 0 (a float's x/0, inf*0 are special)
        return {"limits": [v for v in _integer_limits(code) if v or kind != "finite only"]}
    if kind == "finite only":  # normal values alone (no 0 to divide by)
        return {}
    cats = {"zeros": [0.0, -0.0], "nan": [math.nan], "inf": [math.inf, -math.inf]}
    if kind == "all special":
        cats.update(_float_extremes(code))
    return cats


def _float_extremes(code: int) -> dict[str, list]:
    """Values that overflow when added or multiplied (the largest, half of it) and that
    underflow (the smallest normal, a subnormal), of both signs."""
    info = torch.finfo(torch_dtype(DTYPES[code if code in FLOAT_CODES else DOUBLE_CODE]))
    huge, tiny = [info.max, info.max / 2], [info.tiny, info.tiny / 4]
    return {"huge": huge + [-v for v in huge], "tiny": tiny + [-v for v in tiny]}


def _integer_limits(code: int) -> list[int]:
    """The dtype's limits, their neighbours, the least square that overflows, 0 and -1 (a
    divisor that overflows INT_MIN / -1, a factor that overflows -INT_MIN)."""
    info = torch.iinfo(torch_dtype(DTYPES[code]))
    root = math.isqrt(info.max) + 1
    return [info.min, info.min + 1, info.max, info.max - 1, root, -root, 0, -1]


def verify_rule(
    rule, *, cases: int = 60, seed: int = 0, max_draws: int = 4000, values: str | None = None
) -> Verdict:
    """Check ``rule`` on ``cases`` random cases whose conditions hold, drawing ``values``
    (VALUE_KINDS; default :func:`values_for` the rule)."""
    values = values or values_for(rule)
    rng = random.Random(f"{seed}:{rule.name}")
    done, worst, draws = 0, 0.0, 0
    while done < cases and draws < max_draws:
        draws += 1
        case = _draw_case(rule, rng, values)
        if case is None:
            continue
        done += 1
        lhs, rhs, leaves = case
        problem = _compare(lhs, rhs, leaves, values, rule.signed_zeros)
        if isinstance(problem, str):
            return Verdict(rule.name, done, math.inf, False, problem, values)
        worst = max(worst, problem[0])
        if problem[0] > problem[1]:
            return Verdict(
                rule.name,
                done,
                worst,
                False,
                f"sides differ by {problem[0]:.3g} (tolerance {problem[1]:.1g})",
                values,
            )
    if done == 0:
        return Verdict(rule.name, 0, 0.0, False, "its conditions never held on random cases", values)
    return Verdict(rule.name, done, worst, True, "", values)


def _draw_case(rule, rng: random.Random, values: str):
    """Both sides of ``rule`` on random variables, and the variables' dtype codes; None where
    the conditions fail or the values are outside an op's domain (integer division by 0)."""
    n_labels = rng.randint(1, 4)
    extents = {l: _draw_extent(rng) for l in range(n_labels)}
    extents[BATCH_LABEL] = BATCH  # in no mask, so in no reduction
    k = EvalNamespace(extents)
    # the categories of special values each batch instance meets, in all its variables
    themes = [{c for c in CATEGORIES if rng.random() < 0.5} for _ in range(BATCH)]
    # one case in four is an integer one, its terms of one integer dtype, most of them (an
    # Int32 product that wraps where a wider one does not needs two Int32 operands); one in
    # five mixes that dtype with floats half and half (an integer max over an empty axis is
    # no -inf); the rest draw each term's dtype on its own
    r = rng.random()
    integer = (rng.choice(INT_CODES), 0.7 if r < 0.25 else 0.5) if r < 0.45 else None
    env: list = []
    for _, kind in rule.variables:
        drawn_before = list(zip(env, (kind for _, kind in rule.variables)))
        if kind is Index:
            env.append(_draw_index(rng, extents, drawn_before))
            continue
        earlier = [
            v.dtype if isinstance(v, Named) else v for v, drawn in drawn_before if drawn in (Term, DType)
        ]
        env.append(_draw_variable(kind, rng, extents, values, themes, earlier, integer))
    try:
        lhs, rhs, conditions = rule.fn(k, *env)
    except ValueError:
        return None
    if not all(bool(c) for c in conditions):
        return None
    return lhs, rhs, [v.dtype for v in env if isinstance(v, Named)]


def _draw_extent(rng: random.Random) -> int:
    """An axis extent: 0 (an empty axis) one time in five, 1 (a size-1 one) in seven, else
    2, 3 or 5: the extents a symbolic definition meets at run time."""
    r = rng.random()
    return 0 if r < 0.2 else 1 if r < 0.35 else rng.choice([2, 3, 5])


# Most tensors also vary along a batch label that no mask holds: a case is BATCH independent
# instances of the rule (the same shapes, other values, other special values), so that rare
# meetings of special values (+inf in b where a has -inf) are met in a few dozen cases.
BATCH, BATCH_LABEL = 64, 8  # masks are drawn over labels 0 to 3


def _draw_variable(
    kind: type,
    rng: random.Random,
    extents: dict,
    values: str,
    themes=(None,),
    earlier=(),
    integer: tuple[int, float] | None = None,
):
    """A random value of a rule variable of ``kind`` (:data:`~eqsat.rules.rule.VARIABLE_KINDS`);
    ``earlier``: the dtype codes of the term and dtype variables drawn before it;
    ``integer``: the integer dtype many terms of the case have (None: any dtype,
    floats, integers and bools mixed), with the share of terms it is given to: the others an
    integer or bool (a share of 0.7) or a float (0.5)."""
    if kind is DType:
        return _draw_dtype(rng, earlier)
    if kind is Correction:
        return rng.choice([0, 1, 2, 3])
    if kind is Axes:  # not the batch label
        return rng.randrange(1, 1 << (len(extents) - 1)) if rng.random() < 0.9 else 0
    if kind is Axis:  # one label, not the batch label
        return 1 << rng.randrange(len(extents) - 1)
    assert kind is Term
    r = rng.random()
    if integer is not None:
        code, share = integer
        others = INT_CODES + [BOOL_CODE] if share > 0.5 else FLOAT_CODES
        code = code if r < share else rng.choice(others)
    else:
        code = (
            rng.choice(FLOAT_CODES)
            if r < 0.2
            else rng.choice(INT_CODES)
            if r < 0.35
            else BOOL_CODE
            if r < 0.4
            else DOUBLE_CODE
        )
    return _random_tensor(
        rng,
        extents,
        nonneg=rng.random() < 0.35,
        dtype=code,
        values=values if rng.random() < 0.8 else "finite only",
        themes=themes,
    )


def _draw_index(rng: random.Random, extents: dict, drawn_before) -> Named:
    """An index tensor (integers from -2 to 6: in and out of the range of an extent of 1 to 5;
    an indexing term takes them in range) over labels that fit the terms
    drawn before it: half the time a subset of the labels every earlier term varies along
    (less an earlier ``Axis``: take_along_axis's index), else one label none of them has
    (index_select's)."""
    terms = [v for v, kind in drawn_before if kind is Term]
    axes = 0
    for v, kind in drawn_before:
        if kind is Axis:
            axes |= v
    common = set.intersection(*(set(t.labels) for t in terms)) if terms else set(extents)
    common = [l for l in sorted(common) if not (1 << l) & axes or l == BATCH_LABEL]
    outside = [l for l in sorted(extents) if all(l not in t.labels for t in terms)]
    if outside and rng.random() < 0.5:
        labels = [rng.choice(outside)]
    else:
        labels = [l for l in common if rng.random() < 0.8]
        rng.shuffle(labels)
    g = torch.Generator().manual_seed(rng.randrange(1 << 30))
    code = rng.choice(INT_CODES)
    t = (torch.rand([extents[l] for l in labels], generator=g, dtype=torch.float64) * 9).floor() - 2  # -2..6
    return Named(rounded(t, code), tuple(labels), code)


def _draw_dtype(rng: random.Random, earlier) -> int:
    """A dtype code: half the time one that the last of ``earlier`` widens to exactly, a
    quarter of the time one of ``earlier``, so that the conditions of cast rules on a value's
    own dtype and its exact widenings (cast-round-trip, cast-after-exact-widening) hold on a
    fair share of the cases."""
    codes = FLOAT_CODES + INT_CODES
    r = rng.random()
    wider = sorted(w for n, w in WIDENS if earlier and n == earlier[-1] and w in codes)
    if wider and r < 0.5:
        return rng.choice(wider)
    seen = sorted({c for c in earlier if c in codes})
    if seen and r < 0.75:
        return rng.choice(seen)
    return rng.choice(codes)


def _random_tensor(
    rng: random.Random, extents, nonneg: bool, dtype, values: str = "finite only", themes=(None,)
) -> Named:
    """A tensor over a random subset of the labels (the batch label more often): normal
    values, and special values of ``values`` (:func:`special_values`), in each batch instance
    of the categories in its theme (``themes``)."""
    labels = [l for l in extents if rng.random() < (0.8 if l == BATCH_LABEL else 0.6)]
    rng.shuffle(labels)
    g = torch.Generator().manual_seed(rng.randrange(1 << 30))
    code = dtype if dtype is not None else DOUBLE_CODE
    t = _normal_values([extents[l] for l in labels], g, code, nonneg, false=values != "finite only")
    if values != "finite only" or not is_float_code(code):  # integers: their limits always
        if BATCH_LABEL not in labels:  # one instance: as a batch of one
            pools = [special_values(code, values, nonneg, themes[0])]
            t = _with_specials(t.unsqueeze(0), 0, rng, g, code, pools).squeeze(0)
        else:
            dim = labels.index(BATCH_LABEL)
            pools = [special_values(code, values, nonneg, theme) for theme in themes]
            t = _with_specials(t, dim, rng, g, code, pools)
    return Named(t, tuple(labels), code)


def _normal_values(
    shape: list[int], g: torch.Generator, code: int, nonneg: bool, false: bool = True
) -> torch.Tensor:
    """Standard normal values rounded to ``code``; integers -50..50 but 0 (as normal floats
    are never 0: 0 is a special value); bools False and True alike (``false``), or True alone
    (False is a 0 in arithmetic)."""
    t = torch.randn(shape, generator=g, dtype=torch.float64)
    if code == BOOL_CODE:
        return t > 0 if false else torch.ones(shape, dtype=torch.bool)
    if not is_float_code(code):
        t = (t * 20).round()
        t = torch.where(t == 0, torch.ones_like(t), t)
    return rounded(t.abs() if nonneg else t, code)


def _with_specials(
    t: torch.Tensor, dim: int, rng: random.Random, g: torch.Generator, code: int, pools: list[dict]
) -> torch.Tensor:
    """``t`` with special values in each batch instance (index ``i`` along ``dim``): one to
    three values of ``pools[i]`` (by category, :func:`special_values`) at random places (a
    random share of them, up to all): few at a time, so that +inf in one operand meets -inf
    or 0 in another. Integers are placed in their own dtype (an int64 limit is no float64
    value), floats rounded to ``code``."""
    rows = t.movedim(dim, 0)
    flat = rows.reshape(rows.shape[0], -1)
    few, share = [], []
    for pool in pools:
        drawn = (
            [rng.choice(pool[rng.choice(sorted(pool))]) for _ in range(rng.randint(1, 3))] if pool else [0]
        )
        few.append([drawn[j % len(drawn)] for j in range(3)])
        share.append(rng.choice([0.2, 0.5, 1.0]) if pool else 0.0)
    few = rounded(torch.tensor(few, dtype=t.dtype), code)
    at = (
        torch.rand(flat.shape, generator=g, dtype=torch.float64)
        < torch.tensor(share, dtype=torch.float64)[:, None]
    )
    chosen = torch.gather(few, 1, torch.randint(3, flat.shape, generator=g))
    return torch.where(at, chosen, flat).reshape(rows.shape).movedim(0, dim)


def _compare(lhs: Named, rhs: Named, leaf_codes=(), values: str = "finite only", signed_zeros: bool = False):
    """(relative error, tolerance), or a message when the sides disagree in kind: different
    axes or dtypes, integers that differ, NaNs in different places, different infinities, or
    (``signed_zeros``) zeros of different signs. Finite values are compared relative to the
    largest of them (to each one where huge values are drawn), within the tolerance of the
    least precise dtype among the sides and the variables."""
    if sorted(lhs.labels) != sorted(rhs.labels):
        return f"the sides vary along different axes: {sorted(lhs.labels)} vs {sorted(rhs.labels)}"
    if lhs.dtype != rhs.dtype:
        name = lambda c: "weak scalar" if c in WEAK else DTYPES[c].name  # noqa: E731
        return f"the sides have different dtypes: {name(lhs.dtype)} vs {name(rhs.dtype)}"
    a, b = lhs.t, rhs.aligned(lhs.labels).reshape(lhs.t.shape)
    if not a.is_floating_point():
        return (0.0, 0.0) if torch.equal(a, b) else f"integer values differ: {_example(a, b, a != b)}"
    dtypes = [DTYPES[c] for c in (lhs.dtype, rhs.dtype, *leaf_codes) if c not in WEAK]
    # the two sides round differently, by the tolerance of the least precise dtype involved
    # (the one table of eqsat.reference.compare); integers must agree exactly (above)
    tol = max((rtol_of(d, 1e-9) for d in dtypes), default=1e-9)
    return _special_mismatch(a, b, signed_zeros) or (_relative_error(a, b, lhs.labels, values), tol)


def _relative_error(a: torch.Tensor, b: torch.Tensor, labels, values: str) -> float:
    """The largest difference of finite values (NaN and inf already agree), relative to the
    largest value of its batch instance (at least 1), or to its own size where huge values
    are drawn."""
    if a.numel() == 0:  # an empty result: nothing to differ
        return 0.0
    finite = a.isfinite()
    zero = torch.zeros((), dtype=a.dtype)
    if values == "all special":
        scale = torch.maximum(a.abs(), b.abs())
    else:
        others = [i for i, l in enumerate(labels) if l != BATCH_LABEL]
        scale = torch.where(finite, a.abs(), zero)
        scale = scale.amax(dim=others, keepdim=True) if others else scale
    relative = torch.where(finite, (a - b).abs() / scale.clamp(min=1.0), zero)
    return float(relative.max()) if relative.numel() else 0.0


def _special_mismatch(a: torch.Tensor, b: torch.Tensor, signed_zeros: bool) -> str | None:
    """Why ``a`` and ``b`` differ in NaN places, infinities or (``signed_zeros``) the sign of
    zeros, or None."""
    if not torch.equal(a.isnan(), b.isnan()):
        return f"NaNs in different places: {_example(a, b, a.isnan() != b.isnan())}"
    inf = a.isinf() | b.isinf()
    if not torch.equal(a[inf], b[inf]):
        return f"infinities differ: {_example(a, b, inf & (a != b))}"
    zeros = (a == 0) & (b == 0)
    if signed_zeros and not torch.equal(a[zeros].signbit(), b[zeros].signbit()):
        return f"signed zeros differ: {_example(a, b, zeros & (a.signbit() != b.signbit()))}"
    return None


def _example(a: torch.Tensor, b: torch.Tensor, where: torch.Tensor) -> str:
    i = where.nonzero()[0].tolist() if where.any() else []
    return f"{a[tuple(i)].item()!r} vs {b[tuple(i)].item()!r}"


def verify(names=None, *, cases: int = 100, seed: int = 0) -> list[Verdict]:
    names = list(RULES) if not names else list(names)
    unknown = [n for n in names if n not in RULES]
    if unknown:
        raise ValueError(f"unknown rules {unknown}; known: {', '.join(sorted(RULES))}")
    return [verify_rule(RULES[n], cases=cases, seed=seed) for n in names]
