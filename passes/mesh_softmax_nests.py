"""
`mesh-fuse-softmax` across nests: one softmax allreduce for a split-K softmax written as
three nests (the maximum, the exponentials, the sums).

A decode step's attention keeps its probabilities `exp(s − M)` as a tensor (each is read
by the softmax's sum and by P·V along the head dimension), so its softmax reaches the mesh
as three `mesh.spmd` nests, each with its own allreduce along the axis that splits the
positions:

    %M_t = mesh.spmd(...) { ... %M = mesh.allreduce max %m axis x ...  yield(M) }
    %E_t = mesh.spmd(..., %M_t) { ... exp(s − M) ...                    yield(E) }
    %O_t = mesh.spmd(%E_t, ...) { ... l = Σ E, o = E·V ...
                                  %r = mesh.allreduce sum pack(l, o) axis x ... }

Each PE's exponentials need only *its* maximum: `exp(s − m) = exp(s − M) · exp(m − M)`,
and every sum linear in them is the same rescaling away. So the three nests become one
nest (each one's results were the next one's operands, block for block), the max
allreduce goes (`M` reads the local `m`), and the sum allreduce becomes one
`mesh.allreduce softmax` of rows `[m, l, o...]` (flash-decoding's combine, which rescales
by `exp(m_i − M)` as it reduces); the rows' sums, loaded back from its columns, are the
sums the sum allreduce returned.

A chain matches (`match_nests`) when

- the first nest has one allreduce, `max`, under loops of one trip, whose result the
  nest reaches only through moves (`reshape`, `store`, `select`, loops) into its one
  result; that result's only reader is the second nest;
- in the second nest the maximum is read only as `x − M` (x independent of it) under an
  `exp`, and everything computed from the exponentials is linear in them (products by
  values independent of them, sums, moves) up to its one result, read only by the third
  nest and with the same block type there;
- the third nest has one allreduce, `sum`, with the maximum's axis, algorithm, K, groups
  and segment, under loops of one trip; its payload (one value, or the pieces that
  `mesh-pack-allreduces` stored side by side) is linear in the exponentials, each piece
  `m`'s rows followed by its own columns (its shape, unit dimensions dropped, starts with
  `m`'s), and nothing else of the nest reads the exponentials past the allreduce;
- the algorithm is not `ring`, and the fused collective is faster by the runtime's
  timing of one line (`saved_cycles`), unless `always`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp, TensorType
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.rewriter import Rewriter

from plmr.dialects import mesh, tile
from plmr.dialects.graph import element_type, static_shape
from plmr.dialects.narrow import expect, terminator
from plmr.passes.dead_ops import erase_dead
from plmr.passes.mesh_pack import Merge, hoist_allreduce, single_allreduce
from plmr.target.collective_stages import line_cycles
from plmr.target.device import Device, get_device
from plmr.target.op_cost import vector_op_cycles
from plmr.target.route_plan import plan_of

C = TypeVar("C")
"""A chain a matcher finds."""


def softmax_allreduce(
    packed: SSAValue,
    packed_type: TensorType[Attribute],
    maximum: mesh.AllreduceOp,
    attributes_of: Operation,
) -> mesh.AllreduceOp:
    """
    The one allreduce with the `softmax` combine over the rows `[m, x…]` of `packed`,
    on the axis, algorithm and groups of the max's allreduce `maximum`, with the
    attributes of `attributes_of`.
    """
    return mesh.AllreduceOp.create(
        operands=[packed],
        result_types=[packed_type],
        properties={
            **maximum.properties,
            "kind": mesh.CombineKindAttr(mesh.CombineKind.SOFTMAX),
        },
        attributes=dict(attributes_of.attributes),
    )


@dataclass
class NestChain:
    """The three nests of a split-K softmax and their allreduces."""

    maximum_nest: mesh.SpmdOp
    exp_nest: mesh.SpmdOp
    sum_nest: mesh.SpmdOp
    maximum: mesh.AllreduceOp
    total: mesh.AllreduceOp
    pieces: list[tuple[SSAValue, int]]
    """The sum's payload: (piece, element offset in the payload)."""


def _is_zero_fill(value: SSAValue) -> bool:
    owner = value.owner
    return isinstance(owner, tile.FillOp) and owner.value.value.data == 0.0


def _users(value: SSAValue) -> Iterable[Operation]:
    return (use.operation for use in value.uses)


def _closure(seeds: Sequence[SSAValue], stop: Operation | None = None) -> set[SSAValue]:
    """
    Every value that depends on `seeds` (through operands, and through a loop's carried
    values and results); `stop`'s results are left out (a collective's result is no
    PE's own).
    """
    found: set[SSAValue] = set(seeds)
    work = list(seeds)
    while work:
        value = work.pop()
        for op in _users(value):
            if op is stop:
                continue
            new: list[SSAValue] = list(op.results)
            loop = op.parent_op()
            if isinstance(op, tile.YieldOp) and isinstance(loop, tile.ForOp):
                for i, operand in enumerate(op.operands):
                    if operand is value:
                        new += [loop.body.block.args[1 + i], loop.res[i]]
            if isinstance(op, tile.ForOp):
                for i, init in enumerate(op.iter_args):
                    if init is value:
                        new += [op.body.block.args[1 + i], op.res[i]]
            for v in new:
                if v not in found:
                    found.add(v)
                    work.append(v)
    return found


def _linear_op(op: Operation, scaled: set[SSAValue]) -> bool:
    """`op`'s results are linear in its operands of `scaled` (the others independent)."""
    ins = [v in scaled for v in op.operands]
    if isinstance(op, tile.ReshapeOp):
        return True
    if isinstance(op, tile.LoadOp):
        # A padding of zeros (a padded reduction block's) scales with the rest.
        zero = op.padding is None or op.padding.value.data == 0.0
        return ins[0] and not any(ins[1:]) and zero
    if isinstance(op, tile.ReduceOp):
        return op.kind.data.value == "sum"
    if isinstance(op, tile.MapOp):
        kind = op.kind_name
        if kind == "mul":
            return sum(ins) == 1
        if kind == "div":
            return ins[0] and not any(ins[1:])
        if kind == "neg":
            return True
        if kind in ("add", "sub"):
            return all(s or _is_zero_fill(v) for v, s in zip(op.inputs, ins, strict=True))
        return False
    if isinstance(op, tile.DotOp):
        product = (op.lhs in scaled) != (op.rhs in scaled)
        acc = op.acc
        return product and (acc is None or acc in scaled or _is_zero_fill(acc))
    if isinstance(op, tile.StoreOp):
        return (op.block in scaled or _is_zero_fill(op.block)) and (
            op.dest in scaled or _is_zero_fill(op.dest)
        )
    if isinstance(op, tile.SelectOp):
        return op.cond not in scaled and all(
            v in scaled or _is_zero_fill(v) for v in (op.on_true, op.on_false)
        )
    if isinstance(op, tile.ForOp):
        return all(v in scaled or _is_zero_fill(v) for v in op.iter_args) and not any(
            v in scaled for v in op.operands if v not in op.iter_args
        )
    return isinstance(op, tile.YieldOp | mesh.YieldOp)


def _ops_reading(values: set[SSAValue]) -> list[Operation]:
    seen: dict[int, Operation] = {}
    for v in values:
        for op in _users(v):
            seen.setdefault(id(op), op)
    return list(seen.values())


def _linear(
    seeds: Sequence[SSAValue], stop: Operation | None = None
) -> set[SSAValue] | None:
    """The values linear in `seeds` (None if something computed from them is not)."""
    scaled = _closure(seeds, stop)
    for op in _ops_reading(scaled):
        if op is stop:
            continue
        if not _linear_op(op, scaled):
            return None
    return scaled


def _moves_to_yield(value: SSAValue, nest: mesh.SpmdOp) -> bool:
    """`value` reaches only the nest's yield, through moves of it (module doc)."""
    reach = _closure([value])
    for op in _ops_reading(reach):
        if isinstance(op, mesh.YieldOp) and op.parent_op() is nest:
            continue
        if isinstance(op, tile.ReshapeOp | tile.YieldOp):
            continue
        if isinstance(op, tile.StoreOp | tile.SelectOp | tile.ForOp):
            if isinstance(op, tile.SelectOp) and op.cond in reach:
                return False
            if isinstance(op, tile.StoreOp) and any(o in reach for o in op.offsets):
                return False
            continue
        return False
    return True


def _exponentials(arg: SSAValue) -> list[SSAValue] | None:
    """The `exp(x − M)` of the second nest (`arg`: its maximum), None if it reads `M` otherwise."""
    reach = _closure([arg])
    exps: list[SSAValue] = []
    work = [arg]
    seen: set[SSAValue] = set()
    while work:
        value = work.pop()
        if value in seen:
            continue
        seen.add(value)
        for op in _users(value):
            if isinstance(op, tile.ReshapeOp) or (
                isinstance(op, tile.LoadOp) and op.source is value and not op.padding
            ):
                if any(o in reach for o in op.operands[1:]):
                    return None
                work.append(op.results[0])
                continue
            if isinstance(op, tile.MapOp) and op.kind_name == "sub":
                if (
                    len(op.inputs) != 2
                    or op.inputs[1] is not value
                    or op.inputs[0] in reach
                ):
                    return None
                uses = list(_users(op.result))
                if not uses or any(
                    not (isinstance(u, tile.MapOp) and u.kind_name == "exp") for u in uses
                ):
                    return None
                exps += [u.results[0] for u in uses]
                continue
            return None
    return exps


def _single_result_reader(nest: mesh.SpmdOp) -> tuple[mesh.SpmdOp, int] | None:
    """The only nest that reads `nest`'s only result, and at which operand."""
    if len(nest.results) != 1:
        return None
    uses = list(nest.results[0].uses)
    if len(uses) != 1 or not isinstance(uses[0].operation, mesh.SpmdOp):
        return None
    reader = uses[0].operation
    if reader.parent_block() is not nest.parent_block():
        return None
    index = uses[0].index
    written = nest.body.block.last_op
    # The reader's block is the block the writer yields.
    if (
        written is None
        or reader.body.block.args[2 + index].type != written.operands[0].type
    ):
        return None
    return reader, index


def _payload(total: mesh.AllreduceOp) -> list[tuple[SSAValue, int]]:
    """The pieces stored side by side into a zero fill (or the payload itself)."""
    pieces: list[tuple[SSAValue, int]] = []
    value = total.input
    while (
        isinstance(value.owner, tile.StoreOp) and len(static_shape(value, "payload")) == 1
    ):
        store = value.owner
        offset = store.offsets[0].owner
        if not isinstance(offset, arith.ConstantOp) or len(list(store.result.uses)) != 1:
            break
        attr = expect(offset.value, IntegerAttr, "the offset of a one-dimensional store")
        pieces.append((store.block, int(attr.value.data)))
        value = store.dest
    if pieces and _is_zero_fill(value):
        return sorted(pieces, key=lambda p: p[1])
    return [(total.input, 0)]


def _squeezed(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)


def _source(value: SSAValue) -> SSAValue:
    while isinstance(value.owner, tile.ReshapeOp):
        value = value.owner.input
    return value


def match_nests(maximum: mesh.AllreduceOp) -> NestChain | None:
    """The three-nest chain of `maximum` (a max allreduce) if it fuses (module doc)."""
    if maximum.kind.data != mesh.CombineKind.MAX:
        return None
    if maximum.algorithm.data == mesh.Algorithm.RING:
        return None
    first = maximum.parent_op()
    while first is not None and not isinstance(first, mesh.SpmdOp):
        first = first.parent_op()
    if first is None or single_allreduce(first) is not maximum:
        return None
    if not _moves_to_yield(maximum.result, first):
        return None
    found = _single_result_reader(first)
    if found is None:
        return None
    second, index = found
    exps = _exponentials(second.body.block.args[2 + index])
    if not exps:
        return None
    if any(isinstance(op, mesh.AllreduceOp) for op in second.body.walk()):
        return None
    scaled = _linear(exps)
    yielded = second.body.block.last_op
    if (
        scaled is None
        or yielded is None
        or list(yielded.operands) != [v for v in yielded.operands if v in scaled]
    ):
        return None
    found = _single_result_reader(second)
    if found is None:
        return None
    third, index = found
    total = single_allreduce(third)
    if total is None or total.kind.data != mesh.CombineKind.SUM:
        return None
    key = (maximum.axis, maximum.algorithm, maximum.k, maximum.groups, maximum.segment)
    if (total.axis, total.algorithm, total.k, total.groups, total.segment) != key:
        return None
    if element_type(total.input) != element_type(maximum.input):
        return None
    inside = _linear([third.body.block.args[2 + index]], stop=total)
    if inside is None or total.input not in inside:
        return None
    # Nothing of this PE's own scale leaves the nest but through the allreduce.
    yield_op = third.body.block.last_op
    assert yield_op is not None
    if any(v in inside for v in yield_op.operands):
        return None
    rows = _squeezed(static_shape(maximum.input, "maximum"))
    n_rows = math.prod(rows)
    pieces = _payload(total)
    for piece, _ in pieces:
        shape = _squeezed(static_shape(_source(piece), "piece"))
        if shape[: len(rows)] != rows or piece not in inside:
            return None
        if math.prod(static_shape(piece, "piece")) % max(n_rows, 1):
            return None
    return NestChain(first, second, third, maximum, total, pieces)


def _elements(value: SSAValue) -> int:
    return math.prod(static_shape(value, "value"))


def saved_cycles(chain: NestChain, device: Device) -> float:
    """
    What the fused allreduce saves on one line (negative: it is slower): the max
    allreduce and the sum allreduce against the softmax allreduce of the rows and the
    copies that pack and unpack them.
    """
    maximum = chain.maximum
    plan = plan_of(maximum, maximum.grid())
    rows = _elements(maximum.input)
    payload = _elements(chain.total.input)
    width = 1 + payload // rows
    apart = float(line_cycles(plan, rows, device, kind="max").max()) + float(
        line_cycles(plan, payload, device).max()
    )
    fused = float(
        line_cycles(plan, rows * width, device, kind="softmax", width=width).max()
    )
    e = device.elem_bytes

    def op(read: int, written: int) -> float:
        return vector_op_cycles(device, 0, False, read * e, written * e)

    copies = op(0, rows * width) + 2 * (op(rows, 0) + op(0, rows))
    copies += sum(
        2 * (op(n, 0) + op(0, n)) for n in (_elements(p) for p, _ in chain.pieces)
    )
    return apart - fused - copies


def _index(value: int) -> arith.ConstantOp:
    return arith.ConstantOp(IntegerAttr(value, IndexType()))


def _merged(chain: NestChain) -> mesh.SpmdOp:
    """One nest running the three in turn (each one's result a value of the block)."""
    nests = [chain.maximum_nest, chain.exp_nest, chain.sum_nest]
    internal = {chain.maximum_nest.results[0], chain.exp_nest.results[0]}
    block_types: dict[SSAValue, Attribute] = {}
    for nest in nests:
        for v, t in zip(nest.inputs, nest.body.block.arg_types[2:], strict=True):
            if v not in internal:
                block_types.setdefault(v, t)
    inputs = list(block_types)
    new = Block(arg_types=[*nests[0].body.block.arg_types[:2], *block_types.values()])
    block_of = {v: new.args[2 + i] for i, v in enumerate(inputs)}
    yielded: dict[SSAValue, SSAValue] = {}
    for nest in nests:
        block = nest.body.block
        for old, arg in zip(block.args[:2], new.args[:2], strict=True):
            old.replace_all_uses_with(arg)
        for v, old in zip(nest.inputs, block.args[2:], strict=True):
            old.replace_all_uses_with(yielded[v] if v in internal else block_of[v])
        yield_op = terminator(block, mesh.YieldOp)
        for result, value in zip(nest.results, yield_op.values, strict=True):
            yielded[result] = value
        if nest is not nests[-1]:
            yield_op.detach()
            yield_op.erase()
        for op in list(block.ops):
            op.detach()
            new.add_op(op)
    last = chain.sum_nest
    merged = mesh.SpmdOp(inputs, list(last.result_types), Region(new))
    program = last.parent_block()
    assert program is not None
    # Where the last one ran: every operand of the three is defined by then.
    program.insert_op_before(merged, last)
    for old, result in zip(last.results, merged.results, strict=True):
        result.name_hint = old.name_hint
        old.replace_all_uses_with(result)
    for nest in reversed(nests):
        nest.detach()
        nest.erase(safe_erase=False)
    return merged


def fuse_nests(chain: NestChain) -> mesh.SpmdOp:
    """Rewrites `chain` into one nest with one softmax allreduce; returns the nest."""
    hoist_allreduce(chain.maximum, chain.maximum_nest)
    hoist_allreduce(chain.total, chain.sum_nest)
    maximum, total = chain.maximum, chain.total
    m = maximum.input
    rows = _elements(m)
    payload = _elements(total.input)
    width = 1 + payload // rows
    elt = element_type(m)
    ops: list[Operation] = []
    zero = _index(0)
    ops.append(zero)
    m_rows = tile.ReshapeOp(m, [rows, 1])
    buffer = tile.FillOp(0.0, TensorType(elt, [rows, width]))
    store = tile.StoreOp(m_rows, buffer, [zero, zero])
    ops += [m_rows, buffer, store]
    current: SSAValue = store.result
    columns: list[tuple[SSAValue, int, int, arith.ConstantOp]] = []
    column = 1
    for piece, offset in chain.pieces:
        cols = _elements(piece) // rows
        at = _index(column)
        flat = tile.ReshapeOp(piece, [rows, cols])
        put = tile.StoreOp(flat, current, [zero, at])
        ops += [at, flat, put]
        current = put.result
        columns.append((piece, offset, cols, at))
        column += cols
    packed_type = TensorType(elt, [rows, width])
    fused = softmax_allreduce(current, packed_type, maximum, total)
    ops.append(fused)
    # The sums, back in the sum allreduce's payload.
    fill = tile.FillOp(0.0, TensorType(elt, [payload]))
    ops.append(fill)
    out: SSAValue = fill.result
    for piece, offset, cols, at in columns:
        load = tile.LoadOp(fused.result, [zero, at], [rows, cols])
        flat = tile.ReshapeOp(load.result, [rows * cols])
        where = _index(offset)
        put = tile.StoreOp(flat, out, [where])
        ops += [load, flat, where, put]
        out = put.result
    if static_shape(total.result, "sum") != (payload,):
        back = tile.ReshapeOp(out, static_shape(total.result, "sum"))
        ops.append(back)
        out = back.result
    block = total.parent_block()
    assert block is not None
    block.insert_ops_before(ops, total)
    payload_value = total.input
    Rewriter.replace_op(total, (), [out])
    Rewriter.replace_op(maximum, (), [m])
    erase_dead(payload_value)
    return _merged(chain)


def faster_fused(
    module: ModuleOp,
    match: Callable[[mesh.AllreduceOp], C | None],
    saved: Callable[[C, Device], float],
    always: bool,
) -> Iterator[C]:
    """
    The chains `match` finds from each allreduce of `module`'s mesh programs that
    `saved` says are faster fused on the program's device (every one with `always`),
    one at a time: the caller fuses each before the next is looked for.
    """
    for program in list(module.walk()):
        if not isinstance(program, mesh.ProgramOp):
            continue
        device = get_device(program.device.spec.data)
        for op in list(program.walk()):
            if not isinstance(op, mesh.AllreduceOp) or op.parent is None:
                continue
            chain = match(op)
            if chain is None or (not always and saved(chain, device) <= 0):
                continue
            yield chain


def fuse_softmax_nests(module: ModuleOp, always: bool = False) -> list[Merge]:
    """
    Fuses every matching three-nest chain of `module` that is faster fused (every one
    with `always`); returns the merges (the first two nests, then the third, into one).
    """
    merges: list[Merge] = []
    for chain in faster_fused(module, match_nests, saved_cycles, always):
        first, second, third = chain.maximum_nest, chain.exp_nest, chain.sum_nest
        merged = fuse_nests(chain)
        merges += [Merge(first, second, merged), Merge(third, third, merged)]
    return merges


__all__ = [
    "NestChain",
    "faster_fused",
    "fuse_nests",
    "fuse_softmax_nests",
    "match_nests",
    "saved_cycles",
]
