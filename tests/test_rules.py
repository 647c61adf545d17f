"""The rule library: every rule verifies; a wrong rule does not."""

from pathlib import Path

import pytest
import torch

import eqsat
from eqsat import DataType
from eqsat.cli import main
from eqsat.egraph.analysis import dtype_rule, labels_rule
from eqsat.egraph.explore import explore
from eqsat.egraph.terms import BINARY_TERMS, IR_OP, REDUCTION_TERMS, SIGNATURES, TERMS, UNARY_TERMS
from eqsat.egraph.vocabulary import CONSTRUCTORS
from eqsat.ir.opspec import OPS
from eqsat.rules import FAMILIES, RULES, Axes, Correction, DType, Rule, Term, rule
from eqsat.rules.verify import verify, verify_rule


def test_every_rule_passes_verification():
    verdicts = verify(cases=25)
    failed = [(v.rule, v.problem) for v in verdicts if not v.passed]
    assert not failed
    assert all(v.cases == 25 for v in verdicts)


def _wrong_sum_over_both_factors(k, a: Term, b: Term, R: Axes):
    return k.Sum(R, k.Mul(a, b)), k.Mul(k.Sum(R, a), k.Sum(R, b)), []


def _wrong_max_of_product_without_sign(k, a: Term, c: Term, R: Axes):
    return k.Max(R, k.Mul(a, c)), k.Mul(k.Max(R, a), c), [k.constant_along(c, R)]


def _wrong_axes(k, a: Term, R: Axes):
    return k.Sum(R, a), a, [k.has_axes(R)]


@pytest.mark.parametrize(
    "fn", [_wrong_sum_over_both_factors, _wrong_max_of_product_without_sign, _wrong_axes]
)
def test_a_deliberately_wrong_rule_fails(fn):
    verdict = verify_rule(Rule("wrong", "test", fn), cases=40)
    assert not verdict.passed and verdict.problem


def test_a_rule_whose_conditions_never_hold_fails_instead_of_passing():
    def vacuous(k, a: Term, R: Axes):
        return k.Sum(R, a), a, [k.has_axes(R), k.disjoint(R, R)]

    verdict = verify_rule(Rule("vacuous", "test", vacuous), cases=10, max_draws=200)
    assert not verdict.passed and "never held" in verdict.problem


def test_rules_are_documented_and_grouped():
    assert {"distributive", "split", "algebra", "normalization"} <= set(FAMILIES)
    for r in RULES.values():
        assert r.doc, f"{r.name} has no docstring"
    assert any(r.reassociates for r in RULES.values())
    assert not RULES["split-max-lowest-axis-first"].reassociates


def test_cli_verify_exit_status(capsys):
    assert main(["rules", "verify", "add-commutes", "--cases", "5"]) == 0
    assert "1 passed, 0 failed" in capsys.readouterr().out
    assert main(["rules", "verify", "no-such-rule"]) == 2


# -- a rule's variables: their kinds are annotations, read once --------------------------------


def test_a_rule_variable_without_a_kind_is_refused_at_registration():
    with pytest.raises(ValueError, match="rule unkinded-for-test: variable b has no kind; annotate it"):

        @rule("algebra")
        def unkinded_for_test(k, a: Term, b):
            """a+b = b+a."""
            return k.Add(a, b), k.Add(b, a), []

    assert "unkinded-for-test" not in RULES

    def sum_over_an_int(k, a: Term, R: int):
        return k.Sum(R, a), a, []

    with pytest.raises(ValueError, match="rule wrong-kind: variable R has the kind <class 'int'>"):
        Rule("wrong-kind", "test", sum_over_an_int)


def test_every_rule_variable_has_its_kind():
    assert RULES["variance-as-sums"].variables == [("x", Term), ("R", Axes), ("C", Correction)]
    assert RULES["cast-round-trip"].variables == [("x", Term), ("D", DType), ("E", DType)]
    assert RULES["merge-nested-max"].variables == [("x", Term), ("R", Axes), ("S", Axes)]


def test_a_variables_kind_not_the_case_of_its_name_says_what_it_is():
    """Uppercase terms and a lowercase set of axes: every reader (egglog, the right side's
    shape, the verifier's draws) takes each for what its annotation says."""

    def factor_out(k, A: Term, B: Term, r: Axes):
        return (
            k.Sum(r, k.Mul(A, B)),
            k.Mul(k.Sum(r, k.acc(A)), B),
            [k.constant_along(B, r), k.floating(A), k.floating(B)],
        )

    renamed = Rule("renamed", "test", factor_out, reassociates=True, special_values="as the original")
    assert renamed.rhs_shape() == ("Mul", ("Sum", None), None)
    assert "Sum(r, Mul(A, B))" in str(renamed.egglog())
    assert verify_rule(renamed, cases=30).passed


# -- conditions mean what they say ---------------------------------------------------------------


def _sum_over_k_of_a_product(b_varies_along_k: bool):
    """sum_k(x[i,k] * b), b[i,k] (varying along k) or b[i,j] (constant along k)."""

    def define(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        if not b_varies_along_k:
            n, kk, j = fd.ops.size(x, dim=0), fd.ops.size(x, dim=1), fd.ops.size(b, dim=1)
            x = fd.ops.broadcast_in_dim(x, shape=[n, kk, j], broadcast_dims=[0, 1])
            b = fd.ops.broadcast_in_dim(b, shape=[n, kk, j], broadcast_dims=[0, 2])
        fd.add_output(fd.ops.sum(fd.ops.mul(x, b), dims=[1], keepdim=False, dtype=DataType.Null))

    return define


@pytest.mark.parametrize("b_varies_along_k", [True, False])
def test_constant_along_holds_only_where_the_factor_is_constant_along_the_axes(b_varies_along_k):
    fusion = eqsat.from_function(_sum_over_k_of_a_product(b_varies_along_k))
    fired = explore(fusion).fired
    factored = fired.get("sum-of-product-factor-right", 0) + fired.get("sum-of-product-factor-left", 0)
    assert (factored > 0) == (not b_varies_along_k)

    big = [torch.empty(512, 512, device="meta")] * 2
    opt = eqsat.optimize_fusion(fusion, big, min_gain=0.0)
    assert opt.report.changed == (not b_varies_along_k)
    g = torch.Generator().manual_seed(0)
    x, b = torch.randn(4, 5, generator=g), torch.randn(4, 5 if b_varies_along_k else 3, generator=g)
    want = (x * b).sum(1) if b_varies_along_k else (x[:, :, None] * b[:, None, :]).sum(1)
    torch.testing.assert_close(eqsat.run_fusion(opt.fusion, [x, b], strict=True)[0], want)


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("correction", [0, 1, 2])
def test_a_variance_becomes_sums_for_a_correction_of_0_or_1_over_axes_that_cannot_be_empty(
    correction, static
):
    # nvFuser divides by max(0, |R| - c): with c = 1 over an empty axis that is 0 * inf, NaN,
    # where the two-pass form gives 0 / -1 = -0.0; with c = 0 both are NaN
    def define(fd):
        shape = [3, 6] if static else [-1, -1]
        x = fd.define_tensor(shape=shape, contiguity=[True, True], dtype=DataType.Float)
        var, mean = fd.ops.var_mean(x, dims=[1], correction=correction)
        fd.add_output(var)
        fd.add_output(mean)

    fusion = eqsat.from_function(define)
    fired = explore(fusion).fired
    assert (fired.get("variance-as-sums", 0) > 0) == (correction == 0)
    assert (fired.get("corrected-variance-as-sums", 0) > 0) == (correction in (0, 1) and static)
    x = torch.randn(3, 6, generator=torch.Generator().manual_seed(1))
    opt = eqsat.optimize_fusion(fusion, [torch.empty(3, 6, device="meta")], min_gain=0.0)
    for got, want in zip(
        eqsat.run_fusion(opt.fusion, [x], strict=True),
        torch.var_mean(x, dim=1, correction=correction),
        strict=True,
    ):
        torch.testing.assert_close(got, want)
    if not static:  # the symbolic definition at an empty axis: torch's NaN (nvFuser's)
        got = eqsat.run_fusion(opt.fusion, [torch.zeros(3, 0)], strict=True)[0]
        assert got.isnan().all(), got


# -- the table of terms ---------------------------------------------------------------------------


def test_every_term_of_the_table_is_in_egglog_and_in_the_analyses():
    assert list(CONSTRUCTORS) == list(TERMS) == list(SIGNATURES)
    for spec in TERMS.values():
        made_labels, made_dtype = labels_rule(spec), dtype_rule(spec)
        assert (made_labels is None) == (spec.kind == "leaf"), spec.name
        assert (made_dtype is None) == (spec.dtype == "given"), spec.name


def test_every_term_that_is_an_ir_op_is_evaluated_encoded_and_lowered_as_that_op():
    """The op is one the recorder and the torch executor know, of the term's category, and
    encoding makes the term from it (lowering and the verifier go back through IR_OP)."""
    for spec in TERMS.values():
        if spec.ir_op is None:
            continue
        category = "reduction" if spec.kind == "reduction" else {1: "unary", 2: "binary"}[spec.kids]
        assert spec.ir_op in OPS and OPS[spec.ir_op].category == category, spec.name
        encoded_from = {"unary": UNARY_TERMS, "binary": BINARY_TERMS, "reduction": REDUCTION_TERMS}[category]
        assert encoded_from[spec.ir_op] == spec.name and IR_OP[spec.name] == spec.ir_op


# -- rules/README.md ------------------------------------------------------------------------------

README = Path(__file__).resolve().parent.parent / "rules" / "README.md"


def _python_blocks() -> list[str]:
    return [part.split("```")[0] for part in README.read_text().split("```python\n")[1:]]


def test_the_readme_shows_the_rule_as_the_code_has_it():
    rule_block = _python_blocks()[0]
    assert "def sum_of_product_factor_right(" in rule_block
    assert rule_block in (README.parent / "distributive.py").read_text()


def test_the_readmes_examples_print_what_their_comments_say(capsys):
    """Every example that prints says what in a comment (``...`` between the parts of a longer
    output): run, each part is in what it printed."""
    examples = [b for b in _python_blocks() if "print(" in b]
    assert len(examples) == 2
    for block in examples:
        exec(compile(block, str(README), "exec"), {"__name__": "readme_example"})
        printed = capsys.readouterr().out
        said = [
            line.split("# ", 1)[1]
            for line in block.splitlines()
            if line.startswith("print(") and "# " in line
        ]
        assert said
        for comment in said:
            for part in comment.split(" ... "):
                assert part.strip() in printed, (part, printed)
