"""Elementwise handlers of `plmr.frontend.onnx`, against ONNX's reference evaluator."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

F32 = TensorProto.FLOAT


@pytest.mark.parametrize(
    "op",
    [
        "Relu", "Sigmoid", "Tanh", "Exp", "Erf", "Neg", "Sqrt",
        "Abs", "Ceil", "Floor", "Reciprocal", "Cos", "Sin", "Sinh", "Cosh",
    ],
)  # fmt: skip
def test_unary(kit: Any, op: str):
    x = kit.rand(3, 5) * 3
    if op == "Sqrt":
        x = np.abs(x) + 0.1
    module = kit.check(kit.model([kit.node(op, ["x"])], {"x": x}, ["out"]), {"x": x})
    assert kit.ops(module) == [f"graph.{op.lower()}"]


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_unary_other_float_types(kit: Any, dtype: Any):
    x = kit.rand(4, 3, dtype=dtype)
    model = kit.model([kit.node("Tanh", ["x"])], {"x": x}, ["out"])
    kit.check(model, {"x": x}, rtol=1e-3, atol=1e-3)


def test_log_of_positive_values(kit: Any):
    x = np.abs(kit.rand(3, 4)) + 0.1
    module = kit.check(kit.model([kit.node("Log", ["x"])], {"x": x}, ["out"]), {"x": x})
    assert kit.ops(module) == ["graph.log"]


@pytest.mark.parametrize("approximate", [None, "none", "tanh"])
def test_gelu(kit: Any, approximate: str | None):
    attrs = {} if approximate is None else {"approximate": approximate}
    x = kit.rand(4, 6) * 3
    model = kit.model([kit.node("Gelu", ["x"], **attrs)], {"x": x}, ["out"], opset=20)
    module = kit.check(model, {"x": x})
    assert ("graph.gelu %x tanh" in str(module)) == (approximate == "tanh")


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize(
    "shapes",
    [((2, 3), (2, 3)), ((2, 3), (3,)), ((4, 1, 3), (2, 1)), ((1,), (2, 3)), ((), (2, 2))],
)
def test_binary_broadcast(
    kit: Any, op: str, shapes: tuple[tuple[int, ...], tuple[int, ...]]
):
    x, y = kit.rand(*shapes[0], seed=1), kit.rand(*shapes[1], seed=2)
    if op == "Div":
        y = np.abs(y) + 0.5
    feeds = {"x": x, "y": y}
    module = kit.check(kit.model([kit.node(op, ["x", "y"])], feeds, ["out"]), feeds)
    assert kit.ops(module) == [f"graph.{op.lower()}"]


def test_binary_int64(kit: Any):
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    y = np.array([1, -2, 3], dtype=np.int64)
    feeds = {"x": x, "y": y}
    kit.check(kit.model([kit.node("Mul", ["x", "y"])], feeds, ["out"]), feeds)


@pytest.mark.parametrize(
    ("op", "const_first"), [("Mul", False), ("Mul", True), ("Div", False)]
)
@pytest.mark.parametrize("as_initializer", [False, True])
def test_mul_div_by_scalar_becomes_scale(
    kit: Any, op: str, const_first: bool, as_initializer: bool
):
    c = np.float32(0.25 if op == "Mul" else math.sqrt(8.0))
    inputs = ["c", "x"] if const_first else ["x", "c"]
    nodes = [helper.make_node(op, inputs, ["out"])]
    inits: dict[str, Any] = {}
    if as_initializer:
        inits["c"] = np.asarray(c)
    else:
        nodes.insert(0, helper.make_node("Constant", [], ["c"], value_float=float(c)))
    x = kit.rand(2, 4, 4)
    module = kit.check(kit.model(nodes, {"x": x}, ["out"], inits), {"x": x})
    assert kit.ops(module) == ["graph.scale"]


def test_div_by_scalar_on_lhs_stays_div(kit: Any):
    nodes = [
        helper.make_node("Constant", [], ["c"], value_float=2.0),
        helper.make_node("Div", ["c", "x"], ["out"]),
    ]
    x = np.abs(kit.rand(3, 2)) + 1
    module = kit.check(kit.model(nodes, {"x": x}, ["out"]), {"x": x})
    assert kit.ops(module) == ["graph.constant", "graph.div"]


def test_mul_by_one_element_constant_that_broadcasts_stays_mul(kit: Any):
    # A [1, 1] constant times a [3] vector has shape [1, 3]: not a scale of the vector.
    x = kit.rand(3)
    model = kit.model(
        [kit.node("Mul", ["x", "y"])],
        {"x": x},
        ["out"],
        {"y": np.full((1, 1), 3.0, np.float32)},
    )
    module = kit.check(model, {"x": x})
    assert kit.ops(module) == ["graph.constant", "graph.mul"]


def test_add_causal_mask_initializer(kit: Any):
    s = 4
    mask = np.triu(np.full((s, s), -1e9, np.float32), k=1).reshape(1, 1, s, s)
    x = kit.rand(2, 3, s, s)
    nodes = [
        helper.make_node("Add", ["x", "mask"], ["m"]),
        helper.make_node("Softmax", ["m"], ["out"]),
    ]
    module = kit.check(kit.model(nodes, {"x": x}, ["out"], {"mask": mask}), {"x": x})
    assert "tensor<1x1x4x4xf32>" in str(module)


@pytest.mark.parametrize("shape", [(), (1,), (3, 4)])
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
def test_pow_constant_exponent(
    kit: Any, exponent: float, ops: list[str], shape: tuple[int, ...]
):
    """A constant exponent of one value, of any shape that broadcasts to the base's."""
    x = np.abs(kit.rand(3, 4)) + 0.5
    e = np.full(shape, exponent, np.float32)
    model = kit.model([kit.node("Pow", ["x", "e"])], {"x": x}, ["out"], {"e": e})
    module = kit.check(model, {"x": x})
    assert kit.ops(module) == ops


def test_pow_int_exponent(kit: Any):
    x = kit.rand(2, 3)
    model = kit.model(
        [kit.node("Pow", ["x", "e"])], {"x": x}, ["out"], {"e": np.array(2, np.int64)}
    )
    kit.check(model, {"x": x})


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


@pytest.mark.parametrize("source", ["input", "constant"])
def test_identity(kit: Any, source: str):
    x = kit.rand(3, 2)
    if source == "input":
        model = kit.model([kit.node("Identity", ["x"])], {"x": x}, ["out"])
        module = kit.check(model, {"x": x})
        assert kit.ops(module) == []
        return
    nodes = [
        helper.make_node("Identity", ["w"], ["w2"]),
        helper.make_node("Add", ["x", "w2"], ["out"]),
    ]
    model = kit.model(nodes, {"x": x}, ["out"], {"w": kit.rand(3, 2, seed=3)})
    kit.check(model, {"x": x})


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


@pytest.mark.parametrize("exponent", ["input", "node"])
def test_error_pow_runtime_exponent(kit: Any, exponent: str):
    """An exponent that is a graph input, or the result of a node on one."""
    x, e = kit.rand(3), kit.rand(3, seed=1)
    nodes = [kit.node("Pow", ["x", "e"])]
    if exponent == "node":
        nodes = [helper.make_node("Exp", ["e"], ["ee"]), kit.node("Pow", ["x", "ee"])]
    model = kit.model(nodes, {"x": x, "e": e}, ["out"])
    kit.raises(model, "(Pow)", "exponent", "computed at run time", "Exp(Mul(y, Log(x)))")


def test_error_pow_exponent_not_one_value(kit: Any):
    x = kit.rand(2, 2)
    model = kit.model(
        [kit.node("Pow", ["x", "e"])],
        {"x": x},
        ["out"],
        {"e": np.array([2.0, 3.0], np.float32)},
    )
    kit.raises(model, "(Pow)", "2 distinct values", "constant scalar exponent")


def test_error_gelu_approximate(kit: Any):
    x = kit.rand(2)
    node = kit.node("Gelu", ["x"], approximate="erf")
    model = kit.model([node], {"x": x}, ["out"], opset=20, infer=False)
    kit.raises(model, "(Gelu)", "approximate")
