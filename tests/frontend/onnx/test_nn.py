"""Reduction, softmax and normalization handlers of `plmr.frontend.onnx`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import helper


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceMean"])
@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("keepdims", [0, 1, None])
@pytest.mark.parametrize("axes", [[1], [0, 2], [-1], None])
def test_reduce(
    kit: Any, op: str, opset: int, keepdims: int | None, axes: list[int] | None
):
    x = kit.rand(2, 3, 4)
    axes_as_input = op == "ReduceSum" or opset >= 18
    attrs: dict[str, Any] = {} if keepdims is None else {"keepdims": keepdims}
    inits: dict[str, Any] = {}
    inputs = ["x"]
    if axes is not None and axes_as_input:
        inits["axes"] = np.array(axes, np.int64)
        inputs.append("axes")
    elif axes is not None:
        attrs["axes"] = axes
    node = helper.make_node(op, inputs, ["out"], **attrs)
    module = kit.check(kit.model([node], {"x": x}, ["out"], inits, opset), {"x": x})
    assert kit.ops(module) == ["graph.reduce"]


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean"])
def test_reduce_noop_with_empty_axes(kit: Any, op: str):
    x = kit.rand(2, 3)
    node = helper.make_node(op, ["x"], ["out"], noop_with_empty_axes=1)
    module = kit.check(kit.model([node], {"x": x}, ["out"], opset=18), {"x": x})
    assert kit.ops(module) == []


@pytest.mark.parametrize(
    "op", ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]
)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_more_reductions(kit: Any, op: str, keepdims: int):
    x = np.abs(kit.rand(2, 3, 4)) + 0.1
    model = kit.model(
        [kit.node(op, ["x", "a"], keepdims=keepdims)],
        {"x": x},
        ["out"],
        {"a": np.array([1, -1], np.int64)},
    )
    kit.check(model, {"x": x})


@pytest.mark.parametrize("axis", [None, 0, 1, -2, 2])
def test_softmax(kit: Any, axis: int | None):
    attrs = {} if axis is None else {"axis": axis}
    x = kit.rand(2, 3, 4) * 4
    model = kit.model([kit.node("Softmax", ["x"], **attrs)], {"x": x}, ["out"], opset=13)
    kit.check(model, {"x": x})


@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_log_softmax(kit: Any, axis: int):
    x = kit.rand(3, 4, 5) * 4
    kit.check(
        kit.model([kit.node("LogSoftmax", ["x"], axis=axis)], {"x": x}, ["out"]), {"x": x}
    )


@pytest.mark.parametrize(
    ("axis", "with_bias", "epsilon"),
    [(-1, True, None), (-1, False, None), (1, True, 1e-3), (-2, False, 1e-6)],
)
def test_layer_normalization(kit: Any, axis: int, with_bias: bool, epsilon: float | None):
    x = kit.rand(2, 3, 4) * 3 + 1
    norm_shape = x.shape[axis % x.ndim :]
    inits = {"scale": kit.rand(*norm_shape, seed=4)}
    inputs = ["x", "scale"]
    if with_bias:
        inits["bias"] = kit.rand(*norm_shape, seed=5)
        inputs.append("bias")
    attrs: dict[str, Any] = {"axis": axis}
    if epsilon is not None:
        attrs["epsilon"] = epsilon
    node = helper.make_node("LayerNormalization", inputs, ["out"], **attrs)
    module = kit.check(kit.model([node], {"x": x}, ["out"], inits), {"x": x})
    assert kit.ops(module)[-1] == "graph.layernorm"


def test_error_layernorm_extra_outputs_used(kit: Any):
    x = kit.rand(2, 4)
    node = helper.make_node(
        "LayerNormalization", ["x", "g"], ["out", "mean"], name="ln", axis=-1
    )
    model = kit.model([node], {"x": x}, ["out", "mean"], {"g": kit.rand(4)})
    kit.raises(model, "node 'ln' (LayerNormalization)", "output 1", "'mean'")


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (2, 3, 4, 5), (1, 3, 2, 2, 2)])
def test_batch_normalization(kit: Any, shape: tuple[int, ...]):
    x = kit.rand(*shape)
    rng = np.random.default_rng(1)
    inits = {
        "s": rng.standard_normal(3).astype(np.float32),
        "b": rng.standard_normal(3).astype(np.float32),
        "m": rng.standard_normal(3).astype(np.float32),
        "v": rng.random(3).astype(np.float32) + 0.5,
    }
    model = kit.model(
        [kit.node("BatchNormalization", ["x", "s", "b", "m", "v"], epsilon=1e-3)],
        {"x": x},
        ["out"],
        inits,
    )
    module = kit.check(model, {"x": x})
    assert kit.ops(module) == ["graph.constant", "graph.constant", "graph.mul", "graph.add"]


def test_error_batch_normalization_runtime_statistics(kit: Any):
    x = kit.rand(2, 3, 4)
    feeds = {"x": x, "m": kit.rand(3)}
    inits = {"s": kit.rand(3), "b": kit.rand(3), "v": np.ones(3, np.float32)}
    model = kit.model(
        [kit.node("BatchNormalization", ["x", "s", "b", "m", "v"])], feeds, ["out"], inits
    )
    kit.raises(model, "(BatchNormalization)", "mean", "compile-time constant")


def test_error_batch_normalization_training(kit: Any):
    x = kit.rand(2, 3, 4)
    inits = {k: np.ones(3, np.float32) for k in "sbmv"}
    node = helper.make_node(
        "BatchNormalization", ["x", "s", "b", "m", "v"], ["out"], training_mode=1
    )
    model = kit.model([node], {"x": x}, ["out"], inits, infer=False)
    kit.raises(model, "(BatchNormalization)", "training_mode")


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5)])
@pytest.mark.parametrize("runtime_scale", [False, True])
def test_instance_normalization(kit: Any, shape: tuple[int, ...], runtime_scale: bool):
    x = kit.rand(*shape)
    feeds = {"x": x}
    inits = {"b": kit.rand(3, seed=2)}
    (feeds if runtime_scale else inits)["s"] = kit.rand(3, seed=1)
    model = kit.model(
        [kit.node("InstanceNormalization", ["x", "s", "b"], epsilon=1e-4)],
        feeds,
        ["out"],
        inits,
    )
    kit.check(model, feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("size", [1, 2, 3, 5])
@pytest.mark.parametrize("beta", [0.75, 0.5, 1.0])
def test_lrn(kit: Any, size: int, beta: float):
    # ONNX's reference LRN loops over the batch instead of the channels (onnx 1.23):
    # compare with the formula of the ONNX specification instead.
    from plmr.frontend.onnx import import_onnx
    from plmr.runtime.reference import evaluate_function

    x = kit.rand(2, 6, 3, 4) * 3
    alpha, bias = 0.01, 1.5
    node = kit.node("LRN", ["x"], size=size, alpha=alpha, beta=beta, bias=bias)
    (got,) = evaluate_function(
        import_onnx(kit.model([node], {"x": x}, ["out"])), "main", [x]
    )
    x64 = x.astype(np.float64)
    square_sum = np.zeros_like(x64)
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    for c in range(x.shape[1]):
        window = x64[:, max(0, c - lo) : min(x.shape[1], c + hi + 1)]
        square_sum[:, c] = (window**2).sum(axis=1)
    want = x64 / (bias + alpha / size * square_sum) ** beta
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_error_lrn_without_size(kit: Any):
    x = kit.rand(1, 3, 2, 2)
    model = kit.model([kit.node("LRN", ["x"])], {"x": x}, ["out"], infer=False)
    kit.raises(model, "(LRN)", "'size'")


def test_reduce_log_sum_exp_of_large_values(kit: Any):
    x = kit.rand(2, 3) * 10 + 200  # exp overflows float32
    model = kit.model(
        [kit.node("ReduceLogSumExp", ["x", "a"], keepdims=0)],
        {"x": x},
        ["out"],
        {"a": np.array([1], np.int64)},
    )
    from plmr.frontend.onnx import import_onnx
    from plmr.runtime.reference import evaluate_function

    (got,) = evaluate_function(import_onnx(model), "main", [x])
    x64 = x.astype(np.float64)
    m = x64.max(axis=1)
    want = np.log(np.exp(x64 - m[:, None]).sum(axis=1)) + m
    np.testing.assert_allclose(got, want, rtol=1e-6)
