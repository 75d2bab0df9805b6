"""
Shape inference of the `graph` dialect: the helpers shared by the op builders, the
verifiers, the lowerings and the ONNX importer. Every function raises a
`VerifyException` naming the offending dimension when the shapes do not fit.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    AnyFloat,
    DenseArrayBase,
    IndexType,
    IntegerAttr,
    IntegerType,
    TensorType,
    i1,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.hints import isa

Shape = tuple[int, ...]


def fmt_shape(shape: Sequence[int]) -> str:
    """Formats a shape the way MLIR spells it in a tensor type, e.g. `2x3` or `scalar`."""
    if not shape:
        return "scalar"
    return "x".join(str(d) for d in shape)


def tensor_type(value: SSAValue | Attribute, what: str) -> TensorType[Attribute]:
    """Returns the ranked, static-shaped tensor type of a value, or raises."""
    attr = value if isinstance(value, Attribute) else value.type
    if type(attr) is TensorType and attr in _STATIC:
        # The common case, checked once per type (interpreters ask for every op).
        return attr
    if not isa(attr, TensorType[Attribute]):
        raise VerifyException(f"{what} must be a ranked tensor, got {attr}")
    t = attr
    if any(d < 0 for d in t.get_shape()):
        raise VerifyException(
            f"{what} must have a static shape, got {t} (plmr needs static shapes)"
        )
    if len(_STATIC) < 65536:
        _STATIC.add(t)
    return t


_STATIC: set[Attribute] = set()
"""Tensor types already found ranked and static."""


def static_shape(value: SSAValue | Attribute, what: str) -> Shape:
    return tensor_type(value, what).get_shape()


def element_type(value: SSAValue | Attribute) -> Attribute:
    attr = value if isinstance(value, Attribute) else value.type
    if not isa(attr, TensorType[Attribute]):
        raise VerifyException(f"expected a tensor, got {attr}")
    return attr.element_type


def is_float_type(attr: Attribute) -> bool:
    return isinstance(attr, AnyFloat)


def is_integer_type(attr: Attribute) -> bool:
    return isinstance(attr, IntegerType | IndexType)


def check_same_element_type(values: Sequence[SSAValue], names: Sequence[str]) -> None:
    first = element_type(values[0])
    for value, name in zip(values[1:], names[1:], strict=True):
        if element_type(value) != first:
            raise VerifyException(
                f"{names[0]} and {name} must have the same element type, "
                f"got {first} and {element_type(value)}"
            )


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """Maps a possibly negative axis into [0, rank), or raises."""
    if rank == 0:
        raise VerifyException(f"{what} {axis} is out of range: a rank-0 tensor has no axes")
    if not -rank <= axis < rank:
        raise VerifyException(
            f"{what} {axis} is out of range for a tensor of rank {rank} "
            f"(expected {-rank} <= {what} < {rank})"
        )
    return axis % rank


def normalize_axes(axes: Sequence[int], rank: int) -> tuple[int, ...]:
    result = tuple(normalize_axis(a, rank, "axis") for a in axes)
    if len(set(result)) != len(result):
        raise VerifyException(f"axes {list(axes)} contain a repeated axis")
    return result


def broadcast_shapes(lhs: Shape, rhs: Shape) -> Shape:
    """Numpy broadcasting of two shapes, or a VerifyException naming the clash."""
    rank = max(len(lhs), len(rhs))
    a = (1,) * (rank - len(lhs)) + tuple(lhs)
    b = (1,) * (rank - len(rhs)) + tuple(rhs)
    out: list[int] = []
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise VerifyException(
                f"shapes {fmt_shape(lhs)} and {fmt_shape(rhs)} are not "
                f"broadcast-compatible (dimension {i - rank}: {x} vs {y})"
            )
    return tuple(out)


def matmul_shape(lhs: Shape, rhs: Shape, transpose_a: bool, transpose_b: bool) -> Shape:
    """Result shape of a batched matmul with numpy broadcasting of batch dims."""
    if len(lhs) < 2 or len(rhs) < 2:
        raise VerifyException(
            f"matmul operands must have rank >= 2, got {fmt_shape(lhs)} and "
            f"{fmt_shape(rhs)} (reshape vectors to matrices first)"
        )
    m, k = (lhs[-1], lhs[-2]) if transpose_a else (lhs[-2], lhs[-1])
    k2, n = (rhs[-1], rhs[-2]) if transpose_b else (rhs[-2], rhs[-1])
    if k != k2:
        raise VerifyException(
            f"contraction dimensions differ: lhs {fmt_shape(lhs)}"
            f"{' (transposed)' if transpose_a else ''} has K = {k}, rhs "
            f"{fmt_shape(rhs)}{' (transposed)' if transpose_b else ''} has K = {k2}"
        )
    try:
        batch = broadcast_shapes(lhs[:-2], rhs[:-2])
    except VerifyException as e:
        raise VerifyException(f"matmul batch dimensions: {e}") from e
    return (*batch, m, n)


def transpose_shape(shape: Shape, perm: Sequence[int]) -> Shape:
    if sorted(perm) != list(range(len(shape))):
        raise VerifyException(
            f"perm {list(perm)} is not a permutation of the {len(shape)} dimensions "
            f"of a {fmt_shape(shape)} tensor"
        )
    return tuple(shape[p] for p in perm)


def reduce_shape(shape: Shape, axes: Sequence[int], keepdims: bool) -> Shape:
    if not axes:
        raise VerifyException("reduce needs at least one axis")
    norm = normalize_axes(axes, len(shape))
    if keepdims:
        return tuple(1 if i in norm else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in norm)


def concat_shape(shapes: Sequence[Shape], axis: int) -> Shape:
    if not shapes:
        raise VerifyException("concat needs at least one input")
    first = shapes[0]
    ax = normalize_axis(axis, len(first))
    total = 0
    for i, s in enumerate(shapes):
        if len(s) != len(first) or any(
            a != b for j, (a, b) in enumerate(zip(s, first, strict=True)) if j != ax
        ):
            raise VerifyException(
                f"concat input {i} has shape {fmt_shape(s)}, which differs from input 0 "
                f"({fmt_shape(first)}) outside axis {ax}"
            )
        total += s[ax]
    return tuple(total if j == ax else d for j, d in enumerate(first))


def split_shapes(shape: Shape, axis: int, sizes: Sequence[int]) -> list[Shape]:
    ax = normalize_axis(axis, len(shape))
    if any(s < 0 for s in sizes):
        raise VerifyException(f"split sizes {list(sizes)} must be non-negative")
    if sum(sizes) != shape[ax]:
        raise VerifyException(
            f"split sizes {list(sizes)} sum to {sum(sizes)}, but axis {ax} of "
            f"{fmt_shape(shape)} has size {shape[ax]}"
        )
    return [tuple(s if j == ax else d for j, d in enumerate(shape)) for s in sizes]


def _window_out(
    size: int, kernel: int, stride: int, pad_lo: int, pad_hi: int, dilation: int
) -> int:
    span = dilation * (kernel - 1) + 1
    return (size + pad_lo + pad_hi - span) // stride + 1


def _check_window_params(
    strides: Sequence[int], pads: Sequence[int], dilations: Sequence[int]
) -> None:
    if len(strides) != 2 or any(s <= 0 for s in strides):
        raise VerifyException(f"strides must be two positive integers, got {list(strides)}")
    if len(pads) != 4 or any(p < 0 for p in pads):
        raise VerifyException(
            "pads must be four non-negative integers [top, left, bottom, right], "
            f"got {list(pads)}"
        )
    if len(dilations) != 2 or any(d <= 0 for d in dilations):
        raise VerifyException(
            f"dilations must be two positive integers, got {list(dilations)}"
        )


def conv2d_shape(
    x: Shape,
    w: Shape,
    strides: Sequence[int],
    pads: Sequence[int],
    dilations: Sequence[int],
    groups: int,
) -> Shape:
    if len(x) != 4:
        raise VerifyException(f"conv2d input must be NCHW (rank 4), got {fmt_shape(x)}")
    if len(w) != 4:
        raise VerifyException(f"conv2d weight must be MCkHkW (rank 4), got {fmt_shape(w)}")
    _check_window_params(strides, pads, dilations)
    n, c, h, wd = x
    m, cg, kh, kw = w
    if groups <= 0 or c % groups != 0 or m % groups != 0:
        raise VerifyException(
            f"groups = {groups} must be positive and divide both the {c} input channels "
            f"and the {m} output channels"
        )
    if cg != c // groups:
        raise VerifyException(
            f"conv2d weight has {cg} channels per group, expected {c // groups} "
            f"({c} input channels / {groups} groups)"
        )
    oh = _window_out(h, kh, strides[0], pads[0], pads[2], dilations[0])
    ow = _window_out(wd, kw, strides[1], pads[1], pads[3], dilations[1])
    if oh <= 0 or ow <= 0:
        raise VerifyException(
            f"conv2d kernel {kh}x{kw} does not fit the padded {h}x{wd} input"
        )
    return (n, m, oh, ow)


def pool_shape(
    x: Shape, kernel: Sequence[int], strides: Sequence[int], pads: Sequence[int]
) -> Shape:
    if len(x) != 4:
        raise VerifyException(f"pool input must be NCHW (rank 4), got {fmt_shape(x)}")
    if len(kernel) != 2 or any(k <= 0 for k in kernel):
        raise VerifyException(f"kernel must be two positive integers, got {list(kernel)}")
    _check_window_params(strides, pads, (1, 1))
    if (
        pads[0] >= kernel[0]
        or pads[2] >= kernel[0]
        or pads[1] >= kernel[1]
        or (pads[3] >= kernel[1])
    ):
        raise VerifyException(
            f"pads {list(pads)} must be smaller than the kernel {list(kernel)}"
        )
    n, c, h, w = x
    oh = _window_out(h, kernel[0], strides[0], pads[0], pads[2], 1)
    ow = _window_out(w, kernel[1], strides[1], pads[1], pads[3], 1)
    if oh <= 0 or ow <= 0:
        raise VerifyException(
            f"pool kernel {kernel[0]}x{kernel[1]} does not fit the padded {h}x{w} input"
        )
    return (n, c, oh, ow)


def gather_shape(data: Shape, indices: Shape, axis: int) -> Shape:
    if not data:
        raise VerifyException("gather data must have rank >= 1")
    ax = normalize_axis(axis, len(data))
    return (*data[:ax], *indices, *data[ax + 1 :])


def ints(attr: DenseArrayBase[IntegerType]) -> tuple[int, ...]:
    return attr.get_values()


def i64_array(values: Sequence[int]) -> DenseArrayBase[IntegerType]:
    return DenseArrayBase.from_list(i64, list(values))


def i64_attr(value: int) -> IntegerAttr[IntegerType]:
    return IntegerAttr(value, i64)


def is_bool_type(attr: Attribute) -> bool:
    """Whether an element type is `i1` (the type of masks and comparisons)."""
    return attr == i1


def where_shape(condition: Shape, lhs: Shape, rhs: Shape) -> Shape:
    """Numpy broadcasting of the three operands of a `graph.where`."""
    return broadcast_shapes(broadcast_shapes(condition, lhs), rhs)


def _check_per_dim(values: Sequence[int], rank: int, what: str) -> None:
    if len(values) != rank:
        raise VerifyException(
            f"{what} has {len(values)} entries, but the input has rank {rank} "
            "(give one per dimension)"
        )


def slice_shape(
    shape: Shape, starts: Sequence[int], ends: Sequence[int], steps: Sequence[int]
) -> Shape:
    """
    The shape of a normalised slice: per dimension `len(range(start, end, step))`, with
    `0 <= start < dim` (`start = end = 0` for an empty dimension), `step != 0`, and `end`
    in `[0, dim]` for positive steps or `[-1, dim]` for negative ones.
    """
    rank = len(shape)
    _check_per_dim(starts, rank, "starts")
    _check_per_dim(ends, rank, "ends")
    _check_per_dim(steps, rank, "steps")
    out: list[int] = []
    for i, (dim, start, end, step) in enumerate(
        zip(shape, starts, ends, steps, strict=True)
    ):
        if step == 0:
            raise VerifyException(f"slice step of dimension {i} must not be 0")
        if dim == 0:
            if start != 0 or end != 0:
                raise VerifyException(
                    f"dimension {i} is empty, so its slice needs start = end = 0, "
                    f"got start {start} and end {end}"
                )
            out.append(0)
            continue
        if not 0 <= start < dim:
            raise VerifyException(
                f"slice start {start} of dimension {i} is out of range "
                f"(expected 0 <= start < {dim}; normalise negative starts first)"
            )
        low = 0 if step > 0 else -1
        if not low <= end <= dim:
            raise VerifyException(
                f"slice end {end} of dimension {i} is out of range for step {step} "
                f"(expected {low} <= end <= {dim}; clamp ends first)"
            )
        out.append(len(range(start, end, step)))
    return tuple(out)


def expand_shape(shape: Shape, target: Shape) -> Shape:
    """ONNX Expand: the numpy broadcast of a shape with the requested one."""
    if any(d < 0 for d in target):
        raise VerifyException(f"expand shape {list(target)} must be non-negative")
    return broadcast_shapes(shape, target)


def pad_shape(shape: Shape, pads: Sequence[int], mode: str) -> Shape:
    """
    The shape of a padded tensor; `pads` is `[begin_0, ..., begin_n, end_0, ..., end_n]`
    (ONNX Pad). `reflect` needs each pad smaller than its dimension; `edge` needs a
    non-empty dimension to repeat.
    """
    rank = len(shape)
    if len(pads) != 2 * rank or any(p < 0 for p in pads):
        raise VerifyException(
            f"pads must be {2 * rank} non-negative integers (the begin pads of the {rank} "
            f"dimensions, then their end pads), got {list(pads)}"
        )
    for i, dim in enumerate(shape):
        most = max(pads[i], pads[i + rank])
        if mode == "reflect" and most >= dim:
            raise VerifyException(
                f"reflect padding of dimension {i} by {most} needs a dimension larger "
                f"than the padding, but it has size {dim}"
            )
        if mode == "edge" and most > 0 and dim == 0:
            raise VerifyException(
                f"edge padding of dimension {i} needs a non-empty dimension to repeat"
            )
    return tuple(d + pads[i] + pads[i + rank] for i, d in enumerate(shape))


def gather_elements_shape(data: Shape, indices: Shape, axis: int) -> Shape:
    """ONNX GatherElements: the result has the indices' shape."""
    if not data:
        raise VerifyException("gather_elements data must have rank >= 1")
    if len(indices) != len(data):
        raise VerifyException(
            f"gather_elements indices must have the rank of the data ({len(data)}), "
            f"got {fmt_shape(indices)}"
        )
    ax = normalize_axis(axis, len(data))
    for i, (d, n) in enumerate(zip(data, indices, strict=True)):
        if i != ax and n > d:
            raise VerifyException(
                f"gather_elements indices {fmt_shape(indices)} exceed the data "
                f"{fmt_shape(data)} in dimension {i} ({n} > {d}), which is not the axis"
            )
    return tuple(indices)
