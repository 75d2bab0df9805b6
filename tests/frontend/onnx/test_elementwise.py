"""Elementwise handlers of `plmr.frontend.onnx`, against ONNX's reference evaluator."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

F32 = TensorProto.FLOAT


@pytest.mark.parametrize(
    ("op", "graph_op"),
    [
        ("Abs", "graph.abs"),
        ("Ceil", "graph.ceil"),
        ("Floor", "graph.floor"),
        ("Reciprocal", "graph.reciprocal"),
    ],
)
def test_unary_new_ops(kit: Any, op: str, graph_op: str):
    x = kit.rand(3, 4) * 3
    module = kit.check(kit.model([kit.node(op, ["x"])], {"x": x}, ["out"]), {"x": x})
    assert kit.ops(module) == [graph_op]


def test_log_of_positive_values(kit: Any):
    x = np.abs(kit.rand(3, 4)) + 0.1
    module = kit.check(kit.model([kit.node("Log", ["x"])], {"x": x}, ["out"]), {"x": x})
    assert kit.ops(module) == ["graph.log"]


@pytest.mark.parametrize(
    ("exponent", "ops"),
    [
        (2.0, ["graph.mul"]),
        (0.5, ["graph.sqrt"]),
        (1.0, []),
        (3.0, ["graph.pow"]),
        (-1.5, ["graph.pow"]),
        (0.75, ["graph.pow"]),
    ],
)
def test_pow_constant_exponent(kit: Any, exponent: float, ops: list[str]):
    x = np.abs(kit.rand(2, 5)) + 0.5
    model = kit.model(
        [kit.node("Pow", ["x", "e"])],
        {"x": x},
        ["out"],
        {"e": np.array(exponent, np.float32)},
    )
    module = kit.check(model, {"x": x})
    assert kit.ops(module) == ops


@pytest.mark.parametrize(("op", "n"), [("Sum", 3), ("Mean", 3), ("Max", 3), ("Min", 2)])
def test_variadic(kit: Any, op: str, n: int):
    names = ["a", "b", "c"][:n]
    feeds = {name: kit.rand(2, 3, seed=i) for i, name in enumerate(names)}
    last = names[-1]
    feeds[last] = feeds[last][:1]  # broadcast one operand
    kit.check(kit.model([kit.node(op, names)], feeds, ["out"]), feeds)


def test_max_single_input_is_identity(kit: Any):
    x = kit.rand(4)
    module = kit.check(kit.model([kit.node("Max", ["x"])], {"x": x}, ["out"]), {"x": x})
    assert kit.ops(module) == []


@pytest.mark.parametrize(
    ("op", "attrs"),
    [
        ("LeakyRelu", {}),
        ("LeakyRelu", {"alpha": 0.3}),
        ("Elu", {"alpha": 0.7}),
        ("Selu", {}),
        ("Softplus", {}),
        ("Softsign", {}),
        ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
        ("HardSwish", {}),
        ("Shrink", {"lambd": 0.4, "bias": 0.2}),
        ("Sign", {}),
    ],
)
def test_activations(kit: Any, op: str, attrs: dict[str, Any]):
    x = kit.rand(3, 7) * 2
    x[0, 0] = 0.0
    kit.check(kit.model([kit.node(op, ["x"], **attrs)], {"x": x}, ["out"]), {"x": x})


def test_leaky_relu_is_exact(kit: Any):
    x = kit.rand(64) * 100
    kit.check(
        kit.model([kit.node("LeakyRelu", ["x"], alpha=0.1)], {"x": x}, ["out"]),
        {"x": x},
        rtol=0,
        atol=0,
    )


@pytest.mark.parametrize("slope_shape", [(1,), (4,), (3, 1), (3, 4)])
def test_prelu(kit: Any, slope_shape: tuple[int, ...]):
    x = kit.rand(2, 3, 4)
    model = kit.model(
        [kit.node("PRelu", ["x", "s"])],
        {"x": x},
        ["out"],
        {"s": kit.rand(*slope_shape, seed=1)},
    )
    kit.check(model, {"x": x}, rtol=0, atol=0)


def test_prelu_opset6_vector_slope_is_per_channel(kit: Any):
    x = kit.rand(2, 3, 4, 5)
    slope = np.array([0.1, 0.2, 0.3], np.float32)
    model = kit.model(
        [kit.node("PRelu", ["x", "s"])],
        {"x": x},
        ["out"],
        {"s": slope},
        opset=6,
        infer=False,
    )
    from plmr.frontend.onnx import import_onnx
    from plmr.runtime.reference import evaluate_function

    (got,) = evaluate_function(import_onnx(model), "main", [x])
    want = np.where(x >= 0, x, x * slope.reshape(3, 1, 1))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("bounds", ["both", "min", "max", "none", "runtime"])
def test_clip(kit: Any, bounds: str):
    x = kit.rand(4, 5) * 3
    inits: dict[str, Any] = {}
    feeds = {"x": x}
    if bounds == "runtime":
        feeds |= {"lo": np.array(-1.0, np.float32), "hi": np.array(0.5, np.float32)}
        inputs = ["x", "lo", "hi"]
    else:
        inputs = {
            "both": ["x", "lo", "hi"],
            "min": ["x", "lo"],
            "max": ["x", "", "hi"],
            "none": ["x"],
        }[bounds]
        inits = {"lo": np.array(-1.0, np.float32), "hi": np.array(0.5, np.float32)}
        inits = {k: v for k, v in inits.items() if k in inputs}
    kit.check(kit.model([kit.node("Clip", inputs)], feeds, ["out"], inits), feeds)


@pytest.mark.parametrize(
    "op", ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"]
)
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_comparisons(kit: Any, op: str, dtype: Any):
    a = np.array([[1, 2, 3], [3, 2, 1]], dtype=dtype)
    b = np.array([2, 2, 2], dtype=dtype)
    module = kit.check(
        kit.model([kit.node(op, ["a", "b"])], {"a": a, "b": b}, ["out"]), {"a": a, "b": b}
    )
    assert kit.ops(module) == ["graph.cmp"]


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic(kit: Any, op: str):
    a = np.array([[True, False], [True, True]])
    b = np.array([True, False])
    kit.check(
        kit.model([kit.node(op, ["a", "b"])], {"a": a, "b": b}, ["out"]), {"a": a, "b": b}
    )


def test_not(kit: Any):
    a = np.array([True, False, True])
    kit.check(kit.model([kit.node("Not", ["a"])], {"a": a}, ["out"]), {"a": a})


def test_is_nan_is_exact(kit: Any):
    x = np.array([1.0, np.nan, -np.inf, 0.0, np.nan], np.float32)
    module = kit.check(kit.model([kit.node("IsNaN", ["x"])], {"x": x}, ["out"]), {"x": x})
    assert kit.ops(module) == ["graph.cmp"]


@pytest.mark.parametrize(("pos", "neg"), [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_is_inf(kit: Any, pos: int, neg: int):
    x = np.array([1.0, np.inf, -np.inf, np.nan], np.float32)
    node = kit.node("IsInf", ["x"], detect_positive=pos, detect_negative=neg)
    kit.check(kit.model([node], {"x": x}, ["out"]), {"x": x})


def test_where(kit: Any):
    c = np.array([[True], [False]])
    a, b = kit.rand(2, 3), kit.rand(3, seed=1)
    feeds = {"c": c, "a": a, "b": b}
    module = kit.check(
        kit.model([kit.node("Where", ["c", "a", "b"])], feeds, ["out"]), feeds
    )
    assert kit.ops(module) == ["graph.where"]


@pytest.mark.parametrize(
    ("src", "to"),
    [
        (np.float32, TensorProto.INT64),
        (np.int64, TensorProto.FLOAT),
        (np.float32, TensorProto.BOOL),
        (np.bool_, TensorProto.FLOAT),
        (np.int64, TensorProto.INT32),
    ],
)
def test_cast(kit: Any, src: Any, to: int):
    x = (kit.rand(3, 4) * 5).astype(src)
    module = kit.check(
        kit.model([kit.node("Cast", ["x"], to=to)], {"x": x}, ["out"]), {"x": x}
    )
    assert kit.ops(module) == ["graph.cast"]


def test_cast_to_same_type_is_identity(kit: Any):
    x = kit.rand(3)
    module = kit.check(
        kit.model([kit.node("Cast", ["x"], to=F32)], {"x": x}, ["out"]), {"x": x}
    )
    assert kit.ops(module) == []


def test_cast_like(kit: Any):
    x = kit.rand(3) * 4
    model = kit.model(
        [kit.node("CastLike", ["x", "t"])], {"x": x}, ["out"], {"t": np.zeros(1, np.int64)}
    )
    kit.check(model, {"x": x})


def test_error_cast_to_string(kit: Any):
    x = kit.rand(3)
    model = kit.model(
        [kit.node("Cast", ["x"], to=TensorProto.STRING)], {"x": x}, ["out"], infer=False
    )
    kit.raises(model, "(Cast)", "STRING", "not supported")


def test_dropout_is_identity(kit: Any):
    x = kit.rand(2, 3)
    module = kit.check(kit.model([kit.node("Dropout", ["x"])], {"x": x}, ["out"]), {"x": x})
    assert kit.ops(module) == []


def test_error_dropout_mask_used(kit: Any):
    x = kit.rand(2, 3)
    node = helper.make_node("Dropout", ["x"], ["out", "mask"], name="d")
    model = kit.model([node], {"x": x}, ["out", "mask"])
    kit.raises(model, "node 'd' (Dropout)", "dropout mask")


def test_error_dropout_training(kit: Any):
    x = kit.rand(2, 3)
    node = kit.node("Dropout", ["x", "", "t"])
    model = kit.model([node], {"x": x}, ["out"], {"t": np.array(True)})
    kit.raises(model, "(Dropout)", "training_mode")


def test_error_pow_integer_base(kit: Any):
    x = np.arange(4, dtype=np.int64)
    model = kit.model(
        [kit.node("Pow", ["x", "e"])], {"x": x}, ["out"], {"e": np.array(3, np.int64)}
    )
    kit.raises(model, "(Pow)", "floating-point")


def test_error_pow_runtime_exponent(kit: Any):
    x, e = kit.rand(3), kit.rand(3, seed=1)
    model = kit.model([kit.node("Pow", ["x", "e"])], {"x": x, "e": e}, ["out"])
    kit.raises(model, "(Pow)", "exponent", "computed at run time", "Exp(Mul(y, Log(x)))")
