"""
The graph passes on the ops of ONNX models (where, cmp, logic, casts, abs, log, floor,
ceil, reciprocal, pow, maximum, minimum, slice, expand, pad, gather_elements): TASO
substitution and transpose elimination treat them as opaque or elementwise, keep the
program's semantics, and the cost model prices them (data movement as moves).
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import func

from plmr.dialects import graph
from plmr.dialects.context import parse_module
from plmr.passes.taso.cost import ELEMENT_WORK, CostModel
from plmr.passes.taso.substitute import TasoSubstitutePass
from plmr.passes.transpose_elim import TransposeElimPass
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import random_inputs
from plmr.target.device import get_device

PROGRAM = """
func.func @main(%a: tensor<4x6xf32>, %b: tensor<6xf32>, %m: tensor<4x6xi1>,
                %i: tensor<4x6xi64>, %ix: tensor<2x6xi64>)
    -> (tensor<4x6xf32>, tensor<6x4xi1>, tensor<2x6xf32>, tensor<4x6xi64>) {
  %t = graph.transpose %a perm = [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
  %ab = graph.abs %t : tensor<6x4xf32>
  %l = graph.log %ab : tensor<6x4xf32>
  %tt = graph.transpose %l perm = [1, 0] : tensor<6x4xf32> -> tensor<4x6xf32>
  %c = graph.constant dense<[1.0, -2.0, 3.0, 0.5, 0.0, -1.0]> : tensor<6xf32>
  %c2 = graph.constant dense<2.0> : tensor<6xf32>
  %cc = graph.cmp gt %c, %c2 : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xi1>
  %cm = graph.cast %cc : tensor<6xi1> -> tensor<6xf32>
  %cp = graph.pow %c2 by 2.0 : tensor<6xf32>
  %mx = graph.maximum %tt, %cm : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %mn = graph.minimum %mx, %cp : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %lt = graph.cmp lt %a, %b : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xi1>
  %n = graph.not %lt : tensor<4x6xi1>
  %an = graph.and %n, %m : (tensor<4x6xi1>, tensor<4x6xi1>) -> tensor<4x6xi1>
  %o = graph.or %an, %m : (tensor<4x6xi1>, tensor<4x6xi1>) -> tensor<4x6xi1>
  %x = graph.xor %o, %lt : (tensor<4x6xi1>, tensor<4x6xi1>) -> tensor<4x6xi1>
  %xt = graph.transpose %x perm = [1, 0] : tensor<4x6xi1> -> tensor<6x4xi1>
  %w = graph.where %x, %mn, %a : (tensor<4x6xi1>, tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %f = graph.floor %w : tensor<4x6xf32>
  %ce = graph.ceil %f : tensor<4x6xf32>
  %r = graph.reciprocal %b : tensor<6xf32>
  %mul = graph.mul %ce, %r : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %sl = graph.slice %mul starts = [1, 0] ends = [3, 6] steps = [1, 1] : tensor<4x6xf32> -> tensor<2x6xf32>
  %ex = graph.expand %sl : tensor<2x6xf32> -> tensor<2x6xf32>
  %pd = graph.pad %ex pads = [1, 0, 1, 0] mode = constant value = 0.0 : tensor<2x6xf32> -> tensor<4x6xf32>
  %ge = graph.gather_elements %pd, %ix axis = 0 : (tensor<4x6xf32>, tensor<2x6xi64>) -> tensor<2x6xf32>
  %ci = graph.cast %pd : tensor<4x6xf32> -> tensor<4x6xi64>
  %ia = graph.abs %i : tensor<4x6xi64>
  %is = graph.maximum %ci, %ia : (tensor<4x6xi64>, tensor<4x6xi64>) -> tensor<4x6xi64>
  func.return %pd, %xt, %ge, %is : tensor<4x6xf32>, tensor<6x4xi1>, tensor<2x6xf32>, tensor<4x6xi64>
}
"""

NEW_OPS = {
    "where", "cmp", "not", "and", "or", "xor", "cast", "abs", "log", "floor", "ceil",
    "reciprocal", "pow", "maximum", "minimum", "slice", "expand", "pad", "gather_elements",
}  # fmt: skip


def test_the_program_uses_every_new_op():
    module = parse_module(PROGRAM)
    used = {op.name.split(".")[1] for op in module.walk() if op.name.startswith("graph.")}
    assert used >= NEW_OPS


@pytest.mark.parametrize(
    "make",
    [TransposeElimPass, lambda: TasoSubstitutePass(budget=30)],
    ids=["transpose-elim", "taso"],
)
def test_graph_passes_keep_the_semantics(make: object):
    module = parse_module(PROGRAM)
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    for seed in range(3):
        args = random_inputs(fn, seed)
        want = evaluate_function(module, "main", args)
        trial = module.clone()
        make().apply(Context(), trial)  # pyright: ignore[reportUnknownMemberType,reportCallIssue]
        trial.verify()
        got = evaluate_function(trial, "main", args)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype
            np.testing.assert_allclose(
                g.astype(np.float64), w.astype(np.float64), rtol=1e-6
            )


def test_transpose_elim_sinks_through_the_new_elementwise_ops():
    module = parse_module(PROGRAM)
    TransposeElimPass().apply(Context(), module)
    # abs and log of a transpose that is transposed back: both transposes cancel.
    names = [op.name for op in module.walk() if isinstance(op, graph.TransposeOp)]
    assert len(names) == 1  # only the transpose of the result %xt is left


def test_the_cost_model_prices_the_new_ops():
    model = CostModel(get_device("wse2"))
    elementwise = [k for k in ELEMENT_WORK if k.startswith("opaque:graph.")]
    assert {k.split(".")[1] for k in elementwise} >= NEW_OPS - {
        "slice", "expand", "pad", "gather_elements"
    }  # fmt: skip
    shape = (64, 64)
    log = model.op_cost("opaque:graph.log", (), [shape], [shape])
    cmp = model.op_cost("opaque:graph.cmp", (), [shape, shape], [shape])
    assert log > cmp > 0
    for kind in ("slice", "expand", "pad", "gather_elements"):
        assert model.op_cost(f"opaque:graph.{kind}", (), [shape], [shape]) == model.move(
            64 * 64
        )
