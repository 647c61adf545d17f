"""Rules on special values: what each rule claims about NaN, +-inf, signed zeros and integer
overflow, the flag that turns the inexact ones off, and a verifier that draws those values and
catches a rule that breaks them."""

import math

import pytest
import torch

import eqsat
from eqsat import DataType
from eqsat.cli import main
from eqsat.egraph.explore import explore
from eqsat.egraph.saturate import select_rules
from eqsat.egraph.terms import DTYPE_CODE
from eqsat.ir.dtypes import to_torch
from eqsat.rules import RULES, Axes, Rule, Term
from eqsat.rules.verify import special_values, values_for, verify, verify_rule

MAX_MIN_RULES = [
    "max-of-sum-with-constant",
    "max-of-sum-with-constant-left",
    "min-of-sum-with-constant",
    "max-of-difference-with-constant",
    "min-of-difference-with-constant",
    "max-of-product-with-nonnegative-constant",
    "min-of-product-with-nonnegative-constant",
    "max-of-quotient-by-nonnegative-constant",
    "min-of-quotient-by-nonnegative-constant",
]


# -- what each rule says -----------------------------------------------------------------------


def test_every_rule_states_what_it_assumes_about_special_values():
    for rule in RULES.values():
        said = rule.doc[rule.doc.find("Special values:") :].lower()
        assert "Special values:" in rule.doc, f"{rule.name} says nothing about special values"
        for word in ("nan", "inf", "zero", "overflow"):
            assert word in said, f"{rule.name}: its docstring says nothing of {word}"


def test_the_max_and_min_rules_that_turn_nan_into_inf_or_0_are_flagged():
    """The probe's finding: Max_R(a+b) with a = [-inf, 1], b = +inf is NaN, Max_R(a)+b is inf;
    Max_R(a*c) with c = exp(-inf) = 0 and a = [-inf, 1] is NaN, Max_R(a)*c is 0."""
    for name in MAX_MIN_RULES:
        assert RULES[name].special_values and not RULES[name].exact_on_special_values, name
    for name in ("add-commutes", "split-max-lowest-axis-first", "max-over-axes-it-lacks", "sum-of-negation"):
        assert RULES[name].exact_on_special_values, name


def test_no_reassociate_drops_the_rules_not_exact_on_special_values():
    strict = select_rules(reassociate=False)
    assert not set(MAX_MIN_RULES) & set(strict)
    assert all(RULES[n].exact_on_special_values for n in strict)
    assert "split-max-lowest-axis-first" in strict and "add-commutes" in strict
    exact_only = select_rules(special_values=False)  # keeps reassociation
    assert "sum-of-product-factor-right" not in exact_only  # flagged too: inf * 0
    assert "split-sum-lowest-axis-first" in exact_only and "max-of-sum-with-constant" not in exact_only
    assert set(select_rules()) == set(RULES)
    from eqsat.rules import select_rules as public  # importable with the rules too

    assert public is select_rules


def test_rules_list_shows_the_flags(capsys):
    assert main(["rules", "list"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "[special values]" in lines["max-of-sum-with-constant"]
    assert "[reassociates]" in lines["split-sum-lowest-axis-first"]
    assert "[special values]" not in lines["split-max-lowest-axis-first"]
    assert "[signed zeros]" in lines["add-commutes"]
    assert main(["rules", "list", "-v"]) == 0
    assert "Not exact on special values: b = +inf where a has -inf" in capsys.readouterr().out


# -- the optimizer: --no-reassociate keeps NaN and inf ------------------------------------------


def _max_of_sum(first: bool):
    def define(fd):
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        bb = fd.ops.broadcast_in_dim(b, shape=fd.ops.shape(a), broadcast_dims=[0])
        if first:
            fd.add_output(fd.ops.add(fd.ops.max(a, dims=[1]), b))
        else:
            fd.add_output(fd.ops.max(fd.ops.add(a, bb), dims=[1]))

    return define


def _max_of_product(first: bool):
    def define(fd):
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        y = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        c = fd.ops.exp(y)  # >= 0, and 0 for y = -inf
        if first:
            fd.add_output(fd.ops.mul(fd.ops.max(a, dims=[1]), c))
        else:
            cc = fd.ops.broadcast_in_dim(c, shape=fd.ops.shape(a), broadcast_dims=[0])
            fd.add_output(fd.ops.max(fd.ops.mul(a, cc), dims=[1]))

    return define


@pytest.mark.parametrize(
    "pattern, inputs",
    [
        (_max_of_sum, [torch.tensor([[-math.inf, 1.0]]), torch.tensor([math.inf])]),
        (_max_of_product, [torch.tensor([[-math.inf, 1.0]]), torch.tensor([-math.inf])]),
    ],
)
def test_without_reassociation_the_max_rules_that_change_nan_are_not_applied(pattern, inputs):
    given, rewritten = pattern(False), pattern(True)
    assert eqsat.run_fusion(eqsat.ingest(given), inputs, strict=True)[0].isnan().all()
    assert not eqsat.run_fusion(eqsat.ingest(rewritten), inputs, strict=True)[0].isnan().any()  # inf, or 0
    assert explore(given, contains=[rewritten]).contains == [True]  # with every rule
    assert explore(given, contains=[rewritten], reassociate=False).contains == [False]


def test_an_absolute_value_of_rsqrt_of_minus_zero_stays_plus_inf():
    """rsqrt(-0.0) is -inf, which the sign analysis took for >= 0: |rsqrt(x)| = rsqrt(x)
    turned +inf into -inf. The analysis now states rsqrt(x) >= 0 only where x has no -0.0,
    so the rule needs no flag, and the rewrite is made in no mode; where x is known to have
    no -0.0 (x*x + 1), it still is."""

    def given(fd):
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.abs(fd.ops.rsqrt(x)))

    def rewritten(fd):
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.rsqrt(x))

    x = torch.tensor([-0.0, 4.0])
    assert eqsat.run_fusion(eqsat.ingest(given), [x], strict=True)[0].tolist() == [math.inf, 0.5]
    assert eqsat.run_fusion(eqsat.ingest(rewritten), [x], strict=True)[0].tolist() == [-math.inf, 0.5]
    assert explore(given, contains=[rewritten], reassociate=False).contains == [False]
    assert explore(given, contains=[rewritten]).contains == [False]

    def given_square(fd):
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.abs(fd.ops.rsqrt(fd.ops.add(fd.ops.mul(x, x), 1.0))))

    def rewritten_square(fd):
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.rsqrt(fd.ops.add(fd.ops.mul(x, x), 1.0)))

    assert explore(given_square, contains=[rewritten_square], reassociate=False).contains == [True]


# -- integers that wrap around ------------------------------------------------------------------


def _int32(define):
    def wrapped(fd):
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int32)
        define(fd, a)

    return wrapped


INT_MIN, INT_MAX = -(2**31), 2**31 - 1


@pytest.mark.parametrize(
    "given, rewritten, a",
    [
        # -INT_MIN wraps to INT_MIN in Int32 before the Int64 sum; -sum(a) does not wrap
        (
            _int32(lambda fd, a: fd.add_output(fd.ops.sum(fd.ops.neg(a), dims=[1]))),
            _int32(lambda fd, a: fd.add_output(fd.ops.neg(fd.ops.sum(a, dims=[1])))),
            torch.tensor([[INT_MIN, 0]], dtype=torch.int32),
        ),
        # INT_MAX + 1 wraps to INT_MIN: max(a + 1) is 1, max(a) + 1 is INT_MIN
        (
            _int32(
                lambda fd, a: fd.add_output(
                    fd.ops.max(fd.ops.add(a, fd.define_scalar(1, dtype=DataType.Int)), dims=[1])
                )
            ),
            _int32(
                lambda fd, a: fd.add_output(
                    fd.ops.add(fd.ops.max(a, dims=[1]), fd.define_scalar(1, dtype=DataType.Int))
                )
            ),
            torch.tensor([[INT_MAX, 0]], dtype=torch.int32),
        ),
    ],
)
def test_integer_rewrites_that_wrap_differently_are_not_made(given, rewritten, a):
    want, other = (eqsat.run_fusion(eqsat.ingest(f), [a], strict=True)[0] for f in (given, rewritten))
    assert not torch.equal(want, other)
    assert explore(given, contains=[rewritten]).contains == [False]


# -- the verifier -------------------------------------------------------------------------------


def _max_of_product_unflagged(k, a: Term, c: Term, R: Axes):
    return (
        k.Max(R, k.Mul(a, c)),
        k.Mul(k.Max(R, a), c),
        [k.constant_along(c, R), k.nonneg(c), k.floating(k.Mul(a, c)), k.floating(a)],
    )


def _max_of_sum_unflagged(k, a: Term, b: Term, R: Axes):
    return (
        k.Max(R, k.Add(a, b)),
        k.Add(k.Max(R, a), b),
        [k.constant_along(b, R), k.floating(k.Add(a, b)), k.floating(a)],
    )


@pytest.mark.parametrize("fn", [_max_of_product_unflagged, _max_of_sum_unflagged])
def test_the_verifier_catches_a_rule_not_exact_on_special_values(fn):
    verdict = verify_rule(Rule("wrong", "test", fn), cases=100)
    assert not verdict.passed and "NaN" in verdict.problem and verdict.values == "all special"
    flagged = verify_rule(Rule("flagged", "test", fn, special_values="0 * inf"), cases=100)
    assert flagged.passed and flagged.values == "finite only"


def test_the_verifier_catches_integer_wrap_around():
    def sum_of_negation_in_any_dtype(k, a: Term, R: Axes):
        return k.Sum(R, k.Neg(a)), k.Neg(k.Sum(R, k.acc(a))), []

    verdict = verify_rule(Rule("wrong", "test", sum_of_negation_in_any_dtype), cases=200)
    assert not verdict.passed and "integer values differ" in verdict.problem
    assert verify_rule(RULES["sum-of-negation"], cases=200).passed


def _sum_of_product_factor_right_in_any_dtype(k, a: Term, b: Term, R: Axes):
    """sum-of-product-factor-right without its integer-wrap conditions (issue 37's mutant)."""
    return k.Sum(R, k.Mul(a, b)), k.Mul(k.Sum(R, k.acc(a)), b), [k.constant_along(b, R)]


def test_the_verifier_catches_a_flagged_rule_that_integer_wrap_around_breaks():
    """An Int32 product wraps where the right side's Int64 sum does not (a = INT_MAX, b = 2).
    The rule is flagged (reassociates, special values), so it was verified on finite floats
    and small integers alone, and the mutant passed: integers now get their limits whatever
    the flags."""
    rule = RULES["sum-of-product-factor-right"]
    mutant = Rule(
        "factor-out-in-any-dtype",
        "test",
        _sum_of_product_factor_right_in_any_dtype,
        reassociates=rule.reassociates,
        special_values=rule.special_values,
    )
    verdict = verify_rule(mutant, cases=100)
    assert not verdict.passed and "integer values differ" in verdict.problem, verdict
    assert verify_rule(rule, cases=100).passed
    limits = special_values(DTYPE_CODE[DataType.Int32], "finite only")["limits"]
    assert {-(2**31), 2**31 - 1, -1} <= set(limits) and 0 not in limits  # no 0: a float's x/0


def _max_over_axes_it_lacks_unguarded(k, x: Term, R: Axes):
    lacked = k.constant_axes(x, R)
    return k.Max(R, x), k.Max(k.varying_axes(x, R), x), [k.has_axes(lacked)]


def _max_of_sum_of_any_a(k, a: Term, b: Term, R: Axes):
    return k.Max(R, k.Add(a, b)), k.Add(k.Max(R, a), b), [k.constant_along(b, R), k.floating(k.Add(a, b))]


@pytest.mark.parametrize(
    "fn, flags",
    [
        (_max_over_axes_it_lacks_unguarded, {"signed_zeros": True}),
        (_max_of_sum_of_any_a, {"special_values": "as max-of-sum"}),
    ],
)
def test_the_verifier_catches_a_rule_that_holds_only_on_non_empty_axes(fn, flags):
    """The verifier draws empty axes (an optimized definition runs at any extent): the max of
    x over an axis it lacks is -inf there, not x, and an Int32 a's max is INT_MIN, not -inf."""
    verdict = verify_rule(Rule("wrong", "test", fn, **flags), cases=100)
    assert not verdict.passed and (
        "infinities differ" in verdict.problem or "integer values differ" in verdict.problem
    ), verdict


def test_the_verifier_checks_signed_zeros_where_a_rule_claims_them():
    def sum_of_negation(k, a: Term, R: Axes):  # Sum([-0.0, -0.0]) is +0.0, -Sum([0.0, 0.0]) is -0.0
        return k.Sum(R, k.Neg(a)), k.Neg(k.Sum(R, k.acc(a))), [k.floating(a)]

    verdict = verify_rule(Rule("claims", "test", sum_of_negation, signed_zeros=True), cases=200)
    assert not verdict.passed and "signed zeros differ" in verdict.problem
    assert verify_rule(Rule("claims not", "test", sum_of_negation), cases=200).passed


@pytest.mark.parametrize(
    "name",
    [
        "max-of-sum-with-constant",
        "max-of-product-with-nonnegative-constant",
        "sum-of-product-factor-right",
        "mean-as-sum",
    ],
)
def test_a_flag_is_needed_the_rule_fails_on_special_values(name):
    assert not verify_rule(RULES[name], cases=200, values="all special").passed


def test_what_each_rule_is_verified_on():
    assert values_for(RULES["add-commutes"]) == "all special"
    assert values_for(RULES["split-sum-lowest-axis-first"]) == "no overflow"
    assert values_for(RULES["max-of-sum-with-constant"]) == "finite only"
    (verdict,) = verify(["max-of-sum-with-constant"], cases=5)
    assert verdict.passed and verdict.values == "finite only"


def test_special_values_per_dtype():
    for dtype in (DataType.Float, DataType.Half, DataType.BFloat16, DataType.Double):
        drawn = [v for vs in special_values(DTYPE_CODE[dtype], "all special").values() for v in vs]
        info = torch.finfo(to_torch(dtype))
        assert any(math.isnan(v) for v in drawn) and math.inf in drawn and -math.inf in drawn
        assert {math.copysign(1, v) for v in drawn if v == 0} == {1.0, -1.0}
        assert info.max in drawn and -info.max in drawn and info.tiny in drawn
        assert -math.inf not in special_values(DTYPE_CODE[dtype], "no overflow", nonneg=True)["inf"]
        assert special_values(DTYPE_CODE[dtype], "finite only") == {}
    for dtype in (DataType.Int32, DataType.Int):
        info = torch.iinfo(to_torch(dtype))
        limits = special_values(DTYPE_CODE[dtype], "all special")["limits"]
        assert {info.min, info.max, info.min + 1, info.max - 1} <= set(limits)


def test_cli_verify_says_what_it_drew(capsys):
    assert main(["rules", "verify", "max-of-sum-with-constant", "add-commutes", "--cases", "5"]) == 0
    out = capsys.readouterr().out
    assert "finite only" in out and "all special" in out


# -- constants ----------------------------------------------------------------------------------


def test_a_nan_literal_is_kept_apart_from_every_other_constant():
    """fd.define_scalar(nan) next to inf, -inf, 0.0, -0.0 and 2.0: each sum of a product, made
    a product of the sum, keeps its own constant through saturation, extraction and lowering
    (NaN is equal to no float: the e-graph must neither merge it with another constant nor
    lose it)."""
    constants = [math.nan, math.inf, -math.inf, 0.0, -0.0, 2.0, math.nan]

    def define(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        for v in constants:
            s = fd.define_scalar(v, dtype=DataType.Double)
            fd.add_output(fd.ops.sum(fd.ops.mul(x, s), dims=[1]))

    fusion = eqsat.from_function(define)
    opt = eqsat.optimize_fusion(fusion, [torch.empty(4096, 4096, device="meta")], min_gain=0)
    assert opt.report.changed
    x = torch.tensor([[1.0, 2.0, 3.0], [0.5, 4.0, 1.0]])  # positive: no inf - inf
    want, got = eqsat.run_fusion(fusion, [x], strict=True), eqsat.run_fusion(opt.fusion, [x], strict=True)
    assert [w.isnan().all().item() for w in want] == [True, False, False, False, False, False, True]
    for w, g in zip(want, got, strict=True):
        assert torch.equal(w.isnan(), g.isnan())
        assert torch.equal(w[~w.isnan()], g[~g.isnan()])
    assert 'float("nan")' in opt.source and 'float("-inf")' in opt.source
