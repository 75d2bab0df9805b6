"""
The lowerings of `convert-graph-to-loop` for the ops that only move data: slice,
expand and pad (gathers: `plmr.lowering.gather`). Each is one parallel nest over its
result whose `loop.read` index is computed from the loop indices:

- `graph.slice`: `start + i·step` per dimension;
- `graph.expand`: a broadcasting read (index 0 along the size-1 dimensions);
- `graph.pad`: `i - begin`; a `constant` pad reads with the pad value as `padding`,
  `edge` clamps the index into the tensor, `reflect` mirrors it at both borders
  (`r = min(|j|, 2(n-1) - |j|)` with `j = i - begin`, valid for pads smaller than `n`).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith
from xdsl.ir import SSAValue

from plmr.dialects import graph
from plmr.dialects.loop import ReadOp
from plmr.lowering.gather import lower_gather_elements
from plmr.lowering.loop_builders import (
    LoweringTable,
    broadcast_read,
    element_of,
    index,
    map_nest,
    shape_of,
)

DATA_MOVEMENT_LOWERINGS = LoweringTable("convert-graph-to-loop")
"""The lowerings of the data-movement ops, by op class."""


@DATA_MOVEMENT_LOWERINGS.impl(graph.SliceOp)
def _lower_slice(op: graph.SliceOp) -> list[SSAValue]:
    x = op.input
    starts, steps = op.starts.get_values(), op.steps.get_values()

    def body(idx: Sequence[SSAValue]) -> SSAValue:
        src: list[SSAValue] = []
        for i, start, step in zip(idx, starts, steps, strict=True):
            v = i if step == 1 else arith.MuliOp(i, index(step)).result
            src.append(arith.AddiOp(v, index(start)).result if start else v)
        return ReadOp(x, src).result

    return [map_nest(shape_of(op.result), body, element_of(op.result))]


@DATA_MOVEMENT_LOWERINGS.impl(graph.ExpandOp)
def _lower_expand(op: graph.ExpandOp) -> list[SSAValue]:
    x = op.input
    return [
        map_nest(
            shape_of(op.result), lambda idx: broadcast_read(x, idx), element_of(op.result)
        )
    ]


def _magnitude(j: SSAValue) -> SSAValue:
    """`|j|` of an index."""
    return arith.MaxSIOp(j, arith.SubiOp(index(0), j).result).result


def _edge(i: SSAValue, begin: int, end: int, size: int) -> SSAValue:
    """The index of `i - begin` clamped into `[0, size)`."""
    j = arith.SubiOp(i, index(begin)).result if begin else i
    if begin:
        j = arith.MaxSIOp(j, index(0)).result
    if end:
        j = arith.MinSIOp(j, index(size - 1)).result
    return j


def _reflect(i: SSAValue, begin: int, end: int, size: int) -> SSAValue:
    """The index of `i - begin` mirrored at both borders (without repeating them)."""
    j = arith.SubiOp(i, index(begin)).result if begin else i
    if begin:
        j = _magnitude(j)
    if end:
        mirrored = arith.SubiOp(index(2 * (size - 1)), j).result
        j = arith.MinSIOp(j, mirrored).result
    return j


@DATA_MOVEMENT_LOWERINGS.impl(graph.PadOp)
def _lower_pad(op: graph.PadOp) -> list[SSAValue]:
    x = op.input
    shape = shape_of(x)
    rank = len(shape)
    pads = op.pads.get_values()
    mode = op.mode.data
    value = op.value.value.data

    def body(idx: Sequence[SSAValue]) -> SSAValue:
        src: list[SSAValue] = []
        for a, (i, size) in enumerate(zip(idx, shape, strict=True)):
            begin, end = pads[a], pads[a + rank]
            if mode == graph.PadMode.CONSTANT:
                src.append(arith.SubiOp(i, index(begin)).result if begin else i)
            elif mode == graph.PadMode.EDGE:
                src.append(_edge(i, begin, end, size))
            else:
                src.append(_reflect(i, begin, end, size))
        padded = mode == graph.PadMode.CONSTANT and any(pads)
        return ReadOp(x, src, padding=value if padded else None).result

    return [map_nest(shape_of(op.result), body, element_of(op.result))]


DATA_MOVEMENT_LOWERINGS.add(graph.GatherElementsOp, lower_gather_elements)
