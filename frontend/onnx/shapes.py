"""
Shape and data-movement ONNX ops: Reshape, Flatten, (Un)Squeeze, Transpose, Concat,
Split, Gather, Tile, Expand, Constant and the shape queries (Shape, Size) that fold to
constants from static shapes. Data movement on constants is folded (see `folding`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.utils.exceptions import VerifyException

from plmr.dialects import graph
from plmr.frontend.onnx.core import (
    Importer,
    Node,
    fmt_shape,
    handles,
    int_list,
    shape_of,
)
from plmr.frontend.onnx.weights import to_array


def reshape_to(imp: Importer, node: Node, shape: Sequence[int]) -> None:
    """Defines output 0 as input 0 reshaped to `shape` (folded if constant)."""
    out = tuple(shape)
    if imp.is_const(node, 0):
        imp.define_const(node.output(0), imp.consts[node.input(0)].reshape(out))
        return
    x = imp.tensor(node, 0)
    if shape_of(x) == out:
        imp.define(node.output(0), x)
        return
    imp.define(node.output(0), imp.emit(graph.ReshapeOp(x, out)))


@handles("Reshape")
def op_reshape(imp: Importer, node: Node) -> None:
    """Reshape to a constant shape (0 copies a dim unless allowzero; -1 is inferred)."""
    target = int_list(imp.const(node, 1, "target shape"))
    allowzero = node.int_attr("allowzero", 0) != 0
    in_shape = imp.shape(node, 0)
    out: list[int] = []
    infer: int | None = None
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            if i >= len(in_shape):
                raise node.error(
                    f"shape entry {i} is 0 (copy the input dimension), but the input "
                    f"{fmt_shape(in_shape)} has only {len(in_shape)} dimensions"
                )
            out.append(in_shape[i])
        elif d == -1:
            if infer is not None:
                raise node.error(
                    f"the target shape {target} has more than one -1; fix the model"
                )
            infer = i
            out.append(1)
        elif d < 0:
            raise node.error(f"the target shape {target} has a negative entry {d}")
        else:
            out.append(d)
    total = math.prod(in_shape)
    if infer is not None:
        known = math.prod(out)
        if known == 0 or total % known != 0:
            raise node.error(
                f"cannot infer the -1 in target shape {target} for an input of shape "
                f"{fmt_shape(in_shape)} ({total} elements)"
            )
        out[infer] = total // known
    if math.prod(out) != total:
        raise node.error(
            f"cannot reshape {fmt_shape(in_shape)} ({total} elements) to "
            f"{fmt_shape(out)} ({math.prod(out)} elements); fix the target shape"
        )
    reshape_to(imp, node, out)


@handles("Flatten")
def op_flatten(imp: Importer, node: Node) -> None:
    """Reshape to `[prod(shape[:axis]), prod(shape[axis:])]`."""
    in_shape = imp.shape(node, 0)
    rank = len(in_shape)
    axis = node.int_attr("axis", 1)
    if not -rank <= axis <= rank:
        raise node.error(
            f"axis {axis} is out of range for an input of rank {rank} "
            f"(expected {-rank} <= axis <= {rank})"
        )
    if axis < 0:
        axis += rank
    reshape_to(imp, node, (math.prod(in_shape[:axis]), math.prod(in_shape[axis:])))


@handles("Squeeze")
def op_squeeze(imp: Importer, node: Node) -> None:
    """Drops the given size-1 axes (all size-1 axes without axes)."""
    in_shape = imp.shape(node, 0)
    axes = imp.axes(node, 1)
    if axes is None:
        drop = [i for i, d in enumerate(in_shape) if d == 1]
    else:
        drop = imp.normalize_axes(node, axes, len(in_shape))
        for a in drop:
            if in_shape[a] != 1:
                raise node.error(
                    f"cannot squeeze axis {a} of shape {fmt_shape(in_shape)}: its "
                    f"size is {in_shape[a]}, not 1"
                )
    reshape_to(imp, node, [d for i, d in enumerate(in_shape) if i not in drop])


@handles("Unsqueeze")
def op_unsqueeze(imp: Importer, node: Node) -> None:
    """Inserts size-1 axes at the given positions of the output."""
    in_shape = imp.shape(node, 0)
    axes = imp.axes(node, 1)
    if axes is None:
        raise node.error("Unsqueeze needs axes (input 1); fix the model")
    rank = len(in_shape) + len(axes)
    new = imp.normalize_axes(node, axes, rank)
    dims = iter(in_shape)
    reshape_to(imp, node, [1 if i in new else next(dims) for i in range(rank)])


@handles("Transpose")
def op_transpose(imp: Importer, node: Node) -> None:
    """Permutes the dimensions (`perm` defaults to reversing them)."""
    in_shape = imp.shape(node, 0)
    perm = node.ints_attr("perm")
    if perm is None:
        perm = list(reversed(range(len(in_shape))))
    if sorted(perm) != list(range(len(in_shape))):
        raise node.error(
            f"perm {perm} is not a permutation of the {len(in_shape)} dimensions of "
            f"the input {fmt_shape(in_shape)}; fix the model"
        )
    if imp.is_const(node, 0):
        arr = imp.consts[node.input(0)]
        imp.define_const(node.output(0), np.ascontiguousarray(arr.transpose(perm)))
        return
    x = imp.tensor(node, 0)
    imp.define(node.output(0), imp.emit(graph.TransposeOp(x, perm)))


@handles("Concat")
def op_concat(imp: Importer, node: Node) -> None:
    """Concatenation along `axis` (folded if every input is constant)."""
    axis_attr = node.attr("axis")
    if axis_attr is None:
        raise node.error("the required attribute 'axis' is missing; fix the model")
    axis = node.int_attr("axis", 0)
    names = [n for n in node.proto.input if n]
    if not names:
        raise node.error("Concat needs at least one input; fix the model")
    if all(n in imp.consts for n in names):
        arrays = [imp.consts[n] for n in names]
        rank = arrays[0].ndim
        (ax,) = imp.normalize_axes(node, [axis], rank)
        imp.define_const(node.output(0), np.concatenate(arrays, axis=ax))
        return
    values = [imp.value(n, node.where) for n in names]
    (ax,) = imp.normalize_axes(node, [axis], len(shape_of(values[0])))
    imp.define(node.output(0), imp.emit(graph.ConcatOp(values, ax)))


@handles("Split")
def op_split(imp: Importer, node: Node) -> None:
    """Split by constant sizes, by `num_outputs` (last chunk smaller), or equally."""
    in_shape = imp.shape(node, 0)
    (axis,) = imp.normalize_axes(node, [node.int_attr("axis", 0)], len(in_shape))
    dim = in_shape[axis]
    n_out = len(node.proto.output)
    num_outputs = node.int_attr("num_outputs", 0)
    if node.input(1):
        sizes = int_list(imp.const(node, 1, "split sizes"))
    elif num_outputs > 0:
        if num_outputs != n_out:
            raise node.error(
                f"num_outputs = {num_outputs} but the node has {n_out} outputs; fix "
                "the model"
            )
        chunk = -(-dim // num_outputs)
        sizes = [chunk] * (num_outputs - 1) + [dim - chunk * (num_outputs - 1)]
    else:
        if dim % n_out != 0:
            raise node.error(
                f"axis {axis} of size {dim} cannot be split into {n_out} equal parts; "
                "give the split sizes as input 1"
            )
        sizes = [dim // n_out] * n_out
    if len(sizes) != n_out or sum(sizes) != dim or any(s < 0 for s in sizes):
        raise node.error(
            f"split sizes {sizes} do not divide axis {axis} of size {dim} into the "
            f"node's {n_out} outputs; fix the model"
        )
    if imp.is_const(node, 0):
        arr = imp.consts[node.input(0)]
        bounds = np.cumsum(sizes)[:-1]
        for name, part in zip(
            node.proto.output, np.split(arr, bounds, axis=axis), strict=True
        ):
            imp.define_const(name, np.ascontiguousarray(part))
        return
    op = graph.SplitOp(imp.tensor(node, 0), axis, sizes)
    imp.block.add_op(op)
    for name, result in zip(node.proto.output, op.results, strict=True):
        imp.define(name, result)


@handles("Gather")
def op_gather(imp: Importer, node: Node) -> None:
    """Gather along `axis`; constant indices are range-checked here."""
    data_shape = imp.shape(node, 0)
    if not data_shape:
        raise node.error("Gather data must have rank >= 1, got a scalar; fix the model")
    (axis,) = imp.normalize_axes(node, [node.int_attr("axis", 0)], len(data_shape))
    indices = imp.consts.get(node.input(1))
    if indices is not None:
        if indices.dtype.kind not in "iu":
            raise node.error(
                f"indices must be integers, got {indices.dtype}; fix the model"
            )
        size = data_shape[axis]
        if indices.size and (indices.min() < -size or indices.max() >= size):
            raise node.error(
                f"indices span [{indices.min()}, {indices.max()}] but axis {axis} of "
                f"the data {fmt_shape(data_shape)} has size {size}; fix the indices"
            )
        if imp.is_const(node, 0):
            data = imp.consts[node.input(0)]
            taken = np.take(data, indices.astype(np.int64), axis=axis)
            imp.define_const(node.output(0), np.ascontiguousarray(taken))
            return
    data_v, idx_v = imp.tensor(node, 0), imp.tensor(node, 1)
    imp.define(node.output(0), imp.emit(graph.GatherOp(data_v, idx_v, axis)))


# ---------------------------------------------------------------------------------------
# reductions and normalizations
# ---------------------------------------------------------------------------------------


@handles("Constant")
def op_constant(imp: Importer, node: Node) -> None:
    """A compile-time value from value, value_float(s) or value_int(s)."""
    attrs = list(node.proto.attribute)
    if len(attrs) != 1:
        raise node.error(
            f"a Constant needs exactly one value attribute, got {len(attrs)}; fix the model"
        )
    a = attrs[0]
    if a.name == "value":
        arr = to_array(a.t, f"the value of {node.where}")
    elif a.name == "value_float":
        arr = np.asarray(a.f, dtype=np.float32)
    elif a.name == "value_floats":
        arr = np.asarray(list(a.floats), dtype=np.float32)
    elif a.name == "value_int":
        arr = np.asarray(a.i, dtype=np.int64)
    elif a.name == "value_ints":
        arr = np.asarray(list(a.ints), dtype=np.int64)
    else:
        raise node.unsupported_attr(
            a.name, "...", "value, value_float(s) and value_int(s) are supported"
        )
    imp.define_const(node.output(0), arr)


# ---------------------------------------------------------------------------------------
# Shape queries and broadcasting copies
# ---------------------------------------------------------------------------------------


def _slice_bounds(node: Node, rank: int) -> tuple[int, int]:
    """The `[start, end)` of the dimensions a Shape node reports."""
    start = node.int_attr("start", 0)
    end = node.int_attr("end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return start, end


@handles("Shape")
def op_shape(imp: Importer, node: Node) -> None:
    """The static shape of the input (from `start` to `end`), as an int64 constant."""
    shape = imp.shape(node, 0)
    start, end = _slice_bounds(node, len(shape))
    imp.define_const(node.output(0), np.asarray(shape[start:end], dtype=np.int64))


@handles("Size")
def op_size(imp: Importer, node: Node) -> None:
    """The static element count of the input, as an int64 scalar constant."""
    imp.define_const(node.output(0), np.asarray(math.prod(imp.shape(node, 0)), np.int64))


def _const_only(imp: Importer, node: Node) -> None:
    """Ops whose inputs define a shape: they fold when constant (see `Importer.fold`)."""
    for i, name in enumerate(node.proto.input):
        if name:
            imp.const(node, i, "input")
    imp.fold(node, required=True)


for _name in ("ConstantOfShape", "Range"):
    handles(_name)(_const_only)


@handles("Tile")
def op_tile(imp: Importer, node: Node) -> None:
    """Repeats the input along each axis: one `graph.concat` of copies per tiled axis."""
    repeats = int_list(imp.const(node, 1, "repeats"))
    x = imp.tensor(node, 0)
    shape = shape_of(x)
    if len(repeats) != len(shape) or any(r < 1 for r in repeats):
        raise node.error(
            f"repeats {repeats} must hold one positive count per dimension of the input "
            f"{fmt_shape(shape)}; fix the model"
        )
    for axis, r in enumerate(repeats):
        if r > 1:
            x = imp.emit(graph.ConcatOp([x] * r, axis))
    imp.result(node, x)


@handles("Expand")
def op_expand(imp: Importer, node: Node) -> None:
    """Broadcast to a constant shape (`graph.expand`; nothing if the shape is kept)."""
    target = tuple(int_list(imp.const(node, 1, "shape")))
    x = imp.tensor(node, 0)
    shape = shape_of(x)
    try:
        out = graph.broadcast_shapes(shape, target)
    except VerifyException as e:
        raise node.error(f"cannot expand {fmt_shape(shape)} to {list(target)}: {e}") from e
    if out == shape:
        imp.result(node, x)
        return
    imp.result(node, graph.ExpandOp(x, out))


# ---------------------------------------------------------------------------------------
# Slices, pads, masks
# ---------------------------------------------------------------------------------------


def _slice_params(
    imp: Importer, node: Node, shape: Sequence[int]
) -> tuple[list[int], list[int], list[int]]:
    """Normalised full-rank `(starts, ends, steps)` of a Slice with constant inputs."""
    rank = len(shape)
    starts_in = int_list(imp.const(node, 1, "starts"))
    ends_in = int_list(imp.const(node, 2, "ends"))
    if len(starts_in) != len(ends_in):
        raise node.error(
            f"starts {starts_in} and ends {ends_in} differ in length; fix the model"
        )
    axes = (
        int_list(imp.const(node, 3, "axes"))
        if node.input(3)
        else list(range(len(starts_in)))
    )
    steps_in = (
        int_list(imp.const(node, 4, "steps")) if node.input(4) else [1] * len(starts_in)
    )
    if not len(axes) == len(steps_in) == len(starts_in):
        raise node.error(
            f"starts, ends, axes and steps must have one entry per sliced axis, got "
            f"{len(starts_in)}, {len(ends_in)}, {len(axes)} and {len(steps_in)}"
        )
    axes = imp.normalize_axes(node, axes, rank)
    starts, ends, steps = [0] * rank, list(shape), [1] * rank
    for axis, start, end, step in zip(axes, starts_in, ends_in, steps_in, strict=True):
        dim = shape[axis]
        if step == 0:
            raise node.error(f"the step of axis {axis} is 0; fix the model")
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
        if len(range(start, end, step)) == 0:
            raise node.error(
                f"the slice of axis {axis} (size {dim}) is empty; plmr does not "
                "represent empty tensors: remove it from the model"
            )
        starts[axis], ends[axis], steps[axis] = start, end, step
    return starts, ends, steps


@handles("Slice")
def op_slice(imp: Importer, node: Node) -> None:
    """A strided slice with constant starts, ends, axes and steps (`graph.slice`)."""
    shape = imp.shape(node, 0)
    starts, ends, steps = _slice_params(imp, node, shape)
    if starts == [0] * len(shape) and ends == list(shape) and steps == [1] * len(shape):
        if imp.is_const(node, 0):
            imp.define_const(node.output(0), imp.consts[node.input(0)])
        else:
            imp.result(node, imp.tensor(node, 0))
        return
    x = imp.tensor(node, 0)
    imp.result(node, graph.SliceOp(x, starts, ends, steps))


@handles("Pad")
def op_pad(imp: Importer, node: Node) -> None:
    """
    Pad with constant pads (negative pads crop first, with a `graph.slice`) in mode
    constant, reflect or edge.
    """
    mode = node.str_attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        raise node.unsupported_attr("mode", f"'{mode}'", "constant, reflect or edge")
    x = imp.tensor(node, 0)
    shape = shape_of(x)
    rank = len(shape)
    pads_in = int_list(imp.const(node, 1, "pads"))
    axes = (
        imp.normalize_axes(node, int_list(imp.const(node, 3, "axes")), rank)
        if node.input(3)
        else list(range(rank))
    )
    if len(pads_in) != 2 * len(axes):
        raise node.error(
            f"pads {pads_in} must hold a begin and an end pad for each of the "
            f"{len(axes)} padded axes; fix the model"
        )
    begin, end = [0] * rank, [0] * rank
    for i, axis in enumerate(axes):
        begin[axis], end[axis] = pads_in[i], pads_in[i + len(axes)]
    value = 0.0
    if node.input(2):
        arr = imp.const(node, 2, "constant_value")
        if arr.size != 1:
            raise node.error("the constant_value must be a scalar; fix the model")
        value = float(arr.reshape(-1)[0])
    if any(p < 0 for p in begin + end):
        starts = [-min(b, 0) for b in begin]
        stops = [d + min(e, 0) for d, e in zip(shape, end, strict=True)]
        if any(b >= e for b, e in zip(starts, stops, strict=True)):
            raise node.error(f"the negative pads {pads_in} remove the whole input")
        x = imp.emit(graph.SliceOp(x, starts, stops, [1] * rank))
        begin, end = [max(b, 0) for b in begin], [max(e, 0) for e in end]
    if not any(begin + end):
        imp.result(node, x)
        return
    imp.result(node, graph.PadOp(x, begin + end, mode, value))


@handles("Trilu")
def op_trilu(imp: Importer, node: Node) -> None:
    """The lower / upper triangle of the last two axes: a `graph.where` on a mask."""
    x = imp.tensor(node, 0)
    shape = shape_of(x)
    if len(shape) < 2:
        raise node.error("Trilu needs a rank >= 2 input; fix the model")
    k = int(imp.const(node, 1, "k").reshape(-1)[0]) if node.input(1) else 0
    ones = np.ones(shape[-2:], dtype=np.bool_)
    mask = np.triu(ones, k) if node.int_attr("upper", 1) else np.tril(ones, k)
    zero = imp.constant_like(x, 0, "zero", node.where)
    keep = imp.materialize(mask, f"{node.output(0)}_mask", node.where)
    imp.result(node, graph.WhereOp(keep, x, zero))


@handles("GatherElements")
def op_gather_elements(imp: Importer, node: Node) -> None:
    """GatherElements along `axis` (`graph.gather_elements`)."""
    data_shape = imp.shape(node, 0)
    (axis,) = imp.normalize_axes(node, [node.int_attr("axis", 0)], len(data_shape))
    indices = imp.consts.get(node.input(1))
    if indices is not None:
        size = data_shape[axis]
        if indices.size and (indices.min() < -size or indices.max() >= size):
            raise node.error(
                f"indices span [{indices.min()}, {indices.max()}] but axis {axis} of "
                f"the data {fmt_shape(data_shape)} has size {size}; fix the indices"
            )
    data, idx = imp.tensor(node, 0), imp.tensor(node, 1)
    imp.result(node, graph.GatherElementsOp(data, idx, axis))


@handles("GatherND")
def op_gather_nd(imp: Importer, node: Node) -> None:
    """
    GatherND (batch_dims = 0) with constant indices: a `graph.gather` of the data with
    its indexed leading axes flattened into one, at the row-major linear indices.
    """
    if node.int_attr("batch_dims", 0) != 0:
        raise node.unsupported_attr("batch_dims", node.int_attr("batch_dims", 0), "only 0")
    data_shape = imp.shape(node, 0)
    indices = imp.const(node, 1, "indices").astype(np.int64)
    if indices.ndim < 1 or indices.shape[-1] > len(data_shape):
        raise node.error(
            f"indices of shape {fmt_shape(indices.shape)} cannot index data of shape "
            f"{fmt_shape(data_shape)}; fix the model"
        )
    k = indices.shape[-1]
    lead = np.asarray(data_shape[:k], dtype=np.int64)
    if indices.size and (np.any(indices < -lead) or np.any(indices >= lead)):
        raise node.error(
            f"indices are out of range for the leading axes {list(data_shape[:k])} of the "
            "data; fix the indices"
        )
    normalized = np.where(indices < 0, indices + lead, indices)
    strides = np.asarray([math.prod(data_shape[j + 1 : k]) for j in range(k)], np.int64)
    linear = (normalized * strides).sum(axis=-1).astype(np.int64)
    flat = (math.prod(data_shape[:k]), *data_shape[k:])
    x = imp.tensor(node, 0)
    if data_shape != flat:
        x = imp.emit(graph.ReshapeOp(x, flat))
    idx = imp.materialize(linear, f"{node.output(0)}_linear", node.where)
    imp.result(node, graph.GatherOp(x, idx, 0))
