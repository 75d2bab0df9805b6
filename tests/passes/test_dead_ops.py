"""`erase_dead`: what a rewrite leaves unused goes, transitively; what is used stays."""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects import graph
from plmr.dialects.context import parse_module
from plmr.passes.dead_ops import erase_dead

PROGRAM = """
func.func @main(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = "graph.add"(%x, %y) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %b = "graph.mul"(%a, %a) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %c = graph.exp %b : tensor<4x4xf32>
  %d = graph.relu %a : tensor<4x4xf32>
  func.return %d : tensor<4x4xf32>
}
"""


def _names(module: ModuleOp) -> list[str]:
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    return [op.name for op in fn.body.block.ops]


def test_erases_the_chain_left_unused_and_keeps_what_is_read() -> None:
    module = parse_module(PROGRAM, "<test>")
    exp = next(op for op in module.walk() if isinstance(op, graph.ExpOp))
    erase_dead(exp)
    # exp and mul go; add stays: relu still reads it.
    assert _names(module) == ["graph.add", "graph.relu", "func.return"]


def test_an_op_still_used_stays() -> None:
    module = parse_module(PROGRAM, "<test>")
    add = next(op for op in module.walk() if isinstance(op, graph.AddOp))
    erase_dead(add.result)
    assert _names(module) == [
        "graph.add",
        "graph.mul",
        "graph.exp",
        "graph.relu",
        "func.return",
    ]
