"""The rule verifier: random exact-integer tests, Z3 proofs, and mutants it must reject."""

from dataclasses import replace

import pytest

from plmr.passes.taso.rules import INPUT, PatOp, Pattern, Rule, load_rules
from plmr.passes.taso.verifier import check_rules, mutants, prove, random_test

X, W1, W2 = (INPUT, 0), (INPUT, 1), (INPUT, 2)


def _rule(src: Pattern, dst: Pattern, inputs=((2, 4), (4, 5), (4, 5))) -> Rule:
    return Rule("r", inputs, src, dst, frozenset({2, 4, 5}))


def _mm(a, b):
    return PatOp("matmul", (False, False), (a, b))


DISTRIBUTIVITY = _rule(
    Pattern((_mm(X, W1), _mm(X, W2), PatOp("add", (), ((0, 0), (1, 0)))), ((2, 0),)),
    Pattern((PatOp("add", (), (W1, W2)), _mm(X, (0, 0))), ((1, 0),)),
)


def test_true_rule_passes_both_checks():
    assert random_test(DISTRIBUTIVITY).ok
    assert random_test(DISTRIBUTIVITY).shapes == 3
    assert prove(DISTRIBUTIVITY).status == "proved"


def test_matmul_does_not_commute():
    wrong = _rule(
        Pattern((_mm(X, W1),), ((0, 0),)),
        Pattern((_mm(W1, X),), ((0, 0),)),
        inputs=((4, 4), (4, 4), (4, 4)),
    )
    wrong = replace(wrong, symbols=frozenset({4}))
    assert not random_test(wrong).ok
    result = prove(wrong)
    assert result.status == "refuted"


def test_relu_does_not_distribute_over_add():
    wrong = Rule(
        "r",
        ((2, 4), (2, 4)),
        Pattern(
            (PatOp("add", (), ((INPUT, 0), (INPUT, 1))), PatOp("relu", (), ((0, 0),))),
            ((1, 0),),
        ),
        Pattern(
            (
                PatOp("relu", (), ((INPUT, 0),)),
                PatOp("relu", (), ((INPUT, 1),)),
                PatOp("add", (), ((0, 0), (1, 0))),
            ),
            ((2, 0),),
        ),
        frozenset({2, 4}),
        pointwise=True,
    )
    assert not random_test(wrong).ok
    assert prove(wrong).status == "refuted"


def test_mutants_of_a_multi_output_rule_are_rejected():
    split_rule = _rule(
        Pattern(
            (
                PatOp("concat", (1,), (W1, W2)),
                _mm(X, (0, 0)),
                PatOp("split", (1, (5, 5)), ((1, 0),), 2),
            ),
            ((2, 0), (2, 1)),
        ),
        Pattern((_mm(X, W1), _mm(X, W2)), ((0, 0), (1, 0))),
        inputs=((2, 4), (4, 5), (4, 6)),
    )
    split_rule = replace(
        split_rule,
        symbols=frozenset({2, 4, 5, 6}),
        src=Pattern(
            (
                PatOp("concat", (1,), (W1, W2)),
                _mm(X, (0, 0)),
                PatOp("split", (1, (5, 6)), ((1, 0),), 2),
            ),
            ((2, 0), (2, 1)),
        ),
    )
    assert random_test(split_rule).ok
    assert prove(split_rule).status == "proved"
    swapped = replace(split_rule, dst=split_rule.src, src=split_rule.dst)
    found = mutants(swapped)
    kinds = {what.split(" #")[0] for what, _ in found}
    assert "swap operands of concat" in kinds
    for _, mutant in found:
        assert not random_test(mutant).ok
        assert prove(mutant).status == "refuted"


def test_axis_mutant_is_rejected():
    a, b = (INPUT, 0), (INPUT, 1)
    rule = Rule(
        "r",
        ((2, 4), (2, 4)),
        Pattern(
            (
                PatOp("relu", (), (a,)),
                PatOp("relu", (), (b,)),
                PatOp("concat", (1,), ((0, 0), (1, 0))),
            ),
            ((2, 0),),
        ),
        Pattern((PatOp("concat", (1,), (a, b)), PatOp("relu", (), ((0, 0),))), ((1, 0),)),
        frozenset({2, 4}),
    )
    assert random_test(rule).ok
    found = dict(mutants(rule))
    assert set(found) == {"swap operands of concat #0", "axis 0 for concat #0"}
    for mutant in found.values():
        assert not random_test(mutant).ok
        assert prove(mutant).status == "refuted"


@pytest.fixture(scope="module")
def shipped():
    return load_rules()


def test_every_shipped_rule_passes_random_tests_and_z3(shipped):
    checks = check_rules(shipped, trials=3, use_z3=True, timeout_ms=2000)
    assert len(checks) == len(shipped) > 300
    assert all(c.random.ok for c in checks), [c.line() for c in checks if not c.random.ok]
    assert not [c for c in checks if c.proof.status == "refuted"]
    proved = sum(c.proof.status == "proved" for c in checks)
    assert proved >= 0.95 * len(checks)
    assert "random: ok (3 sizes); z3: proved" in checks[0].line()


def test_every_mutant_of_a_shipped_rule_is_rejected(shipped):
    total = 0
    for rule in shipped:
        for what, mutant in mutants(rule):
            total += 1
            if random_test(mutant).ok:
                # Only a mutant that is provably the same function may survive
                # (e.g. swapping the two equal factors of x·x).
                assert prove(mutant).status == "proved", f"{rule.name}: {what}"
    assert total > 300
