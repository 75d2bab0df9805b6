"""
Names and text of the modules `plmr.frontend.onnx` builds: ONNX names kept as
`plmr.name` attributes and turned into SSA names, the function name, and printing then
parsing back.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import helper
from xdsl.dialects import func
from xdsl.dialects.builtin import StringAttr

from plmr.dialects.context import parse_module
from plmr.frontend.onnx import import_onnx, ssa_name
from plmr.runtime.reference import evaluate_function


def test_names_are_kept_as_arg_and_res_attrs(kit: Any):
    x, h = kit.rand(2, 3), kit.rand(2, 3, seed=1)
    nodes = [
        helper.make_node("Add", ["input:0", "hidden/state"], ["/block/Add_output_0"]),
        helper.make_node("Relu", ["/block/Add_output_0"], ["out.1"]),
    ]
    model = kit.model(
        nodes, {"input:0": x, "hidden/state": h}, ["out.1", "/block/Add_output_0"]
    )
    module = kit.check(model, {"input:0": x, "hidden/state": h})
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    assert fn.arg_attrs is not None
    assert fn.res_attrs is not None
    arg_names = [d.data["plmr.name"] for d in fn.arg_attrs.data]
    res_names = [d.data["plmr.name"] for d in fn.res_attrs.data]
    assert arg_names == [StringAttr("input:0"), StringAttr("hidden/state")]
    assert res_names == [StringAttr("out.1"), StringAttr("/block/Add_output_0")]
    text = str(module)
    assert '%input: tensor<2x3xf32> {plmr.name = "input:0"}' in text
    assert '%hidden_state: tensor<2x3xf32> {plmr.name = "hidden/state"}' in text
    assert "%block_Add_output = graph.add %input, %hidden_state" in text
    assert '-> (tensor<2x3xf32> {plmr.name = "out.1"}' in text


@pytest.mark.parametrize(
    ("onnx_name", "expected"),
    [("x", "x"), ("input:0", "input_0"), ("/a/b", "a_b"), ("123", "v123"), ("::", None)],
)
def test_ssa_name(onnx_name: str, expected: str | None):
    assert ssa_name(onnx_name) == expected


def test_func_name(kit: Any):
    x = kit.rand(2)
    model = kit.model([kit.node("Relu", ["x"])], {"x": x}, ["out"])
    module = import_onnx(model, func_name="net")
    assert "func.func @net(" in str(module)
    np.testing.assert_array_equal(
        evaluate_function(module, "net", [x])[0], np.maximum(x, 0)
    )


def test_small_model_round_trips_with_all_kinds_of_constants(kit: Any):
    x = kit.rand(1, 2, 4, 4)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Div", ["c", "two"], ["d"]),
        helper.make_node("Gather", ["d", "idx"], ["out"], axis=1),
    ]
    inits = {
        "w": kit.rand(3, 2, 3, 3, seed=1),
        "two": np.array(2.0, np.float32),
        "idx": np.array([2, -1, 0], np.int64),
    }
    module = kit.check(kit.model(nodes, {"x": x}, ["out"], inits), {"x": x})
    text = str(module)
    parsed = parse_module(text)
    assert str(parsed) == text
    np.testing.assert_array_equal(
        evaluate_function(parsed, "main", [x])[0], evaluate_function(module, "main", [x])[0]
    )
