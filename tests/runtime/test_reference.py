"""
Tests of `plmr.runtime.reference`: each numpy function against ONNX's own reference
implementation (`onnx.reference.ReferenceEvaluator`) or an independent formula, plus the
type helpers and `evaluate_function`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from xdsl.builder import ImplicitBuilder
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    BFloat16Type,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    Float16Type,
    IndexType,
    IntegerType,
    ModuleOp,
    Signedness,
    TensorType,
    f32,
    f64,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Operation

from plmr.dialects import graph
from plmr.errors import PlmrError
from plmr.runtime import reference as ref
from plmr.values import dense_to_numpy, numpy_dtype

Array = npt.NDArray[Any]

_NP_TO_ONNX = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.bool_): TensorProto.BOOL,
}


def onnx_op(
    op: str,
    inputs: list[Array | None],
    opset: int = 17,
    n_out: int = 1,
    **attrs: Any,
) -> list[Array]:
    """Runs one ONNX op with ONNX's reference evaluator (None = omitted input)."""
    names = [f"in{i}" if a is not None else "" for i, a in enumerate(inputs)]
    outs = [f"out{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **attrs)
    given = [(n, a) for n, a in zip(names, inputs, strict=True) if a is not None]
    g = helper.make_graph(
        [node],
        "op",
        [helper.make_tensor_value_info(n, _NP_TO_ONNX[a.dtype], a.shape) for n, a in given],
        [helper.make_empty_tensor_value_info(o) for o in outs],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    results = ReferenceEvaluator(model).run(None, dict(given))
    return [np.asarray(r) for r in results]


def rand(*shape: int, seed: int = 0, dtype: Any = np.float32) -> Array:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def assert_close(got: Array, want: Array, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------------------
# Convolution and pooling
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "strides", "pads", "dilations", "groups", "bias"),
    [
        ((1, 3, 6, 6), (4, 3, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, True),
        ((2, 3, 7, 6), (5, 3, 3, 2), (2, 1), (1, 0, 2, 1), (1, 1), 1, False),
        ((1, 2, 9, 9), (2, 2, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1, True),
        ((1, 2, 9, 8), (3, 2, 2, 3), (2, 2), (0, 1, 0, 1), (3, 2), 1, True),
        ((1, 4, 6, 6), (6, 2, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2, True),
        ((2, 6, 5, 5), (6, 1, 3, 3), (1, 2), (1, 1, 1, 1), (1, 1), 6, False),
        ((1, 6, 8, 8), (3, 2, 3, 3), (2, 2), (1, 2, 1, 0), (2, 1), 3, True),
        ((1, 4, 4, 4), (8, 4, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, True),
    ],
)
def test_conv2d(
    x_shape: tuple[int, ...],
    w_shape: tuple[int, ...],
    strides: tuple[int, int],
    pads: tuple[int, int, int, int],
    dilations: tuple[int, int],
    groups: int,
    bias: bool,
):
    x, w = rand(*x_shape, seed=1), rand(*w_shape, seed=2)
    b = rand(w_shape[0], seed=3) if bias else None
    got = ref.conv2d(x, w, b, strides, pads, dilations, groups)
    (want,) = onnx_op(
        "Conv",
        [x, w, b],
        strides=list(strides),
        pads=list(pads),
        dilations=list(dilations),
        group=groups,
    )
    assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("kind", "count_include_pad"), [("max", False), ("avg", False), ("avg", True)]
)
@pytest.mark.parametrize(
    ("x_shape", "kernel", "strides", "pads"),
    [
        ((1, 2, 8, 8), (2, 2), (2, 2), (0, 0, 0, 0)),
        ((2, 3, 7, 7), (3, 3), (1, 1), (1, 1, 1, 1)),
        ((1, 2, 6, 7), (3, 2), (2, 1), (2, 0, 1, 1)),
        ((1, 1, 5, 9), (1, 4), (1, 3), (0, 3, 0, 2)),
    ],
)
def test_pool(
    kind: str,
    x_shape: tuple[int, ...],
    kernel: tuple[int, int],
    strides: tuple[int, int],
    pads: tuple[int, int, int, int],
    count_include_pad: bool,
):
    x = rand(*x_shape)
    got = ref.pool(kind, x, kernel, strides, pads, count_include_pad)
    attrs: dict[str, Any] = {
        "kernel_shape": list(kernel),
        "strides": list(strides),
        "pads": list(pads),
    }
    if kind == "avg":
        attrs["count_include_pad"] = int(count_include_pad)
    (want,) = onnx_op("MaxPool" if kind == "max" else "AveragePool", [x], **attrs)
    assert_close(got, want)


def test_max_pool_of_all_negative_values_ignores_padding():
    x = -np.abs(rand(1, 1, 3, 3)) - 1
    got = ref.pool("max", x, (2, 2), (1, 1), (1, 1, 1, 1))
    assert np.all(got < 0)
    (want,) = onnx_op("MaxPool", [x], kernel_shape=[2, 2], pads=[1, 1, 1, 1])
    assert_close(got, want)


# ---------------------------------------------------------------------------------------
# Normalizations, softmax, activations
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "axis", "with_bias", "epsilon"),
    [
        ((4, 16), -1, True, 1e-5),
        ((4, 16), -1, False, 1e-5),
        ((2, 3, 8), 1, True, 1e-3),
        ((2, 3, 8), -2, False, 1e-6),
        ((3, 5), 0, True, 1e-5),
    ],
)
def test_layernorm(shape: tuple[int, ...], axis: int, with_bias: bool, epsilon: float):
    x = rand(*shape) * 3 + 2
    norm = shape[axis % len(shape) :]
    scale = rand(*norm, seed=1)
    bias = rand(*norm, seed=2) if with_bias else None
    got = ref.layernorm(x, scale, bias, axis, epsilon)
    (want,) = onnx_op("LayerNormalization", [x, scale, bias], axis=axis, epsilon=epsilon)
    assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("axis", [-1, 0, 1, 2])
def test_softmax(axis: int):
    x = rand(2, 3, 5) * 10
    got = ref.softmax(x, axis)
    (want,) = onnx_op("Softmax", [x], opset=13, axis=axis)
    assert_close(got, want)
    np.testing.assert_allclose(got.sum(axis=axis), 1.0, rtol=1e-6)


def test_softmax_with_large_negative_mask_is_finite():
    x = rand(4, 4)
    x[np.triu_indices(4, k=1)] = -1e9
    got = ref.softmax(x)
    assert np.all(np.isfinite(got))
    assert np.all(got[np.triu_indices(4, k=1)] == 0)
    (want,) = onnx_op("Softmax", [x], opset=13)
    assert_close(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate: str, dtype: Any):
    x = np.linspace(-6, 6, 97).astype(dtype)
    got = ref.gelu(x, tanh=approximate == "tanh")
    (want,) = onnx_op("Gelu", [x], opset=20, approximate=approximate)
    assert_close(got, want, rtol=1e-6, atol=1e-7)


def test_gelu_variants_differ():
    x = np.linspace(-3, 3, 13).astype(np.float64)
    diff = np.abs(ref.gelu(x) - ref.gelu(x, tanh=True))
    assert diff.max() > 1e-5


def test_erf_matches_math_erf():
    x = np.concatenate(
        [
            np.linspace(-6, 6, 2001),
            np.array([0.0, 1e-12, -1e-8, 0.49999, 0.5, 0.50001, 3.9, 10.0, -27.0]),
        ]
    )
    got = ref.erf(x)
    want = np.array([math.erf(v) for v in x])
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300)


def test_erf_keeps_float32_and_matches_onnx():
    x = rand(200) * 3
    got = ref.erf(x)
    assert got.dtype == np.float32
    (want,) = onnx_op("Erf", [x])
    assert_close(got, want, rtol=1e-6, atol=1e-7)


def test_sigmoid_is_stable_and_matches_onnx():
    extreme = np.array([-1000, -80, 80, 1000], dtype=np.float32)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        got = ref.sigmoid(extreme)
    np.testing.assert_allclose(got, [0.0, math.exp(-80), 1.0, 1.0], rtol=1e-6, atol=0)
    x = np.linspace(-20, 20, 81, dtype=np.float32)
    (want,) = onnx_op("Sigmoid", [x])
    assert_close(ref.sigmoid(x), want)


def test_silu_and_relu():
    x = rand(50)
    np.testing.assert_allclose(
        ref.silu(x), x / (1 + np.exp(-x.astype(np.float64))), rtol=1e-6
    )
    (want,) = onnx_op("Relu", [x])
    assert_close(ref.relu(x), want)


@pytest.mark.parametrize("shape", [(4, 16), (2, 3, 8)])
@pytest.mark.parametrize("epsilon", [1e-5, 1e-2])
def test_rmsnorm_matches_formula(shape: tuple[int, ...], epsilon: float):
    x = rand(*shape) * 2 + 0.5
    w = rand(shape[-1], seed=1)
    got = ref.rmsnorm(x, w, -1, epsilon)
    x64 = x.astype(np.float64)
    rms = np.sqrt(np.mean(x64**2, axis=-1, keepdims=True) + epsilon)
    want = x64 / rms * w
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_rmsnorm_over_two_axes():
    x = rand(2, 3, 4)
    w = rand(3, 4, seed=1)
    got = ref.rmsnorm(x, w, 1, 1e-5)
    x64 = x.astype(np.float64)
    rms = np.sqrt(np.mean(x64**2, axis=(1, 2), keepdims=True) + 1e-5)
    np.testing.assert_allclose(got, x64 / rms * w, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------
# Matmul, reductions, gather, split
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [
        ((3, 4), (4, 5)),
        ((2, 3, 4), (4, 5)),
        ((2, 1, 3, 4), (5, 4, 6)),
        ((3, 4), (2, 4, 5)),
        ((1, 2, 3, 4), (2, 1, 4, 2)),
    ],
)
@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul(
    a_shape: tuple[int, ...],
    b_shape: tuple[int, ...],
    transpose_a: bool,
    transpose_b: bool,
):
    def stored(shape: tuple[int, ...], transposed: bool, seed: int) -> Array:
        """The operand as stored: with its last two dims swapped if transposed."""
        if transposed:
            shape = (*shape[:-2], shape[-1], shape[-2])
        return rand(*shape, seed=seed)

    a, b = stored(a_shape, transpose_a, 1), stored(b_shape, transpose_b, 2)
    got = ref.matmul(a, b, transpose_a, transpose_b)

    def swap(v: Array) -> list[int]:
        perm = list(range(v.ndim))
        perm[-2], perm[-1] = perm[-1], perm[-2]
        return perm

    a_eff = onnx_op("Transpose", [a], perm=swap(a))[0] if transpose_a else a
    b_eff = onnx_op("Transpose", [b], perm=swap(b))[0] if transpose_b else b
    (want,) = onnx_op("MatMul", [a_eff, b_eff])
    assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["sum", "max", "min", "mean"])
@pytest.mark.parametrize("axes", [(0,), (1, 2), (-1,), (0, 1, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce(kind: str, axes: tuple[int, ...], keepdims: bool):
    x = rand(2, 3, 4)
    got = ref.reduce(kind, x, axes, keepdims)
    op = {"sum": "ReduceSum", "max": "ReduceMax", "min": "ReduceMin", "mean": "ReduceMean"}
    (want,) = onnx_op(
        op[kind], [x, np.array(axes, np.int64)], opset=18, keepdims=int(keepdims)
    )
    assert_close(np.asarray(got), want)


def test_reduce_unknown_kind():
    with pytest.raises(PlmrError, match="unknown reduce kind 'prod'"):
        ref.reduce("prod", rand(2), (0,), False)


@pytest.mark.parametrize(
    ("axis", "indices"),
    [
        (0, np.array([0, -1, 2, -5], np.int64)),
        (1, np.array([[-1, 0], [1, -4]], np.int64)),
        (2, np.array(-2, np.int32)),
        (0, np.zeros((0,), np.int64)),
    ],
)
def test_gather(axis: int, indices: Array):
    data = rand(5, 4, 3)
    got = ref.gather(data, indices, axis)
    (want,) = onnx_op("Gather", [data, indices], axis=axis)
    assert_close(got, want)


@pytest.mark.parametrize("bad", [5, -6])
def test_gather_out_of_range(bad: int):
    with pytest.raises(PlmrError, match="gather index out of range"):
        ref.gather(rand(5, 2), np.array([0, bad], np.int64), 0)


@pytest.mark.parametrize(("axis", "sizes"), [(0, [1, 3]), (1, [2, 0, 3]), (-1, [1, 1])])
def test_split(axis: int, sizes: list[int]):
    x = rand(4, 5, 2)
    got = ref.split(x, axis, sizes)
    want = onnx_op(
        "Split", [x, np.array(sizes, np.int64)], opset=18, n_out=len(sizes), axis=axis
    )
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w)


# ---------------------------------------------------------------------------------------
# Types and dense attributes
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("elt", "dtype"),
    [
        (f32, np.float32),
        (f64, np.float64),
        (Float16Type(), np.float16),
        (BFloat16Type(), np.float32),
        (i64, np.int64),
        (i32, np.int32),
        (i1, np.bool_),
        (IntegerType(8, Signedness.UNSIGNED), np.uint8),
        (IntegerType(16, Signedness.SIGNED), np.int16),
        (IndexType(), np.int64),
    ],
)
def test_numpy_dtype(elt: Attribute, dtype: Any):
    assert numpy_dtype(elt) == np.dtype(dtype)


def test_numpy_dtype_rejects_non_numeric():
    with pytest.raises(PlmrError, match="no numpy equivalent"):
        numpy_dtype(TensorType(f32, [2]))


@pytest.mark.parametrize(
    ("elt", "dtype"),
    [(f32, "<f4"), (f64, "<f8"), (Float16Type(), "<f2"), (i64, "<i8"), (i32, "<i4")],
)
def test_dense_to_numpy_round_trips_raw_bytes(elt: Attribute, dtype: str):
    arr = (np.arange(6).reshape(2, 3) * 1.5 - 4).astype(dtype)
    t = TensorType(elt, [2, 3])
    attr = DenseIntOrFPElementsAttr(t, BytesAttr(arr.tobytes()))
    got = dense_to_numpy(attr)
    assert got.dtype == np.dtype(dtype).newbyteorder("=")
    np.testing.assert_array_equal(got, arr)


def test_dense_to_numpy_splat():
    attr = DenseIntOrFPElementsAttr.from_list(TensorType(f32, [2, 2]), [0.5])
    np.testing.assert_array_equal(dense_to_numpy(attr), np.full((2, 2), 0.5, np.float32))


def test_dense_to_numpy_matches_onnx_numpy_helper():
    arr = rand(3, 4)
    proto = numpy_helper.from_array(arr, "w")
    attr = DenseIntOrFPElementsAttr(TensorType(f32, [3, 4]), BytesAttr(proto.raw_data))
    np.testing.assert_array_equal(dense_to_numpy(attr), numpy_helper.to_array(proto))


# ---------------------------------------------------------------------------------------
# Function evaluation
# ---------------------------------------------------------------------------------------


def _softmax_of_scaled_matmul() -> ModuleOp:
    t_in = TensorType(f32, [2, 3])
    t_w = TensorType(f32, [3, 4])
    fn = func.FuncOp("f", ((t_in, t_w), (TensorType(f32, [2, 4]),)))
    with ImplicitBuilder(fn.body) as (x, w):
        y = graph.MatmulOp(x, w)
        s = graph.ScaleOp(y, 0.5)
        p = graph.SoftmaxOp(s)
        func.ReturnOp(p)
    return ModuleOp([fn])


def test_evaluate_function():
    module = _softmax_of_scaled_matmul()
    module.verify()
    x, w = rand(2, 3), rand(3, 4, seed=1)
    (got,) = ref.evaluate_function(module, "f", [x, w])
    (mm,) = onnx_op("MatMul", [x, w])
    (want,) = onnx_op("Softmax", [mm * np.float32(0.5)], opset=13)
    assert_close(got, want)


def test_evaluate_function_errors():
    module = _softmax_of_scaled_matmul()
    with pytest.raises(PlmrError, match="takes 2 arguments, got 1"):
        ref.evaluate_function(module, "f", [rand(2, 3)])
    with pytest.raises(PlmrError, match="no function @g"):
        ref.evaluate_function(module, "g", [])


def test_scale_integer_tensor():
    x = np.arange(4, dtype=np.int64)
    t = TensorType(i64, [4])
    fn = func.FuncOp("f", ((t,), (t,)))
    with ImplicitBuilder(fn.body) as (a,):
        func.ReturnOp(graph.ScaleOp(a, 3.0))
    (got,) = ref.evaluate_function(ModuleOp([fn]), "f", [x])
    np.testing.assert_array_equal(got, x * 3)
    assert got.dtype == np.int64


# ---------------------------------------------------------------------------------------
# The ops of ONNX models, run as one-op graph functions against ONNX's evaluator
# ---------------------------------------------------------------------------------------

_ELT: dict[Any, Attribute] = {
    np.dtype(np.float32): f32,
    np.dtype(np.float64): f64,
    np.dtype(np.int64): i64,
    np.dtype(np.int32): i32,
    np.dtype(np.bool_): i1,
}


def run_graph(make: Any, *args: Array) -> Array:
    """Builds `@f(args) { return make(*args) }`, verifies it and runs the reference."""
    types = [TensorType(_ELT[a.dtype], a.shape) for a in args]
    fn = func.FuncOp("f", (types, ()))
    with ImplicitBuilder(fn.body) as values:
        op: Operation = make(*values)
        func.ReturnOp(op)
    fn.function_type = func.FunctionType.from_lists(types, [op.results[0].type])
    module = ModuleOp([fn])
    module.verify()
    (got,) = ref.evaluate_function(module, "f", list(args))
    return got


def bools(*shape: int, seed: int = 0) -> Array:
    return np.random.default_rng(seed).random(shape) < 0.5


def ints(*shape: int, seed: int = 0, dtype: Any = np.int64) -> Array:
    return np.random.default_rng(seed).integers(-5, 6, shape).astype(dtype)


def test_where_broadcasts_like_onnx():
    c, a, b = bools(4, 1), rand(3, 1, 5, seed=1), rand(5, seed=2)
    got = run_graph(graph.WhereOp, c, a, b)
    (want,) = onnx_op("Where", [c, a, b])
    assert_close(got, want)
    ci, ai = bools(2, 3, seed=3), ints(2, 3)
    got = run_graph(graph.WhereOp, ci, ai, ints(3, seed=4))
    (want,) = onnx_op("Where", [ci, ai, ints(3, seed=4)])
    np.testing.assert_array_equal(got, want)


_CMP_ONNX = {
    "eq": "Equal",
    "lt": "Less",
    "le": "LessOrEqual",
    "gt": "Greater",
    "ge": "GreaterOrEqual",
}


@pytest.mark.parametrize("predicate", list(graph.CmpPredicate))
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32])
def test_cmp_matches_onnx(predicate: graph.CmpPredicate, dtype: Any):
    a, b = ints(4, 6, dtype=dtype), ints(6, seed=1, dtype=dtype)
    got = run_graph(lambda x, y: graph.CmpOp(predicate, x, y), a, b)
    assert got.dtype == np.bool_
    assert got.shape == (4, 6)
    if predicate == "ne":
        (eq,) = onnx_op("Equal", [a, b])
        np.testing.assert_array_equal(got, ~eq)
    else:
        (want,) = onnx_op(_CMP_ONNX[predicate], [a, b])
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("cls", "onnx"), [(graph.AndOp, "And"), (graph.OrOp, "Or"), (graph.XorOp, "Xor")]
)
def test_logic_matches_onnx(cls: Any, onnx: str):
    a, b = bools(3, 4), bools(4, seed=1)
    (want,) = onnx_op(onnx, [a, b])
    np.testing.assert_array_equal(run_graph(cls, a, b), want)


def test_not_matches_onnx():
    a = bools(3, 4)
    (want,) = onnx_op("Not", [a])
    np.testing.assert_array_equal(run_graph(graph.NotOp, a), want)


@pytest.mark.parametrize(
    ("src", "dst", "to"),
    [
        (np.float32, i64, TensorProto.INT64),
        (np.float32, i32, TensorProto.INT32),
        (np.float32, i1, TensorProto.BOOL),
        (np.int64, f32, TensorProto.FLOAT),
        (np.int64, i1, TensorProto.BOOL),
        (np.int32, i64, TensorProto.INT64),
        (np.bool_, f32, TensorProto.FLOAT),
        (np.bool_, i64, TensorProto.INT64),
        (np.float32, f64, TensorProto.DOUBLE),
    ],
)
def test_cast_matches_onnx(src: Any, dst: Attribute, to: int):
    if src == np.bool_:
        x = bools(5, 4)
    elif src == np.float32:
        x = (rand(5, 4) * 4).astype(np.float32)
        x[0, :3] = [0.0, -0.0, -2.5]  # truncation toward zero, and zeros to false
    else:
        x = ints(5, 4, dtype=src)
    got = run_graph(lambda v: graph.CastOp(v, dst), x)
    (want,) = onnx_op("Cast", [x], to=to)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("cls", "onnx", "positive"),
    [
        (graph.AbsOp, "Abs", False),
        (graph.LogOp, "Log", True),
        (graph.FloorOp, "Floor", False),
        (graph.CeilOp, "Ceil", False),
        (graph.ReciprocalOp, "Reciprocal", True),
    ],
)
def test_unary_matches_onnx(cls: Any, onnx: str, positive: bool):
    x = rand(3, 7) * 3
    if positive:
        x = np.abs(x) + np.float32(0.1)
    (want,) = onnx_op(onnx, [x])
    assert_close(run_graph(cls, x), want)


def test_abs_of_integers():
    x = ints(3, 4)
    (want,) = onnx_op("Abs", [x])
    np.testing.assert_array_equal(run_graph(graph.AbsOp, x), want)


@pytest.mark.parametrize("exponent", [2.0, 3.0, 0.5, -1.0])
def test_pow_matches_onnx(exponent: float):
    x = np.abs(rand(3, 4)) + np.float32(0.1)
    got = run_graph(lambda v: graph.PowOp(v, exponent), x)
    (want,) = onnx_op("Pow", [x, np.array(exponent, np.float32)])
    assert_close(got, want)


@pytest.mark.parametrize(
    ("cls", "onnx"), [(graph.MaximumOp, "Max"), (graph.MinimumOp, "Min")]
)
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_maximum_minimum_match_onnx(cls: Any, onnx: str, dtype: Any):
    a, b = ints(4, 1, dtype=dtype), ints(5, seed=1, dtype=dtype)
    (want,) = onnx_op(onnx, [a, b])
    np.testing.assert_array_equal(run_graph(cls, a, b), want)


@pytest.mark.parametrize(
    ("shape", "starts", "ends", "steps"),
    [
        ((4, 8), (1, 7), (3, -1), (1, -2)),
        ((10,), (0,), (10,), (3,)),
        ((10,), (9,), (-1,), (-1,)),
        ((10,), (9,), (10,), (-1,)),
        ((3, 4, 5), (2, 0, 4), (0, 4, 1), (-1, 2, -3)),
        ((0, 3), (0, 2), (0, 0), (1, -1)),
    ],
)
def test_slice_matches_onnx(
    shape: tuple[int, ...],
    starts: tuple[int, ...],
    ends: tuple[int, ...],
    steps: tuple[int, ...],
):
    x = rand(*shape)
    got = run_graph(lambda v: graph.SliceOp(v, starts, ends, steps), x)
    # ONNX reads a negative end as counting from the back: -(dim + 1) is "before 0".
    onnx_ends = [e if e >= 0 else -(d + 1) for e, d in zip(ends, shape, strict=True)]
    (want,) = onnx_op(
        "Slice",
        [
            x,
            np.array(starts, np.int64),
            np.array(onnx_ends, np.int64),
            np.arange(len(shape), dtype=np.int64),
            np.array(steps, np.int64),
        ],
    )
    assert_close(got, want)


@pytest.mark.parametrize(
    ("shape", "target"),
    [((4, 1), (2, 4, 8)), ((4, 8), (1,)), ((3, 1), (1, 5)), ((), (2, 2))],
)
def test_expand_matches_onnx(shape: tuple[int, ...], target: tuple[int, ...]):
    x = rand(*shape)
    got = run_graph(lambda v: graph.ExpandOp(v, target), x)
    (want,) = onnx_op("Expand", [x, np.array(target, np.int64)])
    assert_close(got, want)


@pytest.mark.parametrize("mode", list(graph.PadMode))
@pytest.mark.parametrize(
    ("shape", "pads"),
    [((4, 5), (1, 2, 3, 0)), ((3, 4, 5), (0, 3, 2, 2, 1, 4)), ((6,), (0, 0))],
)
def test_pad_matches_onnx(
    mode: graph.PadMode, shape: tuple[int, ...], pads: tuple[int, ...]
):
    x = rand(*shape)
    value = 1.5 if mode == "constant" else 0.0
    got = run_graph(lambda v: graph.PadOp(v, pads, mode, value), x)
    (want,) = onnx_op(
        "Pad",
        [x, np.array(pads, np.int64), np.array(value, np.float32)],
        mode=str(mode),
    )
    assert_close(got, want)


def test_pad_integer_constant():
    x = ints(2, 3)
    got = run_graph(lambda v: graph.PadOp(v, (1, 0, 0, 2), "constant", -7), x)
    (want,) = onnx_op("Pad", [x, np.array([1, 0, 0, 2], np.int64), np.array(-7, np.int64)])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("data_shape", "indices_shape", "axis"),
    [((4, 6), (4, 3), 1), ((4, 6), (7, 6), 0), ((3, 4, 5), (3, 4, 2), -1), ((5,), (9,), 0)],
)
def test_gather_elements_matches_onnx(
    data_shape: tuple[int, ...], indices_shape: tuple[int, ...], axis: int
):
    data = rand(*data_shape)
    size = data_shape[axis]
    rng = np.random.default_rng(1)
    indices = rng.integers(-size, size, indices_shape).astype(np.int64)
    got = run_graph(lambda d, i: graph.GatherElementsOp(d, i, axis), data, indices)
    # ONNX's numpy evaluator mishandles a negative axis; the op itself accepts one.
    (want,) = onnx_op("GatherElements", [data, indices], axis=axis % len(data_shape))
    assert_close(got, want)


def test_gather_elements_with_indices_smaller_than_the_data():
    # ONNX Runtime accepts indices smaller than the data outside the axis (ONNX's numpy
    # evaluator does not): out[i, j, k] = data[i, j, indices[i, j, k]].
    data = rand(3, 4, 5)
    indices = np.random.default_rng(2).integers(-5, 5, (2, 3, 7)).astype(np.int64)
    got = run_graph(lambda d, i: graph.GatherElementsOp(d, i, 2), data, indices)
    want = np.empty((2, 3, 7), np.float32)
    for i, j, k in np.ndindex(2, 3, 7):
        want[i, j, k] = data[i, j, indices[i, j, k]]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("bad", [6, -7])
def test_gather_elements_out_of_range(bad: int):
    indices = np.array([[0, bad]], np.int64)
    with pytest.raises(PlmrError, match="gather_elements index out of range"):
        ref.gather_elements(rand(2, 6), indices, 1)


def test_pad_unknown_mode():
    with pytest.raises(PlmrError, match="unknown pad mode 'wrap'"):
        ref.pad(rand(3), (1, 1), "wrap")


def test_constants_of_every_element_type_evaluate():
    from xdsl.parser import Parser

    from plmr.dialects.context import make_context

    source = """
    func.func @f() -> (tensor<3xi1>, tensor<2xi32>, tensor<2xi64>, tensor<2x2xi1>) {
      %b = graph.constant dense<[true, false, true]> : tensor<3xi1>
      %i = graph.constant dense<[1, -2]> : tensor<2xi32>
      %j = graph.constant dense<[3, -4]> : tensor<2xi64>
      %s = graph.constant dense<true> : tensor<2x2xi1>
      func.return %b, %i, %j, %s : tensor<3xi1>, tensor<2xi32>, tensor<2xi64>, tensor<2x2xi1>
    }
    """
    module = Parser(make_context(), source).parse_module()
    b, i, j, s = ref.evaluate_function(module, "f", [])
    np.testing.assert_array_equal(b, [True, False, True])
    assert b.dtype == np.bool_
    assert s.dtype == np.bool_
    assert s.all()
    np.testing.assert_array_equal(i, np.array([1, -2], np.int32))
    np.testing.assert_array_equal(j, np.array([3, -4], np.int64))
