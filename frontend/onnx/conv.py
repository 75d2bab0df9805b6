"""
Convolution and pooling: 2-D ops map to `graph.conv2d` / `graph.pool`; 1-D ones are
reshaped to 2-D; 3-D ones are exact rewrites into 2-D ops over the depth positions
(one conv2d per kernel depth, combined with strided slices); ConvTranspose is a zero
insertion (reshape, pad, slice) followed by a conv2d with the flipped, transposed
weights; global pools are reductions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.ir import SSAValue

from plmr.dialects import graph
from plmr.frontend.onnx.core import Importer, Node, Shape, fmt_shape, handles, shape_of

# ---------------------------------------------------------------------------------------
# Window attributes
# ---------------------------------------------------------------------------------------


def window_ints(node: Node, name: str, default: Sequence[int], n: int) -> list[int]:
    """An `n`-element window attribute (`strides`, `dilations`, `kernel_shape`)."""
    values = node.ints_attr(name)
    if values is None:
        return list(default)
    if len(values) != n or any(v <= 0 for v in values):
        raise node.error(
            f"attribute {name} = {values} must be {n} positive integers for a "
            f"{n}-D window; fix the model"
        )
    return values


def window_pads(
    node: Node,
    sizes: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
) -> tuple[list[int], list[int]]:
    """`(begin, end)` pads per spatial axis from the `pads` and `auto_pad` attributes."""
    n = len(sizes)
    auto_pad = node.str_attr("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        pads = node.ints_attr("pads") or [0] * (2 * n)
        if len(pads) != 2 * n or any(p < 0 for p in pads):
            raise node.error(
                f"attribute pads = {pads} must be {2 * n} non-negative integers (the "
                f"begin then the end pads of the {n} spatial axes); fix the model"
            )
        return pads[:n], pads[n:]
    if auto_pad == "VALID":
        return [0] * n, [0] * n
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise node.unsupported_attr(
            "auto_pad", f"'{auto_pad}'", "NOTSET, VALID, SAME_UPPER or SAME_LOWER"
        )
    lo: list[int] = []
    hi: list[int] = []
    for size, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        lo.append(small if auto_pad == "SAME_UPPER" else big)
        hi.append(big if auto_pad == "SAME_UPPER" else small)
    return lo, hi


def _spatial_rank(node: Node, shape: Shape, supported: Sequence[int]) -> int:
    n = len(shape) - 2
    if n not in supported:
        dims = ", ".join(f"{d}-D" for d in supported)
        raise node.error(
            f"the input has shape {fmt_shape(shape)} (rank {len(shape)}), but plmr "
            f"supports {node.op_type} on {dims} windows (N x C x spatial inputs) only; "
            "reshape the window in the model"
        )
    return n


def reshaped(imp: Importer, node: Node, i: int, shape: Sequence[int]) -> SSAValue:
    """Input `i` reshaped to `shape` (a new constant if it is one)."""
    arr = imp.consts.get(node.input(i))
    if arr is not None:
        return imp.materialize(
            np.ascontiguousarray(arr.reshape(tuple(shape))),
            f"{node.input(i)}_r",
            node.where,
        )
    return imp.emit(graph.ReshapeOp(imp.tensor(node, i), tuple(shape)))


def _slice_axis(
    imp: Importer, x: SSAValue, axis: int, start: int, count: int, step: int
) -> SSAValue:
    """`count` entries of `x` along `axis` from `start` every `step` (x if all)."""
    shape = shape_of(x)
    if start == 0 and step == 1 and count == shape[axis]:
        return x
    starts = [0] * len(shape)
    ends = list(shape)
    steps = [1] * len(shape)
    starts[axis], ends[axis], steps[axis] = start, start + (count - 1) * step + 1, step
    return imp.emit(graph.SliceOp(x, starts, ends, steps))


def _depth_planes(imp: Importer, x: SSAValue) -> tuple[SSAValue, Shape]:
    """`N x C x D x H x W` as `(N·D) x C x H x W` planes."""
    n, c, d, h, w = shape_of(x)
    planes = imp.emit(graph.TransposeOp(x, (0, 2, 1, 3, 4)))
    return imp.emit(graph.ReshapeOp(planes, (n * d, c, h, w))), (n, c, d, h, w)


# ---------------------------------------------------------------------------------------
# Convolution
# ---------------------------------------------------------------------------------------


@handles("Conv")
def op_conv(imp: Importer, node: Node) -> None:
    """1-, 2- and 3-D convolution with pads / auto_pad, strides, dilations and groups."""
    x_shape, w_shape = imp.shape(node, 0), imp.shape(node, 1)
    n = _spatial_rank(node, x_shape, (1, 2, 3))
    if len(w_shape) != n + 2:
        raise node.error(
            f"the weight has shape {fmt_shape(w_shape)}, but a {n}-D convolution needs "
            f"a rank-{n + 2} weight; fix the model"
        )
    kernel = window_ints(node, "kernel_shape", w_shape[2:], n)
    if tuple(kernel) != w_shape[2:]:
        raise node.error(
            f"attribute kernel_shape = {kernel} does not match the weight shape "
            f"{fmt_shape(w_shape)}; fix the model"
        )
    strides = window_ints(node, "strides", [1] * n, n)
    dilations = window_ints(node, "dilations", [1] * n, n)
    groups = node.int_attr("group", 1)
    lo, hi = window_pads(node, x_shape[2:], kernel, strides, dilations)
    if n == 3:
        _conv3d(imp, node, strides, lo, hi, dilations, groups)
        return
    if n == 1:
        x = reshaped(imp, node, 0, (*x_shape[:2], 1, x_shape[2]))
        w = reshaped(imp, node, 1, (*w_shape[:2], 1, w_shape[2]))
        strides, dilations = [1, *strides], [1, *dilations]
        lo, hi = [0, *lo], [0, *hi]
    else:
        x, w = imp.tensor(node, 0), imp.tensor(node, 1)
    bias = imp.tensor(node, 2) if node.input(2) else None
    y = imp.emit(
        graph.Conv2dOp(
            x, w, bias, strides=strides, pads=[*lo, *hi], dilations=dilations, groups=groups
        )
    )
    if n == 1:
        b, m, _, width = shape_of(y)
        y = imp.emit(graph.ReshapeOp(y, (b, m, width)))
    imp.result(node, y)


def _conv3d(
    imp: Importer,
    node: Node,
    strides: Sequence[int],
    lo: Sequence[int],
    hi: Sequence[int],
    dilations: Sequence[int],
    groups: int,
) -> None:
    """
    3-D convolution as one 2-D convolution of every depth plane per kernel depth `kd`,
    whose results at depths `kd·dilation + od·stride` are summed (exact up to the order
    of the sums).
    """
    x = imp.tensor(node, 0)
    m, cg, kd_size, kh, kw = imp.shape(node, 1)
    if lo[0] or hi[0]:
        x = imp.emit(graph.PadOp(x, [0, 0, lo[0], 0, 0, 0, 0, hi[0], 0, 0]))
    planes, (n, _, depth, _, _) = _depth_planes(imp, x)
    out_depth = (depth - dilations[0] * (kd_size - 1) - 1) // strides[0] + 1
    if out_depth <= 0:
        raise node.error(
            f"the kernel depth {kd_size} does not fit the padded input depth {depth}"
        )
    weights = imp.consts.get(node.input(1))
    total: SSAValue | None = None
    for kd in range(kd_size):
        if weights is not None:
            wk = imp.materialize(
                np.ascontiguousarray(weights[:, :, kd]),
                f"{node.input(1)}_d{kd}",
                node.where,
            )
        else:
            w = imp.tensor(node, 1)
            wk = _slice_axis(imp, w, 2, kd, 1, 1)
            wk = imp.emit(graph.ReshapeOp(wk, (m, cg, kh, kw)))
        y = imp.emit(
            graph.Conv2dOp(
                planes,
                wk,
                None,
                strides=strides[1:],
                pads=[lo[1], lo[2], hi[1], hi[2]],
                dilations=dilations[1:],
                groups=groups,
            )
        )
        _, _, oh, ow = shape_of(y)
        y = imp.emit(graph.ReshapeOp(y, (n, depth, m, oh, ow)))
        y = _slice_axis(imp, y, 1, kd * dilations[0], out_depth, strides[0])
        total = y if total is None else imp.emit(graph.AddOp(total, y))
    assert total is not None
    out = imp.emit(graph.TransposeOp(total, (0, 2, 1, 3, 4)))
    if node.input(2):
        out = imp.emit(graph.AddOp(out, reshaped(imp, node, 2, (m, 1, 1, 1))))
    imp.result(node, out)


@handles("ConvTranspose")
def op_conv_transpose(imp: Importer, node: Node) -> None:
    """
    1- and 2-D transposed convolution with a constant weight: zeros are inserted
    between the input's elements (reshape, pad, slice), the border is padded (or
    cropped), and a stride-1 `graph.conv2d` runs with the weight flipped spatially and
    its channel axes swapped per group.
    """
    x_shape, w_shape = imp.shape(node, 0), imp.shape(node, 1)
    n = _spatial_rank(node, x_shape, (1, 2))
    if len(w_shape) != n + 2:
        raise node.error(
            f"the weight has shape {fmt_shape(w_shape)}; a {n}-D transposed convolution "
            f"needs a rank-{n + 2} weight"
        )
    weight = imp.const(node, 1, "weight")
    groups = node.int_attr("group", 1)
    c_in, m_group = w_shape[0], w_shape[1]
    if groups <= 0 or c_in % groups or x_shape[1] != c_in:
        raise node.error(
            f"the weight {fmt_shape(w_shape)} does not match the input "
            f"{fmt_shape(x_shape)} with group = {groups}; fix the model"
        )
    kernel = list(w_shape[2:])
    strides = window_ints(node, "strides", [1] * n, n)
    dilations = window_ints(node, "dilations", [1] * n, n)
    out_pad = node.ints_attr("output_padding") or [0] * n
    if len(out_pad) != n:
        raise node.error(f"output_padding = {out_pad} must have {n} entries")
    sizes = list(x_shape[2:])
    lo, hi = _transpose_pads(node, sizes, kernel, strides, dilations, out_pad)
    if n == 1:
        sizes, kernel, strides, dilations = (
            [1, *sizes],
            [1, *kernel],
            [1, *strides],
            [1, *dilations],
        )
        lo, hi, out_pad = [0, *lo], [0, *hi], [0, *out_pad]
        x = reshaped(imp, node, 0, (x_shape[0], x_shape[1], 1, x_shape[2]))
        weight = weight.reshape(c_in, m_group, 1, w_shape[2])
    else:
        x = imp.tensor(node, 0)
    batch, channels = x_shape[0], x_shape[1]
    if any(s > 1 for s in strides):
        (h, w), (sh, sw) = sizes, strides
        x = imp.emit(graph.ReshapeOp(x, (batch, channels, h, 1, w, 1)))
        x = imp.emit(graph.PadOp(x, [0] * 6 + [0, 0, 0, sh - 1, 0, sw - 1]))
        x = imp.emit(graph.ReshapeOp(x, (batch, channels, h * sh, w * sw)))
        x = _slice_axis(imp, x, 2, 0, (h - 1) * sh + 1, 1)
        x = _slice_axis(imp, x, 3, 0, (w - 1) * sw + 1, 1)
    conv_lo = [d * (k - 1) - p for d, k, p in zip(dilations, kernel, lo, strict=True)]
    conv_hi = [
        d * (k - 1) - p + o
        for d, k, p, o in zip(dilations, kernel, hi, out_pad, strict=True)
    ]
    for axis, (a, b) in enumerate(zip(conv_lo, conv_hi, strict=True), start=2):
        if a < 0 or b < 0:
            size = shape_of(x)[axis]
            x = _slice_axis(imp, x, axis, max(-a, 0), size - max(-a, 0) - max(-b, 0), 1)
    c_group = c_in // groups
    flipped = np.concatenate(
        [
            weight[g * c_group : (g + 1) * c_group].transpose(1, 0, 2, 3)[:, :, ::-1, ::-1]
            for g in range(groups)
        ],
        axis=0,
    )
    w_v = imp.materialize(
        np.ascontiguousarray(flipped), f"{node.input(1)}_flipped", node.where
    )
    bias = imp.tensor(node, 2) if node.input(2) else None
    pads = [max(v, 0) for v in conv_lo] + [max(v, 0) for v in conv_hi]
    y = imp.emit(
        graph.Conv2dOp(
            x, w_v, bias, strides=(1, 1), pads=pads, dilations=dilations, groups=groups
        )
    )
    if n == 1:
        b, m, _, width = shape_of(y)
        y = imp.emit(graph.ReshapeOp(y, (b, m, width)))
    imp.result(node, y)


def _transpose_pads(
    node: Node,
    sizes: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    out_pad: Sequence[int],
) -> tuple[list[int], list[int]]:
    """The begin / end pads of a ConvTranspose (from pads, auto_pad or output_shape)."""
    n = len(sizes)
    auto_pad = node.str_attr("auto_pad", "NOTSET")
    output_shape = node.ints_attr("output_shape")
    if output_shape is None and auto_pad in ("NOTSET", "VALID"):
        pads = node.ints_attr("pads") or [0] * (2 * n)
        if auto_pad == "VALID":
            pads = [0] * (2 * n)
        if len(pads) != 2 * n or any(p < 0 for p in pads):
            raise node.error(f"attribute pads = {pads} must be {2 * n} non-negative ints")
        return pads[:n], pads[n:]
    if auto_pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER"):
        raise node.unsupported_attr(
            "auto_pad", f"'{auto_pad}'", "NOTSET, VALID, SAME_UPPER or SAME_LOWER"
        )
    if output_shape is None:
        output_shape = [size * s for size, s in zip(sizes, strides, strict=True)]
    output_shape = output_shape[-n:]
    lo: list[int] = []
    hi: list[int] = []
    for size, k, s, d, o, out in zip(
        sizes, kernel, strides, dilations, out_pad, output_shape, strict=True
    ):
        total = s * (size - 1) + o + (k - 1) * d + 1 - out
        if total < 0:
            raise node.error(
                f"output_shape {output_shape} is larger than the transposed convolution "
                "produces; fix the model"
            )
        if auto_pad == "SAME_UPPER":
            lo.append(total // 2)
            hi.append(total - total // 2)
        else:
            lo.append(total - total // 2)
            hi.append(total // 2)
    return lo, hi


# ---------------------------------------------------------------------------------------
# Pooling
# ---------------------------------------------------------------------------------------


def pool(imp: Importer, node: Node, kind: graph.PoolKind) -> None:
    """1-, 2- and 3-D max / average pooling; ceil_mode and dilations are refused."""
    x_shape = imp.shape(node, 0)
    n = _spatial_rank(node, x_shape, (1, 2, 3))
    if node.attr("kernel_shape") is None:
        raise node.error("the required attribute 'kernel_shape' is missing")
    kernel = window_ints(node, "kernel_shape", [1] * n, n)
    ceil_mode = node.int_attr("ceil_mode", 0)
    if ceil_mode != 0:
        raise node.unsupported_attr(
            "ceil_mode",
            ceil_mode,
            "only ceil_mode = 0; pad the input so that the windows fit exactly, or "
            "use explicit pads",
        )
    strides = window_ints(node, "strides", [1] * n, n)
    dilations = window_ints(node, "dilations", [1] * n, n)
    lo, hi = window_pads(node, x_shape[2:], kernel, strides, dilations)
    include_pad = node.int_attr("count_include_pad", 0) != 0 and kind == graph.PoolKind.AVG
    if n == 1:
        x = reshaped(imp, node, 0, (*x_shape[:2], 1, x_shape[2]))
        kernel, strides, lo, hi = [1, *kernel], [1, *strides], [0, *lo], [0, *hi]
        dilations = [1, *dilations]
    else:
        x = imp.tensor(node, 0)
    if any(d != 1 for d in dilations):
        x, strides = _undilate(imp, node, kind, x, strides, lo, hi, dilations)
        lo, hi = [0] * len(lo), [0] * len(hi)
    if n == 3:
        _pool3d(imp, node, kind, x, kernel, strides, lo, hi, include_pad)
        return
    y = imp.emit(
        graph.PoolOp(
            kind, x, kernel, strides=strides, pads=[*lo, *hi], count_include_pad=include_pad
        )
    )
    if n == 1:
        b, c, _, width = shape_of(y)
        y = imp.emit(graph.ReshapeOp(y, (b, c, width)))
    imp.result(node, y)


def _undilate(
    imp: Importer,
    node: Node,
    kind: graph.PoolKind,
    x: SSAValue,
    strides: Sequence[int],
    lo: Sequence[int],
    hi: Sequence[int],
    dilations: Sequence[int],
) -> tuple[SSAValue, list[int]]:
    """
    A dilated max pool whose dilations divide its strides reads only every
    `dilation`-th element of the padded input: that subsampled input (a pad with -inf
    and a strided slice) with strides `stride / dilation` and no dilation is the same
    pool.
    """
    if kind != graph.PoolKind.MAX or any(
        s % d for s, d in zip(strides, dilations, strict=True)
    ):
        raise node.unsupported_attr(
            "dilations",
            list(dilations),
            "dilations other than 1 only for MaxPool, and only when they divide the "
            "strides",
        )
    if not graph.is_float_type(graph.element_type(x)):
        raise node.error("dilated max pooling needs a floating-point input")
    rank = len(shape_of(x))
    spatial = rank - len(lo)
    x = imp.emit(
        graph.PadOp(x, [0] * spatial + list(lo) + [0] * spatial + list(hi), value=-np.inf)
    )
    padded = shape_of(x)
    x = imp.emit(
        graph.SliceOp(x, [0] * rank, list(padded), [1] * spatial + list(dilations))
    )
    return x, [s // d for s, d in zip(strides, dilations, strict=True)]


def _pool3d(
    imp: Importer,
    node: Node,
    kind: graph.PoolKind,
    x: SSAValue,
    kernel: Sequence[int],
    strides: Sequence[int],
    lo: Sequence[int],
    hi: Sequence[int],
    include_pad: bool,
) -> None:
    """
    3-D pooling as a 2-D pool of every depth plane, then a max (or a sum divided by the
    number of counted depths) over the `kernel[0]` planes of each output depth.
    """
    depth_in = shape_of(x)[2]
    is_max = kind == graph.PoolKind.MAX
    if lo[0] or hi[0]:
        fill = -np.inf if is_max else 0.0
        if is_max and not graph.is_float_type(graph.element_type(x)):
            raise node.error("3-D max pooling with depth pads needs a float input")
        x = imp.emit(graph.PadOp(x, [0, 0, lo[0], 0, 0, 0, 0, hi[0], 0, 0], value=fill))
    planes, (n, c, depth, _, _) = _depth_planes(imp, x)
    y = imp.emit(
        graph.PoolOp(
            kind,
            planes,
            kernel[1:],
            strides=strides[1:],
            pads=[lo[1], lo[2], hi[1], hi[2]],
            count_include_pad=include_pad,
        )
    )
    _, _, oh, ow = shape_of(y)
    y = imp.emit(graph.ReshapeOp(y, (n, depth, c, oh, ow)))
    out_depth = (depth - kernel[0]) // strides[0] + 1
    total: SSAValue | None = None
    for kd in range(kernel[0]):
        part = _slice_axis(imp, y, 1, kd, out_depth, strides[0])
        if total is None:
            total = part
        elif is_max:
            total = imp.emit(graph.MaximumOp(total, part))
        else:
            total = imp.emit(graph.AddOp(total, part))
    assert total is not None
    if not is_max:
        starts = np.arange(out_depth) * strides[0] - lo[0]
        if include_pad:
            counts = np.full(out_depth, kernel[0], dtype=np.float64)
        else:
            ends = np.minimum(starts + kernel[0], depth_in)
            counts = (ends - np.maximum(starts, 0)).astype(np.float64)
        divisor = imp.constant_like(
            total, counts.reshape(1, out_depth, 1, 1, 1), "depth_counts", node.where
        )
        total = imp.emit(graph.DivOp(total, divisor))
    imp.result(node, graph.TransposeOp(total, (0, 2, 1, 3, 4)))


@handles("MaxPool")
def op_max_pool(imp: Importer, node: Node) -> None:
    imp.check_unused(node, 1, "the argmax indices")
    pool(imp, node, graph.PoolKind.MAX)


@handles("AveragePool")
def op_average_pool(imp: Importer, node: Node) -> None:
    pool(imp, node, graph.PoolKind.AVG)


def _global_pool(kind: graph.ReduceKind) -> None:
    def handle(imp: Importer, node: Node) -> None:
        x = imp.tensor(node, 0)
        shape = shape_of(x)
        if len(shape) < 3:
            raise node.error(
                f"the input has shape {fmt_shape(shape)}; a global pool needs N x C x "
                "spatial axes"
            )
        imp.result(node, graph.ReduceOp(kind, x, list(range(2, len(shape))), True))

    name = "GlobalMaxPool" if kind == graph.ReduceKind.MAX else "GlobalAveragePool"
    handles(name)(handle)


_global_pool(graph.ReduceKind.MEAN)
_global_pool(graph.ReduceKind.MAX)
