"""Constant folding at import in `plmr.frontend.onnx`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from plmr.frontend.onnx.folding import FoldError, fold_node, foldable

I64 = np.int64


def test_shape_subgraph_folds_to_one_reshape(kit: Any):
    # The shape computation exporters emit: Shape -> Gather -> Unsqueeze -> Concat.
    x = kit.rand(2, 3, 4)
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["out"]),
    ]
    inits = {
        "zero": np.array(0, I64),
        "axes": np.array([0], I64),
        "minus_one": np.array([-1], I64),
    }
    module = kit.check(kit.model(nodes, {"x": x}, ["out"], inits), {"x": x})
    assert kit.ops(module) == ["graph.reshape"]


def test_reshape_shape_computed_from_constants(kit: Any):
    x = kit.rand(2, 3, 4)
    nodes = [
        helper.make_node("Constant", [], ["a"], value_ints=[2]),
        helper.make_node("Constant", [], ["b"], value_ints=[-1]),
        helper.make_node("Concat", ["a", "b"], ["s"], axis=0),
        helper.make_node("Reshape", ["x", "s"], ["out"]),
    ]
    module = kit.check(kit.model(nodes, {"x": x}, ["out"]), {"x": x})
    assert kit.ops(module) == ["graph.reshape"]


def test_data_movement_on_constants_is_folded(kit: Any):
    x = kit.rand(3, 4)
    w = kit.rand(4, 3, seed=1)
    nodes = [
        helper.make_node("Transpose", ["w"], ["wt"]),  # 3x4
        helper.make_node("Unsqueeze", ["wt", "zero"], ["wu"]),  # 1x3x4
        helper.make_node("Concat", ["wu", "wu"], ["wc"], axis=0),  # 2x3x4
        helper.make_node("Gather", ["wc", "one"], ["wg"], axis=0),  # 3x4
        helper.make_node("Flatten", ["wg"], ["wf"], axis=0),  # 1x12
        helper.make_node("Reshape", ["wf", "shape"], ["wr"]),  # 3x4
        helper.make_node("Add", ["x", "wr"], ["out"]),
    ]
    inits = {
        "w": w,
        "zero": np.array([0], I64),
        "one": np.array(1, I64),
        "shape": np.array([3, 4], I64),
    }
    module = kit.check(kit.model(nodes, {"x": x}, ["out"], inits), {"x": x})
    assert kit.ops(module) == ["graph.constant", "graph.add"]


def test_range_trilu_equal_where_fold(kit: Any):
    # A causal mask built at run time by exporters, entirely from constants.
    x = kit.rand(4, 4)
    nodes = [
        helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
        helper.make_node(
            "ConstantOfShape",
            ["dims"],
            ["ones"],
            value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0]),
        ),
        helper.make_node("Trilu", ["ones"], ["tri"], upper=0),
        helper.make_node("Equal", ["tri", "zero"], ["masked"]),
        helper.make_node("Where", ["masked", "neg", "zero"], ["bias"]),
        helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["bias", "rf"], ["bias2"]),
        helper.make_node("Add", ["x", "bias2"], ["out"]),
    ]
    inits = {
        "start": np.array(0, I64),
        "limit": np.array(4, I64),
        "delta": np.array(1, I64),
        "dims": np.array([4, 4], I64),
        "zero": np.array(0.0, np.float32),
        "neg": np.array(-1e9, np.float32),
    }
    module = kit.check(kit.model(nodes, {"x": x}, ["out"], inits), {"x": x})
    assert kit.ops(module) == ["graph.constant", "graph.add"]


def test_unsupported_op_on_constants_is_folded(kit: Any):
    # ReduceProd has no handler, but its inputs are constant.
    x = kit.rand(3)
    nodes = [
        helper.make_node("ReduceProd", ["c"], ["p"], keepdims=0),
        helper.make_node("Mul", ["x", "p"], ["out"]),
    ]
    model = kit.model(nodes, {"x": x}, ["out"], {"c": np.array([2.0, 3.0], np.float32)})
    module = kit.check(model, {"x": x})
    assert kit.ops(module) == ["graph.scale"]


def test_folded_constant_as_graph_output(kit: Any):
    x = kit.rand(2, 5)
    nodes = [
        helper.make_node("Shape", ["x"], ["out"]),
        helper.make_node("Relu", ["x"], ["y"]),
    ]
    kit.check(kit.model(nodes, {"x": x}, ["out", "y"]), {"x": x})


def test_fold_failure_names_node(kit: Any):
    x = kit.rand(2)
    nodes = [
        helper.make_node("ReduceProd", ["c", "bad_axes"], ["p"], name="prod"),
        helper.make_node("Mul", ["x", "p"], ["out"]),
    ]
    model = kit.model(
        nodes,
        {"x": x},
        ["out"],
        {"c": np.ones(2, np.float32), "bad_axes": np.array([5], I64)},
        infer=False,
    )
    kit.raises(model, "node 'prod' (ReduceProd)", "evaluating it at import failed")


def test_random_ops_are_not_folded(kit: Any):
    node = helper.make_node("RandomNormalLike", ["c"], ["r"])
    assert not foldable(node)
    assert foldable(helper.make_node("Add", ["a", "b"], ["c"]))


def test_fold_node_fast_paths_match_reference():
    cases = [
        (
            helper.make_node("Unsqueeze", ["a", "b"], ["c"]),
            [np.arange(3), np.array([0, -1])],
        ),
        (
            helper.make_node("Concat", ["a", "b"], ["c"], axis=0),
            [np.arange(2), np.arange(3)],
        ),
        (
            helper.make_node("Gather", ["a", "b"], ["c"], axis=0),
            [np.arange(5), np.array([[1, -1]])],
        ),
        (helper.make_node("Cast", ["a"], ["c"], to=TensorProto.FLOAT), [np.arange(3)]),
    ]
    for node, inputs in cases:
        (fast,) = fold_node(node, inputs, 18)
        names = list(node.input)
        graph = helper.make_graph(
            [node],
            "g",
            [helper.make_empty_tensor_value_info(n) for n in names],
            [helper.make_empty_tensor_value_info("c")],
        )
        (want,) = ReferenceEvaluator(graph, opsets={"": 18}).run(
            None, dict(zip(names, inputs, strict=True))
        )
        np.testing.assert_array_equal(fast, want)
        assert fast.dtype == want.dtype
        assert fast.shape == want.shape


def test_fold_node_keeps_scalars_scalar():
    (out,) = fold_node(
        helper.make_node("Add", ["a", "b"], ["c"]), [np.array(1), np.array(2)], 18
    )
    assert out.shape == ()
    assert out == 3


def test_fold_node_error():
    with pytest.raises(FoldError):
        fold_node(helper.make_node("Add", ["a", "b"], ["c"]), [np.ones(2), np.ones(3)], 18)


def test_fold_node_omitted_outputs_line_up():
    node = helper.make_node("Split", ["a"], ["", "second"], axis=0, num_outputs=2)
    first, second = fold_node(node, [np.arange(4)], 18)
    assert first.size == 0
    np.testing.assert_array_equal(second, [2, 3])
