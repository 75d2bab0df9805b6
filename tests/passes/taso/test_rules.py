"""Rules as data: the MLIR text form, parsing errors, listing, instantiation."""

import pytest

from plmr.errors import PlmrError
from plmr.passes.taso.rules import (
    DEFAULT_RULES,
    describe_rule,
    load_rules,
    parse_rules,
    rule_functions,
    rules_text,
)


@pytest.fixture(scope="module")
def shipped():
    return load_rules()


def test_shipped_rules_round_trip(shipped):
    again = parse_rules(rules_text(shipped))
    assert again == shipped


def test_text_has_one_function_pair_per_rule(shipped):
    text = DEFAULT_RULES.read_text()
    assert text.count("func.func @rule_") == 2 * len(shipped)
    assert "func.func @rule_1_src" in text
    assert "func.func @rule_1_dst" in text


def test_listing_is_one_line_per_rule(shipped):
    lines = [describe_rule(r) for r in shipped]
    assert all("\n" not in line and " => " in line for line in lines)
    assert any("split[1](matmul(x0, concat[1](x1, x2)))" in line for line in lines)


def test_rule_functions_at_other_sizes(shipped):
    rule = next(r for r in shipped if not r.pointwise and len(r.symbols) >= 3)
    src, dst = rule_functions(rule, {s: 3 for s in rule.symbols})
    assert src.function_type == dst.function_type
    assert all(d in (1, 3) for t in src.function_type.inputs.data for d in t.get_shape())


GOOD = """
func.func @r_src(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x4xf32> attributes {plmr.symbols = array<i64: 2, 4>, plmr.pointwise} {
  %0 = graph.add %a, %b : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %1 = graph.relu %0 : tensor<2x4xf32>
  func.return %1 : tensor<2x4xf32>
}
func.func @r_dst(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = graph.add %b, %a : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %1 = graph.relu %0 : tensor<2x4xf32>
  func.return %1 : tensor<2x4xf32>
}
"""


def test_parse_hand_written_rule():
    (rule,) = parse_rules(GOOD)
    assert rule.name == "r"
    assert rule.pointwise
    assert rule.symbols == {2, 4}
    assert describe_rule(rule) == "r: relu(add(x0, x1)) => relu(add(x1, x0))  [any shape]"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD.replace("@r_dst", "@q_dst"), "has no matching @r_dst"),
        (GOOD.replace("graph.relu %0", "graph.tanh %0"), "not in the substitution op set"),
        (
            GOOD.replace(
                "graph.relu %0 : tensor<2x4xf32>",
                "graph.scale %0 by 2.0 : tensor<2x4xf32>",
                1,
            ),
            "must appear on both sides",
        ),
        (GOOD.replace("@r_src", "@r_source"), "named @<rule>_src"),
    ],
)
def test_bad_rule_files_are_user_errors(text, message):
    with pytest.raises(PlmrError, match=message):
        parse_rules(text)


def test_missing_rule_file():
    with pytest.raises(PlmrError, match="no such rule file"):
        load_rules("/nonexistent/rules.mlir")
