"""The rule library: every rule verifies; a wrong rule does not."""
import pytest

from eqsat.cli import main
from eqsat.rules import FAMILIES, RULES, Rule
from eqsat.rules.verify import verify, verify_rule


def test_every_rule_passes_verification():
    verdicts = verify(cases=25)
    failed = [(v.rule, v.problem) for v in verdicts if not v.passed]
    assert not failed
    assert all(v.cases == 25 for v in verdicts)


def _wrong_sum_over_both_factors(k, a, b, R):
    return k.Sum(R, k.Mul(a, b)), k.Mul(k.Sum(R, a), k.Sum(R, b)), []


def _wrong_max_of_product_without_sign(k, a, c, R):
    return k.Max(R, k.Mul(a, c)), k.Mul(k.Max(R, a), c), [k.disjoint(k.labels(c), R)]


def _wrong_axes(k, a, R):
    return k.Sum(R, a), a, [k.nonzero(R)]


@pytest.mark.parametrize("fn", [_wrong_sum_over_both_factors, _wrong_max_of_product_without_sign,
                                _wrong_axes])
def test_a_deliberately_wrong_rule_fails(fn):
    verdict = verify_rule(Rule("wrong", "test", fn), cases=40)
    assert not verdict.passed and verdict.problem


def test_a_rule_whose_conditions_never_hold_fails_instead_of_passing():
    def vacuous(k, a, R):
        return k.Sum(R, a), a, [k.nonzero(R), k.disjoint(R, R)]

    verdict = verify_rule(Rule("vacuous", "test", vacuous), cases=10, max_draws=200)
    assert not verdict.passed and "never held" in verdict.problem


def test_rules_are_documented_and_grouped():
    assert {"distributive", "split", "algebra", "normalization"} <= set(FAMILIES)
    for rule in RULES.values():
        assert rule.doc, f"{rule.name} has no docstring"
    assert any(r.reassociates for r in RULES.values())
    assert not RULES["split-max-lowest-axis-first"].reassociates


def test_cli_verify_exit_status(capsys):
    assert main(["rules", "verify", "add-commutes", "--cases", "5"]) == 0
    assert "1 passed, 0 failed" in capsys.readouterr().out
    assert main(["rules", "verify", "no-such-rule"]) == 2
