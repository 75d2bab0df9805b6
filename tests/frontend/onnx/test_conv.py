"""Convolution and pooling handlers of `plmr.frontend.onnx` (1-, 2- and 3-D)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from plmr.dialects import graph
from plmr.frontend.onnx import import_onnx
from plmr.runtime.reference import evaluate_function

CONV2D: list[tuple[str, tuple[int, ...], tuple[int, ...], dict[str, Any], bool]] = [
    ("plain", (1, 3, 7, 7), (4, 3, 3, 3), {}, True),
    ("pads", (2, 3, 6, 6), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}, True),
    ("asymmetric_pads", (1, 2, 6, 5), (3, 2, 3, 3), {"pads": [0, 1, 2, 1]}, True),
    ("strides", (1, 3, 9, 8), (4, 3, 3, 3), {"strides": [2, 3]}, True),
    (
        "dilations",
        (1, 2, 9, 9),
        (2, 2, 3, 3),
        {"dilations": [2, 2], "pads": [2, 2, 2, 2]},
        True,
    ),
    ("groups", (1, 4, 6, 6), (6, 2, 3, 3), {"group": 2}, True),
    ("depthwise", (1, 4, 6, 6), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}, False),
    ("no_bias_rect_kernel", (1, 3, 6, 7), (2, 3, 2, 3), {"kernel_shape": [2, 3]}, False),
    ("pointwise", (2, 5, 4, 4), (3, 5, 1, 1), {}, True),
    ("valid", (1, 3, 7, 7), (4, 3, 3, 3), {"auto_pad": "VALID", "strides": [2, 2]}, True),
    (
        "same_upper",
        (1, 3, 7, 8),
        (4, 3, 4, 3),
        {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
        True,
    ),
    (
        "same_lower",
        (1, 3, 7, 8),
        (4, 3, 4, 3),
        {"auto_pad": "SAME_LOWER", "strides": [2, 1]},
        True,
    ),
    (
        "same_upper_dilated",
        (1, 2, 8, 8),
        (2, 2, 3, 3),
        {"auto_pad": "SAME_UPPER", "dilations": [2, 1]},
        True,
    ),
]


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "attrs", "bias"),
    [c[1:] for c in CONV2D],
    ids=[c[0] for c in CONV2D],
)
def test_conv(
    kit: Any,
    x_shape: tuple[int, ...],
    w_shape: tuple[int, ...],
    attrs: dict[str, Any],
    bias: bool,
):
    x = kit.rand(*x_shape)
    inits = {"w": kit.rand(*w_shape, seed=7)}
    inputs = ["x", "w"]
    if bias:
        inits["b"] = kit.rand(w_shape[0], seed=8)
        inputs.append("b")
    node = helper.make_node("Conv", inputs, ["out"], name="conv", **attrs)
    module = kit.check(kit.model([node], {"x": x}, ["out"], inits), {"x": x})
    assert kit.ops(module)[-1] == "graph.conv2d"


def test_conv_with_weight_as_input(kit: Any):
    x, w = kit.rand(1, 2, 5, 5), kit.rand(3, 2, 3, 3, seed=1)
    node = kit.node("Conv", ["x", "w"], pads=[1, 1, 1, 1])
    kit.check(kit.model([node], {"x": x, "w": w}, ["out"]), {"x": x, "w": w})


def test_error_conv_4d(kit: Any):
    x = kit.rand(1, 1, 3, 3, 3, 3)
    model = kit.model(
        [helper.make_node("Conv", ["x", "w"], ["out"], name="c4")],
        {"x": x},
        ["out"],
        {"w": kit.rand(1, 1, 2, 2, 2, 2)},
    )
    kit.raises(model, "node 'c4' (Conv)", "1-D, 2-D, 3-D")


CONV1D = [
    {},
    {"strides": [2]},
    {"pads": [1, 2], "dilations": [2]},
    {"auto_pad": "SAME_UPPER"},
    {"group": 2},
]


@pytest.mark.parametrize("attrs", CONV1D)
@pytest.mark.parametrize("bias", [False, True])
def test_conv1d(kit: Any, attrs: dict[str, Any], bias: bool):
    x = kit.rand(2, 4, 11)
    inits = {"w": kit.rand(6, 4 // attrs.get("group", 1), 3, seed=1)}
    inputs = ["x", "w"]
    if bias:
        inits["b"] = kit.rand(6, seed=2)
        inputs.append("b")
    model = kit.model([kit.node("Conv", inputs, **attrs)], {"x": x}, ["out"], inits)
    module = kit.check(model, {"x": x})
    assert "graph.conv2d" in kit.ops(module)


CONV3D = [
    {},
    {"strides": [2, 1, 2]},
    {"pads": [1, 0, 1, 0, 2, 1]},
    {"dilations": [2, 1, 1]},
    {"strides": [2, 2, 1], "pads": [1, 1, 1, 1, 1, 1], "dilations": [1, 2, 1]},
    {"group": 2},
    {"auto_pad": "SAME_LOWER", "strides": [2, 2, 2]},
]


@pytest.mark.parametrize("attrs", CONV3D)
@pytest.mark.parametrize("bias", [False, True])
def test_conv3d(kit: Any, attrs: dict[str, Any], bias: bool):
    x = kit.rand(2, 4, 5, 6, 5)
    inits = {"w": kit.rand(6, 4 // attrs.get("group", 1), 3, 2, 3, seed=1)}
    inputs = ["x", "w"]
    if bias:
        inits["b"] = kit.rand(6, seed=2)
        inputs.append("b")
    model = kit.model([kit.node("Conv", inputs, **attrs)], {"x": x}, ["out"], inits)
    kit.check(model, {"x": x}, rtol=1e-4, atol=1e-4)


def test_conv3d_runtime_weight(kit: Any):
    feeds = {"x": kit.rand(1, 2, 4, 4, 4), "w": kit.rand(3, 2, 2, 2, 2, seed=1)}
    model = kit.model([kit.node("Conv", ["x", "w"])], feeds, ["out"])
    kit.check(model, feeds, rtol=1e-4, atol=1e-4)


CONV_T = [
    {},
    {"strides": [2, 2]},
    {"strides": [3, 2], "pads": [1, 0, 2, 1]},
    {"strides": [2, 2], "output_padding": [1, 0]},
    {"dilations": [2, 1], "pads": [3, 1, 0, 2]},
    {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"strides": [2, 2], "auto_pad": "SAME_LOWER"},
]


@pytest.mark.parametrize("attrs", CONV_T)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_transpose(kit: Any, attrs: dict[str, Any], bias: bool):
    x = kit.rand(2, 4, 4, 5)
    groups = attrs.get("group", 1)
    inits = {"w": kit.rand(4, 6 // groups, 3, 4, seed=1)}
    inputs = ["x", "w"]
    if bias:
        inits["b"] = kit.rand(6, seed=2)
        inputs.append("b")
    model = kit.model(
        [kit.node("ConvTranspose", inputs, **attrs)], {"x": x}, ["out"], inits
    )
    kit.check(model, {"x": x}, rtol=1e-4, atol=1e-4)


def _run(kit: Any, model: Any, x: Any) -> Any:
    (got,) = evaluate_function(import_onnx(model), "main", [x])
    return got


def test_conv_transpose_groups(kit: Any):
    # ONNX's reference ConvTranspose does not support groups (onnx 1.23): compare with
    # one reference run per group.
    x, w, b = kit.rand(2, 4, 4, 5), kit.rand(4, 3, 3, 2, seed=1), kit.rand(6, seed=2)
    attrs = {"strides": [2, 1], "pads": [1, 0, 0, 1]}
    node = kit.node("ConvTranspose", ["x", "w", "b"], group=2, **attrs)
    model = kit.model([node], {"x": x}, ["out"], {"w": w, "b": b}, infer=False)
    parts = []
    for g in range(2):
        single = kit.model(
            [kit.node("ConvTranspose", ["x", "w", "b"], **attrs)],
            {"x": x[:, 2 * g : 2 * g + 2]},
            ["out"],
            {"w": w[2 * g : 2 * g + 2], "b": b[3 * g : 3 * g + 3]},
        )
        parts.append(
            ReferenceEvaluator(single).run(None, {"x": x[:, 2 * g : 2 * g + 2]})[0]
        )
    np.testing.assert_allclose(
        _run(kit, model, x), np.concatenate(parts, axis=1), rtol=1e-5, atol=1e-5
    )


def test_conv_transpose_output_shape(kit: Any):
    # ONNX's reference ConvTranspose rejects output_shape (onnx 1.23): the same output
    # with the pads the specification derives from it (total 0 on H, 2 on W, the
    # larger half at the beginning).
    x, w = kit.rand(2, 4, 4, 5), kit.rand(4, 6, 3, 4, seed=1)
    shaped = kit.node("ConvTranspose", ["x", "w"], strides=[2, 2], output_shape=[9, 10])
    model = kit.model([shaped], {"x": x}, ["out"], {"w": w}, infer=False)
    padded = kit.node("ConvTranspose", ["x", "w"], strides=[2, 2], pads=[0, 1, 0, 1])
    want = ReferenceEvaluator(kit.model([padded], {"x": x}, ["out"], {"w": w})).run(
        None, {"x": x}
    )[0]
    got = _run(kit, model, x)
    assert got.shape == (2, 6, 9, 10)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs", [{}, {"strides": [3], "pads": [1, 2]}])
def test_conv_transpose_1d(kit: Any, attrs: dict[str, Any]):
    x = kit.rand(2, 3, 7)
    model = kit.model(
        [kit.node("ConvTranspose", ["x", "w"], **attrs)],
        {"x": x},
        ["out"],
        {"w": kit.rand(3, 2, 4, seed=1)},
    )
    kit.check(model, {"x": x}, rtol=1e-4, atol=1e-4)


def test_error_conv_transpose_runtime_weight(kit: Any):
    feeds = {"x": kit.rand(1, 2, 3, 3), "w": kit.rand(2, 2, 2, 2, seed=1)}
    model = kit.model([kit.node("ConvTranspose", ["x", "w"])], feeds, ["out"])
    kit.raises(model, "(ConvTranspose)", "weight", "compile-time constant")


POOL2D: list[tuple[str, str, tuple[int, ...], dict[str, Any]]] = [
    ("max_2x2", "MaxPool", (1, 3, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ("max_pads", "MaxPool", (2, 2, 7, 7), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    (
        "max_asym",
        "MaxPool",
        (1, 2, 6, 7),
        {"kernel_shape": [3, 2], "strides": [1, 2], "pads": [0, 1, 2, 0]},
    ),
    (
        "max_same_upper",
        "MaxPool",
        (1, 2, 7, 7),
        {"kernel_shape": [2, 2], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
    ),
    ("avg_2x2", "AveragePool", (1, 3, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    (
        "avg_pads_exclude",
        "AveragePool",
        (1, 2, 7, 7),
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
    ),
    (
        "avg_pads_include",
        "AveragePool",
        (1, 2, 7, 7),
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
    ),
    (
        "avg_asym_include",
        "AveragePool",
        (1, 2, 6, 7),
        {
            "kernel_shape": [3, 2],
            "strides": [2, 1],
            "pads": [2, 0, 1, 1],
            "count_include_pad": 1,
        },
    ),
    (
        "avg_valid",
        "AveragePool",
        (1, 2, 7, 7),
        {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "VALID"},
    ),
    (
        "avg_dilations_one",
        "AveragePool",
        (1, 2, 6, 6),
        {"kernel_shape": [2, 2], "dilations": [1, 1]},
    ),
]


@pytest.mark.parametrize(
    ("op", "x_shape", "attrs"), [c[1:] for c in POOL2D], ids=[c[0] for c in POOL2D]
)
def test_pool(kit: Any, op: str, x_shape: tuple[int, ...], attrs: dict[str, Any]):
    x = kit.rand(*x_shape)
    model = kit.model([kit.node(op, ["x"], **attrs)], {"x": x}, ["out"], opset=19)
    module = kit.check(model, {"x": x})
    pool = next(o for o in module.walk() if isinstance(o, graph.PoolOp))
    assert pool.kind.data == ("max" if op == "MaxPool" else "avg")
    assert (pool.count_include_pad is not None) == bool(attrs.get("count_include_pad"))


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_same_lower(kit: Any, op: str):
    """
    SAME_LOWER puts the extra padding first: here it equals explicit pads [1, 1, 0, 0].
    (onnx 1.23's ReferenceEvaluator gets MaxPool SAME_LOWER wrong: it returns 3x3 where
    ONNX shape inference and the spec say 4x4, so compare with explicit pads.)
    """
    x = kit.rand(1, 2, 7, 7)
    window = {"kernel_shape": [2, 2], "strides": [2, 2]}
    same = kit.model(
        [kit.node(op, ["x"], auto_pad="SAME_LOWER", **window)], {"x": x}, ["out"]
    )
    explicit = kit.model(
        [kit.node(op, ["x"], pads=[1, 1, 0, 0], **window)], {"x": x}, ["out"]
    )
    got = evaluate_function(import_onnx(same), "main", [x])[0]
    assert got.shape == (1, 2, 4, 4)
    want = ReferenceEvaluator(explicit).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-6)


def test_maxpool_unused_indices_are_fine(kit: Any):
    x = kit.rand(1, 1, 4, 4)
    node = helper.make_node("MaxPool", ["x"], ["out", "idx"], kernel_shape=[2, 2])
    kit.check(kit.model([node], {"x": x}, ["out"]), {"x": x})


def test_error_maxpool_indices_used(kit: Any):
    x = kit.rand(1, 1, 4, 4)
    node = helper.make_node("MaxPool", ["x"], ["out", "idx"], kernel_shape=[2, 2])
    model = kit.model([node], {"x": x}, ["out", "idx"])
    kit.raises(model, "(MaxPool)", "output 1", "'idx'")


def test_error_ceil_mode(kit: Any):
    x = kit.rand(1, 1, 5, 5)
    node = kit.node("MaxPool", ["x"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
    kit.raises(
        kit.model([node], {"x": x}, ["out"]),
        "node 'the_maxpool' (MaxPool)",
        "ceil_mode = 1",
    )


POOL = [
    ({"kernel_shape": [3]}, 1),
    ({"kernel_shape": [2], "strides": [2], "pads": [1, 1]}, 1),
    ({"kernel_shape": [2, 2, 2]}, 3),
    ({"kernel_shape": [3, 2, 2], "strides": [2, 1, 2]}, 3),
    ({"kernel_shape": [3, 3, 2], "strides": [2, 2, 1], "pads": [1, 1, 0, 1, 0, 1]}, 3),
]


@pytest.mark.parametrize(("attrs", "n"), POOL)
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("include_pad", [0, 1])
def test_pool_1d_3d(kit: Any, attrs: dict[str, Any], n: int, op: str, include_pad: int):
    x = kit.rand(2, 3, *([7, 6, 5][:n]))
    extra = {"count_include_pad": include_pad} if op == "AveragePool" else {}
    model = kit.model([kit.node(op, ["x"], **attrs, **extra)], {"x": x}, ["out"])
    kit.check(model, {"x": x})


@pytest.mark.parametrize(
    ("attrs", "shape"),
    [
        ({"kernel_shape": [2, 3], "dilations": [2, 2], "strides": [2, 2]}, (1, 2, 9, 10)),
        (
            {
                "kernel_shape": [3, 2],
                "dilations": [2, 3],
                "strides": [4, 3],
                "pads": [1, 2, 2, 0],
            },
            (1, 2, 12, 11),
        ),
        (
            {"kernel_shape": [4], "dilations": [3], "strides": [3], "pads": [2, 1]},
            (2, 2, 20),
        ),
    ],
)
def test_dilated_max_pool(kit: Any, attrs: dict[str, Any], shape: tuple[int, ...]):
    x = kit.rand(*shape)
    model = kit.model([kit.node("MaxPool", ["x"], **attrs)], {"x": x}, ["out"])
    kit.check(model, {"x": x}, rtol=0, atol=0)


@pytest.mark.parametrize("strides", [None, [3, 3]])
def test_error_dilation_not_dividing_stride(kit: Any, strides: list[int] | None):
    """A dilated window whose stride (1 if not given) the dilation does not divide."""
    x = kit.rand(1, 1, 8, 8)
    window: dict[str, Any] = {} if strides is None else {"strides": strides}
    node = kit.node("MaxPool", ["x"], kernel_shape=[2, 2], dilations=[2, 2], **window)
    kit.raises(kit.model([node], {"x": x}, ["out"]), "(MaxPool)", "dilations", "divide")


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (1, 2, 3, 4, 2)])
def test_global_pool(kit: Any, op: str, shape: tuple[int, ...]):
    # ONNX's reference GlobalMaxPool gets the shape wrong outside rank 4 (onnx 1.23):
    # compare with numpy.
    x = kit.rand(*shape)
    model = kit.model([kit.node(op, ["x"])], {"x": x}, ["out"])
    axes = tuple(range(2, len(shape)))
    want = (
        x.max(axis=axes, keepdims=True)
        if op == "GlobalMaxPool"
        else x.mean(axis=axes, keepdims=True)
    )
    np.testing.assert_allclose(_run(kit, model, x), want, rtol=1e-6, atol=1e-6)
    assert kit.ops(import_onnx(model)) == ["graph.reduce"]
