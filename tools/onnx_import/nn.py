"""
Neural-network ONNX ops: reductions, softmax and normalizations, convolution and pooling.
"""

from __future__ import annotations

from collections.abc import Sequence

from plmr.dialects import graph
from plmr.tools.onnx_import.core import Importer, Node, Shape, fmt_shape, handles, shape_of


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
# convolution and pooling
# ---------------------------------------------------------------------------------------


def window_pads(
    imp: Importer,
    node: Node,
    in_hw: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
) -> list[int]:
    """`[top, left, bottom, right]` from the `pads` and `auto_pad` attributes."""
    auto_pad = node.str_attr("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        pads = node.ints_attr("pads") or [0, 0, 0, 0]
        if len(pads) != 4 or any(p < 0 for p in pads):
            raise node.error(
                f"attribute pads = {pads} must be four non-negative integers "
                "[top, left, bottom, right] for a 2-D window; fix the model"
            )
        return pads
    if auto_pad == "VALID":
        return [0, 0, 0, 0]
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise node.unsupported_attr(
            "auto_pad", f"'{auto_pad}'", "NOTSET, VALID, SAME_UPPER or SAME_LOWER"
        )
    lo: list[int] = []
    hi: list[int] = []
    for size, k, s, d in zip(in_hw, kernel, strides, dilations, strict=True):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        lo.append(small if auto_pad == "SAME_UPPER" else big)
        hi.append(big if auto_pad == "SAME_UPPER" else small)
    return [lo[0], lo[1], hi[0], hi[1]]


def window_ints(imp: Importer, node: Node, name: str, default: Sequence[int]) -> list[int]:
    """A two-element window attribute (`strides`, `dilations`, `kernel_shape`)."""
    values = node.ints_attr(name)
    if values is None:
        return list(default)
    if len(values) != 2 or any(v <= 0 for v in values):
        raise node.error(
            f"attribute {name} = {values} must be two positive integers for a 2-D "
            "window; plmr supports only 2-D convolution and pooling"
        )
    return values


def check_nchw(imp: Importer, node: Node, shape: Shape) -> None:
    if len(shape) != 4:
        raise node.error(
            f"the input has shape {fmt_shape(shape)} (rank {len(shape)}), but plmr "
            f"supports only 2-D {node.op_type} on NCHW (rank-4) inputs; reshape 1-D "
            "or 3-D windows to 2-D in the model"
        )


@handles("Conv")
def op_conv(imp: Importer, node: Node) -> None:
    """2-D convolution (NCHW), with pads / auto_pad, strides, dilations and groups."""
    x, w = imp.tensor(node, 0), imp.tensor(node, 1)
    x_shape, w_shape = shape_of(x), shape_of(w)
    check_nchw(imp, node, x_shape)
    if len(w_shape) != 4:
        raise node.error(
            f"the weight has shape {fmt_shape(w_shape)}; plmr supports only 2-D "
            "convolution (an MCkHkW weight)"
        )
    kernel = window_ints(imp, node, "kernel_shape", w_shape[2:])
    if tuple(kernel) != w_shape[2:]:
        raise node.error(
            f"attribute kernel_shape = {kernel} does not match the weight shape "
            f"{fmt_shape(w_shape)}; fix the model"
        )
    strides = window_ints(imp, node, "strides", (1, 1))
    dilations = window_ints(imp, node, "dilations", (1, 1))
    groups = node.int_attr("group", 1)
    pads = window_pads(imp, node, x_shape[2:], kernel, strides, dilations)
    bias = imp.tensor(node, 2) if node.input(2) else None
    op = graph.Conv2dOp(
        x, w, bias, strides=strides, pads=pads, dilations=dilations, groups=groups
    )
    imp.define(node.output(0), imp.emit(op))


def pool(imp: Importer, node: Node, kind: graph.PoolKind) -> None:
    """2-D max / average pooling; ceil_mode and dilations other than 1 are rejected."""
    x = imp.tensor(node, 0)
    x_shape = shape_of(x)
    check_nchw(imp, node, x_shape)
    if node.attr("kernel_shape") is None:
        raise node.error("the required attribute 'kernel_shape' is missing")
    kernel = window_ints(imp, node, "kernel_shape", (1, 1))
    ceil_mode = node.int_attr("ceil_mode", 0)
    if ceil_mode != 0:
        raise node.unsupported_attr(
            "ceil_mode",
            ceil_mode,
            "only ceil_mode = 0; pad the input so that the windows fit exactly, or "
            "use explicit pads",
        )
    dilations = node.ints_attr("dilations")
    if dilations is not None and any(d != 1 for d in dilations):
        raise node.unsupported_attr("dilations", dilations, "only dilations of 1")
    strides = window_ints(imp, node, "strides", (1, 1))
    pads = window_pads(imp, node, x_shape[2:], kernel, strides, (1, 1))
    count_include_pad = node.int_attr("count_include_pad", 0) != 0
    op = graph.PoolOp(
        kind,
        x,
        kernel,
        strides=strides,
        pads=pads,
        count_include_pad=count_include_pad and kind == graph.PoolKind.AVG,
    )
    imp.define(node.output(0), imp.emit(op))


@handles("MaxPool")
def op_max_pool(imp: Importer, node: Node) -> None:
    imp.check_unused(node, 1, "the argmax indices")
    pool(imp, node, graph.PoolKind.MAX)


@handles("AveragePool")
def op_average_pool(imp: Importer, node: Node) -> None:
    pool(imp, node, graph.PoolKind.AVG)


# ---------------------------------------------------------------------------------------
# constants
# ---------------------------------------------------------------------------------------
