"""
What a collective does to the data and when a sender may issue it again, on the whole grid
at once: the mesh machine's (`plmr.runtime.mesh_machine`) collectives without its state.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from plmr.dialects import mesh
from plmr.runtime.spmd import CLOCK, FloatArray
from plmr.target.collective_stages import StageArrays, combine_along, segmented_data
from plmr.target.device import Device
from plmr.values import Array


def _line_view(a: Array, axis: str) -> Array:
    """(rows, cols, ...) -> (lines, positions, ...) for the axis."""
    return a if axis == "x" else np.swapaxes(a, 0, 1)


def collective_data(
    op: Operation, x: Array, root: int | None, grid: tuple[int, int]
) -> Array:
    """The blocks every PE of `grid` holds after the collective `op` on the blocks `x`."""
    axis = getattr(op, "axis").data
    lines = _line_view(np.asarray(x), axis)
    n = lines.shape[1]
    if isinstance(op, mesh.ShiftOp):
        from plmr.target.collectives import shift_plan

        plan = shift_plan(op.ring.data, n, op.distance.value.data)
        out = lines
        for stage in plan.stages:
            src = np.full(n, -1, dtype=np.int64)
            for t in stage.transfers:
                for d in t.dsts:
                    src[d] = t.src
            nxt = np.zeros_like(out)
            has = src >= 0
            nxt[:, has] = out[:, src[has]]
            out = nxt
        result = out
    elif isinstance(op, mesh.DiagonalBroadcastOp):
        # Line l's root is position l (a square grid: as many lines as positions).
        index = np.arange(int(lines.shape[0]), dtype=np.int64)
        diagonal = lines[index, index]
        result = np.broadcast_to(diagonal[:, None], lines.shape).copy()
    elif isinstance(op, mesh.AllgatherOp):
        result = _allgathered(lines, op.dim.value.data, op.owners())
    elif mesh.segment_of(op, grid) != n:
        result = segmented_data(op, lines, mesh.segment_of(op, grid), root)
    elif isinstance(op, mesh.BroadcastOp):
        assert root is not None
        result = np.broadcast_to(lines[:, root : root + 1], lines.shape).copy()
    else:
        total = combine_along(getattr(op, "kind").data, lines, 1)
        if isinstance(op, mesh.AllreduceOp):
            result = np.broadcast_to(total, lines.shape).copy()
        else:
            assert root is not None
            result = np.zeros_like(lines)
            result[:, root : root + 1] = total
    return _line_view(result, axis)


def _allgathered(lines: Array, dim: int, owners: int) -> Array:
    """
    The concatenation along block dim `dim` of the first `owners` positions' blocks of
    `(lines, positions, ...)`, at every position.
    """
    n = lines.shape[1]
    parts = lines[:, :owners]
    # (lines, owners, d0, .., dk, ..) -> (lines, d0, .., owners, dk, ..) -> merge.
    moved = np.moveaxis(parts, 1, dim + 1)
    shape = list(lines.shape[2:])
    shape[dim] *= owners
    whole = moved.reshape(lines.shape[0], *shape)
    return np.broadcast_to(whole[:, None], (lines.shape[0], n, *shape)).copy()


def flow_control(
    device: Device,
    grid: tuple[int, int],
    previous: FloatArray | None,
    stages: list[StageArrays],
    issue: FloatArray,
    axis: str,
    hop: float,
) -> FloatArray:
    """
    Double buffering: a PE may run at most one message ahead of each receiver of its
    first stage. When the same collective runs again (e.g. the next step of a loop), a
    sender waits until its receivers issued their previous instance (`previous`, the issue
    times of that instance) and the credit travelled back to it. Returns the issue times.
    """
    issue = np.asarray(np.broadcast_to(issue, grid), dtype=CLOCK)
    first = next((st for st in stages if st.src.size), None)
    if previous is None or first is None:
        return issue
    pos_axis = 1 if axis == "x" else 0
    if first.dst_of is not None and first.back_hops_of is not None:
        delay_of = (first.back_hops_of * hop + 2 * device.ramp_cycles).astype(CLOCK)
        credit = np.take(previous, first.dst_of, axis=pos_axis)
        credit += delay_of if pos_axis == 1 else delay_of[:, None]
        return np.maximum(issue, credit)
    credit = np.take(previous, first.dst, axis=pos_axis)
    delay = (first.hops * hop + 2 * device.ramp_cycles).astype(CLOCK)
    credit += delay if pos_axis == 1 else delay[:, None]
    need = np.full(grid, -np.inf, dtype=CLOCK)
    if len(set(first.src.tolist())) == first.src.size:
        index = (slice(None), first.src) if pos_axis == 1 else (first.src,)
        need[index] = credit
    else:
        moved = np.moveaxis(need, pos_axis, 0)
        np.maximum.at(moved, first.src, np.moveaxis(credit, pos_axis, 0))  # pyright: ignore[reportArgumentType]
    return np.maximum(issue, need)
