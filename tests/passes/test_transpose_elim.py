"""`transpose-elim`: the transpose count drops and the semantics stay."""

from pathlib import Path

import numpy as np
import pytest

from plmr.dialects import graph
from plmr.dialects.context import load_module, make_context, parse_module
from plmr.passes.transpose_elim import TransposeElimPass, inverse, swaps_last_two
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import random_inputs, select_function

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def transposes(module) -> int:
    return sum(1 for op in module.walk() if isinstance(op, graph.TransposeOp))


def test_perm_helpers():
    assert swaps_last_two((0, 2, 1))
    assert swaps_last_two((1, 0))
    assert not swaps_last_two((1, 0, 2))
    assert not swaps_last_two((0,))
    assert inverse((2, 0, 1)) == (1, 2, 0)


CHAIN = """
func.func @main(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16x4xf32>) -> tensor<16x4xf32> {
  %wt = graph.transpose %w perm = [1, 0] : tensor<16x8xf32> -> tensor<8x16xf32>
  %y = graph.matmul %x, %wt : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %r = graph.relu %y : tensor<4x16xf32>
  %t = graph.transpose %r perm = [1, 0] : tensor<4x16xf32> -> tensor<16x4xf32>
  %s = graph.add %t, %b : (tensor<16x4xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
  func.return %s : tensor<16x4xf32>
}
"""


def test_chain_loses_its_transposes():
    module = parse_module(CHAIN)
    args = random_inputs(select_function(module, None), 0)
    before = evaluate_function(module, "main", args)
    TransposeElimPass().apply(make_context(), module)
    module.verify()
    # relu sinks the second transpose to the matmul, which absorbs it: (x·wᵀ)ᵀ = w·xᵀ.
    assert transposes(module) == 0
    np.testing.assert_allclose(
        evaluate_function(module, "main", args)[0], before[0], rtol=1e-5
    )


@pytest.mark.parametrize("name", ["onnx/attention.mlir", "onnx/transformer_block.mlir"])
def test_examples_keep_semantics_and_lose_transposes(name: str):
    module = load_module(EXAMPLES / name)
    fn = select_function(module, None)
    args = random_inputs(fn, 0)
    before = evaluate_function(module, fn.sym_name.data, args)
    count = transposes(module)
    TransposeElimPass().apply(make_context(), module)
    module.verify()
    assert transposes(module) <= count
    for a, b in zip(before, evaluate_function(module, fn.sym_name.data, args), strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
