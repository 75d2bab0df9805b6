"""
Tests of `convert-loop-to-scf`: the `scf` / `memref` programs run on xDSL's own
interpreter (with the scalar ops it lacks added) and agree with the loop-level reference.
"""

from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType

from plmr.dialects.context import load_module, parse_module
from plmr.errors import PlmrError
from plmr.lowering.graph_to_loop import ConvertGraphToLoopPass
from plmr.lowering.loop_to_scf import ConvertLoopToScfPass
from plmr.passes.neptune.fuse import NeptuneFusePass
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import random_inputs, select_function
from plmr.runtime.xdsl_interp import run_with_xdsl

ROOT = Path(__file__).resolve().parents[2]

SMALL_ATTENTION = """
func.func @main(%q: tensor<4x8xf32>, %k: tensor<6x8xf32>, %v: tensor<6x8xf32>) -> tensor<4x8xf32> {
  %s = graph.matmul %q, %k transpose_b : (tensor<4x8xf32>, tensor<6x8xf32>) -> tensor<4x6xf32>
  %p = graph.softmax %s : tensor<4x6xf32>
  %o = graph.matmul %p, %v : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  func.return %o : tensor<4x8xf32>
}
"""

PADDED = """
func.func @main(%x: tensor<1x1x5x5xf32>, %w: tensor<2x1x3x3xf32>) -> tensor<1x2x3x3xf32> {
  %y = graph.conv2d %x, %w strides = [2, 2] pads = [1, 1, 1, 1] : (tensor<1x1x5x5xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2x3x3xf32>
  %z = graph.tanh %y : tensor<1x2x3x3xf32>
  func.return %z : tensor<1x2x3x3xf32>
}
"""


@pytest.mark.parametrize(
    ("text", "fuse"),
    [(SMALL_ATTENTION, False), (SMALL_ATTENTION, True), (PADDED, False)],
    ids=["attention", "fused-attention", "padded-conv"],
)
def test_scf_programs_run_on_xdsls_interpreter(text: str, fuse: bool):
    module = parse_module(text)
    ConvertGraphToLoopPass().apply(Context(), module)
    if fuse:
        NeptuneFusePass(remarks=False).apply(Context(), module)
    args = random_inputs(select_function(module, None), 0)
    want = evaluate_function(module, "main", args)
    ConvertLoopToScfPass().apply(Context(), module)
    module.verify()
    fn = select_function(module, None)
    assert all(isinstance(t, MemRefType) for t in fn.function_type.inputs.data)
    assert not [op for op in module.walk() if op.dialect_name() == "loop"]
    got = run_with_xdsl(module, "main", args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_constants_become_globals():
    module = load_module(ROOT / "examples" / "onnx" / "mlp.mlir")
    ConvertGraphToLoopPass().apply(Context(), module)
    args = random_inputs(select_function(module, None), 0)
    want = evaluate_function(module, "main", args)
    ConvertLoopToScfPass().apply(Context(), module)
    module.verify()
    assert any(op.name == "memref.global" for op in module.ops)
    (got,) = run_with_xdsl(module, "main", args)
    np.testing.assert_allclose(got, want[0], rtol=1e-4, atol=1e-5)


def test_graph_ops_are_rejected():
    module = parse_module(SMALL_ATTENTION)
    with pytest.raises(PlmrError, match="is not at the loop level"):
        ConvertLoopToScfPass().apply(Context(), module)
    assert isinstance(next(iter(module.ops)), func.FuncOp)
