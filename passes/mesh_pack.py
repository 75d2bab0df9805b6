"""
`mesh-pack-allreduces`: one allreduce for independent sibling reductions.

Every `mesh.allreduce` pays the whole latency of its K-tree, however small its payload
(≈ 1.2 k cycles along 420 PEs for one value). Two nests that reduce along the same axis
and do not read each other (a softmax's sum and P·V, both reading `exp`; a norm's mean
square and the matrix-vector product after it) can share one: the pass merges the later
`mesh.spmd` B into the earlier A,

    A's ops up to its allreduce, B's ops up to its allreduce,
    one allreduce of both payloads packed into one buffer (flattened, stored side by side),
    the two slices loaded back, A's rest, B's rest,

with A's results then B's. A pair merges when

- each body has exactly one `mesh.allreduce`, outside loops or in loops of one trip only
  (the blocked nests' `0 to 8 step 8`: those are inlined first),
- both allreduces have the same elementwise combine kind (`sum`, `max`, `min`: not
  `softmax`, whose rows a flat packing would mix), axis, segment, algorithm, K and groups and
  element type, their payloads together hold at most `max-elements` values, and the
  packed allreduce with the packing's copies (a fill, a store and a load of each payload)
  is faster than the two by the runtime's timing of a line (`saved_cycles`): on a short
  line with large payloads the copies cost more than the latency saved,
- B reads no result of A, and nothing between them that reads A: host ops between them
  that B reads (scatters of inputs and constants) move above A; a `mesh.spmd` does not,
- A is among the `window` nests before B (nearest first), and the merged body's SRAM
  (at most the sum of both peaks and the packed buffers) fits a PE of the device.

First, within one nest: the allreduces at the top of its body (not in loops) that share
all of the above, where none's payload is computed from another's result and no result is
read before the last of them, become one allreduce at the place of the last, when that is
faster by the same timing (a nest's head gathers each value it reads whole with an
allreduce of its own: a cache append's new K, rotated K and V rows, three along one axis,
become one).

What every PE computes is unchanged: the combine is elementwise, so each slice of the
packed result is the allreduce of that payload. The packed allreduce keeps A's `colors`;
run `mesh-route` after the pass (the pipeline does) to route it again.

```mlir
// before: two nests, two allreduces along x
%s = mesh.spmd(%e) : ... {
  %p = ... : tensor<4xf32>
  %r = mesh.allreduce sum %p axis x : tensor<4xf32>
  mesh.yield %r : tensor<4xf32>
}
%v = mesh.spmd(%e, %w) : ... {
  %q = ... : tensor<2x3xf32>
  %t = mesh.allreduce sum %q axis x : tensor<2x3xf32>
  mesh.yield %t : tensor<2x3xf32>
}
// after: one nest, one allreduce of 10 values
%s, %v = mesh.spmd(%e, %w) : ... {
  %p = ... : tensor<4xf32>
  %q = ... : tensor<2x3xf32>
  %buf = ... (tile.fill, tile.reshape, tile.store) : tensor<10xf32>
  %r = mesh.allreduce sum %buf axis x : tensor<10xf32>
  ... (tile.load, tile.reshape of both slices)
  mesh.yield %r0, %t0 : tensor<4xf32>, tensor<2x3xf32>
}
```
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp, TensorType
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.transforms.common_subexpression_elimination import cse

from plmr.dialects import mesh, tile
from plmr.dialects.graph import element_type, static_shape
from plmr.dialects.narrow import expect, terminator
from plmr.errors import PassOptionError
from plmr.target.collective_stages import line_cycles
from plmr.target.device import Device, get_device
from plmr.target.op_cost import vector_op_cycles
from plmr.target.route_plan import plan_of
from plmr.target.sram import spmd_sram

if TYPE_CHECKING:
    from plmr.lowering.tile_to_mesh import NestPlan


@dataclass(frozen=True)
class Merge:
    """One merge: `first` and `second` became `merged` (results: first's, then second's)."""

    first: mesh.SpmdOp
    second: mesh.SpmdOp
    merged: mesh.SpmdOp


def single_allreduce(spmd: mesh.SpmdOp) -> mesh.AllreduceOp | None:
    """
    The body's only allreduce, if it has exactly one and every loop around it runs
    once (None otherwise: nothing to pack, or an allreduce per iteration).
    """
    found: mesh.AllreduceOp | None = None
    for op in spmd.body.walk():
        if not isinstance(op, mesh.AllreduceOp):
            continue
        if found is not None:
            return None
        found = op
    if found is None:
        return None
    parent = found.parent_op()
    while parent is not None and parent is not spmd:
        if not isinstance(parent, tile.ForOp) or parent.trip_count != 1:
            return None
        parent = parent.parent_op()
    return found


def _key(op: mesh.AllreduceOp) -> tuple[Attribute | None, ...]:
    """What two allreduces must share to be one: everything but the payload's shape."""
    return (
        op.kind,
        op.axis,
        op.algorithm,
        op.k,
        op.groups,
        op.segment,
        element_type(op.input),
    )


def _elements(op: mesh.AllreduceOp) -> int:
    return math.prod(static_shape(op.input, "allreduce input"))


def _allreduce_cycles(op: mesh.AllreduceOp, elems: int, device: Device) -> float:
    """The runtime's timing of `op` with `elems` values per PE (its plan on one line)."""
    return float(line_cycles(plan_of(op, op.grid()), elems, device).max())


def _copy_cycles(device: Device, na: int, nb: int) -> float:
    """
    The packing's compute (`target/op_cost.py`): a fill of the buffer, a store and a
    load of each payload.
    """
    e = device.elem_bytes

    def op(read: int, written: int) -> float:
        return vector_op_cycles(device, 0, False, read * e, written * e)

    return op(0, na + nb) + op(na, 0) + op(nb, 0) + op(0, na) + op(0, nb)


def saved_cycles(ra: mesh.AllreduceOp, rb: mesh.AllreduceOp, device: Device) -> float:
    """
    What one packed allreduce saves on one line against the two: their time minus the
    packed one's and the packing's copies (negative: packing is slower).
    """
    na, nb = _elements(ra), _elements(rb)
    apart = _allreduce_cycles(ra, na, device) + _allreduce_cycles(rb, nb, device)
    packed = _allreduce_cycles(ra, na + nb, device)
    return apart - packed - _copy_cycles(device, na, nb)


def inline_single_trip(loop: tile.ForOp) -> None:
    """Replaces a one-trip `tile.for` by its body (induction variable = lower bound)."""
    assert loop.trip_count == 1
    block = loop.body.block
    lb = arith.ConstantOp(IntegerAttr(loop.lb.value.data, IndexType()))
    Rewriter.insert_op(lb, InsertPoint.before(loop))
    yield_op = terminator(block, tile.YieldOp)
    Rewriter.inline_block(block, InsertPoint.before(loop), [lb.result, *loop.iter_args])
    Rewriter.replace_op(loop, (), list(yield_op.operands))
    Rewriter.erase_op(yield_op)


def hoist_allreduce(allreduce: mesh.AllreduceOp, spmd: mesh.SpmdOp) -> None:
    """Inlines the one-trip loops around `allreduce`, outermost first."""
    loops: list[tile.ForOp] = []
    parent = allreduce.parent_op()
    while parent is not None and parent is not spmd:
        parent = expect(parent, tile.ForOp, "an op enclosing an allreduce in its spmd nest")
        loops.append(parent)
        parent = parent.parent_op()
    for loop in reversed(loops):
        inline_single_trip(loop)


def _reshape(value: SSAValue, shape: Sequence[int]) -> tuple[list[Operation], SSAValue]:
    """The ops that give `value` the `shape` (none if it has it) and the result."""
    if static_shape(value, "value") == tuple(shape):
        return [], value
    op = tile.ReshapeOp(value, shape)
    return [op], op.result


def _index(value: int) -> arith.ConstantOp:
    return arith.ConstantOp(IntegerAttr(value, IndexType()))


def _merge(
    a: mesh.SpmdOp, b: mesh.SpmdOp, ra: mesh.AllreduceOp, rb: mesh.AllreduceOp
) -> mesh.SpmdOp:
    """Builds the merged nest before `a`, rewires the uses and erases `a` and `b`."""
    hoist_allreduce(ra, a)
    hoist_allreduce(rb, b)
    a_block, b_block = a.body.block, b.body.block
    # The operands' block types (an operand of both nests is one block argument).
    block_types = dict(zip(a.inputs, a_block.arg_types[2:], strict=True))
    for v, t in zip(b.inputs, b_block.arg_types[2:], strict=True):
        block_types.setdefault(v, t)
    inputs = list(block_types)
    new = Block(arg_types=[*a_block.arg_types[:2], *block_types.values()])
    block_of = {v: new.args[2 + i] for i, v in enumerate(inputs)}
    for old, arg in zip(a_block.args[:2], new.args[:2], strict=True):
        old.replace_all_uses_with(arg)
    for old, arg in zip(b_block.args[:2], new.args[:2], strict=True):
        old.replace_all_uses_with(arg)
    for v, old in zip(a.inputs, a_block.args[2:], strict=True):
        old.replace_all_uses_with(block_of[v])
    for v, old in zip(b.inputs, b_block.args[2:], strict=True):
        old.replace_all_uses_with(block_of[v])

    def split(block: Block, at: Operation) -> tuple[list[Operation], list[Operation]]:
        ops = list(block.ops)
        i = ops.index(at)
        return ops[:i], ops[i + 1 : -1]

    a_head, a_tail = split(a_block, ra)
    b_head, b_tail = split(b_block, rb)

    def move(ops: Sequence[Operation]) -> None:
        for op in ops:
            op.detach()
            new.add_op(op)

    move(a_head)
    move(b_head)
    # Both nests may gather the same operand the same way (a table read by two nests):
    # once their heads are one block, the payloads are one value, reduced once.
    cse(new)
    if ra.input == rb.input and _key(ra) == _key(rb):
        single = mesh.AllreduceOp.create(
            operands=[ra.input],
            result_types=[ra.result.type],
            properties=dict(ra.properties),
            attributes=dict(ra.attributes),
        )
        new.add_op(single)
        ra.result.replace_all_uses_with(single.result)
        rb.result.replace_all_uses_with(single.result)
        return _finish(a, b, ra, rb, new, inputs, a_tail, b_tail, move)
    na, nb = _elements(ra), _elements(rb)
    packed_type = TensorType(element_type(ra.input), [na + nb])
    zero, offset = _index(0), _index(na)
    flat_a, flat_b = _reshape(ra.input, [na]), _reshape(rb.input, [nb])
    buffer = tile.FillOp(0.0, packed_type)
    first = tile.StoreOp(flat_a[1], buffer, [zero])
    both = tile.StoreOp(flat_b[1], first, [offset])
    packed = mesh.AllreduceOp.create(
        operands=[both.result],
        result_types=[packed_type],
        properties=dict(ra.properties),
        attributes=dict(ra.attributes),
    )
    slice_a = tile.LoadOp(packed, [zero], [na])
    slice_b = tile.LoadOp(packed, [offset], [nb])
    out_a = _reshape(slice_a.result, static_shape(ra.result, "allreduce"))
    out_b = _reshape(slice_b.result, static_shape(rb.result, "allreduce"))
    new.add_ops([zero, offset, *flat_a[0], *flat_b[0], buffer, first, both, packed])
    new.add_ops([slice_a, slice_b, *out_a[0], *out_b[0]])
    ra.result.replace_all_uses_with(out_a[1])
    rb.result.replace_all_uses_with(out_b[1])
    return _finish(a, b, ra, rb, new, inputs, a_tail, b_tail, move)


def _finish(
    a: mesh.SpmdOp,
    b: mesh.SpmdOp,
    ra: mesh.AllreduceOp,
    rb: mesh.AllreduceOp,
    new: Block,
    inputs: list[SSAValue],
    a_tail: list[Operation],
    b_tail: list[Operation],
    move: Callable[[Sequence[Operation]], None],
) -> mesh.SpmdOp:
    """Moves both tails into `new`, yields both results, replaces `a` and `b` by it."""
    a_yield = terminator(a.body.block, mesh.YieldOp)
    b_yield = terminator(b.body.block, mesh.YieldOp)
    move(a_tail)
    move(b_tail)
    new.add_op(mesh.YieldOp(*a_yield.values, *b_yield.values))
    merged = mesh.SpmdOp(inputs, [*a.result_types, *b.result_types], Region(new))
    program_block = a.parent_block()
    assert program_block is not None
    program_block.insert_op_before(merged, a)
    for old, result in zip((*a.results, *b.results), merged.results, strict=True):
        result.name_hint = old.name_hint
        old.replace_all_uses_with(result)
    for op in (ra, rb, a, b):
        Rewriter.erase_op(op, safe_erase=False)
    return merged


# -- several allreduces of one body ---------------------------------------------------


def _payload_copy_cycles(device: Device, sizes: Sequence[int]) -> float:
    """The packing's compute for payloads of `sizes`: a fill, a store and a load of each."""
    e = device.elem_bytes

    def op(read: int, written: int) -> float:
        return vector_op_cycles(device, 0, False, read * e, written * e)

    return op(0, sum(sizes)) + sum(op(n, 0) + op(0, n) for n in sizes)


def group_saved_cycles(group: Sequence[mesh.AllreduceOp], device: Device) -> float:
    """
    What one packed allreduce of `group`'s payloads saves on one line against one
    allreduce each (the packing's copies included; negative: packing is slower).
    """
    sizes = [_elements(r) for r in group]
    apart = sum(_allreduce_cycles(r, n, device) for r, n in zip(group, sizes, strict=True))
    packed = _allreduce_cycles(group[0], sum(sizes), device)
    return apart - packed - _payload_copy_cycles(device, sizes)


def _in_block(op: Operation, block: Block) -> Operation | None:
    """The ancestor of `op` (itself included) that sits in `block`, if any."""
    cur: Operation | None = op
    while cur is not None and cur.parent_block() is not block:
        cur = cur.parent_op()
    return cur


def _reads_any(value: SSAValue, results: set[SSAValue], block: Block) -> bool:
    """Whether `value` is computed (transitively, within `block`) from one of `results`."""
    seen: set[Operation] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        if v in results:
            return True
        owner = v.owner
        if not isinstance(owner, Operation) or owner in seen:
            continue
        top = _in_block(owner, block)
        if top is None or top in seen:
            continue
        seen.add(top)
        for inner in top.walk():
            stack.extend(inner.operands)
    return False


def _used_before(result: SSAValue, at: Operation, block: Block) -> bool:
    """Whether an op of `block` before `at` (or inside it) reads `result`."""
    for use in result.uses:
        top = _in_block(use.operation, block)
        if top is None or not top.is_before_in_block(at):
            continue
        return True
    return False


def _pack_group(group: Sequence[mesh.AllreduceOp]) -> mesh.AllreduceOp:
    """
    Replaces the allreduces of `group` (one block, in order) by one allreduce of their
    payloads stored side by side, at the place of the last; returns it.
    """
    last = group[-1]
    block = last.parent_block()
    assert block is not None
    sizes = [_elements(r) for r in group]
    packed_type = TensorType(element_type(last.input), [sum(sizes)])
    offsets = [_index(sum(sizes[:i])) for i in range(len(group))]
    buffer = tile.FillOp(0.0, packed_type)
    ops: list[Operation] = [*offsets, buffer]
    acc: SSAValue = buffer.result
    for r, n, at in zip(group, sizes, offsets, strict=True):
        flat = _reshape(r.input, [n])
        store = tile.StoreOp(flat[1], acc, [at])
        ops += [*flat[0], store]
        acc = store.result
    packed = mesh.AllreduceOp.create(
        operands=[acc],
        result_types=[packed_type],
        properties=dict(group[0].properties),
        attributes=dict(group[0].attributes),
    )
    ops.append(packed)
    for r, n, at in zip(group, sizes, offsets, strict=True):
        part = tile.LoadOp(packed, [at], [n])
        out = _reshape(part.result, static_shape(r.result, "allreduce"))
        ops += [part, *out[0]]
        out[1].name_hint = r.result.name_hint
        r.result.replace_all_uses_with(out[1])
    block.insert_ops_before(ops, last)
    for r in group:
        r.detach()
        r.erase()
    return packed


def pack_within(spmd: mesh.SpmdOp, device: Device, max_elements: int) -> int:
    """
    Packs the allreduces at the top of `spmd`'s body (not in loops) that share kind,
    axis, algorithm, K, groups, segment and element type, where none's payload is
    computed from another's result and no result is read before the last of them: one
    allreduce at the place of the last (the relayouts at a nest's head gather each value
    read whole: the new K, V and rotated K rows of a cache append). Each group is the
    first pending allreduce and the later ones that may join it (within `max_elements`
    values), cut to its longest prefix that the runtime's timing of a line says is
    faster. Returns the number of allreduces removed.
    """
    block = spmd.body.block
    pending = [op for op in block.ops if isinstance(op, mesh.AllreduceOp)]
    removed = 0
    while pending:
        first = pending.pop(0)
        if first.kind.data == mesh.CombineKind.SOFTMAX:
            continue
        group = [first]
        for r in list(pending):
            if _key(r) != _key(first):
                continue
            results: set[SSAValue] = {g.result for g in group}
            if _reads_any(r.input, results, block):
                continue
            if any(_used_before(g.result, r, block) for g in group):
                continue
            if sum(_elements(g) for g in [*group, r]) > max_elements:
                continue
            group.append(r)
        # Each packed payload saves a latency; a pair may not pay for its copies where
        # three do: the longest prefix that is faster.
        while len(group) > 1 and group_saved_cycles(group, device) <= 0:
            group.pop()
        if len(group) > 1:
            for r in group[1:]:
                pending.remove(r)
            _pack_group(group)
            removed += len(group) - 1
    return removed


@dataclass
class _Packer:
    block: Block
    device: Device
    window: int
    max_elements: int
    allreduce: dict[mesh.SpmdOp, mesh.AllreduceOp | None] = field(
        default_factory=dict[mesh.SpmdOp, "mesh.AllreduceOp | None"]
    )
    sram: dict[mesh.SpmdOp, int] = field(default_factory=dict[mesh.SpmdOp, int])
    position: dict[Operation, int] = field(default_factory=dict[Operation, int])

    def allreduce_of(self, spmd: mesh.SpmdOp) -> mesh.AllreduceOp | None:
        if spmd not in self.allreduce:
            self.allreduce[spmd] = single_allreduce(spmd)
        return self.allreduce[spmd]

    def sram_of(self, spmd: mesh.SpmdOp) -> int:
        if spmd not in self.sram:
            self.sram[spmd] = spmd_sram(spmd, self.device).peak_bytes
        return self.sram[spmd]

    def renumber(self) -> None:
        self.position = {op: i for i, op in enumerate(self.block.ops)}

    def movable_deps(self, a: mesh.SpmdOp, b: mesh.SpmdOp) -> list[Operation] | None:
        """
        The host ops between `a` and `b` that `b` reads (transitively), to move above
        `a`; None if `b` depends on `a` or on a nest between them.
        """
        pos = self.position
        first, last = pos[a], pos[b]
        needed: set[Operation] = set()
        stack: list[SSAValue] = list(b.operands)
        for op in b.body.walk():
            stack.extend(v for v in op.operands if _defined_in(v, self.block))
        while stack:
            owner = stack.pop().owner
            if not isinstance(owner, Operation) or owner.parent_block() is not self.block:
                continue
            if pos[owner] < first or owner in needed:
                continue
            if owner is a or isinstance(owner, mesh.SpmdOp):
                return None
            needed.add(owner)
            stack.extend(owner.operands)
            for inner in owner.walk():
                stack.extend(v for v in inner.operands if _defined_in(v, self.block))
        assert all(pos[op] < last for op in needed)
        return sorted(needed, key=lambda op: pos[op])

    def try_merge(self, a: mesh.SpmdOp, b: mesh.SpmdOp) -> mesh.SpmdOp | None:
        ra, rb = self.allreduce_of(a), self.allreduce_of(b)
        if ra is None or rb is None or _key(ra) != _key(rb):
            return None
        if ra.kind.data == mesh.CombineKind.SOFTMAX:
            # Its combine works on rows [m, x...], not elementwise: packed flat, rows of
            # different payloads would mix.
            return None
        n = _elements(ra) + _elements(rb)
        if n > self.max_elements or saved_cycles(ra, rb, self.device) <= 0:
            return None
        packed_bytes = n * self.device.elem_bytes
        if self.sram_of(a) + self.sram_of(b) + 3 * packed_bytes > self.device.sram_bytes:
            return None
        deps = self.movable_deps(a, b)
        if deps is None:
            return None
        for op in deps:
            op.detach()
            self.block.insert_op_before(op, a)
        sram = self.sram_of(a) + self.sram_of(b) + 3 * packed_bytes
        merged = _merge(a, b, ra, rb)
        self.allreduce[merged] = single_allreduce(merged)
        self.sram[merged] = sram
        self.renumber()
        return merged

    def run(self) -> list[Merge]:
        merges: list[Merge] = []
        recent: list[mesh.SpmdOp] = []
        self.renumber()
        for b in [op for op in self.block.ops if isinstance(op, mesh.SpmdOp)]:
            merged: mesh.SpmdOp | None = None
            if self.allreduce_of(b) is not None:
                for i in range(len(recent) - 1, -1, -1):
                    a = recent[i]
                    merged = self.try_merge(a, b)
                    if merged is not None:
                        merges.append(Merge(a, b, merged))
                        recent[i] = merged
                        break
            if merged is None:
                recent = [*recent, b][-self.window :]
        return merges


def _defined_in(value: SSAValue, block: Block) -> bool:
    owner = value.owner
    return isinstance(owner, Operation) and owner.parent_block() is block


def update_plans(plans: list[NestPlan], merges: Sequence[Merge]) -> None:
    """
    Keeps `plans` (one per loop nest, `plmr compile --explain`) in step with `merges`:
    the plans of both nests of a merge point at the merged `mesh.spmd`.
    """
    for m in merges:
        for i, plan in enumerate(plans):
            if plan.spmd is m.first or plan.spmd is m.second:
                plans[i] = replace(plan, spmd=m.merged)


def pack_allreduces(
    module: ModuleOp, window: int = 4, max_elements: int = 1024
) -> list[Merge]:
    """
    Packs the allreduces of each nest's body, then merges the sibling nests of every
    `mesh.program` in `module` (see the module doc).
    """
    if window < 1 or max_elements < 1:
        raise PassOptionError(
            f"mesh-pack-allreduces: window ({window}) and max-elements ({max_elements}) "
            "must be at least 1"
        )
    merges: list[Merge] = []
    for program in module.walk():
        if not isinstance(program, mesh.ProgramOp):
            continue
        device = get_device(program.device.spec.data)
        for spmd in [op for op in program.body.block.ops if isinstance(op, mesh.SpmdOp)]:
            pack_within(spmd, device, max_elements)
        packer = _Packer(program.body.block, device, window, max_elements)
        merges.extend(packer.run())
    return merges


@dataclass(frozen=True)
class MeshPackAllreducesPass(ModulePass):
    """
    Packs the independent allreduces of one `mesh.spmd` body that share kind, axis and
    algorithm into one, then merges independent `mesh.spmd` nests whose single
    allreduces do into one nest with one allreduce of both payloads: `window` (nests
    looked back from each nest), `max-elements` (largest packed payload).
    """

    name = "mesh-pack-allreduces"

    window: int = 4
    max_elements: int = 1024

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pack_allreduces(op, self.window, self.max_elements)


__all__ = [
    "Merge",
    "MeshPackAllreducesPass",
    "group_saved_cycles",
    "hoist_allreduce",
    "inline_single_trip",
    "pack_allreduces",
    "pack_within",
    "single_allreduce",
    "update_plans",
]
