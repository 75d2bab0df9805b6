"""Delta debugging keeps a failure while it drops results, ops and arguments."""

from plmr.dialects.context import parse_module
from plmr.validate.fuzz.driver import Config, Outcome
from plmr.validate.fuzz.minimize import minimize

PROGRAM = """
func.func @main(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %c: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %e = graph.exp %b : tensor<4x8xf32>
  %t = graph.tanh %e : tensor<4x8xf32>
  %d = graph.sub %a, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %f = graph.add %d, %c : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %s = graph.reduce sum %a axes = [1] : tensor<4x8xf32> -> tensor<4xf32>
  func.return %f, %s : tensor<4x8xf32>, tensor<4xf32>
}
"""


def test_minimize_keeps_only_what_the_failure_needs():
    def fails(text: str) -> bool:
        return "graph.tanh" in text

    text, _ = minimize(PROGRAM, Config(), Outcome("crash", "x"), 1e-3, 60.0, fails=fails)
    module = parse_module(text)
    names = [op.name for op in module.walk()]
    assert names.count("graph.tanh") == 1
    assert "graph.exp" not in names
    assert "graph.reduce" not in names
    assert "graph.add" not in names
    assert "graph.sub" not in names
