"""
Tests of `plmr.frontend.onnx`: every supported ONNX op, imported and run with plmr's
reference semantics, against `onnx.reference.ReferenceEvaluator`; names, printing, the
example models, and the error messages.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import Builtin, ModuleOp, StringAttr
from xdsl.dialects.func import Func
from xdsl.parser import Parser

from plmr.dialects import graph
from plmr.errors import PlmrError
from plmr.frontend.onnx import SUPPORTED_OPS, import_onnx, import_onnx_file, ssa_name
from plmr.runtime.reference import evaluate_function

Array = npt.NDArray[Any]

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "onnx"
EXAMPLE_MODELS = ["mlp", "attention", "conv_block", "transformer_block", "rnn_cell"]

F32 = TensorProto.FLOAT

_NP_TO_ONNX = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.int32): TensorProto.INT32,
}


# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------


def make_model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, Array],
    outputs: list[str],
    inits: dict[str, Array] | None = None,
    opset: int = 17,
    check: bool = True,
) -> onnx.ModelProto:
    """
    A model whose graph inputs have the shapes and types of the example arrays. With
    `check`, ONNX shape inference declares the output types and the model is checked.
    """
    g = helper.make_graph(
        nodes,
        "test",
        [
            helper.make_tensor_value_info(n, _NP_TO_ONNX[a.dtype], list(a.shape))
            for n, a in inputs.items()
        ],
        [helper.make_empty_tensor_value_info(n) for n in outputs],
        [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8 if opset < 19 else 9
    if check:
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        onnx.checker.check_model(model, full_check=True)
    return model


def run_both(
    model: onnx.ModelProto, feeds: dict[str, Array]
) -> tuple[ModuleOp, list[Array], list[Array]]:
    """Imports `model` and runs it with plmr and with ONNX's reference evaluator."""
    module = import_onnx(model)
    module.verify()
    got = evaluate_function(module, "main", list(feeds.values()))
    want = [np.asarray(w) for w in ReferenceEvaluator(model).run(None, feeds)]
    return module, got, want


def check(
    model: onnx.ModelProto,
    feeds: dict[str, Array],
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> ModuleOp:
    """Asserts that plmr and ONNX agree on `model` (shapes, dtypes and values)."""
    module, got, want = run_both(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return module


def rand(*shape: int, seed: int = 0, dtype: Any = np.float32) -> Array:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def ops_of(module: ModuleOp) -> list[str]:
    """The op names of the body of @main, without func.return."""
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    return [op.name for op in fn.body.block.ops if not isinstance(op, func.ReturnOp)]


def single(op: str, n_in: int = 1, **attrs: Any) -> onnx.NodeProto:
    names = ["x", "y", "z"][:n_in]
    return helper.make_node(op, names, ["out"], name=f"the_{op.lower()}", **attrs)


def context() -> Context:
    ctx = Context()
    for dialect in (Builtin, Func, graph.Graph):
        ctx.load_dialect(dialect)
    return ctx


# ---------------------------------------------------------------------------------------
# Elementwise ops
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "Tanh", "Exp", "Erf", "Neg", "Sqrt"])
def test_unary(op: str):
    x = rand(3, 5)
    if op == "Sqrt":
        x = np.abs(x) + 0.1
    module = check(make_model([single(op)], {"x": x}, ["out"]), {"x": x})
    assert ops_of(module) == [f"graph.{op.lower()}"]


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_unary_other_float_types(dtype: Any):
    x = rand(4, 3, dtype=dtype)
    model = make_model([single("Tanh")], {"x": x}, ["out"])
    check(model, {"x": x}, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("approximate", [None, "none", "tanh"])
def test_gelu(approximate: str | None):
    attrs = {} if approximate is None else {"approximate": approximate}
    x = rand(4, 6) * 3
    module = check(
        make_model([single("Gelu", **attrs)], {"x": x}, ["out"], opset=20), {"x": x}
    )
    text = str(module)
    assert ("graph.gelu %x tanh" in text) == (approximate == "tanh")


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize(
    "shapes",
    [((2, 3), (2, 3)), ((2, 3), (3,)), ((4, 1, 3), (2, 1)), ((1,), (2, 3)), ((), (2, 2))],
)
def test_binary_broadcast(op: str, shapes: tuple[tuple[int, ...], tuple[int, ...]]):
    x, y = rand(*shapes[0], seed=1), rand(*shapes[1], seed=2)
    if op == "Div":
        y = np.abs(y) + 0.5
    module = check(make_model([single(op, 2)], {"x": x, "y": y}, ["out"]), {"x": x, "y": y})
    assert ops_of(module) == [f"graph.{op.lower()}"]


def test_binary_int64():
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    y = np.array([1, -2, 3], dtype=np.int64)
    model = make_model([single("Mul", 2)], {"x": x, "y": y}, ["out"])
    check(model, {"x": x, "y": y})


@pytest.mark.parametrize(
    ("op", "const_first"), [("Mul", False), ("Mul", True), ("Div", False)]
)
@pytest.mark.parametrize("as_initializer", [False, True])
def test_mul_div_by_scalar_becomes_scale(op: str, const_first: bool, as_initializer: bool):
    c = np.float32(0.25 if op == "Mul" else math.sqrt(8.0))
    inputs = ["c", "x"] if const_first else ["x", "c"]
    nodes = [helper.make_node(op, inputs, ["out"])]
    inits: dict[str, Array] = {}
    if as_initializer:
        inits["c"] = np.asarray(c)
    else:
        nodes.insert(0, helper.make_node("Constant", [], ["c"], value_float=float(c)))
    x = rand(2, 4, 4)
    module = check(make_model(nodes, {"x": x}, ["out"], inits), {"x": x})
    assert ops_of(module) == ["graph.scale"]


def test_div_by_scalar_on_lhs_stays_div():
    nodes = [
        helper.make_node("Constant", [], ["c"], value_float=2.0),
        helper.make_node("Div", ["c", "x"], ["out"]),
    ]
    x = np.abs(rand(3, 2)) + 1
    module = check(make_model(nodes, {"x": x}, ["out"]), {"x": x})
    assert ops_of(module) == ["graph.constant", "graph.div"]


def test_mul_by_one_element_constant_that_broadcasts_stays_mul():
    # A [1, 1] constant times a [3] vector has shape [1, 3]: not a scale of the vector.
    x = rand(3)
    model = make_model(
        [single("Mul", 2)], {"x": x}, ["out"], {"y": np.full((1, 1), 3.0, np.float32)}
    )
    module = check(model, {"x": x})
    assert ops_of(module) == ["graph.constant", "graph.mul"]


def test_add_causal_mask_initializer():
    s = 4
    mask = np.triu(np.full((s, s), -1e9, np.float32), k=1).reshape(1, 1, s, s)
    x = rand(2, 3, s, s)
    nodes = [
        helper.make_node("Add", ["x", "mask"], ["m"]),
        helper.make_node("Softmax", ["m"], ["out"]),
    ]
    module = check(make_model(nodes, {"x": x}, ["out"], {"mask": mask}), {"x": x})
    assert "tensor<1x1x4x4xf32>" in str(module)


@pytest.mark.parametrize("exponent", [2.0, 0.5, 1.0])
@pytest.mark.parametrize("shape", [(), (1,), (3, 4)])
def test_pow(exponent: float, shape: tuple[int, ...]):
    x = np.abs(rand(3, 4)) + 0.1
    e = np.full(shape, exponent, np.float32)
    module = check(make_model([single("Pow", 2)], {"x": x}, ["out"], {"y": e}), {"x": x})
    expected = {2.0: ["graph.mul"], 0.5: ["graph.sqrt"], 1.0: []}[exponent]
    assert ops_of(module) == expected


def test_pow_int_exponent():
    x = rand(2, 3)
    model = make_model([single("Pow", 2)], {"x": x}, ["out"], {"y": np.array(2, np.int64)})
    check(model, {"x": x})


# ---------------------------------------------------------------------------------------
# Matrix products
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shapes",
    [
        ((3, 4), (4, 5)),
        ((2, 3, 4), (4, 5)),
        ((2, 3, 4), (2, 4, 5)),
        ((2, 1, 3, 4), (3, 4, 5)),
        ((4,), (4, 5)),
        ((3, 4), (4,)),
        ((4,), (4,)),
        ((2, 3, 4), (4,)),
        ((4,), (2, 4, 5)),
    ],
)
def test_matmul(shapes: tuple[tuple[int, ...], tuple[int, ...]]):
    x, y = rand(*shapes[0], seed=1), rand(*shapes[1], seed=2)
    check(make_model([single("MatMul", 2)], {"x": x, "y": y}, ["out"]), {"x": x, "y": y})


def test_matmul_with_weight_initializer():
    x = rand(2, 4)
    w = rand(4, 3, seed=5)
    module = check(make_model([single("MatMul", 2)], {"x": x}, ["out"], {"y": w}), {"x": x})
    assert ops_of(module) == ["graph.constant", "graph.matmul"]


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize(("alpha", "beta"), [(1.0, 1.0), (0.5, 2.0), (1.5, 0.0)])
@pytest.mark.parametrize("c_kind", ["none", "const_vector", "input_matrix", "const_row"])
def test_gemm(trans_a: int, trans_b: int, alpha: float, beta: float, c_kind: str):
    m, k, n = 3, 4, 5
    a = rand(*((k, m) if trans_a else (m, k)), seed=1)
    b = rand(*((n, k) if trans_b else (k, n)), seed=2)
    feeds = {"a": a, "b": b}
    inits: dict[str, Array] = {}
    inputs = ["a", "b"]
    if c_kind == "const_vector":
        inits["c"] = rand(n, seed=3)
        inputs.append("c")
    elif c_kind == "const_row":
        inits["c"] = rand(1, n, seed=3)
        inputs.append("c")
    elif c_kind == "input_matrix":
        feeds["c"] = rand(m, n, seed=3)
        inputs.append("c")
    node = helper.make_node(
        "Gemm", inputs, ["out"], transA=trans_a, transB=trans_b, alpha=alpha, beta=beta
    )
    module = check(make_model([node], feeds, ["out"], inits), feeds)
    matmul = next(op for op in module.walk() if isinstance(op, graph.MatmulOp))
    assert (matmul.transpose_a is not None) == bool(trans_a)
    assert (matmul.transpose_b is not None) == bool(trans_b)


def test_gemms_sharing_c_with_different_betas():
    a = rand(2, 3)
    inits = {"b": rand(3, 4, seed=1), "c": rand(4, seed=2)}
    nodes = [
        helper.make_node("Gemm", ["a", "b", "c"], ["y1"], beta=2.0),
        helper.make_node("Gemm", ["a", "b", "c"], ["y2"], beta=-0.5),
        helper.make_node("Gemm", ["a", "b", "c"], ["y3"]),
    ]
    check(make_model(nodes, {"a": a}, ["y1", "y2", "y3"], inits), {"a": a})


def test_graph_input_with_initializer_is_a_constant():
    x = rand(2, 3)
    w = rand(2, 3, seed=1)
    model = make_model([single("Add", 2)], {"x": x}, ["out"], {"y": w})
    model.graph.input.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]))
    module = check(model, {"x": x})
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    assert len(fn.args) == 1
    assert ops_of(module) == ["graph.constant", "graph.add"]


# ---------------------------------------------------------------------------------------
# Shape ops
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("perm", [None, [0, 2, 1], [2, 0, 1], [1, 0, 2]])
def test_transpose(perm: list[int] | None):
    attrs = {} if perm is None else {"perm": perm}
    x = rand(2, 3, 4)
    module = check(make_model([single("Transpose", **attrs)], {"x": x}, ["out"]), {"x": x})
    op = next(op for op in module.walk() if isinstance(op, graph.TransposeOp))
    assert list(op.perm.get_values()) == (perm or [2, 1, 0])


@pytest.mark.parametrize(
    "shape", [[6, 4], [0, -1], [-1], [2, 0, 2, 2], [-1, 3, 1], [2, 3, 4], [0, 0, 0]]
)
@pytest.mark.parametrize("opset", [13, 19])
def test_reshape(shape: list[int], opset: int):
    x = rand(2, 3, 4)
    nodes = [single("Reshape", 2)]
    model = make_model(nodes, {"x": x}, ["out"], {"y": np.array(shape, np.int64)}, opset)
    check(model, {"x": x})


def test_reshape_allowzero_with_nonzero_shape():
    x = rand(2, 6)
    node = helper.make_node("Reshape", ["x", "s"], ["out"], allowzero=1)
    model = make_model([node], {"x": x}, ["out"], {"s": np.array([3, 4], np.int64)}, 19)
    check(model, {"x": x})


def test_reshape_shape_from_constant_node():
    x = rand(2, 3, 4)
    nodes = [
        helper.make_node("Constant", [], ["s"], value_ints=[4, -1]),
        helper.make_node("Reshape", ["x", "s"], ["out"]),
    ]
    module = check(make_model(nodes, {"x": x}, ["out"]), {"x": x})
    assert ops_of(module) == ["graph.reshape"]


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_flatten(axis: int):
    x = rand(2, 3, 4)
    check(make_model([single("Flatten", axis=axis)], {"x": x}, ["out"]), {"x": x})


@pytest.mark.parametrize("axes", [None, [0], [-2], [0, 2]])
@pytest.mark.parametrize("opset", [13, 18])
def test_squeeze(axes: list[int] | None, opset: int):
    x = rand(1, 3, 1, 4)
    inits = {} if axes is None else {"y": np.array(axes, np.int64)}
    node = single("Squeeze", 1 if axes is None else 2)
    check(make_model([node], {"x": x}, ["out"], inits, opset), {"x": x})


@pytest.mark.parametrize("axes", [[0], [-1], [0, 3], [1, 2], [-1, 0]])
def test_unsqueeze(axes: list[int]):
    x = rand(3, 4)
    model = make_model(
        [single("Unsqueeze", 2)], {"x": x}, ["out"], {"y": np.array(axes, np.int64)}
    )
    check(model, {"x": x})


@pytest.mark.parametrize("axis", [0, 1, -1, 2])
@pytest.mark.parametrize("with_constant", [False, True])
def test_concat(axis: int, with_constant: bool):
    x, y = rand(2, 3, 4, seed=1), rand(2, 3, 4, seed=2)
    feeds = {"x": x, "y": y}
    inits: dict[str, Array] = {}
    if with_constant:
        inits["z"] = rand(2, 3, 4, seed=3)
        node = single("Concat", 3, axis=axis)
    else:
        node = single("Concat", 2, axis=axis)
    check(make_model([node], feeds, ["out"], inits), feeds)


def _split_model(
    x: Array,
    axis: int,
    n_out: int,
    opset: int,
    split: list[int] | None,
    num_outputs: int | None,
) -> onnx.ModelProto:
    outs = [f"o{i}" for i in range(n_out)]
    attrs: dict[str, Any] = {"axis": axis}
    if num_outputs is not None:
        attrs["num_outputs"] = num_outputs
    inputs = ["x", "s"] if split is not None else ["x"]
    inits = {} if split is None else {"s": np.array(split, np.int64)}
    node = helper.make_node("Split", inputs, outs, name="split", **attrs)
    return make_model([node], {"x": x}, outs, inits, opset)


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
    shape: tuple[int, ...],
    axis: int,
    n_out: int,
    opset: int,
    split: list[int] | None,
    num_outputs: int | None,
):
    x = rand(*shape)
    module = check(_split_model(x, axis, n_out, opset, split, num_outputs), {"x": x})
    assert ops_of(module) == ["graph.split"]


@pytest.mark.parametrize(
    ("axis", "indices"),
    [
        (0, np.array([[0, 4], [2, 1]], np.int64)),
        (0, np.array([-1, -5, 3], np.int64)),
        (1, np.array([3, -2, 0], np.int64)),
        (-1, np.array([[1], [2]], np.int32)),
        (1, np.array(2, np.int64)),
    ],
)
@pytest.mark.parametrize("const_indices", [False, True])
def test_gather(axis: int, indices: Array, const_indices: bool):
    data = rand(5, 4)
    feeds = {"x": data}
    inits: dict[str, Array] = {}
    if const_indices:
        inits["y"] = indices
    else:
        feeds["y"] = indices
    model = make_model([single("Gather", 2, axis=axis)], feeds, ["out"], inits)
    check(model, feeds)


def test_gather_embedding_table_initializer():
    table = rand(10, 6)
    ids = np.array([[1, 9, 0, 3]], np.int64)
    model = make_model(
        [helper.make_node("Gather", ["embedding", "ids"], ["out"])],
        {"ids": ids},
        ["out"],
        {"embedding": table},
    )
    module = check(model, {"ids": ids})
    assert "graph.gather %embedding, %ids" in str(module)


# ---------------------------------------------------------------------------------------
# Reductions and normalizations
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceMean"])
@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("keepdims", [0, 1, None])
@pytest.mark.parametrize("axes", [[1], [0, 2], [-1], None])
def test_reduce(op: str, opset: int, keepdims: int | None, axes: list[int] | None):
    x = rand(2, 3, 4)
    axes_as_input = op == "ReduceSum" or opset >= 18
    attrs: dict[str, Any] = {} if keepdims is None else {"keepdims": keepdims}
    inits: dict[str, Array] = {}
    inputs = ["x"]
    if axes is not None and axes_as_input:
        inits["axes"] = np.array(axes, np.int64)
        inputs.append("axes")
    elif axes is not None:
        attrs["axes"] = axes
    node = helper.make_node(op, inputs, ["out"], **attrs)
    module = check(make_model([node], {"x": x}, ["out"], inits, opset), {"x": x})
    assert ops_of(module) == ["graph.reduce"]


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean"])
def test_reduce_noop_with_empty_axes(op: str):
    x = rand(2, 3)
    node = helper.make_node(op, ["x"], ["out"], noop_with_empty_axes=1)
    module = check(make_model([node], {"x": x}, ["out"], opset=18), {"x": x})
    assert ops_of(module) == []


@pytest.mark.parametrize("axis", [None, 0, 1, -2, 2])
def test_softmax(axis: int | None):
    attrs = {} if axis is None else {"axis": axis}
    x = rand(2, 3, 4) * 4
    check(make_model([single("Softmax", **attrs)], {"x": x}, ["out"], opset=13), {"x": x})


@pytest.mark.parametrize(
    ("axis", "with_bias", "epsilon"),
    [(-1, True, None), (-1, False, None), (1, True, 1e-3), (-2, False, 1e-6)],
)
def test_layer_normalization(axis: int, with_bias: bool, epsilon: float | None):
    x = rand(2, 3, 4) * 3 + 1
    norm_shape = x.shape[axis % x.ndim :]
    inits = {"scale": rand(*norm_shape, seed=4)}
    inputs = ["x", "scale"]
    if with_bias:
        inits["bias"] = rand(*norm_shape, seed=5)
        inputs.append("bias")
    attrs: dict[str, Any] = {"axis": axis}
    if epsilon is not None:
        attrs["epsilon"] = epsilon
    node = helper.make_node("LayerNormalization", inputs, ["out"], **attrs)
    module = check(make_model([node], {"x": x}, ["out"], inits), {"x": x})
    assert ops_of(module)[-1] == "graph.layernorm"


# ---------------------------------------------------------------------------------------
# Convolution and pooling
# ---------------------------------------------------------------------------------------

CONV_CASES: list[
    tuple[str, tuple[int, int, int, int], tuple[int, ...], dict[str, Any], bool]
] = [
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
    [c[1:] for c in CONV_CASES],
    ids=[c[0] for c in CONV_CASES],
)
def test_conv(
    x_shape: tuple[int, ...], w_shape: tuple[int, ...], attrs: dict[str, Any], bias: bool
):
    x = rand(*x_shape)
    inits = {"w": rand(*w_shape, seed=7)}
    inputs = ["x", "w"]
    if bias:
        inits["b"] = rand(w_shape[0], seed=8)
        inputs.append("b")
    node = helper.make_node("Conv", inputs, ["out"], name="conv", **attrs)
    module = check(make_model([node], {"x": x}, ["out"], inits), {"x": x})
    assert ops_of(module)[-1] == "graph.conv2d"


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_same_lower(op: str):
    """
    SAME_LOWER puts the extra padding first: here it equals explicit pads [1, 1, 0, 0].
    (onnx 1.23's ReferenceEvaluator gets MaxPool SAME_LOWER wrong: it returns 3x3 where
    ONNX shape inference and the spec say 4x4, so compare with explicit pads.)
    """
    x = rand(1, 2, 7, 7)
    window = {"kernel_shape": [2, 2], "strides": [2, 2]}
    same = make_model([single(op, auto_pad="SAME_LOWER", **window)], {"x": x}, ["out"])
    explicit = make_model([single(op, pads=[1, 1, 0, 0], **window)], {"x": x}, ["out"])
    got = evaluate_function(import_onnx(same), "main", [x])[0]
    assert got.shape == (1, 2, 4, 4)
    want = ReferenceEvaluator(explicit).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-6)


def test_conv_with_weight_as_input():
    x, w = rand(1, 2, 5, 5), rand(3, 2, 3, 3, seed=1)
    node = helper.make_node("Conv", ["x", "w"], ["out"], pads=[1, 1, 1, 1])
    check(make_model([node], {"x": x, "w": w}, ["out"]), {"x": x, "w": w})


POOL_CASES: list[tuple[str, str, tuple[int, ...], dict[str, Any]]] = [
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
    ("op", "x_shape", "attrs"), [c[1:] for c in POOL_CASES], ids=[c[0] for c in POOL_CASES]
)
def test_pool(op: str, x_shape: tuple[int, ...], attrs: dict[str, Any]):
    x = rand(*x_shape)
    module = check(make_model([single(op, **attrs)], {"x": x}, ["out"], opset=19), {"x": x})
    pool = next(o for o in module.walk() if isinstance(o, graph.PoolOp))
    assert pool.kind.data == ("max" if op == "MaxPool" else "avg")
    assert (pool.count_include_pad is not None) == bool(attrs.get("count_include_pad"))


# ---------------------------------------------------------------------------------------
# Constants, Identity, folding
# ---------------------------------------------------------------------------------------


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
def test_constant(attr: str, value: Any):
    is_int = attr.startswith("value_int")
    x = np.arange(8, dtype=np.int64).reshape(2, 4) if is_int else rand(2, 4)
    nodes = [
        helper.make_node("Constant", [], ["c"], **{attr: value}),
        helper.make_node("Sub", ["x", "c"], ["out"]),
    ]
    check(make_model(nodes, {"x": x}, ["out"]), {"x": x})


def test_constant_as_output():
    x = rand(2)
    nodes = [
        helper.make_node("Constant", [], ["c"], value_floats=[1.0, 2.0]),
        helper.make_node("Identity", ["x"], ["y"]),
    ]
    module = check(make_model(nodes, {"x": x}, ["y", "c"]), {"x": x})
    assert "func.return %x, %c" in str(module)


@pytest.mark.parametrize("source", ["input", "constant"])
def test_identity(source: str):
    x = rand(3, 2)
    if source == "input":
        model = make_model([single("Identity")], {"x": x}, ["out"])
        module = check(model, {"x": x})
        assert ops_of(module) == []
        return
    nodes = [
        helper.make_node("Identity", ["w"], ["w2"]),
        helper.make_node("Add", ["x", "w2"], ["out"]),
    ]
    check(make_model(nodes, {"x": x}, ["out"], {"w": rand(3, 2, seed=3)}), {"x": x})


def test_data_movement_on_constants_is_folded():
    x = rand(3, 4)
    w = rand(4, 3, seed=1)
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
        "zero": np.array([0], np.int64),
        "one": np.array(1, np.int64),
        "shape": np.array([3, 4], np.int64),
    }
    module = check(make_model(nodes, {"x": x}, ["out"], inits), {"x": x})
    assert ops_of(module) == ["graph.constant", "graph.add"]


def test_reshape_shape_computed_from_constants():
    x = rand(2, 3, 4)
    nodes = [
        helper.make_node("Constant", [], ["a"], value_ints=[2]),
        helper.make_node("Constant", [], ["b"], value_ints=[-1]),
        helper.make_node("Concat", ["a", "b"], ["s"], axis=0),
        helper.make_node("Reshape", ["x", "s"], ["out"]),
    ]
    module = check(make_model(nodes, {"x": x}, ["out"]), {"x": x})
    assert ops_of(module) == ["graph.reshape"]


# ---------------------------------------------------------------------------------------
# Names, printing, parsing
# ---------------------------------------------------------------------------------------


def test_names_are_kept_as_arg_and_res_attrs():
    x, h = rand(2, 3), rand(2, 3, seed=1)
    nodes = [
        helper.make_node("Add", ["input:0", "hidden/state"], ["/block/Add_output_0"]),
        helper.make_node("Relu", ["/block/Add_output_0"], ["out.1"]),
    ]
    model = make_model(
        nodes, {"input:0": x, "hidden/state": h}, ["out.1", "/block/Add_output_0"]
    )
    module = check(model, {"input:0": x, "hidden/state": h})
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


def test_func_name():
    x = rand(2)
    module = import_onnx(make_model([single("Relu")], {"x": x}, ["out"]), func_name="net")
    assert "func.func @net(" in str(module)
    np.testing.assert_array_equal(
        evaluate_function(module, "net", [x])[0], np.maximum(x, 0)
    )


@pytest.mark.parametrize("name", EXAMPLE_MODELS)
def test_example_round_trips_through_print_and_parse(name: str):
    module = import_onnx_file(str(EXAMPLES / f"{name}.onnx"))
    text = str(module)
    parsed = Parser(context(), text).parse_module()
    parsed.verify()
    assert str(parsed) == text


def test_small_model_round_trips_with_all_kinds_of_constants():
    x = rand(1, 2, 4, 4)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Div", ["c", "two"], ["d"]),
        helper.make_node("Gather", ["d", "idx"], ["out"], axis=1),
    ]
    inits = {
        "w": rand(3, 2, 3, 3, seed=1),
        "two": np.array(2.0, np.float32),
        "idx": np.array([2, -1, 0], np.int64),
    }
    model = make_model(nodes, {"x": x}, ["out"], inits)
    module = check(model, {"x": x})
    text = str(module)
    parsed = Parser(context(), text).parse_module()
    assert str(parsed) == text
    np.testing.assert_array_equal(
        evaluate_function(parsed, "main", [x])[0], evaluate_function(module, "main", [x])[0]
    )


# ---------------------------------------------------------------------------------------
# Example models
# ---------------------------------------------------------------------------------------


def _example_feeds(model: onnx.ModelProto) -> dict[str, Array]:
    rng = np.random.default_rng(42)
    return {
        vi.name: rng.standard_normal(
            [d.dim_value for d in vi.type.tensor_type.shape.dim]
        ).astype(np.float32)
        for vi in model.graph.input
    }


@pytest.mark.parametrize("name", EXAMPLE_MODELS)
def test_example_model_matches_onnx(name: str):
    path = EXAMPLES / f"{name}.onnx"
    assert path.stat().st_size < 200_000
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    feeds = _example_feeds(model)
    module = import_onnx_file(str(path))
    got = evaluate_function(module, "main", list(feeds.values()))
    want = ReferenceEvaluator(model).run(None, feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    assert fn.arg_attrs is not None
    assert [d.data["plmr.name"] for d in fn.arg_attrs.data] == [
        StringAttr(vi.name) for vi in model.graph.input
    ]


@pytest.mark.parametrize("name", EXAMPLE_MODELS)
def test_example_mlir_is_up_to_date(name: str):
    module = import_onnx_file(str(EXAMPLES / f"{name}.onnx"))
    assert (EXAMPLES / f"{name}.mlir").read_text() == str(module) + "\n"


def test_example_ops():
    """The examples exercise what their descriptions promise."""
    expected = {
        "mlp": {"graph.matmul", "graph.add", "graph.relu"},
        "attention": {"graph.scale", "graph.softmax", "graph.transpose", "graph.reshape"},
        "conv_block": {"graph.conv2d", "graph.pool", "graph.reshape", "graph.relu"},
        "transformer_block": {
            "graph.layernorm",
            "graph.erf",
            "graph.gelu",
            "graph.softmax",
        },
        "rnn_cell": {"graph.sigmoid", "graph.tanh", "graph.sub", "graph.matmul"},
    }
    for name, ops in expected.items():
        module = import_onnx_file(str(EXAMPLES / f"{name}.onnx"))
        assert ops <= set(ops_of(module)), name


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------


def _raises(model: onnx.ModelProto, *fragments: str) -> str:
    with pytest.raises(PlmrError) as info:
        import_onnx(model)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


def test_error_unsupported_op():
    x = rand(2, 3)
    model = make_model(
        [helper.make_node("Cos", ["x"], ["out"], name="my_cos")], {"x": x}, ["out"]
    )
    message = _raises(
        model, "node 'my_cos' (Cos)", "'Cos' is not supported", "supported ops:"
    )
    for op in SUPPORTED_OPS:
        assert op in message


def test_error_unsupported_op_unnamed_node_uses_index():
    x = rand(2, 3)
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Cos", ["r"], ["out"]),
    ]
    _raises(make_model(nodes, {"x": x}, ["out"]), "node #1 (Cos)")


def test_error_custom_domain():
    x = rand(2, 3)
    node = helper.make_node("FusedGemm", ["x"], ["out"], name="fg", domain="com.microsoft")
    model = make_model([node], {"x": x}, ["out"], check=False)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    _raises(model, "node 'fg' (FusedGemm)", "com.microsoft", "default-domain")


def test_error_dynamic_dim():
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["out"])],
        "dyn",
        [helper.make_tensor_value_info("x", F32, ["batch", 4])],
        [helper.make_tensor_value_info("out", F32, None)],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    _raises(
        model,
        "graph input 'x'",
        "dimension 0",
        "'batch'",
        "static shapes",
        "update_model_dims",
    )


def test_error_unknown_dim():
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["out"])],
        "dyn",
        [helper.make_tensor_value_info("x", F32, [2, None])],
        [helper.make_tensor_value_info("out", F32, None)],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    _raises(model, "graph input 'x'", "dimension 1", "unknown size")


def test_error_unknown_rank():
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["out"])],
        "norank",
        [helper.make_tensor_value_info("x", F32, None)],
        [helper.make_tensor_value_info("out", F32, None)],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    _raises(model, "graph input 'x'", "no shape")


def test_error_opset_newer_than_onnx():
    x = rand(2, 3)
    newer = onnx.defs.onnx_opset_version() + 1
    model = make_model([single("Relu")], {"x": x}, ["out"], opset=newer, check=False)
    _raises(model, f"opset {newer}", f"up to {newer - 1}", "upgrade onnx")


def test_error_opset_conversion_fails():
    # The converter rejects an op that no opset defines; its failure is one PlmrError.
    g = helper.make_graph(
        [helper.make_node("Foo", ["x"], ["out"], domain="")],
        "bad",
        [helper.make_tensor_value_info("x", F32, [2])],
        [helper.make_tensor_value_info("out", F32, [2])],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 4
    _raises(model, "opset 9", "onnx.version_converter", "failed")


def test_error_no_default_opset():
    x = rand(2, 3)
    model = make_model([single("Relu")], {"x": x}, ["out"], check=False)
    del model.opset_import[:]
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    _raises(model, "no default-domain ONNX opset")


def test_error_non_constant_reshape_shape():
    x = rand(2, 6)
    s = np.array([3, 4], np.int64)
    node = helper.make_node("Reshape", ["x", "s"], ["out"], name="reshape_dyn")
    model = make_model([node], {"x": x, "s": s}, ["out"])
    _raises(
        model,
        "node 'reshape_dyn' (Reshape)",
        "target shape",
        "'s'",
        "compile-time constant",
    )


@pytest.mark.parametrize("op", ["Unsqueeze", "Squeeze"])
def test_error_non_constant_axes(op: str):
    x = rand(1, 3)
    model = make_model(
        [single(op, 2)], {"x": x, "y": np.array([0], np.int64)}, ["out"], check=False
    )
    _raises(model, f"({op})", "axes", "compile-time constant")


def test_error_ceil_mode():
    x = rand(1, 1, 5, 5)
    node = single("MaxPool", kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
    _raises(
        make_model([node], {"x": x}, ["out"]),
        "node 'the_maxpool' (MaxPool)",
        "ceil_mode = 1",
    )


def test_error_pool_dilations():
    x = rand(1, 1, 6, 6)
    node = single("MaxPool", kernel_shape=[2, 2], dilations=[2, 2])
    _raises(make_model([node], {"x": x}, ["out"]), "(MaxPool)", "dilations")


def test_error_maxpool_indices_used():
    x = rand(1, 1, 4, 4)
    node = helper.make_node("MaxPool", ["x"], ["out", "idx"], kernel_shape=[2, 2])
    model = make_model([node], {"x": x}, ["out", "idx"])
    _raises(model, "(MaxPool)", "output 1", "'idx'")


def test_maxpool_unused_indices_are_fine():
    x = rand(1, 1, 4, 4)
    node = helper.make_node("MaxPool", ["x"], ["out", "idx"], kernel_shape=[2, 2])
    check(make_model([node], {"x": x}, ["out"]), {"x": x})


def test_error_conv_4d():
    x = rand(1, 1, 3, 3, 3, 3)
    model = make_model(
        [helper.make_node("Conv", ["x", "w"], ["out"], name="c4")],
        {"x": x},
        ["out"],
        {"w": rand(1, 1, 2, 2, 2, 2)},
    )
    _raises(model, "node 'c4' (Conv)", "1-D, 2-D, 3-D")


def test_error_layernorm_extra_outputs_used():
    x = rand(2, 4)
    node = helper.make_node(
        "LayerNormalization", ["x", "g"], ["out", "mean"], name="ln", axis=-1
    )
    model = make_model([node], {"x": x}, ["out", "mean"], {"g": rand(4)})
    _raises(model, "node 'ln' (LayerNormalization)", "output 1", "'mean'")


def test_error_pow_exponent_not_one_value():
    x = rand(2, 2)
    model = make_model(
        [single("Pow", 2)], {"x": x}, ["out"], {"y": np.array([2.0, 3.0], np.float32)}
    )
    _raises(model, "(Pow)", "2 distinct values", "constant scalar exponent")


def test_error_pow_runtime_exponent():
    x = rand(2, 2)
    model = make_model([single("Pow", 2)], {"x": x, "y": rand(2, 2)}, ["out"])
    _raises(model, "(Pow)", "exponent", "computed at run time")


def test_error_shape_mismatch_names_node():
    x, y = rand(2, 3), rand(4)
    model = make_model([single("Add", 2)], {"x": x, "y": y}, ["out"], check=False)
    _raises(model, "node 'the_add' (Add)", "broadcast", "[2, 3]", "[4]")


def test_error_gather_constant_indices_out_of_range():
    x = rand(3, 2)
    model = make_model(
        [single("Gather", 2)], {"x": x}, ["out"], {"y": np.array([0, 3], np.int64)}
    )
    _raises(model, "(Gather)", "indices span [0, 3]", "size 3")


def test_error_split_not_divisible():
    x = rand(2, 5)
    model = make_model(
        [helper.make_node("Split", ["x"], ["a", "b"], axis=1)],
        {"x": x},
        ["a", "b"],
        opset=13,
        check=False,
    )
    _raises(model, "(Split)", "2 equal parts")


def test_error_unsupported_input_type():
    g = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["out"])],
        "b",
        [helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
        [helper.make_tensor_value_info("out", TensorProto.STRING, [2])],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    _raises(model, "graph input 'x'", "STRING", "float32")


def test_error_gelu_approximate():
    x = rand(2)
    node = single("Gelu", approximate="erf")
    _raises(make_model([node], {"x": x}, ["out"], opset=20, check=False), "approximate")


def test_error_declared_output_shape_mismatch():
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["out"])],
        "bad",
        [helper.make_tensor_value_info("x", F32, [2, 3])],
        [helper.make_tensor_value_info("out", F32, [3, 2])],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    _raises(model, "graph output 'out'", "[3, 2]", "[2, 3]")


def test_error_undefined_input():
    x = rand(2)
    model = make_model([single("Add", 2)], {"x": x}, ["out"], check=False)
    _raises(model, "node 'the_add' (Add)", "'y'", "topologically")


def test_error_file_missing(tmp_path: Path):
    path = tmp_path / "missing.onnx"
    with pytest.raises(PlmrError, match=re.escape(str(path))):
        import_onnx_file(str(path))


@pytest.mark.parametrize("content", [b"", b"garbage\x00\xff\xfe"])
def test_error_file_not_a_model(tmp_path: Path, content: bytes):
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(PlmrError, match=re.escape(str(path))):
        import_onnx_file(str(path))


def test_import_file_with_external_data(tmp_path: Path):
    x = rand(2, 64)
    w = rand(64, 64, seed=1)
    model = make_model([single("MatMul", 2)], {"x": x}, ["out"], {"y": w})
    path = tmp_path / "ext.onnx"
    onnx.save(model, str(path), save_as_external_data=True, size_threshold=0)
    (data_file,) = [p for p in tmp_path.iterdir() if p != path]
    assert path.stat().st_size < w.nbytes  # the weight really is stored outside
    module = import_onnx_file(str(path))
    np.testing.assert_allclose(
        evaluate_function(module, "main", [x])[0], x @ w, rtol=1e-5, atol=1e-5
    )
    data_file.unlink()
    with pytest.raises(PlmrError, match="cannot load the external data"):
        import_onnx_file(str(path))
