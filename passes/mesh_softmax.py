"""
`mesh-fuse-softmax`: one collective for a split-K softmax (flash-decoding's combine).

When the positions of a softmax are split over the PEs of an axis, each PE holds a
partial maximum `m`, the partial sum `l` of `exp(s - m)` and partial outputs `o`
(`P·V`) weighted by it. Merging them takes a max allreduce, then the rescaling
`exp(m - M)` of every partial, then a sum allreduce of each rescaled partial:

    %M  = mesh.allreduce max %m axis y
    %d  = tile.map sub %m, %M
    %f  = tile.map exp %d
    %ls = tile.map mul %l, %f            %os = tile.map mul %o, reshape(%f)
    %L  = mesh.allreduce sum %ls axis y  %O  = mesh.allreduce sum %os axis y

Every allreduce pays its tree's whole latency (≈ 1.2 k cycles along 420 PEs however
small the payload), and the sums wait for the maximum. The pass packs `m` and the
partials into rows `[m, l, o...]` and combines them in ONE allreduce of kind
`softmax`, whose combine rescales as it reduces (`M = max(m1, m2)`,
`[l, o] = [l1, o1]·e^(m1 - M) + [l2, o2]·e^(m2 - M)`):

    %buf = tile.store ... (m, l, o flattened per row)  : tensor<R x (1 + 1 + D)>
    %r   = mesh.allreduce softmax %buf axis y           : tensor<R x (1 + 1 + D)>
    %M, %L, %O = tile.load ... (the columns back)

The result is what the sequence computes: the sum of `x_i · exp(m_i − M)` over the PEs
is exactly what each sum allreduce returned, and `M` the maximum. A chain matches when

- the max allreduce's every use is the maximum itself (kept: it becomes the first
  column) or a `tile.map sub %m, %M` whose uses are `tile.map exp`s,
- every use of such an exponential is a `tile.map mul` (directly or through a
  `tile.reshape` that appends unit dimensions) by a partial whose shape is `m`'s shape
  followed by its own dimensions, the product's only use a sum allreduce with the
  maximum's axis, algorithm, K, groups and segment,
- the partials are defined before the max allreduce (the packed buffer is built there),
- the algorithm is not `ring` (its reduce-scatter would split rows),
- it is faster by the runtime's timing of one line (`saved_cycles`): the softmax
  allreduce and the packing's copies against the max allreduce and the slowest sum
  after it. Every combine of a softmax allreduce costs seven vector operations instead
  of one, so on short lines (a few PEs) the latency saved does not pay for them.

Exponentials with other uses stay (they read the combined maximum, unchanged).

The pass then fuses the same softmax written as three nests (the maximum's, the
exponentials', the sums'), as a decode step's attention reaches the mesh:
`passes/mesh_softmax_nests.py`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from plmr.dialects import mesh, tile
from plmr.dialects.graph import element_type, static_shape
from plmr.passes.mesh_softmax_nests import (
    faster_fused,
    fuse_softmax_nests,
    softmax_allreduce,
)
from plmr.target.collective_stages import line_cycles
from plmr.target.device import Device
from plmr.target.op_cost import vector_op_cycles
from plmr.target.route_plan import plan_of


@dataclass
class _Partial:
    """One rescaled partial: `value · factor` summed by `allreduce`."""

    value: SSAValue
    product: tile.MapOp
    reshape: tile.ReshapeOp | None
    allreduce: mesh.AllreduceOp


@dataclass
class SoftmaxChain:
    """A max allreduce, its rescaling factors and the sum allreduces they weight."""

    maximum: mesh.AllreduceOp
    subs: list[tile.MapOp]
    exps: list[tile.MapOp]
    partials: list[_Partial]


def _map(op: Operation | None, kind: str) -> tile.MapOp | None:
    if isinstance(op, tile.MapOp) and op.kind_name == kind:
        return op
    return None


def _same_collective(a: mesh.AllreduceOp, b: mesh.AllreduceOp) -> bool:
    return (a.axis, a.algorithm, a.k, a.groups, a.segment) == (
        b.axis,
        b.algorithm,
        b.k,
        b.groups,
        b.segment,
    )


def _before(value: SSAValue, op: Operation) -> bool:
    """`value` is available at `op`: defined outside `op`'s block or before `op` in it."""
    block = op.parent_block()
    owner = value.owner
    if isinstance(owner, Operation):
        if owner.parent_block() is not block:
            return True
        assert block is not None
        return block.get_operation_index(owner) < block.get_operation_index(op)
    return True


def _partial(
    factor: SSAValue, use: Operation, maximum: mesh.AllreduceOp
) -> list[_Partial] | None:
    """The rescaled partials that `use` (a use of an exponential) feeds, or None."""
    m_shape = static_shape(maximum.input, "maximum")
    if isinstance(use, tile.ReshapeOp):
        shape = static_shape(use.result, "factor")
        if shape[: len(m_shape)] != m_shape or any(d != 1 for d in shape[len(m_shape) :]):
            return None
        found: list[_Partial] = []
        for u in use.result.uses:
            got = _product(use.result, u.operation, maximum, use)
            if got is None:
                return None
            found.append(got)
        return found
    got = _product(factor, use, maximum, None)
    return None if got is None else [got]


def _product(
    factor: SSAValue,
    op: Operation,
    maximum: mesh.AllreduceOp,
    reshape: tile.ReshapeOp | None,
) -> _Partial | None:
    mul = _map(op, "mul")
    if mul is None or len(mul.inputs) != 2:
        return None
    a, b = mul.inputs
    value = b if a is factor else a if b is factor else None
    if value is None or value is factor:
        return None
    m_shape = static_shape(maximum.input, "maximum")
    v_shape = static_shape(value, "partial")
    f_shape = static_shape(factor, "factor")
    if v_shape[: len(m_shape)] != m_shape or len(v_shape) != len(f_shape):
        return None
    if static_shape(mul.result, "product") != v_shape:
        return None
    if element_type(value) != element_type(maximum.input):
        return None
    uses = list(mul.result.uses)
    if len(uses) != 1:
        return None
    total = uses[0].operation
    if not isinstance(total, mesh.AllreduceOp) or total.kind.data != mesh.CombineKind.SUM:
        return None
    if not _same_collective(total, maximum) or total.parent_block() is not (
        maximum.parent_block()
    ):
        return None
    if not _before(value, maximum):
        return None
    return _Partial(value, mul, reshape, total)


def match_chain(maximum: mesh.AllreduceOp) -> SoftmaxChain | None:
    """The chain of `maximum` (a max allreduce) if the pass can fuse it (module doc)."""
    if maximum.kind.data != mesh.CombineKind.MAX:
        return None
    if maximum.algorithm.data == mesh.Algorithm.RING:
        return None
    m = maximum.input
    subs: list[tile.MapOp] = []
    exps: list[tile.MapOp] = []
    partials: list[_Partial] = []
    for use in maximum.result.uses:
        sub = _map(use.operation, "sub")
        if sub is None:
            continue
        if list(sub.inputs) != [m, maximum.result]:
            return None
        subs.append(sub)
        for su in sub.result.uses:
            exp = _map(su.operation, "exp")
            if exp is None:
                return None
            exps.append(exp)
            for eu in exp.result.uses:
                found = _partial(exp.result, eu.operation, maximum)
                if found is not None:
                    partials.extend(found)
    if not partials:
        return None
    if len({id(p.allreduce) for p in partials}) != len(partials):
        return None
    block = maximum.parent_block()
    assert block is not None
    partials.sort(key=lambda p: block.get_operation_index(p.allreduce))
    return SoftmaxChain(maximum, subs, exps, partials)


def _elements(value: SSAValue) -> int:
    return math.prod(static_shape(value, "value"))


def saved_cycles(chain: SoftmaxChain, device: Device) -> float:
    """
    What the fused allreduce saves on one line (negative: it is slower): the max
    allreduce and the slowest sum allreduce after it, against the softmax allreduce of
    the packed rows and the packing's copies (a fill, a store and a load of each piece).
    """
    maximum = chain.maximum
    plan = plan_of(maximum, maximum.grid())
    rows = _elements(maximum.input)
    pieces = [rows, *(_elements(p.value) for p in chain.partials)]
    width = sum(pieces) // rows
    sums = max(float(line_cycles(plan, n, device).max()) for n in pieces[1:])
    apart = float(line_cycles(plan, rows, device, kind="max").max()) + sums
    fused = float(
        line_cycles(plan, rows * width, device, kind="softmax", width=width).max()
    )
    e = device.elem_bytes

    def op(read: int, written: int) -> float:
        return vector_op_cycles(device, 0, False, read * e, written * e)

    copies = op(0, rows * width) + sum(op(n, 0) + op(0, n) for n in pieces)
    return apart - fused - copies


def _index(value: int) -> arith.ConstantOp:
    return arith.ConstantOp(IntegerAttr(value, IndexType()))


def _columns(value: SSAValue, rows: int) -> tuple[list[Operation], SSAValue, int]:
    """`value` as `[rows, c]` (ops to add, the value, c)."""
    shape = static_shape(value, "partial")
    cols = math.prod(shape) // rows
    if tuple(shape) == (rows, cols):
        return [], value, cols
    op = tile.ReshapeOp(value, [rows, cols])
    return [op], op.result, cols


def fuse_chain(chain: SoftmaxChain) -> mesh.AllreduceOp:
    """Rewrites `chain` into one softmax allreduce (built before the max allreduce)."""
    maximum = chain.maximum
    block = maximum.parent_block()
    assert block is not None
    m_shape = static_shape(maximum.input, "maximum")
    rows = math.prod(m_shape)
    ops: list[Operation] = []
    pieces: list[tuple[SSAValue, int]] = []
    for value in [maximum.input, *(p.value for p in chain.partials)]:
        new, flat, cols = _columns(value, rows)
        ops.extend(new)
        pieces.append((flat, cols))
    width = sum(cols for _, cols in pieces)
    packed_type = TensorType(element_type(maximum.input), [rows, width])
    fill = tile.FillOp(0.0, packed_type)
    ops.append(fill)
    buffer: SSAValue = fill.result
    zero = _index(0)
    ops.append(zero)
    offsets: list[arith.ConstantOp] = []
    offset = 0
    for flat, cols in pieces:
        at = zero if offset == 0 else _index(offset)
        if at is not zero:
            ops.append(at)
        offsets.append(at)
        store = tile.StoreOp(flat, buffer, [zero, at])
        ops.append(store)
        buffer = store.result
        offset += cols
    fused = softmax_allreduce(buffer, packed_type, maximum, maximum)
    ops.append(fused)
    outs: list[SSAValue] = []
    for (flat, cols), at, value in zip(
        pieces, offsets, [maximum.input, *(p.value for p in chain.partials)], strict=True
    ):
        load = tile.LoadOp(fused.result, [zero, at], [rows, cols])
        ops.append(load)
        out: SSAValue = load.result
        shape = static_shape(value, "partial")
        if static_shape(flat, "partial") != shape or tuple(shape) != (rows, cols):
            back = tile.ReshapeOp(out, shape)
            ops.append(back)
            out = back.result
        outs.append(out)
    block.insert_ops_before(ops, maximum)
    for partial, out in zip(chain.partials, outs[1:], strict=True):
        Rewriter.replace_op(partial.allreduce, (), [out])
        Rewriter.erase_op(partial.product)
    Rewriter.replace_op(maximum, (), [outs[0]])
    _erase_unused([p.reshape for p in chain.partials if p.reshape is not None])
    _erase_unused(chain.exps)
    _erase_unused(chain.subs)
    return fused


def _erase_unused(ops: Sequence[Operation]) -> None:
    seen: set[int] = set()
    for op in ops:
        if id(op) in seen or op.parent is None:
            continue
        seen.add(id(op))
        if all(not r.uses for r in op.results):
            Rewriter.erase_op(op)


def fuse_softmax(module: ModuleOp, always: bool = False) -> int:
    """
    Fuses every matching chain of `module` that is faster fused (every matching one with
    `always`); returns how many.
    """
    fused = 0
    for chain in faster_fused(module, match_chain, saved_cycles, always):
        fuse_chain(chain)
        fused += 1
    return fused


@dataclass(frozen=True)
class MeshFuseSoftmaxPass(ModulePass):
    """
    One `mesh.allreduce softmax` for a split-K softmax's max allreduce and the sum
    allreduces of the partials it rescales, where that is faster (see the module doc);
    `always` fuses every matching chain.
    """

    name = "mesh-fuse-softmax"

    always: bool = False
    """Fuse every matching chain, also where the runtime's timing says it is slower."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fuse_softmax(op, self.always)
        fuse_softmax_nests(op, self.always)


__all__ = [
    "MeshFuseSoftmaxPass",
    "SoftmaxChain",
    "fuse_chain",
    "fuse_softmax",
    "match_chain",
    "saved_cycles",
]
