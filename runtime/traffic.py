"""
Static memory traffic of tile programs: what `run_tile_function` counts, without running.

Every `tile.load` from and `tile.store` to a tensor in global memory moves its block's
bytes once per iteration of the `tile.for` loops around it, so the traffic of a program
is a sum over its loads and stores weighted by trip counts; a `loop.nest` left at the loop
level reads one element per executed `loop.read` of a global tensor and writes its results
once. `static_traffic` also estimates the SRAM a program needs: the largest set of blocks
alive at once (by liveness within each loop body, plus what enclosing bodies keep alive).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.utils.hints import isa

from plmr.dialects import loop, tile
from plmr.errors import PlmrError
from plmr.runtime.tile_ops import global_values


@dataclass
class Traffic:
    """Bytes a program moves between global memory and SRAM, and its SRAM peak."""

    bytes_loaded: int = 0
    """By `tile.load` of global tensors."""
    bytes_stored: int = 0
    """By `tile.store` into global tensors."""
    loop_bytes: int = 0
    """Element reads and result writes of nests left at the loop level."""
    sram_peak: int = 0
    """The largest number of bytes of blocks alive at once."""

    @property
    def bytes_moved(self) -> int:
        return self.bytes_loaded + self.bytes_stored + self.loop_bytes


def static_traffic(module: ModuleOp, name: str) -> Traffic:
    """The traffic of `@name` of a tile program, from the trip counts of its loops."""
    fn = next(
        (
            op
            for op in module.ops
            if isinstance(op, func.FuncOp) and op.sym_name.data == name
        ),
        None,
    )
    if fn is None:
        raise PlmrError(f"no function @{name} in the module")
    globals_ = global_values(fn)
    traffic = Traffic()
    _count(fn.body.block, 1, globals_, traffic)
    traffic.sram_peak = _peak(fn.body.block, 0, globals_)
    return traffic


def _count(block: Block, times: int, globals_: set[SSAValue], out: Traffic) -> None:
    for op in block.ops:
        if isinstance(op, tile.ForOp):
            _count(op.body.block, times * op.trip_count, globals_, out)
        elif isinstance(op, tile.LoadOp) and op.source in globals_:
            out.bytes_loaded += times * tile.nbytes(op.result.type)
        elif isinstance(op, tile.StoreOp) and op.dest in globals_:
            out.bytes_stored += times * tile.nbytes(op.block.type)
        elif isinstance(op, loop.NestOp):
            out.loop_bytes += times * _nest_bytes(op, op, 1)
            out.loop_bytes += times * sum(tile.nbytes(t) for t in op.res.types)


def _nest_bytes(nest: loop.NestOp, top: loop.NestOp, outer: int) -> int:
    """Bytes of the global reads a nest (and the nests in it) executes."""
    points = outer * math.prod(nest.extents)
    total = 0
    for op in nest.body.block.ops:
        if isinstance(op, loop.NestOp):
            total += _nest_bytes(op, top, points)
        elif isinstance(op, loop.ReadOp) and not _inside(op.source, top):
            elt = loop.value_element(op.source.type)
            total += points * tile.nbytes(elt)
    return total


def _inside(value: SSAValue, nest: Operation) -> bool:
    owner = value.owner
    op: Operation | None = owner if isinstance(owner, Operation) else owner.parent_op()
    while op is not None:
        if op is nest:
            return True
        op = op.parent_op()
    return False


def _sram(value: SSAValue, globals_: set[SSAValue]) -> int:
    t: Attribute = value.type
    if value in globals_ or not isa(t, TensorType[Attribute]):
        return 0
    return tile.nbytes(t)


_IN_PLACE = (tile.MapOp, tile.ReshapeOp, tile.CastOp)


def _in_place(
    op: Operation, i: int, ends: dict[SSAValue, int], globals_: set[SSAValue]
) -> int:
    """
    Bytes `op` needs no new SRAM for: an elementwise op (or a reshape) can write its
    result over an operand of the same size that dies with it.
    """
    if not isinstance(op, _IN_PLACE) or len(op.results) != 1:
        return 0
    size = _sram(op.results[0], globals_)
    for v in op.operands:
        if ends.get(v) == i and _sram(v, globals_) == size:
            return size
    return 0


def _peak(block: Block, base: int, globals_: set[SSAValue]) -> int:
    """The most SRAM bytes alive at once in `block` (and the blocks nested in it)."""
    ops = list(block.ops)
    position = {op: i for i, op in enumerate(ops)}

    def last_use(v: SSAValue) -> int:
        last = -1
        for use in v.uses:
            op: Operation | None = use.operation
            while op is not None and op not in position:
                op = op.parent_op()
            if op is not None:
                last = max(last, position[op])
        return last

    born: list[tuple[int, int, int]] = []
    for arg in block.args:
        born.append((-1, last_use(arg), _sram(arg, globals_)))
    for i, op in enumerate(ops):
        for r in op.results:
            born.append((i, max(i, last_use(r)), _sram(r, globals_)))
    ends: dict[SSAValue, int] = {
        v: end
        for v, (_, end, _) in zip(
            [*block.args, *(r for o in ops for r in o.results)], born, strict=True
        )
    }
    peak = base
    for i, op in enumerate(ops):
        live = sum(size for start, end, size in born if start <= i <= end)
        live -= _in_place(op, i, ends, globals_)
        peak = max(peak, base + live)
        for region in op.regions:
            for inner in region.blocks:
                peak = max(peak, _peak(inner, base + live, globals_))
    return peak


__all__ = ["Traffic", "static_traffic"]
