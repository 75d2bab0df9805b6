"""
Neural-network ONNX ops: reductions, softmax and normalizations, convolution and pooling.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.ir import SSAValue

from plmr.dialects import graph
from plmr.frontend.onnx.core import Importer, Node, Shape, fmt_shape, handles, shape_of
from plmr.frontend.onnx.elementwise import power


def reduce(imp: Importer, node: Node, kind: graph.ReduceKind) -> None:
    """ReduceX with axes as attribute or input, keepdims and noop_with_empty_axes."""
    x = imp.tensor(node, 0)
    shape = shape_of(x)
    axes = imp.axes(node, 1)
    keepdims = node.int_attr("keepdims", 1) != 0
    noop = node.int_attr("noop_with_empty_axes", 0) != 0
    if not axes:
        if noop or not shape:
            imp.define(node.output(0), x)
            return
        axes = list(range(len(shape)))
    norm = imp.normalize_axes(node, axes, len(shape))
    imp.define(node.output(0), imp.emit(graph.ReduceOp(kind, x, norm, keepdims)))


@handles("ReduceSum")
def op_reduce_sum(imp: Importer, node: Node) -> None:
    reduce(imp, node, graph.ReduceKind.SUM)


@handles("ReduceMax")
def op_reduce_max(imp: Importer, node: Node) -> None:
    reduce(imp, node, graph.ReduceKind.MAX)


@handles("ReduceMin")
def op_reduce_min(imp: Importer, node: Node) -> None:
    reduce(imp, node, graph.ReduceKind.MIN)


@handles("ReduceMean")
def op_reduce_mean(imp: Importer, node: Node) -> None:
    reduce(imp, node, graph.ReduceKind.MEAN)


@handles("Softmax")
def op_softmax(imp: Importer, node: Node) -> None:
    """Softmax along one axis (opset 13 semantics)."""
    x = imp.tensor(node, 0)
    rank = len(shape_of(x))
    (axis,) = imp.normalize_axes(node, [node.int_attr("axis", -1)], rank)
    imp.define(node.output(0), imp.emit(graph.SoftmaxOp(x, axis - rank)))


@handles("LayerNormalization")
def op_layer_normalization(imp: Importer, node: Node) -> None:
    """LayerNormalization from `axis` on, optional bias; output 0 only."""
    imp.check_unused(node, 1, "the mean or inverse standard deviation")
    x = imp.tensor(node, 0)
    rank = len(shape_of(x))
    (axis,) = imp.normalize_axes(node, [node.int_attr("axis", -1)], rank)
    epsilon = node.float_attr("epsilon", 1e-5)
    scale = imp.tensor(node, 1)
    bias = imp.tensor(node, 2) if node.input(2) else None
    op = graph.LayerNormOp(x, scale, bias, axis - rank, epsilon)
    imp.define(node.output(0), imp.emit(op))


# ---------------------------------------------------------------------------------------
# More reductions
# ---------------------------------------------------------------------------------------


def _reduce_with(
    imp: Importer,
    node: Node,
    kind: graph.ReduceKind,
    pre: Callable[[SSAValue], SSAValue],
    post: Callable[[SSAValue], SSAValue],
) -> None:
    """`post(reduce(pre(x)))`: ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum."""
    x = imp.tensor(node, 0)
    if not graph.is_float_type(graph.element_type(x)):
        raise node.error(f"{node.op_type} needs a floating-point input; fix the model")
    shape = shape_of(x)
    axes = imp.axes(node, 1)
    keepdims = node.int_attr("keepdims", 1) != 0
    if not axes:
        if node.int_attr("noop_with_empty_axes", 0) != 0 or not shape:
            imp.result(node, post(pre(x)))
            return
        axes = list(range(len(shape)))
    norm = imp.normalize_axes(node, axes, len(shape))
    imp.result(node, post(imp.emit(graph.ReduceOp(kind, pre(x), norm, keepdims))))


def _register_reductions() -> None:
    def reg(
        name: str,
        pre: Callable[[Importer, SSAValue], SSAValue],
        post: Callable[[Importer, SSAValue], SSAValue],
    ) -> None:
        def handle(imp: Importer, node: Node) -> None:
            _reduce_with(
                imp,
                node,
                graph.ReduceKind.SUM,
                lambda v: pre(imp, v),
                lambda v: post(imp, v),
            )

        handles(name)(handle)

    reg("ReduceL1", lambda imp, v: imp.emit(graph.AbsOp(v)), lambda imp, v: v)
    reg(
        "ReduceL2",
        lambda imp, v: imp.emit(graph.MulOp(v, v)),
        lambda imp, v: imp.emit(graph.SqrtOp(v)),
    )
    reg("ReduceSumSquare", lambda imp, v: imp.emit(graph.MulOp(v, v)), lambda imp, v: v)
    reg("ReduceLogSum", lambda imp, v: v, lambda imp, v: imp.emit(graph.LogOp(v)))


_register_reductions()


@handles("LogSoftmax")
def op_log_softmax(imp: Importer, node: Node) -> None:
    """`(x - max) - log(sum(exp(x - max)))` along one axis (opset 13 semantics)."""
    x = imp.tensor(node, 0)
    rank = len(shape_of(x))
    (axis,) = imp.normalize_axes(node, [node.int_attr("axis", -1)], rank)
    top = imp.emit(graph.ReduceOp(graph.ReduceKind.MAX, x, [axis], True))
    shifted = imp.emit(graph.SubOp(x, top))
    total = imp.emit(
        graph.ReduceOp(graph.ReduceKind.SUM, imp.emit(graph.ExpOp(shifted)), [axis], True)
    )
    imp.result(node, graph.SubOp(shifted, imp.emit(graph.LogOp(total))))


# ---------------------------------------------------------------------------------------
# Per-channel normalizations
# ---------------------------------------------------------------------------------------


def channel_vector(imp: Importer, node: Node, i: int, rank: int) -> SSAValue:
    """Input `i` (one value per channel) shaped `[C, 1, ...]` to broadcast over NC..."""
    shape = imp.shape(node, i)
    if len(shape) != 1:
        raise node.error(
            f"input {i} must be a vector (one value per channel), got shape "
            f"{fmt_shape(shape)}; fix the model"
        )
    target = (shape[0],) + (1,) * (rank - 2)
    arr = imp.consts.get(node.input(i))
    if arr is not None:
        return imp.materialize(arr.reshape(target), f"{node.input(i)}_c", node.where)
    return imp.emit(graph.ReshapeOp(imp.tensor(node, i), target))


def _channels(imp: Importer, node: Node) -> tuple[SSAValue, Shape]:
    x = imp.tensor(node, 0)
    shape = shape_of(x)
    if len(shape) < 2 or not graph.is_float_type(graph.element_type(x)):
        raise node.error(
            f"{node.op_type} needs a floating-point N x C x ... input, got "
            f"{x.type}; fix the model"
        )
    return x, shape


@handles("BatchNormalization")
def op_batch_normalization(imp: Importer, node: Node) -> None:
    """
    Inference batch norm with constant statistics: folded (in float64) into one
    per-channel product and sum, `x·s + b` with `s = scale / sqrt(var + eps)` and
    `b = bias - mean·s`.
    """
    if node.int_attr("training_mode", 0) != 0:
        raise node.error(
            "training_mode = 1; plmr imports inference graphs only: export in eval mode"
        )
    imp.check_unused(node, 1, "the running mean or variance")
    x, shape = _channels(imp, node)
    channels = shape[1]
    params: list[np.ndarray[Any, np.dtype[np.float64]]] = []
    for i, what in enumerate(("scale", "bias", "mean", "variance"), start=1):
        arr = imp.const(node, i, what).astype(np.float64)
        if arr.shape != (channels,):
            raise node.error(
                f"the {what} has shape {fmt_shape(arr.shape)}, expected [{channels}] "
                "(one value per channel); fix the model"
            )
        params.append(arr)
    scale, bias, mean, var = params
    eps = node.float_attr("epsilon", 1e-5)
    s = scale / np.sqrt(var + eps)
    b = bias - mean * s
    target = (channels,) + (1,) * (len(shape) - 2)
    name = node.output(0)
    s_v = imp.constant_like(x, s.reshape(target), f"{name}_scale", node.where)
    b_v = imp.constant_like(x, b.reshape(target), f"{name}_shift", node.where)
    imp.result(node, graph.AddOp(imp.emit(graph.MulOp(x, s_v)), b_v))


@handles("InstanceNormalization")
def op_instance_normalization(imp: Importer, node: Node) -> None:
    """`(x - mean) / sqrt(var + eps)·scale + bias` over the spatial axes of each channel."""
    x, shape = _channels(imp, node)
    rank = len(shape)
    if rank < 3:
        raise node.error("InstanceNormalization needs spatial axes (rank >= 3)")
    axes = list(range(2, rank))
    mean = imp.emit(graph.ReduceOp(graph.ReduceKind.MEAN, x, axes, True))
    centered = imp.emit(graph.SubOp(x, mean))
    sq = imp.emit(graph.MulOp(centered, centered))
    var = imp.emit(graph.ReduceOp(graph.ReduceKind.MEAN, sq, axes, True))
    eps = imp.constant_like(x, node.float_attr("epsilon", 1e-5), "epsilon", node.where)
    std = imp.emit(graph.SqrtOp(imp.emit(graph.AddOp(var, eps))))
    normed = imp.emit(graph.DivOp(centered, std))
    scaled = imp.emit(graph.MulOp(normed, channel_vector(imp, node, 1, rank)))
    imp.result(node, graph.AddOp(scaled, channel_vector(imp, node, 2, rank)))


@handles("LRN")
def op_lrn(imp: Importer, node: Node) -> None:
    """
    Local response normalization across channels: the window sum of squares is an
    average pool (count_include_pad) over the channel axis of `x²` seen as
    `N x 1 x C x rest`, then `x / (bias + alpha·avg)^beta`.
    """
    x, shape = _channels(imp, node)
    if node.attr("size") is None:
        raise node.error("the required attribute 'size' is missing; fix the model")
    size = node.int_attr("size", 1)
    if size < 1:
        raise node.error(f"size = {size} must be positive; fix the model")
    alpha = node.float_attr("alpha", 1e-4)
    beta = node.float_attr("beta", 0.75)
    bias = node.float_attr("bias", 1.0)
    n, c = shape[0], shape[1]
    rest = math.prod(shape[2:])
    sq = imp.emit(graph.ReshapeOp(imp.emit(graph.MulOp(x, x)), (n, 1, c, rest)))
    lo = (size - 1) // 2
    avg = imp.emit(
        graph.PoolOp(
            graph.PoolKind.AVG,
            sq,
            (size, 1),
            strides=(1, 1),
            pads=(lo, 0, size - 1 - lo, 0),
            count_include_pad=True,
        )
    )
    bias_v = imp.constant_like(x, bias, "bias", node.where)
    base = imp.emit(graph.AddOp(imp.emit(graph.ScaleOp(avg, alpha)), bias_v))
    base = imp.emit(graph.ReshapeOp(base, shape))
    imp.result(node, graph.DivOp(x, power(imp, base, beta)))


@handles("ReduceLogSumExp")
def op_reduce_log_sum_exp(imp: Importer, node: Node) -> None:
    """`log(sum(exp(x - m))) + m` with `m` the maximum over the axes (no overflow)."""
    x = imp.tensor(node, 0)
    shape = shape_of(x)
    axes = imp.axes(node, 1)
    keepdims = node.int_attr("keepdims", 1) != 0
    if not axes:
        if node.int_attr("noop_with_empty_axes", 0) != 0 or not shape:
            imp.result(node, x)
            return
        axes = list(range(len(shape)))
    norm = imp.normalize_axes(node, axes, len(shape))
    top = imp.emit(graph.ReduceOp(graph.ReduceKind.MAX, x, norm, True))
    exp = imp.emit(graph.ExpOp(imp.emit(graph.SubOp(x, top))))
    total = imp.emit(graph.ReduceOp(graph.ReduceKind.SUM, exp, norm, keepdims))
    if not keepdims:
        top = imp.emit(graph.ReshapeOp(top, shape_of(total)))
    imp.result(node, graph.AddOp(imp.emit(graph.LogOp(total)), top))
