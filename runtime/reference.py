"""
Reference semantics of the `graph` dialect in plain numpy, and the reference interpreter
of every level.

Each `graph` op has one numpy function (`numpy_ops`, ONNX semantics), registered for its
class in the typed table `REFERENCE` (`@REFERENCE.impl(graph.GeluOp)`); `GRAPH_IMPLS` is
derived from it. Importing this module registers the semantics of every level, as xDSL
`InterpreterFunctions`, with the evaluator engine (`graph` here, `loop` in `loop_ops`,
`tile` and the `arith` / `math` ops it uses in `tile_ops`), so `ReferenceEvaluator` runs programs at any of them.
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
from plmr.dialects.op_table import OpTable
from plmr.errors import PlmrError
from plmr.runtime.evaluator import (
    EvalImpl,
    OpImpl,
    ReferenceEvaluator,
    interpreter_functions,
    register_functions,
)
from plmr.runtime.loop_ops import LoopFunctions
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
from plmr.runtime.tile_ops import TileFunctions, TileStats, TrafficCounter
from plmr.runtime.weights import load_weight
from plmr.values import Array, dense_to_numpy, tensor_dtype

# ---------------------------------------------------------------------------------------
# Op dispatch
# ---------------------------------------------------------------------------------------


REFERENCE = OpTable[[list[Array]], list[Array]]("reference semantics")
"""The reference semantics of every `graph` op: (op, operand arrays) -> result arrays."""


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


@REFERENCE.impl(graph.MatmulOp)
def _run_matmul(op: graph.MatmulOp, args: list[Array]) -> list[Array]:
    a, b = args
    return [matmul(a, b, op.transpose_a is not None, op.transpose_b is not None)]


@REFERENCE.impl(graph.ScaleOp)
def _run_scale(op: graph.ScaleOp, args: list[Array]) -> list[Array]:
    (x,) = args
    factor = op.factor.value.data
    if x.dtype.kind in "iu":
        if factor != int(factor):
            raise PlmrError(f"cannot scale an integer tensor by {factor}")
        return [x * x.dtype.type(int(factor))]
    return [(x * np.asarray(factor, dtype=x.dtype)).astype(x.dtype)]


@REFERENCE.impl(graph.GeluOp)
def _run_gelu(op: graph.GeluOp, args: list[Array]) -> list[Array]:
    return [gelu(args[0], op.tanh is not None)]


@REFERENCE.impl(graph.TransposeOp)
def _run_transpose(op: graph.TransposeOp, args: list[Array]) -> list[Array]:
    # `.copy(order="C")`, not `np.ascontiguousarray`, which turns a 0-d array into 1-d.
    return [np.transpose(args[0], _ints(op.perm)).copy(order="C")]


@REFERENCE.impl(graph.ReshapeOp)
def _run_reshape(op: graph.ReshapeOp, args: list[Array]) -> list[Array]:
    return [args[0].reshape(graph.static_shape(op.results[0], "result"))]


@REFERENCE.impl(graph.ReduceOp)
def _run_reduce(op: graph.ReduceOp, args: list[Array]) -> list[Array]:
    return [
        np.asarray(
            reduce(op.kind.data, args[0], op.normalized_axes(), op.keepdims is not None)
        )
    ]


@REFERENCE.impl(graph.SoftmaxOp)
def _run_softmax(op: graph.SoftmaxOp, args: list[Array]) -> list[Array]:
    return [softmax(args[0], op.axis.value.data)]


@REFERENCE.impl(graph.LayerNormOp)
def _run_layernorm(op: graph.LayerNormOp, args: list[Array]) -> list[Array]:
    bias = args[2] if len(args) > 2 else None
    return [layernorm(args[0], args[1], bias, op.axis.value.data, op.epsilon.value.data)]


@REFERENCE.impl(graph.RmsNormOp)
def _run_rmsnorm(op: graph.RmsNormOp, args: list[Array]) -> list[Array]:
    return [rmsnorm(args[0], args[1], op.axis.value.data, op.epsilon.value.data)]


@REFERENCE.impl(graph.ConcatOp)
def _run_concat(op: graph.ConcatOp, args: list[Array]) -> list[Array]:
    return [np.concatenate(args, axis=op.axis.value.data)]


@REFERENCE.impl(graph.SplitOp)
def _run_split(op: graph.SplitOp, args: list[Array]) -> list[Array]:
    return split(args[0], op.axis.value.data, _ints(op.sizes))


@REFERENCE.impl(graph.Conv2dOp)
def _run_conv2d(op: graph.Conv2dOp, args: list[Array]) -> list[Array]:
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


@REFERENCE.impl(graph.PoolOp)
def _run_pool(op: graph.PoolOp, args: list[Array]) -> list[Array]:
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


@REFERENCE.impl(graph.ConstantOp)
def _run_constant(op: graph.ConstantOp, args: list[Array]) -> list[Array]:
    return [dense_to_numpy(op.value)]


@REFERENCE.impl(graph.WeightOp)
def _run_weight(op: graph.WeightOp, args: list[Array]) -> list[Array]:
    ref = weight_ref(op)
    assert ref is not None
    return [load_weight(ref)]


@REFERENCE.impl(graph.GatherOp)
def _run_gather(op: graph.GatherOp, args: list[Array]) -> list[Array]:
    data, indices = args
    return [gather(data, indices, op.axis.value.data % max(data.ndim, 1))]


@REFERENCE.impl(graph.WhereOp)
def _run_where(op: graph.WhereOp, args: list[Array]) -> list[Array]:
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


@REFERENCE.impl(graph.CmpOp)
def _run_cmp(op: graph.CmpOp, args: list[Array]) -> list[Array]:
    a, b = args
    return [np.asarray(_COMPARE[op.predicate.data](a, b), dtype=np.bool_)]


@REFERENCE.impl(graph.CastOp)
def _run_cast(op: graph.CastOp, args: list[Array]) -> list[Array]:
    return [cast_to(args[0], tensor_dtype(op.results[0].type))]


@REFERENCE.impl(graph.PowOp)
def _run_pow(op: graph.PowOp, args: list[Array]) -> list[Array]:
    (x,) = args
    return [np.power(x, np.asarray(op.exponent.value.data, dtype=x.dtype))]


@REFERENCE.impl(graph.SliceOp)
def _run_slice(op: graph.SliceOp, args: list[Array]) -> list[Array]:
    return [slice_(args[0], _ints(op.starts), _ints(op.ends), _ints(op.steps))]


@REFERENCE.impl(graph.ExpandOp)
def _run_expand(op: graph.ExpandOp, args: list[Array]) -> list[Array]:
    shape = graph.static_shape(op.results[0], "result")
    return [np.broadcast_to(args[0], shape).copy()]


@REFERENCE.impl(graph.PadOp)
def _run_pad(op: graph.PadOp, args: list[Array]) -> list[Array]:
    return [pad(args[0], _ints(op.pads), op.mode.data, op.value.value.data)]


@REFERENCE.impl(graph.GatherElementsOp)
def _run_gather_elements(op: graph.GatherElementsOp, args: list[Array]) -> list[Array]:
    data, indices = args
    return [gather_elements(data, indices, op.axis.value.data % max(data.ndim, 1))]


REFERENCE.add(graph.AddOp, _binary(np.add))
REFERENCE.add(graph.SubOp, _binary(np.subtract))
REFERENCE.add(graph.MulOp, _binary(np.multiply))
REFERENCE.add(graph.DivOp, _binary(np.divide))
REFERENCE.add(graph.ReluOp, _unary(relu))
REFERENCE.add(graph.SiluOp, _unary(silu))
REFERENCE.add(graph.SigmoidOp, _unary(sigmoid))
REFERENCE.add(graph.TanhOp, _unary(np.tanh))
REFERENCE.add(graph.ExpOp, _unary(np.exp))
REFERENCE.add(graph.ErfOp, _unary(erf))
REFERENCE.add(graph.SqrtOp, _unary(np.sqrt))
REFERENCE.add(graph.NegOp, _unary(np.negative))
REFERENCE.add(graph.NotOp, _unary(np.logical_not))
REFERENCE.add(graph.AndOp, _binary(np.logical_and))
REFERENCE.add(graph.OrOp, _binary(np.logical_or))
REFERENCE.add(graph.XorOp, _binary(np.logical_xor))
REFERENCE.add(graph.AbsOp, _unary(np.abs))
REFERENCE.add(graph.LogOp, _unary(np.log))
REFERENCE.add(graph.CosOp, _unary(np.cos))
REFERENCE.add(graph.SinOp, _unary(np.sin))
REFERENCE.add(graph.FloorOp, _unary(np.floor))
REFERENCE.add(graph.CeilOp, _unary(np.ceil))
REFERENCE.add(graph.ReciprocalOp, _unary(np.reciprocal))
REFERENCE.add(graph.MaximumOp, _binary(np.maximum))
REFERENCE.add(graph.MinimumOp, _binary(np.minimum))
for _cls, _meaning in graph.unary_meanings().items():
    REFERENCE.add(_cls, _unary(_meaning.numpy))

GRAPH_IMPLS: dict[type[Operation], OpImpl] = REFERENCE.as_dict()
"""Reference implementation of every `graph` op: (op, operand arrays) -> result arrays."""

GraphFunctions = interpreter_functions("GraphFunctions", pure=GRAPH_IMPLS)
"""The `graph` semantics as xDSL `InterpreterFunctions` (one `@impl` per op)."""

register_functions(GraphFunctions, LoopFunctions, TileFunctions)


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
    counter = TrafficCounter()
    ev = ReferenceEvaluator(module, listeners=[counter])
    fn = ev.function(name)
    counter.watch(fn)
    return ev.run(fn, args), counter.stats


__all__ = [
    "GRAPH_IMPLS",
    "REFERENCE",
    "EvalImpl",
    "GraphFunctions",
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
