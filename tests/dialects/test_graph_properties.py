"""
Property tests of the `graph` dialect: random shapes and parameters through the builders,
the verifiers and the numpy reference semantics.

Every valid case builds a one-op function, verifies it, runs it with `evaluate_function`
on random data and checks that the inferred result types are the shapes the reference
actually produces (and, where numpy has an opinion, the shapes numpy computes). Every
invalid case must be rejected with a `VerifyException`, never with another exception.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    Float64Type,
    FloatAttr,
    ModuleOp,
    TensorType,
    f32,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.test_value import create_ssa_value

from plmr.dialects import graph
from plmr.dialects.graph import (
    AddOp,
    ConcatOp,
    Conv2dOp,
    DivOp,
    GatherOp,
    LayerNormOp,
    MatmulOp,
    MulOp,
    PoolOp,
    ReduceOp,
    ReshapeOp,
    RmsNormOp,
    ScaleOp,
    SoftmaxOp,
    SplitOp,
    SubOp,
    TransposeOp,
)
from plmr.runtime.reference import evaluate_function
from plmr.values import tensor_dtype

Shape = tuple[int, ...]
Array = np.ndarray[Any, Any]

FAST = settings(max_examples=150, deadline=None)
SLOW = settings(max_examples=60, deadline=None)


def shapes(min_rank: int = 0, max_rank: int = 4, min_dim: int = 1, max_dim: int = 4) -> Any:
    return st.lists(
        st.integers(min_dim, max_dim), min_size=min_rank, max_size=max_rank
    ).map(tuple)


def value(shape: Sequence[int], elt: Attribute = f32) -> SSAValue:
    return create_ssa_value(TensorType(elt, shape))


def shape_of(v: SSAValue | Attribute) -> Shape:
    return graph.static_shape(v, "value")


def random_array(t: Attribute, rng: np.random.Generator) -> Array:
    shape = shape_of(t)
    dtype = tensor_dtype(t)
    if dtype.kind in "iu":
        return rng.integers(-5, 6, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def run_one(
    arg_types: Sequence[Attribute],
    build: Callable[..., Operation],
    args: Sequence[Array] | None = None,
    seed: int = 0,
) -> tuple[Operation, list[Array]]:
    """Builds `func.func @f(args) { %r = build(args); return %r }`, verifies and runs it."""
    block = Block(arg_types=arg_types)
    op = build(*block.args)
    block.add_op(op)
    block.add_op(func.ReturnOp(*op.results))
    fn = func.FuncOp("f", (list(arg_types), [r.type for r in op.results]), Region(block))
    module = ModuleOp([fn])
    module.verify()
    if args is None:
        rng = np.random.default_rng(seed)
        args = [random_array(t, rng) for t in arg_types]
    outputs = evaluate_function(module, "f", args)
    assert len(outputs) == len(op.results)
    for out, result in zip(outputs, op.results, strict=True):
        assert out.shape == shape_of(result)
        assert out.dtype == tensor_dtype(result.type)
    return op, outputs


def tt(shape: Sequence[int], elt: Attribute = f32) -> TensorType[Attribute]:
    return TensorType(elt, shape)


def numpy_rejects(fn: Callable[[], object]) -> bool:
    try:
        fn()
    except (ValueError, IndexError, TypeError):
        return True
    return False


# ---------------------------------------------------------------------------------------
# Broadcasting (elementwise binary ops)
# ---------------------------------------------------------------------------------------


@st.composite
def shape_pairs(draw: st.DrawFn) -> tuple[Shape, Shape]:
    """Pairs of shapes that are often, but not always, broadcast-compatible."""
    out = draw(shapes(0, 4, 1, 4))
    lhs = list(out[len(out) - draw(st.integers(0, len(out))) :])
    rhs = list(out[len(out) - draw(st.integers(0, len(out))) :])
    for side in (lhs, rhs):
        for i in range(len(side)):
            choice = draw(st.integers(0, 5))
            if choice == 0:
                side[i] = 1
            elif choice == 1:
                side[i] = draw(st.integers(0, 4))
    return tuple(lhs), tuple(rhs)


@FAST
@given(shape_pairs())
def test_broadcast_shapes_agrees_with_numpy(pair: tuple[Shape, Shape]):
    lhs, rhs = pair
    try:
        expected = np.broadcast_shapes(lhs, rhs)
    except ValueError:
        with pytest.raises(VerifyException, match="are not broadcast-compatible"):
            graph.broadcast_shapes(lhs, rhs)
        with pytest.raises(VerifyException, match="are not broadcast-compatible"):
            AddOp(value(lhs), value(rhs))
        return
    assert graph.broadcast_shapes(lhs, rhs) == expected


@FAST
@given(
    shape_pairs().filter(lambda p: not numpy_rejects(lambda: np.broadcast_shapes(*p))),
    st.sampled_from([AddOp, SubOp, MulOp, DivOp]),
    st.integers(0, 2**16),
)
def test_binary_ops_infer_the_reference_shape(
    pair: tuple[Shape, Shape], cls: type[AddOp], seed: int
):
    lhs, rhs = pair
    op, (out,) = run_one([tt(lhs), tt(rhs)], cls, seed=seed)
    assert out.shape == np.broadcast_shapes(lhs, rhs)
    assert op.results[0].type == tt(np.broadcast_shapes(lhs, rhs))


@FAST
@given(shapes(0, 3), shapes(0, 3))
def test_elementwise_rejects_mismatched_element_types(lhs: Shape, rhs: Shape):
    op = AddOp.create(
        operands=[value(lhs), value(rhs, i32)], result_types=[tt(lhs)]
    )  # the builder would not catch the element types, the verifier does
    with pytest.raises(VerifyException, match="must have the same element type"):
        op.verify_()


# ---------------------------------------------------------------------------------------
# Matmul
# ---------------------------------------------------------------------------------------


@st.composite
def matmul_cases(draw: st.DrawFn) -> tuple[Shape, Shape, bool, bool]:
    batch_lhs, batch_rhs = draw(shape_pairs())
    m, k, n = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    k2 = k if draw(st.integers(0, 4)) else draw(st.integers(1, 4))
    ta, tb = draw(st.booleans()), draw(st.booleans())
    lhs = (*batch_lhs, *((k, m) if ta else (m, k)))
    rhs = (*batch_rhs, *((n, k2) if tb else (k2, n)))
    return lhs, rhs, ta, tb


@FAST
@given(matmul_cases(), st.integers(0, 2**16))
def test_matmul_agrees_with_numpy(case: tuple[Shape, Shape, bool, bool], seed: int):
    lhs, rhs, ta, tb = case
    a, b = np.zeros(lhs, np.float32), np.zeros(rhs, np.float32)
    a_t = np.swapaxes(a, -1, -2) if ta else a
    b_t = np.swapaxes(b, -1, -2) if tb else b
    try:
        expected = np.matmul(a_t, b_t).shape
    except ValueError:
        with pytest.raises(VerifyException):
            MatmulOp(value(lhs), value(rhs), ta, tb)
        return
    op, (out,) = run_one([tt(lhs), tt(rhs)], lambda x, y: MatmulOp(x, y, ta, tb), seed=seed)
    assert out.shape == expected
    assert op.results[0].type == tt(expected)


@FAST
@given(shapes(0, 3), shapes(0, 3), st.booleans(), st.booleans())
def test_matmul_rejects_vectors(lhs: Shape, rhs: Shape, ta: bool, tb: bool):
    assume(len(lhs) < 2 or len(rhs) < 2)
    with pytest.raises(VerifyException, match="matmul operands must have rank >= 2"):
        MatmulOp(value(lhs), value(rhs), ta, tb)


# ---------------------------------------------------------------------------------------
# Transpose, reshape, reduce, softmax, norms
# ---------------------------------------------------------------------------------------


@FAST
@given(shapes(0, 5), st.data())
def test_transpose_agrees_with_numpy(shape: Shape, data: st.DataObject):
    perm = data.draw(st.permutations(range(len(shape))))
    _, (out,) = run_one([tt(shape)], lambda x: TransposeOp(x, perm))
    assert out.shape == np.zeros(shape).transpose(perm).shape


@FAST
@given(shapes(0, 4), st.lists(st.integers(-5, 5), max_size=5))
def test_transpose_rejects_non_permutations(shape: Shape, perm: list[int]):
    assume(sorted(perm) != list(range(len(shape))))
    with pytest.raises(VerifyException, match="is not a permutation"):
        TransposeOp(value(shape), perm)


@FAST
@given(shapes(0, 4), st.data())
def test_reshape_to_any_factorization(shape: Shape, data: st.DataObject):
    size = math.prod(shape)
    new: list[int] = []
    rest = size
    for _ in range(data.draw(st.integers(0, 3))):
        d = data.draw(st.sampled_from([d for d in range(1, rest + 1) if rest % d == 0]))
        new.append(d)
        rest //= d
    new.append(rest)
    new = data.draw(st.permutations(new))
    _, (out,) = run_one([tt(shape)], lambda x: ReshapeOp(x, new))
    assert out.shape == tuple(new)


@FAST
@given(shapes(0, 3), shapes(0, 3))
def test_reshape_rejects_a_different_element_count(shape: Shape, new: Shape):
    assume(math.prod(shape) != math.prod(new))
    op = ReshapeOp(value(shape), new)
    with pytest.raises(VerifyException, match="changes the element count"):
        op.verify_()


@pytest.mark.filterwarnings(
    "ignore:Mean of empty slice", "ignore:invalid value encountered"
)
@FAST
@given(
    shapes(1, 4, 0, 4),
    st.lists(st.integers(-4, 3), min_size=0, max_size=4),
    st.booleans(),
    st.sampled_from(list(graph.ReduceKind)),
    st.integers(0, 2**16),
)
def test_reduce_agrees_with_numpy(
    shape: Shape, axes: list[int], keepdims: bool, kind: graph.ReduceKind, seed: int
):
    rank = len(shape)
    valid = (
        bool(axes)
        and all(-rank <= a < rank for a in axes)
        and len({a % rank for a in axes}) == len(axes)
    )
    if not valid:
        with pytest.raises(VerifyException):
            ReduceOp(kind, value(shape), axes, keepdims)
        return
    expected = np.sum(np.zeros(shape), axis=tuple(axes), keepdims=keepdims).shape
    data = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    op, (out,) = run_one(
        [tt(shape)], lambda x: ReduceOp(kind, x, axes, keepdims), args=[data]
    )
    assert out.shape == expected
    assert op.results[0].type == tt(expected)
    ax = tuple(axes)
    if data.size == 0:
        # Over an empty set: sum 0, mean NaN, max -inf and min +inf (ONNX).
        empty = {"sum": 0.0, "mean": np.nan, "max": -np.inf, "min": np.inf}[kind]
        np.testing.assert_array_equal(out, np.full(expected, empty, np.float32))
        return
    numpy_fn = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}[kind]
    want = numpy_fn(data.astype(np.float64), axis=ax, keepdims=keepdims)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@FAST
@given(shapes(0, 4, 0, 4), st.integers(-5, 4), st.integers(0, 2**16))
def test_softmax_axis(shape: Shape, axis: int, seed: int):
    rank = len(shape)
    if not -rank <= axis < rank:
        with pytest.raises(VerifyException, match="out of range"):
            SoftmaxOp(value(shape), axis).verify_()
        return
    _, (out,) = run_one([tt(shape)], lambda x: SoftmaxOp(x, axis), seed=seed)
    if shape[axis] > 0:
        np.testing.assert_allclose(out.sum(axis=axis), 1.0, rtol=1e-5)


@st.composite
def norm_cases(draw: st.DrawFn) -> tuple[Shape, int, Shape]:
    shape = draw(shapes(1, 4))
    axis = draw(st.integers(-len(shape) - 1, len(shape)))
    if -len(shape) <= axis < len(shape):
        norm = shape[axis % len(shape) :]
    else:
        norm = shape
    # A parameter shape that is a (possibly broadcasting, possibly wrong) suffix of norm.
    suffix = list(norm[len(norm) - draw(st.integers(0, len(norm))) :])
    for i in range(len(suffix)):
        choice = draw(st.integers(0, 4))
        if choice == 0:
            suffix[i] = 1
        elif choice == 1:
            suffix[i] = draw(st.integers(1, 5))
    if draw(st.integers(0, 6)) == 0:
        suffix.insert(0, 1)
    return shape, axis, tuple(suffix)


def _norm_param_ok(shape: Shape, axis: int, param: Shape) -> bool:
    if not -len(shape) <= axis < len(shape):
        return False
    norm = shape[axis % len(shape) :]
    try:
        return np.broadcast_shapes(norm, param) == norm
    except ValueError:
        return False


@FAST
@given(norm_cases(), st.booleans(), st.integers(0, 2**16))
def test_layernorm_parameters(case: tuple[Shape, int, Shape], bias: bool, seed: int):
    shape, axis, param = case

    def build(x: SSAValue, g: SSAValue, *b: SSAValue) -> Operation:
        return LayerNormOp(x, g, b[0] if b else None, axis=axis)

    types = [tt(shape), tt(param)] + ([tt(param)] if bias else [])
    if not _norm_param_ok(shape, axis, param):
        with pytest.raises(VerifyException):
            build(*(value(shape_of(t)) for t in types)).verify_()
        return
    _, (out,) = run_one(types, build, seed=seed)
    assert out.shape == shape


@FAST
@given(norm_cases(), st.integers(0, 2**16))
def test_rmsnorm_parameters(case: tuple[Shape, int, Shape], seed: int):
    shape, axis, param = case
    if not _norm_param_ok(shape, axis, param):
        with pytest.raises(VerifyException):
            RmsNormOp(value(shape), value(param), axis=axis).verify_()
        return
    _, (out,) = run_one([tt(shape), tt(param)], lambda x, w: RmsNormOp(x, w, axis=axis))
    assert out.shape == shape


@FAST
@given(shapes(0, 3), st.floats(allow_nan=True, allow_infinity=True, width=64))
def test_scale_of_integers_needs_an_integral_factor(shape: Shape, factor: float):
    if not float(factor).is_integer() or abs(factor) > 2**31:
        if float(factor).is_integer():
            return  # representable but would overflow: a runtime, not a type, question
        with pytest.raises(VerifyException, match="needs an integral factor"):
            ScaleOp(value(shape, i32), factor).verify_()
        ScaleOp(value(shape), factor).verify_()  # floats take any factor
        return
    _, (out,) = run_one([tt(shape, i32)], lambda x: ScaleOp(x, factor))
    assert out.shape == shape
    assert ScaleOp(value(shape), factor).factor == FloatAttr(factor, Float64Type())


# ---------------------------------------------------------------------------------------
# Concat, split, gather
# ---------------------------------------------------------------------------------------


@st.composite
def concat_cases(draw: st.DrawFn) -> tuple[list[Shape], int]:
    base = draw(shapes(1, 4))
    axis = draw(st.integers(-len(base) - 1, len(base)))
    n = draw(st.integers(1, 4))
    inputs: list[Shape] = []
    for _ in range(n):
        s = list(base)
        if -len(base) <= axis < len(base):
            s[axis] = draw(st.integers(0, 4))
        if draw(st.integers(0, 7)) == 0:  # sometimes break the other dimensions
            i = draw(st.integers(0, len(s) - 1))
            s[i] = draw(st.integers(1, 5))
        if draw(st.integers(0, 15)) == 0:
            s.append(1)
        inputs.append(tuple(s))
    return inputs, axis


@FAST
@given(concat_cases(), st.integers(0, 2**16))
def test_concat_agrees_with_numpy(case: tuple[list[Shape], int], seed: int):
    inputs, axis = case
    try:
        expected = np.concatenate([np.zeros(s) for s in inputs], axis=axis).shape
    except ValueError:
        with pytest.raises(VerifyException):
            ConcatOp([value(s) for s in inputs], axis)
        return
    op, (out,) = run_one([tt(s) for s in inputs], lambda *xs: ConcatOp(xs, axis), seed=seed)
    assert out.shape == expected
    assert op.results[0].type == tt(expected)


@st.composite
def split_cases(draw: st.DrawFn) -> tuple[Shape, int, list[int]]:
    shape = draw(shapes(1, 4, 1, 6))
    axis = draw(st.integers(-len(shape) - 1, len(shape)))
    if -len(shape) <= axis < len(shape) and draw(st.integers(0, 3)):
        total = shape[axis]
        cuts = sorted(draw(st.lists(st.integers(0, total), max_size=4)))
        bounds = [0, *cuts, total]
        sizes = [b - a for a, b in itertools.pairwise(bounds)]
    else:
        sizes = draw(st.lists(st.integers(-2, 6), min_size=1, max_size=4))
    return shape, axis, sizes


@FAST
@given(split_cases(), st.integers(0, 2**16))
def test_split_agrees_with_numpy(case: tuple[Shape, int, list[int]], seed: int):
    shape, axis, sizes = case
    rank = len(shape)
    valid = (
        -rank <= axis < rank
        and all(s >= 0 for s in sizes)
        and sum(sizes) == shape[axis % rank]
    )
    if not valid:
        with pytest.raises(VerifyException):
            SplitOp(value(shape), axis, sizes)
        return
    pieces = np.split(np.zeros(shape), np.cumsum(sizes)[:-1], axis=axis)
    op, outs = run_one([tt(shape)], lambda x: SplitOp(x, axis, sizes), seed=seed)
    assert [o.shape for o in outs] == [p.shape for p in pieces]
    assert [r.type for r in op.results] == [tt(p.shape) for p in pieces]


@FAST
@given(shapes(0, 3), shapes(0, 3), st.integers(-4, 3), st.integers(0, 2**16))
def test_gather_agrees_with_numpy(data: Shape, indices: Shape, axis: int, seed: int):
    rank = len(data)
    if not -rank <= axis < rank:
        with pytest.raises(VerifyException):
            GatherOp(value(data), value(indices, i64), axis)
        return
    rng = np.random.default_rng(seed)
    size = data[axis]
    idx = rng.integers(-size, size, size=indices).astype(np.int64)
    table = rng.standard_normal(data).astype(np.float32)
    _, (out,) = run_one(
        [tt(data), tt(indices, i64)],
        lambda d, i: GatherOp(d, i, axis),
        args=[table, idx],
    )
    expected = np.take(table, idx, axis=axis)
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)


# ---------------------------------------------------------------------------------------
# Conv2d and pooling, against brute-force window counting and naive loops
# ---------------------------------------------------------------------------------------


def count_windows(size: int, kernel: int, stride: int, lo: int, hi: int, dil: int) -> int:
    """The number of window positions that fit the padded extent, counted one by one."""
    padded = size + lo + hi
    return sum(
        1 for start in range(0, padded, stride) if start + dil * (kernel - 1) < padded
    )


def naive_conv2d(
    x: Array,
    w: Array,
    bias: Array | None,
    strides: Sequence[int],
    pads: Sequence[int],
    dilations: Sequence[int],
    groups: int,
) -> Array:
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.zeros((n, c, h + pads[0] + pads[2], wd + pads[1] + pads[3]), np.float64)
    xp[:, :, pads[0] : pads[0] + h, pads[1] : pads[1] + wd] = x
    oh = count_windows(h, kh, strides[0], pads[0], pads[2], dilations[0])
    ow = count_windows(wd, kw, strides[1], pads[1], pads[3], dilations[1])
    y = np.zeros((n, m, oh, ow), np.float64)
    mg = m // groups
    for o in range(m):
        g = o // mg
        for i in range(oh):
            for j in range(ow):
                for a in range(kh):
                    for b in range(kw):
                        r = i * strides[0] + a * dilations[0]
                        s = j * strides[1] + b * dilations[1]
                        patch = xp[:, g * cg : (g + 1) * cg, r, s]
                        y[:, o, i, j] += patch @ w[o, :, a, b]
    if bias is not None:
        y += bias.reshape(1, m, 1, 1)
    return y


@st.composite
def conv_cases(draw: st.DrawFn) -> dict[str, Any]:
    groups = draw(st.integers(1, 3))
    cg = draw(st.integers(1, 2))
    mg = draw(st.integers(1, 2))
    return {
        "x": (
            draw(st.integers(1, 2)),
            groups * cg,
            draw(st.integers(1, 7)),
            draw(st.integers(1, 7)),
        ),
        "w": (groups * mg, cg, draw(st.integers(1, 3)), draw(st.integers(1, 3))),
        "strides": (draw(st.integers(1, 3)), draw(st.integers(1, 3))),
        "pads": tuple(draw(st.integers(0, 2)) for _ in range(4)),
        "dilations": (draw(st.integers(1, 2)), draw(st.integers(1, 2))),
        "groups": groups,
        "bias": draw(st.booleans()),
    }


@SLOW
@given(conv_cases(), st.integers(0, 2**16))
def test_conv2d_shape_and_values(case: dict[str, Any], seed: int):
    x, w = case["x"], case["w"]
    strides, pads, dilations = case["strides"], case["pads"], case["dilations"]
    groups = case["groups"]
    oh = count_windows(x[2], w[2], strides[0], pads[0], pads[2], dilations[0])
    ow = count_windows(x[3], w[3], strides[1], pads[1], pads[3], dilations[1])
    kwargs = {"strides": strides, "pads": pads, "dilations": dilations, "groups": groups}
    if oh == 0 or ow == 0:
        with pytest.raises(VerifyException, match="does not fit"):
            Conv2dOp(value(x), value(w), **kwargs)
        return
    types = [tt(x), tt(w)] + ([tt((w[0],))] if case["bias"] else [])

    def build(xv: SSAValue, wv: SSAValue, *b: SSAValue) -> Operation:
        return Conv2dOp(xv, wv, b[0] if b else None, **kwargs)

    rng = np.random.default_rng(seed)
    args = [random_array(t, rng) for t in types]
    op, (out,) = run_one(types, build, args=args)
    assert out.shape == (x[0], w[0], oh, ow)
    assert op.results[0].type == tt((x[0], w[0], oh, ow))
    expected = naive_conv2d(
        args[0],
        args[1],
        args[2] if case["bias"] else None,
        strides,
        pads,
        dilations,
        groups,
    )
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


@SLOW
@given(
    st.lists(st.integers(-1, 9), min_size=4, max_size=4),
    st.lists(st.integers(-1, 4), min_size=4, max_size=4),
    st.lists(st.integers(-1, 3), min_size=1, max_size=3),
    st.lists(st.integers(-1, 3), min_size=1, max_size=5),
    st.lists(st.integers(-1, 3), min_size=1, max_size=3),
    st.integers(-1, 4),
)
def test_conv2d_invalid_parameters_raise_verify_exceptions(
    x: list[int],
    w: list[int],
    strides: list[int],
    pads: list[int],
    dilations: list[int],
    groups: int,
):
    # Arbitrary (mostly invalid) parameters: either a shape or a VerifyException.
    x_shape = tuple(max(d, 0) for d in x)
    w_shape = tuple(max(d, 0) for d in w)
    try:
        shape = graph.conv2d_shape(x_shape, w_shape, strides, pads, dilations, groups)
    except VerifyException:
        return
    assert len(shape) == 4
    assert all(d > 0 for d in shape[2:])
    assert shape[:2] == (x_shape[0], w_shape[0])


def naive_pool(
    kind: str,
    x: Array,
    kernel: Sequence[int],
    strides: Sequence[int],
    pads: Sequence[int],
    count_include_pad: bool,
) -> Array:
    n, c, h, w = x.shape
    oh = count_windows(h, kernel[0], strides[0], pads[0], pads[2], 1)
    ow = count_windows(w, kernel[1], strides[1], pads[1], pads[3], 1)
    y = np.zeros((n, c, oh, ow), np.float64)
    for i in range(oh):
        for j in range(ow):
            r0, s0 = i * strides[0] - pads[0], j * strides[1] - pads[1]
            rows = [r for r in range(r0, r0 + kernel[0]) if 0 <= r < h]
            cols = [s for s in range(s0, s0 + kernel[1]) if 0 <= s < w]
            window = x[:, :, rows][:, :, :, cols]
            if kind == "max":
                y[:, :, i, j] = window.max(axis=(2, 3))
            else:
                count = (
                    kernel[0] * kernel[1] if count_include_pad else len(rows) * len(cols)
                )
                y[:, :, i, j] = window.sum(axis=(2, 3)) / count
    return y


@SLOW
@given(
    st.sampled_from(["max", "avg"]),
    shapes(4, 4, 1, 7),
    st.tuples(st.integers(1, 4), st.integers(1, 4)),
    st.tuples(st.integers(1, 3), st.integers(1, 3)),
    st.tuples(*(st.integers(0, 3) for _ in range(4))),
    st.booleans(),
    st.integers(0, 2**16),
)
def test_pool_shape_and_values(
    kind: str,
    x: Shape,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    pads: tuple[int, int, int, int],
    count_include_pad: bool,
    seed: int,
):
    count_include_pad = count_include_pad and kind == "avg"
    kwargs = {"strides": strides, "pads": pads, "count_include_pad": count_include_pad}
    oh = count_windows(x[2], kernel[0], strides[0], pads[0], pads[2], 1)
    ow = count_windows(x[3], kernel[1], strides[1], pads[1], pads[3], 1)
    if any(p >= kernel[i % 2] for i, p in enumerate(pads)) or oh == 0 or ow == 0:
        with pytest.raises(VerifyException):
            PoolOp(kind, value(x), kernel, **kwargs)
        return
    rng = np.random.default_rng(seed)
    data = rng.standard_normal(x).astype(np.float32)
    _, (out,) = run_one([tt(x)], lambda v: PoolOp(kind, v, kernel, **kwargs), args=[data])
    assert out.shape == (x[0], x[1], oh, ow)
    expected = naive_pool(kind, data, kernel, strides, pads, count_include_pad)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


@SLOW
@given(
    st.lists(st.integers(0, 6), min_size=3, max_size=5),
    st.lists(st.integers(-1, 4), min_size=1, max_size=3),
    st.lists(st.integers(-1, 3), min_size=1, max_size=3),
    st.lists(st.integers(-1, 4), min_size=1, max_size=5),
)
def test_pool_invalid_parameters_raise_verify_exceptions(
    x: list[int], kernel: list[int], strides: list[int], pads: list[int]
):
    try:
        shape = graph.pool_shape(tuple(x), kernel, strides, pads)
    except VerifyException:
        return
    assert len(shape) == 4
    assert all(d > 0 for d in shape[2:])


# ---------------------------------------------------------------------------------------
# Dynamic shapes are rejected by every op with a VerifyException
# ---------------------------------------------------------------------------------------

DYNAMIC_CASES: dict[str, Callable[[SSAValue], Operation]] = {
    "add": lambda x: AddOp(x, x),
    "matmul": lambda x: MatmulOp(x, x),
    "scale": lambda x: ScaleOp(x, 2.0),
    "relu": graph.ReluOp,
    "gelu": graph.GeluOp,
    "transpose": lambda x: TransposeOp(x, (1, 0)),
    "reshape": lambda x: ReshapeOp(x, (4,)),
    "reduce": lambda x: ReduceOp("sum", x, (0,)),
    "softmax": SoftmaxOp,
    "layernorm": lambda x: LayerNormOp(x, x),
    "rmsnorm": lambda x: RmsNormOp(x, x),
    "concat": lambda x: ConcatOp([x, x], 0),
    "split": lambda x: SplitOp(x, 0, (1, 1)),
    "gather": lambda x: GatherOp(x, value((2,), i64)),
}


@FAST
@given(
    st.sampled_from(sorted(DYNAMIC_CASES)),
    st.lists(st.sampled_from([2, DYNAMIC_INDEX]), min_size=2, max_size=2).filter(
        lambda s: DYNAMIC_INDEX in s
    ),
)
def test_dynamic_shapes_are_rejected(name: str, shape: list[int]):
    with pytest.raises(VerifyException, match="must have a static shape"):
        DYNAMIC_CASES[name](value(shape)).verify_()
