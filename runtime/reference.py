"""
Reference semantics of the `graph` dialect in plain numpy, and the reference interpreter
of every level.

Each `graph` op has one numpy function (`numpy_ops`, ONNX semantics); `GRAPH_IMPLS` maps
the ops to them. Importing this module registers the semantics of every level with the
evaluator engine (`graph` here, `loop` in `loop_ops`, `tile` and the `arith` / `math`
ops it uses in `tile_ops`), so `ReferenceEvaluator` runs programs at any of them.
`evaluate_function` runs a `func.func` of graph ops on numpy arrays: the oracle every
later level (loop, tile, mesh) is checked against; `run_tile_function` runs a tile-level
function and counts the memory traffic it causes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    ModuleOp,
)
from xdsl.ir import Operation

from plmr.dialects import graph
from plmr.dialects.graph_weights import weight_ref
from plmr.errors import PlmrError
from plmr.runtime.evaluator import (
    EvalImpl,
    OpImpl,
    ReferenceEvaluator,
    register_eval_impls,
    register_op_impls,
)
from plmr.runtime.loop_ops import LOOP_IMPLS
from plmr.runtime.numpy_ops import (
    cast_to,
    conv2d,
    erf,
    gather,
    gather_elements,
    gelu,
    layernorm,
    matmul,
    pad,
    pool,
    reduce,
    relu,
    rmsnorm,
    sigmoid,
    silu,
    slice_,
    softmax,
    split,
)
from plmr.runtime.tile_ops import EVAL_IMPLS, TileStats, count_op, global_values
from plmr.runtime.weights import load_weight
from plmr.values import Array, dense_to_numpy, tensor_dtype

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


def _run_weight(op: Operation, args: list[Array]) -> list[Array]:
    ref = weight_ref(op)
    assert ref is not None
    return [load_weight(ref)]


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
    graph.WeightOp: _run_weight,
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
    graph.CosOp: _unary(np.cos),
    graph.SinOp: _unary(np.sin),
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

register_op_impls(GRAPH_IMPLS)
register_eval_impls(EVAL_IMPLS)
register_eval_impls(LOOP_IMPLS)


# ---------------------------------------------------------------------------------------
# Running functions
# ---------------------------------------------------------------------------------------


def evaluate_function(module: ModuleOp, name: str, args: Sequence[Array]) -> list[Array]:
    """Runs `@name` of `module` on `args` with the reference semantics."""
    evaluator = ReferenceEvaluator(module)
    return evaluator.run(evaluator.function(name), args)


def run_tile_function(
    module: ModuleOp, name: str, args: Sequence[Array]
) -> tuple[list[Array], TileStats]:
    """Runs a tile-level function; returns its results and the traffic it caused."""
    stats = TileStats()

    class _Counting(ReferenceEvaluator):
        def observe(self, op: Operation, operands: list[Any], results: list[Any]) -> None:
            count_op(stats, globals_, op, results)

    ev = _Counting(module)
    fn = ev.function(name)
    globals_ = global_values(fn)
    return ev.run(fn, args), stats


__all__ = [
    "GRAPH_IMPLS",
    "EvalImpl",
    "OpImpl",
    "ReferenceEvaluator",
    "cast_to",
    "conv2d",
    "erf",
    "evaluate_function",
    "gather",
    "gather_elements",
    "gelu",
    "layernorm",
    "matmul",
    "pad",
    "pool",
    "reduce",
    "relu",
    "rmsnorm",
    "run_tile_function",
    "sigmoid",
    "silu",
    "slice_",
    "softmax",
    "split",
]
