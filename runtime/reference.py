"""
Reference semantics of the `graph` dialect in plain numpy.

Each `graph` op has one numpy function here, with ONNX semantics; `evaluate_function`
runs a whole `func.func` of graph ops on numpy arrays. This is the oracle every later
level (loop, tile, mesh) is checked against, so it favours clarity and exactness over
speed: it computes in the tensors' own element type (float32 for `f32`), with float64
only inside transcendental helpers where numpy lacks a float32 kernel (`erf`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    ModuleOp,
    Signedness,
    TensorType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.traits import IsTerminator

from plmr.dialects import graph
from plmr.errors import PlmrError

Array = npt.NDArray[Any]


# ---------------------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------------------


def numpy_dtype(elt: Attribute) -> np.dtype[Any]:
    """The numpy dtype that holds values of an MLIR element type."""
    if isinstance(elt, Float32Type):
        return np.dtype(np.float32)
    if isinstance(elt, Float64Type):
        return np.dtype(np.float64)
    if isinstance(elt, Float16Type):
        return np.dtype(np.float16)
    if isinstance(elt, BFloat16Type):
        # numpy has no bfloat16; float32 holds every bfloat16 value exactly.
        return np.dtype(np.float32)
    if isinstance(elt, IndexType):
        return np.dtype(np.int64)
    if isinstance(elt, IntegerType):
        int_type = cast(IntegerType[int, Signedness], elt)
        width: int = int_type.bitwidth
        unsigned = int_type.signedness.data == Signedness.UNSIGNED
        if width == 1:
            return np.dtype(np.bool_)
        for w in (8, 16, 32, 64):
            if width <= w:
                return np.dtype(f"{'u' if unsigned else ''}int{w}")
    raise PlmrError(f"element type {elt} has no numpy equivalent")


def tensor_dtype(t: Attribute) -> np.dtype[Any]:
    if isinstance(t, TensorType):
        return numpy_dtype(cast(TensorType[Attribute], t).element_type)
    raise PlmrError(f"expected a tensor type, got {t}")


def dense_to_numpy(attr: DenseIntOrFPElementsAttr) -> Array:
    """The value of a dense elements attribute as a numpy array of its own shape."""
    t = attr.get_type()
    dtype = tensor_dtype(t)
    shape = attr.get_shape()
    elt = attr.get_element_type()
    if isinstance(elt, IntegerType | IndexType) and elt != IntegerType(64):
        values = np.array(attr.get_values(), dtype=dtype)
    elif isinstance(elt, BFloat16Type):
        values = np.array(attr.get_values(), dtype=np.float32)
    else:
        values = np.frombuffer(attr.data.data, dtype=dtype.newbyteorder("<"))
        values = values.astype(dtype)
    if values.size == 1 and math.prod(shape) != 1:
        return np.full(shape, values.reshape(()), dtype=dtype)
    return values.reshape(shape)


# ---------------------------------------------------------------------------------------
# Elementwise helpers
# ---------------------------------------------------------------------------------------

_ERF_P = 2.0 / math.sqrt(math.pi)

# Chebyshev coefficients of erfc(z) = t·exp(-z² + P(t)), t = 2 / (2 + z) (Numerical Recipes,
# 3rd ed., §6.2.2). Together with a Taylor series for |x| < 0.5 (where 1 - erfc cancels)
# this matches `math.erf` to ~1e-15 relative (tested).
_ERFC_COF = (
    -1.3026537197817094,
    6.4196979235649026e-1,
    1.9476473204185836e-2,
    -9.561514786808631e-3,
    -9.46595344482036e-4,
    3.66839497852761e-4,
    4.2523324806907e-5,
    -2.0278578112534e-5,
    -1.624290004647e-6,
    1.303655835580e-6,
    1.5626441722e-8,
    -8.5238095915e-8,
    6.529054439e-9,
    5.059343495e-9,
    -9.91364156e-10,
    -2.27365122e-10,
    9.6467911e-11,
    2.394038e-12,
    -6.886027e-12,
    8.94487e-13,
    3.13092e-13,
    -1.12708e-13,
    3.81e-16,
    7.106e-15,
    -1.523e-15,
    -9.4e-17,
    1.21e-16,
    -2.8e-17,
)


def _erfc_cheb(z: Array) -> Array:
    """erfc(z) for z >= 0 in float64 (Chebyshev expansion, ~1e-16 relative)."""
    t = 2.0 / (2.0 + z)
    ty = 4.0 * t - 2.0
    d = np.zeros_like(z)
    dd = np.zeros_like(z)
    for c in reversed(_ERFC_COF[1:]):
        d, dd = ty * d - dd + c, d
    return t * np.exp(-z * z + 0.5 * (_ERFC_COF[0] + ty * d) - dd)


def erf(x: Array) -> Array:
    """The Gauss error function, vectorised (float64 inside, accurate to ~1e-15)."""
    x64 = np.asarray(x, dtype=np.float64)
    ax = np.abs(x64)
    # Taylor series for small |x|, where 1 - erfc(x) would cancel.
    x2 = x64 * x64
    term = x64.copy()
    series = x64.copy()
    for n in range(1, 30):
        term = term * (-x2) / n
        series = series + term / (2 * n + 1)
    small = series * _ERF_P
    large = np.sign(x64) * (1.0 - _erfc_cheb(ax))
    out = np.where(ax < 0.5, small, large)
    return out.astype(
        np.asarray(x).dtype if np.asarray(x).dtype.kind == "f" else np.float64
    )


def sigmoid(x: Array) -> Array:
    # Numerically stable for large |x| in both directions.
    ex = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + ex), ex / (1 + ex)).astype(x.dtype)


def gelu(x: Array, tanh: bool = False) -> Array:
    if tanh:
        c = np.asarray(math.sqrt(2 / math.pi), dtype=x.dtype)
        return (
            0.5 * x * (1 + np.tanh(c * (x + np.asarray(0.044715, x.dtype) * x**3)))
        ).astype(x.dtype)
    return (0.5 * x * (1 + erf(x / np.asarray(math.sqrt(2.0), x.dtype)))).astype(x.dtype)


def silu(x: Array) -> Array:
    return (x * sigmoid(x)).astype(x.dtype)


def relu(x: Array) -> Array:
    return np.maximum(x, np.zeros((), dtype=x.dtype))


# ---------------------------------------------------------------------------------------
# Structured ops
# ---------------------------------------------------------------------------------------


def matmul(
    a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
) -> Array:
    if transpose_a:
        a = np.swapaxes(a, -1, -2)
    if transpose_b:
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


def _extreme(dtype: np.dtype[Any], lowest: bool) -> Any:
    """The lowest (or highest) value of a dtype: what `max` (`min`) of an empty set is."""
    if dtype.kind == "f":
        return -np.inf if lowest else np.inf
    if dtype.kind == "b":
        return not lowest
    info = np.iinfo(dtype)
    return info.min if lowest else info.max


def reduce(kind: str, x: Array, axes: Sequence[int], keepdims: bool) -> Array:
    ax = tuple(axes)
    if kind == "sum":
        return np.sum(x, axis=ax, keepdims=keepdims, dtype=x.dtype)
    # numpy refuses max/min over an empty axis; ONNX defines them as the dtype's extreme.
    if kind == "max":
        if x.size == 0:
            return np.max(x, axis=ax, keepdims=keepdims, initial=_extreme(x.dtype, True))
        return np.max(x, axis=ax, keepdims=keepdims)
    if kind == "min":
        if x.size == 0:
            return np.min(x, axis=ax, keepdims=keepdims, initial=_extreme(x.dtype, False))
        return np.min(x, axis=ax, keepdims=keepdims)
    if kind == "mean":
        return np.mean(x, axis=ax, keepdims=keepdims, dtype=x.dtype)
    raise PlmrError(f"unknown reduce kind '{kind}'")


def softmax(x: Array, axis: int = -1) -> Array:
    if x.size == 0:
        return x.copy()  # numpy's max refuses an empty axis
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return (e / np.sum(e, axis=axis, keepdims=True)).astype(x.dtype)


def layernorm(
    x: Array, scale: Array, bias: Array | None, axis: int = -1, epsilon: float = 1e-5
) -> Array:
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = np.mean(x, axis=axes, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=axes, keepdims=True)
    y = d / np.sqrt(var + np.asarray(epsilon, x.dtype)) * scale
    if bias is not None:
        y = y + bias
    return y.astype(x.dtype)


def rmsnorm(x: Array, weight: Array, axis: int = -1, epsilon: float = 1e-5) -> Array:
    axes = tuple(range(axis % x.ndim, x.ndim))
    ms = np.mean(x * x, axis=axes, keepdims=True)
    return (x / np.sqrt(ms + np.asarray(epsilon, x.dtype)) * weight).astype(x.dtype)


def split(x: Array, axis: int, sizes: Sequence[int]) -> list[Array]:
    bounds = np.cumsum(sizes)[:-1]
    return [np.ascontiguousarray(p) for p in np.split(x, bounds, axis=axis)]


def _windows(
    x: Array,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    out_hw: Sequence[int],
) -> Array:
    """Windows of an NCHW array (already padded): shape (N, C, OH, OW, kH, kW)."""
    n, c, _, _ = x.shape
    sn, sc, sh, sw = x.strides
    shape = (n, c, out_hw[0], out_hw[1], kernel[0], kernel[1])
    st = (sn, sc, sh * strides[0], sw * strides[1], sh * dilations[0], sw * dilations[1])
    return np.lib.stride_tricks.as_strided(x, shape=shape, strides=st, writeable=False)


def conv2d(
    x: Array,
    w: Array,
    bias: Array | None = None,
    strides: Sequence[int] = (1, 1),
    pads: Sequence[int] = (0, 0, 0, 0),
    dilations: Sequence[int] = (1, 1),
    groups: int = 1,
) -> Array:
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    oh = (h + pads[0] + pads[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    win = _windows(np.ascontiguousarray(xp), (kh, kw), strides, dilations, (oh, ow))
    mg = m // groups
    outs: list[Array] = []
    for g in range(groups):
        wg = win[:, g * cg : (g + 1) * cg]  # N, cg, OH, OW, kH, kW
        kg = w[g * mg : (g + 1) * mg]  # mg, cg, kH, kW
        outs.append(np.einsum("ncxyij,mcij->nmxy", wg, kg, optimize=True))
    y = np.concatenate(outs, axis=1).astype(x.dtype)
    if bias is not None:
        y = y + bias.reshape(1, m, 1, 1)
    del n, c
    return y.astype(x.dtype)


def pool(
    kind: str,
    x: Array,
    kernel: Sequence[int],
    strides: Sequence[int] = (1, 1),
    pads: Sequence[int] = (0, 0, 0, 0),
    count_include_pad: bool = False,
) -> Array:
    _, _, h, w = x.shape
    oh = (h + pads[0] + pads[2] - kernel[0]) // strides[0] + 1
    ow = (w + pads[1] + pads[3] - kernel[1]) // strides[1] + 1
    padding = ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3]))
    if kind == "max":
        fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        xp = np.pad(x, padding, constant_values=fill)
        win = _windows(np.ascontiguousarray(xp), kernel, strides, (1, 1), (oh, ow))
        return win.max(axis=(-2, -1)).astype(x.dtype)
    xp = np.pad(x, padding)
    win = _windows(np.ascontiguousarray(xp), kernel, strides, (1, 1), (oh, ow))
    total = win.sum(axis=(-2, -1))
    if count_include_pad:
        return (total / (kernel[0] * kernel[1])).astype(x.dtype)
    ones = np.pad(np.ones((1, 1, h, w), dtype=x.dtype), padding)
    counts = _windows(ones, kernel, strides, (1, 1), (oh, ow)).sum(axis=(-2, -1))
    return (total / counts).astype(x.dtype)


def gather(data: Array, indices: Array, axis: int = 0) -> Array:
    size = data.shape[axis]
    if indices.size and (indices.min() < -size or indices.max() >= size):
        raise PlmrError(
            f"gather index out of range: indices span [{indices.min()}, {indices.max()}] "
            f"but axis {axis} has size {size}"
        )
    return np.take(data, indices.astype(np.int64), axis=axis)


def cast_to(x: Array, dtype: np.dtype[Any]) -> Array:
    """ONNX Cast: floats to integers truncate toward zero, anything to bool is `x != 0`."""
    if dtype.kind == "b":
        return x != 0
    if x.dtype.kind == "f" and dtype.kind in "iu":
        with np.errstate(invalid="ignore"):
            return np.trunc(x).astype(dtype)
    return x.astype(dtype)


def slice_(
    x: Array, starts: Sequence[int], ends: Sequence[int], steps: Sequence[int]
) -> Array:
    """A normalised strided slice: `range(start, end, step)` per dimension."""
    index = tuple(
        slice(s, e if e >= 0 else None, st)
        for s, e, st in zip(starts, ends, steps, strict=True)
    )
    return x[index].copy(order="C")


def pad(x: Array, pads: Sequence[int], mode: str = "constant", value: float = 0.0) -> Array:
    """ONNX Pad: `pads` holds the begin pads of every dimension, then the end pads."""
    rank = x.ndim
    widths = [(pads[i], pads[i + rank]) for i in range(rank)]
    if mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=x.dtype.type(value))
    if mode == "reflect":
        return np.pad(x, widths, mode="reflect")
    if mode == "edge":
        return np.pad(x, widths, mode="edge")
    raise PlmrError(f"unknown pad mode '{mode}'")


def gather_elements(data: Array, indices: Array, axis: int) -> Array:
    """ONNX GatherElements: `out[p] = data[p with p[axis] = indices[p]]`."""
    size = data.shape[axis]
    if indices.size and (indices.min() < -size or indices.max() >= size):
        raise PlmrError(
            f"gather_elements index out of range: indices span [{indices.min()}, "
            f"{indices.max()}] but axis {axis} has size {size}"
        )
    idx = indices.astype(np.int64)
    where: list[Array] = list(np.indices(indices.shape, sparse=True))
    where[axis] = np.where(idx < 0, idx + size, idx)
    return data[tuple(where)]


# ---------------------------------------------------------------------------------------
# Op dispatch
# ---------------------------------------------------------------------------------------


def _ints(attr: Any) -> tuple[int, ...]:
    values: tuple[int, ...] = attr.get_values()
    return values


def _unary(fn: Callable[[Array], Array]) -> Callable[[Operation, list[Array]], list[Array]]:
    def run(op: Operation, args: list[Array]) -> list[Array]:
        (x,) = args
        return [np.asarray(fn(x)).astype(x.dtype)]

    return run


def _binary(
    fn: Callable[[Array, Array], Array],
) -> Callable[[Operation, list[Array]], list[Array]]:
    def run(op: Operation, args: list[Array]) -> list[Array]:
        a, b = args
        return [np.asarray(fn(a, b)).astype(np.result_type(a, b))]

    return run


def _run_matmul(op: Operation, args: list[Array]) -> list[Array]:
    assert isinstance(op, graph.MatmulOp)
    a, b = args
    return [matmul(a, b, op.transpose_a is not None, op.transpose_b is not None)]


def _run_scale(op: Operation, args: list[Array]) -> list[Array]:
    assert isinstance(op, graph.ScaleOp)
    (x,) = args
    factor = op.factor.value.data
    if x.dtype.kind in "iu":
        if factor != int(factor):
            raise PlmrError(f"cannot scale an integer tensor by {factor}")
        return [x * x.dtype.type(int(factor))]
    return [(x * np.asarray(factor, dtype=x.dtype)).astype(x.dtype)]


def _run_gelu(op: Operation, args: list[Array]) -> list[Array]:
    assert isinstance(op, graph.GeluOp)
    return [gelu(args[0], op.tanh is not None)]


def _run_transpose(op: Operation, args: list[Array]) -> list[Array]:
    assert isinstance(op, graph.TransposeOp)
    # `.copy(order="C")`, not `np.ascontiguousarray`, which turns a 0-d array into 1-d.
    return [np.transpose(args[0], _ints(op.perm)).copy(order="C")]


def _run_reshape(op: Operation, args: list[Array]) -> list[Array]:
    return [args[0].reshape(graph.static_shape(op.results[0], "result"))]


def _run_reduce(op: Operation, args: list[Array]) -> list[Array]:
    assert isinstance(op, graph.ReduceOp)
    return [
        np.asarray(
            reduce(op.kind.data, args[0], op.normalized_axes(), op.keepdims is not None)
        )
    ]


def _run_softmax(op: Operation, args: list[Array]) -> list[Array]:
    assert isinstance(op, graph.SoftmaxOp)
    return [softmax(args[0], op.axis.value.data)]


def _run_layernorm(op: Operation, args: list[Array]) -> list[Array]:
    assert isinstance(op, graph.LayerNormOp)
    bias = args[2] if len(args) > 2 else None
    return [layernorm(args[0], args[1], bias, op.axis.value.data, op.epsilon.value.data)]


def _run_rmsnorm(op: Operation, args: list[Array]) -> list[Array]:
    assert isinstance(op, graph.RmsNormOp)
    return [rmsnorm(args[0], args[1], op.axis.value.data, op.epsilon.value.data)]


def _run_concat(op: Operation, args: list[Array]) -> list[Array]:
    assert isinstance(op, graph.ConcatOp)
    return [np.concatenate(args, axis=op.axis.value.data)]


def _run_split(op: Operation, args: list[Array]) -> list[Array]:
    assert isinstance(op, graph.SplitOp)
    return split(args[0], op.axis.value.data, _ints(op.sizes))


def _run_conv2d(op: Operation, args: list[Array]) -> list[Array]:
    assert isinstance(op, graph.Conv2dOp)
    bias = args[2] if len(args) > 2 else None
    return [
        conv2d(
            args[0],
            args[1],
            bias,
            _ints(op.strides),
            _ints(op.pads),
            _ints(op.dilations),
            op.groups.value.data,
        )
    ]


def _run_pool(op: Operation, args: list[Array]) -> list[Array]:
    assert isinstance(op, graph.PoolOp)
    return [
        pool(
            op.kind.data,
            args[0],
            _ints(op.kernel),
            _ints(op.strides),
            _ints(op.pads),
            op.count_include_pad is not None,
        )
    ]


def _run_constant(op: Operation, args: list[Array]) -> list[Array]:
    assert isinstance(op, graph.ConstantOp)
    return [dense_to_numpy(op.value)]


def _run_gather(op: Operation, args: list[Array]) -> list[Array]:
    assert isinstance(op, graph.GatherOp)
    data, indices = args
    return [gather(data, indices, op.axis.value.data % max(data.ndim, 1))]


def _run_where(op: Operation, args: list[Array]) -> list[Array]:
    c, a, b = args
    return [np.where(c, a, b).astype(a.dtype)]


_COMPARE: dict[str, Callable[[Array, Array], Array]] = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


def _run_cmp(op: Operation, args: list[Array]) -> list[Array]:
    assert isinstance(op, graph.CmpOp)
    a, b = args
    return [np.asarray(_COMPARE[op.predicate.data](a, b), dtype=np.bool_)]


def _run_cast(op: Operation, args: list[Array]) -> list[Array]:
    return [cast_to(args[0], tensor_dtype(op.results[0].type))]


def _run_pow(op: Operation, args: list[Array]) -> list[Array]:
    assert isinstance(op, graph.PowOp)
    (x,) = args
    return [np.power(x, np.asarray(op.exponent.value.data, dtype=x.dtype))]


def _run_slice(op: Operation, args: list[Array]) -> list[Array]:
    assert isinstance(op, graph.SliceOp)
    return [slice_(args[0], _ints(op.starts), _ints(op.ends), _ints(op.steps))]


def _run_expand(op: Operation, args: list[Array]) -> list[Array]:
    shape = graph.static_shape(op.results[0], "result")
    return [np.broadcast_to(args[0], shape).copy()]


def _run_pad(op: Operation, args: list[Array]) -> list[Array]:
    assert isinstance(op, graph.PadOp)
    return [pad(args[0], _ints(op.pads), op.mode.data, op.value.value.data)]


def _run_gather_elements(op: Operation, args: list[Array]) -> list[Array]:
    assert isinstance(op, graph.GatherElementsOp)
    data, indices = args
    return [gather_elements(data, indices, op.axis.value.data % max(data.ndim, 1))]


OpImpl = Callable[[Operation, list[Array]], list[Array]]

GRAPH_IMPLS: dict[type[Operation], OpImpl] = {
    graph.MatmulOp: _run_matmul,
    graph.AddOp: _binary(np.add),
    graph.SubOp: _binary(np.subtract),
    graph.MulOp: _binary(np.multiply),
    graph.DivOp: _binary(np.divide),
    graph.ScaleOp: _run_scale,
    graph.ReluOp: _unary(relu),
    graph.GeluOp: _run_gelu,
    graph.SiluOp: _unary(silu),
    graph.SigmoidOp: _unary(sigmoid),
    graph.TanhOp: _unary(np.tanh),
    graph.ExpOp: _unary(np.exp),
    graph.ErfOp: _unary(erf),
    graph.SqrtOp: _unary(np.sqrt),
    graph.NegOp: _unary(np.negative),
    graph.TransposeOp: _run_transpose,
    graph.ReshapeOp: _run_reshape,
    graph.ReduceOp: _run_reduce,
    graph.SoftmaxOp: _run_softmax,
    graph.LayerNormOp: _run_layernorm,
    graph.RmsNormOp: _run_rmsnorm,
    graph.ConcatOp: _run_concat,
    graph.SplitOp: _run_split,
    graph.Conv2dOp: _run_conv2d,
    graph.PoolOp: _run_pool,
    graph.ConstantOp: _run_constant,
    graph.GatherOp: _run_gather,
    graph.WhereOp: _run_where,
    graph.CmpOp: _run_cmp,
    graph.NotOp: _unary(np.logical_not),
    graph.AndOp: _binary(np.logical_and),
    graph.OrOp: _binary(np.logical_or),
    graph.XorOp: _binary(np.logical_xor),
    graph.CastOp: _run_cast,
    graph.AbsOp: _unary(np.abs),
    graph.LogOp: _unary(np.log),
    graph.FloorOp: _unary(np.floor),
    graph.CeilOp: _unary(np.ceil),
    graph.ReciprocalOp: _unary(np.reciprocal),
    graph.PowOp: _run_pow,
    graph.MaximumOp: _binary(np.maximum),
    graph.MinimumOp: _binary(np.minimum),
    graph.SliceOp: _run_slice,
    graph.ExpandOp: _run_expand,
    graph.PadOp: _run_pad,
    graph.GatherElementsOp: _run_gather_elements,
}
"""Reference implementation of every `graph` op: (op, operand arrays) -> result arrays."""


# ---------------------------------------------------------------------------------------
# Function evaluation
# ---------------------------------------------------------------------------------------


def _location(op: Operation) -> str:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, func.FuncOp):
        parent = parent.parent_op()
    where = f"in @{parent.sym_name.data}" if parent is not None else ""
    names = ", ".join(f"%{r.name_hint}" for r in op.results if r.name_hint)
    return f"'{op.name}'{f' ({names})' if names else ''} {where}".strip()


EvalImpl = Callable[["ReferenceEvaluator", Operation, list[Any]], list[Any]]
"""An implementation that needs the evaluator (regions, vectorised leading dims)."""


class ReferenceEvaluator:
    """
    Runs `func.func` bodies on numpy arrays: `graph` ops, `loop` nests, `tile` ops (with
    their regions), the `arith` / `math` ops that index computations and `tile.map`
    bodies use, and `func.call` between functions.

    `lead` is a shape prepended to every value: with `lead = (H, W)` one evaluation runs
    the same program on H×W cores at once (the mesh runtime's SPMD mode); tensors then
    have shape `lead + type shape` and indices shape `lead` (or are uniform scalars).
    Subclasses observe every op through `observe` (costs, memory traffic, timing).
    """

    def __init__(
        self,
        module: ModuleOp | None = None,
        impls: dict[type[Operation], OpImpl] | None = None,
        *,
        lead: tuple[int, ...] = (),
    ):
        from plmr.runtime.loop_ops import LOOP_IMPLS
        from plmr.runtime.tile_ops import EVAL_IMPLS

        self.module = module
        self.lead = lead
        self.impls: dict[type[Operation], OpImpl] = dict(GRAPH_IMPLS)
        if impls is not None:
            self.impls.update(impls)
        self.eval_impls: dict[type[Operation], EvalImpl] = {**EVAL_IMPLS, **LOOP_IMPLS}
        self.env_stack: list[dict[SSAValue, Any]] = []
        self.owned_buffers: set[int] = set()
        """Ids of arrays this evaluator created and may update in place."""

    def function(self, name: str) -> func.FuncOp:
        if self.module is None:
            raise PlmrError(f"no module to look up @{name} in")
        for op in self.module.ops:
            if isinstance(op, func.FuncOp) and op.sym_name.data == name:
                return op
        raise PlmrError(f"no function @{name} in the module")

    def run(self, fn: func.FuncOp, args: Sequence[Array]) -> list[Array]:
        inputs = fn.function_type.inputs.data
        if len(args) != len(inputs):
            raise PlmrError(
                f"@{fn.sym_name.data} takes {len(inputs)} arguments, got {len(args)}"
            )
        if not fn.body.blocks:
            raise PlmrError(f"@{fn.sym_name.data} is a declaration without a body")
        arrays = [np.asarray(a) for a in args]
        # The caller still holds its arrays: `tile.store` must never update them in place.
        self.owned_buffers.difference_update(id(a) for a in arrays)
        return self.run_block(fn.body.block, arrays)

    def run_block(self, block: Block, args: Sequence[Any]) -> list[Any]:
        """Runs a block; returns the operands of its terminator (return or yield)."""
        env: dict[SSAValue, Any] = dict(zip(block.args, args, strict=True))
        self.env_stack.append(env)
        try:
            for op in block.ops:
                operands = [self.lookup(v) for v in op.operands]
                if op.has_trait(IsTerminator):
                    return operands
                results = self.run_op(op, operands)
                for value, result in zip(op.results, results, strict=True):
                    env[value] = result
        finally:
            self.env_stack.pop()
        raise PlmrError("a block ended without a terminator")

    def lookup(self, value: SSAValue) -> Any:
        for env in reversed(self.env_stack):
            if value in env:
                return env[value]
        raise PlmrError(f"value %{value.name_hint or '?'} used before it was computed")

    def observe(self, op: Operation, operands: list[Any], results: list[Any]) -> None:
        """Called after every op; subclasses count costs here."""

    def run_op(self, op: Operation, operands: list[Any]) -> list[Any]:
        if isinstance(op, func.CallOp):
            return self.run(self.function(op.callee.string_value()), operands)
        eval_impl = self.eval_impls.get(type(op))
        impl = self.impls.get(type(op))
        if eval_impl is None and impl is None:
            raise PlmrError(
                f"{_location(op)}: no reference semantics for '{op.name}' "
                "(lower it or run the program at a level plmr can execute)"
            )
        try:
            if eval_impl is not None:
                results = eval_impl(self, op, operands)
            else:
                assert impl is not None
                if self.lead:
                    raise PlmrError(f"'{op.name}' cannot run inside a per-core program")
                results = impl(op, operands)
        except PlmrError as e:
            raise PlmrError(f"{_location(op)}: {e}") from e
        out: list[Any] = []
        for result, value in zip(results, op.results, strict=True):
            out.append(self._check_result(op, value, result))
        self.observe(op, operands, out)
        return out

    def _check_result(self, op: Operation, value: SSAValue, result: Any) -> Any:
        t = value.type
        if not isinstance(t, TensorType):
            try:
                return np.asarray(result).astype(numpy_dtype(t), copy=False)
            except PlmrError:
                return result
        want = self.lead + graph.static_shape(value, "result")
        arr = np.asarray(result)
        if arr.shape != want:
            raise PlmrError(f"{_location(op)}: produced shape {arr.shape}, expected {want}")
        return arr.astype(tensor_dtype(cast(Attribute, t)), copy=False)


def evaluate_function(module: ModuleOp, name: str, args: Sequence[Array]) -> list[Array]:
    """Runs `@name` of `module` on `args` with the reference semantics."""
    evaluator = ReferenceEvaluator(module)
    return evaluator.run(evaluator.function(name), args)
