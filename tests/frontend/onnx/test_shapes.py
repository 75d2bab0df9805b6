"""Shape and data-movement handlers of `plmr.frontend.onnx`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import helper, numpy_helper

from plmr.dialects import graph

I64 = np.int64


@pytest.mark.parametrize("perm", [None, [0, 2, 1], [2, 0, 1], [1, 0, 2]])
def test_transpose(kit: Any, perm: list[int] | None):
    attrs = {} if perm is None else {"perm": perm}
    x = kit.rand(2, 3, 4)
    model = kit.model([kit.node("Transpose", ["x"], **attrs)], {"x": x}, ["out"])
    module = kit.check(model, {"x": x})
    op = next(op for op in module.walk() if isinstance(op, graph.TransposeOp))
    assert list(op.perm.get_values()) == (perm or [2, 1, 0])


@pytest.mark.parametrize(
    "shape", [[6, 4], [0, -1], [-1], [2, 0, 2, 2], [-1, 3, 1], [2, 3, 4], [0, 0, 0]]
)
@pytest.mark.parametrize("opset", [13, 19])
def test_reshape(kit: Any, shape: list[int], opset: int):
    x = kit.rand(2, 3, 4)
    nodes = [kit.node("Reshape", ["x", "s"])]
    model = kit.model(nodes, {"x": x}, ["out"], {"s": np.array(shape, I64)}, opset)
    kit.check(model, {"x": x})


def test_reshape_allowzero_with_nonzero_shape(kit: Any):
    x = kit.rand(2, 6)
    node = kit.node("Reshape", ["x", "s"], allowzero=1)
    model = kit.model([node], {"x": x}, ["out"], {"s": np.array([3, 4], I64)}, 19)
    kit.check(model, {"x": x})


def test_reshape_shape_from_constant_node(kit: Any):
    x = kit.rand(2, 3, 4)
    nodes = [
        helper.make_node("Constant", [], ["s"], value_ints=[4, -1]),
        helper.make_node("Reshape", ["x", "s"], ["out"]),
    ]
    module = kit.check(kit.model(nodes, {"x": x}, ["out"]), {"x": x})
    assert kit.ops(module) == ["graph.reshape"]


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_flatten(kit: Any, axis: int):
    x = kit.rand(2, 3, 4)
    model = kit.model([kit.node("Flatten", ["x"], axis=axis)], {"x": x}, ["out"])
    kit.check(model, {"x": x})


@pytest.mark.parametrize("axes", [None, [0], [-2], [0, 2]])
@pytest.mark.parametrize("opset", [13, 18])
def test_squeeze(kit: Any, axes: list[int] | None, opset: int):
    x = kit.rand(1, 3, 1, 4)
    inits = {} if axes is None else {"a": np.array(axes, I64)}
    node = kit.node("Squeeze", ["x"] if axes is None else ["x", "a"])
    kit.check(kit.model([node], {"x": x}, ["out"], inits, opset), {"x": x})


@pytest.mark.parametrize("axes", [[0], [-1], [0, 3], [1, 2], [-1, 0]])
def test_unsqueeze(kit: Any, axes: list[int]):
    x = kit.rand(3, 4)
    model = kit.model(
        [kit.node("Unsqueeze", ["x", "a"])], {"x": x}, ["out"], {"a": np.array(axes, I64)}
    )
    kit.check(model, {"x": x})


@pytest.mark.parametrize("axis", [0, 1, -1, 2])
@pytest.mark.parametrize("with_constant", [False, True])
def test_concat(kit: Any, axis: int, with_constant: bool):
    x, y = kit.rand(2, 3, 4, seed=1), kit.rand(2, 3, 4, seed=2)
    feeds = {"x": x, "y": y}
    inits: dict[str, Any] = {}
    inputs = ["x", "y"]
    if with_constant:
        inits["z"] = kit.rand(2, 3, 4, seed=3)
        inputs.append("z")
    node = kit.node("Concat", inputs, axis=axis)
    kit.check(kit.model([node], feeds, ["out"], inits), feeds)


@pytest.mark.parametrize(
    ("shape", "axis", "n_out", "opset", "split", "num_outputs"),
    [
        ((2, 6), 1, 2, 13, [2, 4], None),
        ((2, 6), -1, 3, 13, None, None),
        ((6, 2), 0, 3, 18, None, 3),
        ((2, 7), 1, 3, 18, None, 3),  # uneven: the last chunk is smaller
        ((3, 5, 2), 1, 3, 18, [1, 3, 1], None),
        ((4, 4), 0, 2, 13, None, None),
    ],
)
def test_split(
    kit: Any,
    shape: tuple[int, ...],
    axis: int,
    n_out: int,
    opset: int,
    split: list[int] | None,
    num_outputs: int | None,
):
    x = kit.rand(*shape)
    outs = [f"o{i}" for i in range(n_out)]
    attrs: dict[str, Any] = {"axis": axis}
    if num_outputs is not None:
        attrs["num_outputs"] = num_outputs
    inputs = ["x", "s"] if split is not None else ["x"]
    inits = {} if split is None else {"s": np.array(split, I64)}
    node = helper.make_node("Split", inputs, outs, name="split", **attrs)
    module = kit.check(kit.model([node], {"x": x}, outs, inits, opset), {"x": x})
    assert kit.ops(module) == ["graph.split"]


@pytest.mark.parametrize(
    ("axis", "indices"),
    [
        (0, np.array([[0, 4], [2, 1]], I64)),
        (0, np.array([-1, -5, 3], I64)),
        (1, np.array([3, -2, 0], I64)),
        (-1, np.array([[1], [2]], np.int32)),
        (1, np.array(2, I64)),
    ],
)
@pytest.mark.parametrize("const_indices", [False, True])
def test_gather(kit: Any, axis: int, indices: Any, const_indices: bool):
    data = kit.rand(5, 4)
    feeds = {"x": data}
    inits: dict[str, Any] = {}
    if const_indices:
        inits["i"] = indices
    else:
        feeds["i"] = indices
    model = kit.model([kit.node("Gather", ["x", "i"], axis=axis)], feeds, ["out"], inits)
    kit.check(model, feeds)


def test_gather_embedding_table_initializer(kit: Any):
    table = kit.rand(10, 6)
    ids = np.array([[1, 9, 0, 3]], I64)
    model = kit.model(
        [helper.make_node("Gather", ["embedding", "ids"], ["out"])],
        {"ids": ids},
        ["out"],
        {"embedding": table},
    )
    module = kit.check(model, {"ids": ids})
    assert "graph.gather %embedding, %ids" in str(module)


@pytest.mark.parametrize(
    ("attr", "value"),
    [
        (
            "value",
            numpy_helper.from_array(np.arange(4, dtype=np.float32).reshape(1, 4), "v"),
        ),
        ("value_float", 1.5),
        ("value_floats", [1.0, -2.0, 3.0, 0.5]),
        ("value_int", 3),
        ("value_ints", [1, 2, 3, 4]),
    ],
)
def test_constant(kit: Any, attr: str, value: Any):
    is_int = attr.startswith("value_int")
    x = np.arange(8, dtype=I64).reshape(2, 4) if is_int else kit.rand(2, 4)
    nodes = [
        helper.make_node("Constant", [], ["c"], **{attr: value}),
        helper.make_node("Sub", ["x", "c"], ["out"]),
    ]
    kit.check(kit.model(nodes, {"x": x}, ["out"]), {"x": x})


def test_constant_as_output(kit: Any):
    x = kit.rand(2)
    nodes = [
        helper.make_node("Constant", [], ["c"], value_floats=[1.0, 2.0]),
        helper.make_node("Identity", ["x"], ["y"]),
    ]
    module = kit.check(kit.model(nodes, {"x": x}, ["y", "c"]), {"x": x})
    assert "func.return %x, %c" in str(module)


@pytest.mark.parametrize(
    ("starts", "ends", "axes", "steps"),
    [
        ([1], [3], None, None),
        ([0, 1], [2, -1], [0, 2], None),
        ([-1], [-100], [1], [-1]),
        ([4], [0], [2], [-2]),
        ([0, 0], [9223372036854775807, 5], [1, 2], [2, 3]),
        ([-3], [10], [-1], [1]),
    ],
)
def test_slice(kit: Any, starts: list[int], ends: list[int], axes: Any, steps: Any):
    x = kit.rand(3, 4, 6)
    inits = {"s": np.array(starts, I64), "e": np.array(ends, I64)}
    inputs = ["x", "s", "e"]
    if axes is not None:
        inits["a"] = np.array(axes, I64)
        inputs.append("a")
    if steps is not None:
        if axes is None:
            inputs.append("")
        inits["t"] = np.array(steps, I64)
        inputs.append("t")
    module = kit.check(
        kit.model([kit.node("Slice", inputs)], {"x": x}, ["out"], inits), {"x": x}
    )
    assert kit.ops(module) == ["graph.slice"]


def test_slice_of_everything_is_identity(kit: Any):
    x = kit.rand(3, 4)
    inits = {"s": np.array([0], I64), "e": np.array([4], I64), "a": np.array([1], I64)}
    model = kit.model([kit.node("Slice", ["x", "s", "e", "a"])], {"x": x}, ["out"], inits)
    assert kit.ops(kit.check(model, {"x": x})) == []


def test_error_empty_slice(kit: Any):
    x = kit.rand(3, 4)
    inits = {"s": np.array([2], I64), "e": np.array([2], I64)}
    model = kit.model([kit.node("Slice", ["x", "s", "e"])], {"x": x}, ["out"], inits)
    kit.raises(model, "(Slice)", "empty")


def test_error_slice_runtime_starts(kit: Any):
    x = kit.rand(3, 4)
    feeds = {"x": x, "s": np.array([1], I64)}
    model = kit.model(
        [kit.node("Slice", ["x", "s", "e"])], feeds, ["out"], {"e": np.array([3], I64)}
    )
    kit.raises(model, "(Slice)", "starts", "compile-time constant")


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize(
    ("pads", "axes"),
    [([0, 1, 2, 1, 0, 2], None), ([1, 2], [1]), ([2, 0, 1, 0, 0, 3], None)],
)
def test_pad(kit: Any, mode: str, pads: list[int], axes: Any):
    x = kit.rand(3, 4, 5)
    inits: dict[str, Any] = {"p": np.array(pads, I64)}
    inputs = ["x", "p"]
    if mode == "constant":
        inits["v"] = np.array(1.5, np.float32)
        inputs.append("v")
    if axes is not None:
        if mode != "constant":
            inputs.append("")
        inits["a"] = np.array(axes, I64)
        inputs.append("a")
    model = kit.model([kit.node("Pad", inputs, mode=mode)], {"x": x}, ["out"], inits)
    kit.check(model, {"x": x}, rtol=0, atol=0)


def test_pad_negative_pads_crop(kit: Any):
    # ONNX's reference evaluator rejects negative pads: compare with numpy.
    from plmr.frontend.onnx import import_onnx
    from plmr.runtime.reference import evaluate_function

    x = kit.rand(3, 4, 5)
    model = kit.model(
        [kit.node("Pad", ["x", "p"], mode="edge")],
        {"x": x},
        ["out"],
        {"p": np.array([2, -1, 1, 0, 0, -2], I64)},
    )
    module = import_onnx(model)
    (got,) = evaluate_function(module, "main", [x])
    want = np.pad(x[:, 1:, :3], ((2, 0), (0, 0), (1, 0)), mode="edge")
    np.testing.assert_array_equal(got, want)
    assert kit.ops(module) == ["graph.slice", "graph.pad"]


def test_error_pad_wrap(kit: Any):
    x = kit.rand(3, 4)
    model = kit.model(
        [kit.node("Pad", ["x", "p"], mode="wrap")],
        {"x": x},
        ["out"],
        {"p": np.array([1, 1, 1, 1], I64)},
    )
    kit.raises(model, "(Pad)", "mode", "constant, reflect or edge")


@pytest.mark.parametrize("shape", [[2, 3, 4], [3, 1], [1, 1, 1, 4]])
def test_expand(kit: Any, shape: list[int]):
    x = kit.rand(3, 4)[:, :1] if shape == [3, 1] else kit.rand(3, 4)
    model = kit.model(
        [kit.node("Expand", ["x", "s"])], {"x": x}, ["out"], {"s": np.array(shape, I64)}
    )
    kit.check(model, {"x": x}, rtol=0, atol=0)


def test_expand_of_int_input(kit: Any):
    x = np.arange(3, dtype=I64).reshape(3, 1)
    model = kit.model(
        [kit.node("Expand", ["x", "s"])], {"x": x}, ["out"], {"s": np.array([3, 5], I64)}
    )
    assert kit.ops(kit.check(model, {"x": x})) == ["graph.expand"]


@pytest.mark.parametrize("repeats", [[1, 1], [2, 1], [3, 2]])
def test_tile(kit: Any, repeats: list[int]):
    x = kit.rand(2, 3)
    model = kit.model(
        [kit.node("Tile", ["x", "r"])], {"x": x}, ["out"], {"r": np.array(repeats, I64)}
    )
    kit.check(model, {"x": x}, rtol=0, atol=0)


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, -1, 2])
def test_trilu_of_runtime_tensor(kit: Any, upper: int, k: Any):
    x = kit.rand(2, 4, 5)
    inputs, inits = ["x"], {}
    if k is not None:
        inputs.append("k")
        inits["k"] = np.array(k, I64)
    model = kit.model([kit.node("Trilu", inputs, upper=upper)], {"x": x}, ["out"], inits)
    assert kit.ops(kit.check(model, {"x": x}, rtol=0, atol=0))[-1] == "graph.where"


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("const", [True, False])
def test_gather_elements(kit: Any, axis: int, const: bool):
    x = kit.rand(3, 4)
    rng = np.random.default_rng(1)
    if axis == 0:
        idx = rng.integers(-3, 3, size=(2, 4))
    else:
        idx = rng.integers(-4, 4, size=(3, 2))
    idx = idx.astype(I64)
    feeds = {"x": x}
    inits: dict[str, Any] = {}
    (inits if const else feeds)["i"] = idx
    model = kit.model(
        [kit.node("GatherElements", ["x", "i"], axis=axis)], feeds, ["out"], inits
    )
    kit.check(model, feeds, rtol=0, atol=0)


def test_error_gather_elements_constant_index_out_of_range(kit: Any):
    x = kit.rand(3, 4)
    model = kit.model(
        [kit.node("GatherElements", ["x", "i"], axis=1)],
        {"x": x},
        ["out"],
        {"i": np.array([[4]], I64)},
        infer=False,
    )
    kit.raises(model, "(GatherElements)", "indices span", "size 4")


@pytest.mark.parametrize(
    "indices",
    [np.array([[0, 1], [2, 3]]), np.array([[[1]], [[-1]]]), np.array([[1, 0, 2]])],
)
def test_gather_nd(kit: Any, indices: Any):
    x = kit.rand(3, 4, 5)
    model = kit.model(
        [kit.node("GatherND", ["x", "i"])], {"x": x}, ["out"], {"i": indices.astype(I64)}
    )
    kit.check(model, {"x": x}, rtol=0, atol=0)


def test_error_gather_nd_batch_dims(kit: Any):
    x = kit.rand(3, 4)
    model = kit.model(
        [kit.node("GatherND", ["x", "i"], batch_dims=1)],
        {"x": x},
        ["out"],
        {"i": np.zeros((3, 1), I64)},
    )
    kit.raises(model, "(GatherND)", "batch_dims")


@pytest.mark.parametrize(("start", "end"), [(None, None), (1, None), (-2, -1), (0, 10)])
def test_shape_of_runtime_tensor_folds(kit: Any, start: Any, end: Any):
    x = kit.rand(2, 3, 4)
    attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], **attrs),
        kit.node("Cast", ["s"], to=1),
    ]
    module = kit.check(kit.model(nodes, {"x": x}, ["out"]), {"x": x})
    assert kit.ops(module) == ["graph.constant"]


def test_size_folds(kit: Any):
    x = kit.rand(2, 3, 4)
    module = kit.check(kit.model([kit.node("Size", ["x"])], {"x": x}, ["out"]), {"x": x})
    assert kit.ops(module) == ["graph.constant"]


def test_error_constant_of_shape_runtime_shape(kit: Any):
    s = np.array([2, 3], I64)
    model = kit.model([kit.node("ConstantOfShape", ["s"])], {"s": s}, ["out"], infer=False)
    kit.raises(model, "(ConstantOfShape)", "compile-time constant")


def test_error_constant_of_shape_negative_shape_names_the_failure(kit: Any):
    x = kit.rand(2)
    nodes = [
        helper.make_node("ConstantOfShape", ["s"], ["c"], name="fill"),
        helper.make_node("Add", ["x", "c"], ["out"]),
    ]
    model = kit.model(nodes, {"x": x}, ["out"], {"s": np.array([-2], I64)}, infer=False)
    kit.raises(model, "node 'fill' (ConstantOfShape)", "evaluating it at import failed")


def test_error_non_constant_reshape_shape(kit: Any):
    x = kit.rand(2, 6)
    s = np.array([3, 4], I64)
    node = helper.make_node("Reshape", ["x", "s"], ["out"], name="reshape_dyn")
    model = kit.model([node], {"x": x, "s": s}, ["out"])
    kit.raises(
        model,
        "node 'reshape_dyn' (Reshape)",
        "target shape",
        "'s'",
        "compile-time constant",
    )


@pytest.mark.parametrize("op", ["Unsqueeze", "Squeeze"])
def test_error_non_constant_axes(kit: Any, op: str):
    x = kit.rand(1, 3)
    model = kit.model(
        [kit.node(op, ["x", "a"])], {"x": x, "a": np.array([0], I64)}, ["out"], infer=False
    )
    kit.raises(model, f"({op})", "axes", "compile-time constant")


def test_error_gather_constant_indices_out_of_range(kit: Any):
    x = kit.rand(3, 2)
    model = kit.model(
        [kit.node("Gather", ["x", "i"])], {"x": x}, ["out"], {"i": np.array([0, 3], I64)}
    )
    kit.raises(model, "(Gather)", "indices span [0, 3]", "size 3")


def test_error_split_not_divisible(kit: Any):
    x = kit.rand(2, 5)
    model = kit.model(
        [helper.make_node("Split", ["x"], ["a", "b"], axis=1)],
        {"x": x},
        ["a", "b"],
        opset=13,
        infer=False,
    )
    kit.raises(model, "(Split)", "2 equal parts")
