"""
The lowerings of `convert-graph-to-loop` for `graph.gather` and `graph.gather_elements`.

A `graph.gather` of a host tensor (a function argument or a constant) by host indices —
a token embedding's table by `input_ids` — is a *lookup on the host*: `tile.lookup`
selects the rows there and only they reach the wafer, scattered like any input. The
wafer never sees the table, and the runtime's report counts the rows' bytes and cycles on
the host link (`Report.host_lookup_bytes`). A vocabulary of 32,000 by a width of 4,096
costs one row of 16 KiB per token, not a one-hot product over 32,000 rows:

    %e = tile.lookup %table[%ids] axis = 0 : (tensor<32000x4096xf32>, tensor<1x1xi64>) -> tensor<1x1x4096xf32>

Any other gather (of a tensor computed on the wafer, or by indices computed there), and
every `graph.gather_elements`, is a *one-hot contraction* over the `V` entries of the
gathered axis, a reduction whose every read is affine, so `convert-loop-to-tile` blocks
it like a matmul and the mesh lowering maps it as any reduction, on odd grids too:

    out[p] = Σ_v select(norm(ids[q]) == iota[v], data[.., v, ..], 0)
    norm(i) = i < 0 ? i + V : i

where `iota` is the constant `[0, 1, .., V-1]` (a loop index cannot be a value at the
tile level, a constant tensor can). Exactly one term is the gathered value and every
other term is a zero, so the sum is exact (even for infinite or NaN entries, which are
selected, never multiplied; for integer and boolean data the sum of one value and zeros
is that value). An index outside `[-V, V)` selects nothing and gives 0, where the
reference interpreter reports an error. Constant indices that form a range never get
here: `graph-canonicalize` turns them into a slice (`canonicalize.gather`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    IntegerType,
    Signedness,
    TensorType,
)
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from plmr.dialects import graph, tile
from plmr.dialects.loop import ReadOp
from plmr.lowering.loop_builders import (
    add,
    const,
    element_of,
    reduce_nest,
    shape_of,
)

IndexMap = Callable[[Sequence[SSAValue]], list[SSAValue]]
"""The indices of the `indices` tensor read at an output position."""
DataMap = Callable[[Sequence[SSAValue], SSAValue], list[SSAValue]]
"""The indices of `data` read at an output position, given the gathered index."""


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
        return arith.SelectOp(hit, value, const(0, elt)).result

    return reduce_nest(shape_of(out), (size,), 0, elt, term, add)


def lower_gather(op: graph.GatherOp) -> list[SSAValue]:
    """`graph.gather`: `out[i.., j.., k..] = data[i.., ids[j..], k..]` along `axis`."""
    data, indices = op.data, op.indices
    dshape = shape_of(data)
    ax = graph.normalize_axis(op.axis.value.data, len(dshape))
    irank = len(shape_of(indices))

    def ids(p: Sequence[SSAValue]) -> list[SSAValue]:
        return list(p[ax : ax + irank])

    def at(p: Sequence[SSAValue], i: SSAValue) -> list[SSAValue]:
        return [*p[:ax], i, *p[ax + irank :]]

    if _on_host(data) and _on_host(indices):
        return [tile.LookupOp(data, indices, ax).result]
    return [_one_hot(op, indices, data, dshape[ax], ids, at)]


def _on_host(v: SSAValue) -> bool:
    """A host tensor: an argument of the function, a constant, or a weight by reference."""
    if isinstance(v, BlockArgument):
        return isinstance(v.owner.parent_op(), func.FuncOp)
    return isinstance(v.owner, graph.ConstantOp | graph.WeightOp | arith.ConstantOp)


def lower_gather_elements(op: graph.GatherElementsOp) -> list[SSAValue]:
    """`graph.gather_elements`: `out[p] = data[p with p[axis] = ids[p]]`."""
    data, indices = op.data, op.indices
    dshape = shape_of(data)
    ax = graph.normalize_axis(op.axis.value.data, len(dshape))

    def at(p: Sequence[SSAValue], i: SSAValue) -> list[SSAValue]:
        return [*p[:ax], i, *p[ax + 1 :]]

    return [_one_hot(op, indices, data, dshape[ax], list, at)]
