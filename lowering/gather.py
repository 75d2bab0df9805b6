"""
The lowerings of `convert-graph-to-loop` for `graph.gather` and `graph.gather_elements`.

With constant indices (a `graph.constant`, or the `arith.constant` it has become), or
data that is not floating point, a gather is one parallel nest over its result that
reads the data at the index it reads from the indices tensor (negative indices count
from the end):

    out[p] = data[.., norm(ids[q]), ..]        norm(i) = i < 0 ? i + V : i

With indices computed at run time (a token embedding's `input_ids`) that index is data,
which no block load can express. The gather is then a *one-hot contraction* over the
`V` entries of the gathered axis:

    out[p] = Σ_v select(norm(ids[q]) == iota[v], data[.., v, ..], 0)

where `iota` is the constant `[0, 1, .., V-1]` (a loop index cannot be a value at the
tile level, a constant tensor can). Exactly one term is the gathered value and every
other term is a zero, so the sum is exact (even for infinite or NaN entries, which are
selected, never multiplied). Every read is affine, so `convert-loop-to-tile` blocks the
nest like a matmul (the ids along the parallel dims, the data along `v`): block maps
(compare, select) feeding a `tile.reduce` sum, which the mesh lowering maps as any
reduction, on odd grids too. (A one-hot `tile.dot`, multiplying by a selected 1 or 0,
would also block, but it is slower on the modelled wafer and turns 0·inf into NaN.) An index outside `[-V, V)` selects nothing and gives
0, where the reference interpreter reports an error.

The plain read does not block at the tile level: `graph-canonicalize` turns the
constant indices that form a range into a slice (`canonicalize.gather`); other constant
indices, and gathers of integer data by run-time indices, stay at the loop level.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    IndexType,
    IntegerType,
    Signedness,
    TensorType,
)
from xdsl.ir import Attribute, Operation, SSAValue

from plmr.dialects import graph
from plmr.dialects.loop import ReadOp
from plmr.lowering.loop_builders import (
    add,
    const,
    element_of,
    index,
    is_float,
    map_nest,
    reduce_nest,
    shape_of,
)

IndexMap = Callable[[Sequence[SSAValue]], list[SSAValue]]
"""The indices of the `indices` tensor read at an output position."""
DataMap = Callable[[Sequence[SSAValue], SSAValue], list[SSAValue]]
"""The indices of `data` read at an output position, given the gathered index."""


def runtime_indices(indices: SSAValue, data: SSAValue) -> bool:
    """Whether a gather of `data` by `indices` is lowered as a one-hot contraction."""
    constant = isinstance(indices.owner, graph.ConstantOp | arith.ConstantOp)
    return not constant and graph.is_float_type(element_of(data))


def _normalised(raw: SSAValue, size: int) -> SSAValue:
    """`raw < 0 ? raw + size : raw`, in the type of `raw`."""
    negative = arith.CmpiOp(raw, const(0, raw.type), "slt").result
    return arith.SelectOp(
        negative, arith.AddiOp(raw, const(size, raw.type)).result, raw
    ).result


def _iota(size: int, elt: Attribute) -> SSAValue:
    """The constant tensor `[0, 1, .., size-1]` of integer type `elt`."""
    t = TensorType(cast(IntegerType[int, Signedness], elt), [size])
    return arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(t, list(range(size)))).result


def _plain(
    op: Operation, indices: SSAValue, data: SSAValue, size: int, ids: IndexMap, at: DataMap
) -> SSAValue:
    """One parallel nest reading `data` at the index read from `indices`."""

    def body(idx: Sequence[SSAValue]) -> SSAValue:
        raw = ReadOp(indices, ids(idx)).result
        i = arith.IndexCastOp(raw, IndexType()).result
        negative = arith.CmpiOp(i, index(0), "slt").result
        i = arith.SelectOp(negative, arith.AddiOp(i, index(size)).result, i).result
        return ReadOp(data, at(idx, i)).result

    return map_nest(shape_of(op.results[0]), body, element_of(op.results[0]))


def _one_hot(
    op: Operation, indices: SSAValue, data: SSAValue, size: int, ids: IndexMap, at: DataMap
) -> SSAValue:
    """`Σ_v select(norm(ids) == iota[v], data[.., v, ..], 0)`: a reduction over `v`."""
    out = op.results[0]
    elt = element_of(out)
    iota = _iota(size, element_of(indices))

    def term(p: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        raw = _normalised(ReadOp(indices, ids(p)).result, size)
        hit = arith.CmpiOp(raw, ReadOp(iota, [r[0]]).result, "eq").result
        value = ReadOp(data, at(p, r[0])).result
        assert is_float(value)
        return arith.SelectOp(hit, value, const(0, elt)).result

    return reduce_nest(shape_of(out), (size,), 0, elt, term, add)


def lower_gather(op: Operation) -> list[SSAValue]:
    """`graph.gather`: `out[i.., j.., k..] = data[i.., ids[j..], k..]` along `axis`."""
    assert isinstance(op, graph.GatherOp)
    data, indices = op.data, op.indices
    dshape = shape_of(data)
    ax = graph.normalize_axis(op.axis.value.data, len(dshape))
    irank = len(shape_of(indices))

    def ids(p: Sequence[SSAValue]) -> list[SSAValue]:
        return list(p[ax : ax + irank])

    def at(p: Sequence[SSAValue], i: SSAValue) -> list[SSAValue]:
        return [*p[:ax], i, *p[ax + irank :]]

    build = _one_hot if runtime_indices(indices, data) else _plain
    return [build(op, indices, data, dshape[ax], ids, at)]


def lower_gather_elements(op: Operation) -> list[SSAValue]:
    """`graph.gather_elements`: `out[p] = data[p with p[axis] = ids[p]]`."""
    assert isinstance(op, graph.GatherElementsOp)
    data, indices = op.data, op.indices
    dshape = shape_of(data)
    ax = graph.normalize_axis(op.axis.value.data, len(dshape))

    def at(p: Sequence[SSAValue], i: SSAValue) -> list[SSAValue]:
        return [*p[:ax], i, *p[ax + 1 :]]

    build = _one_hot if runtime_indices(indices, data) else _plain
    return [build(op, indices, data, dshape[ax], list, at)]
