"""
Per-PE SRAM accounting: the peak of the blocks a `mesh.spmd` body keeps live at once.

Every PE runs the same body on blocks of the same shapes, so the live set is the same on
every PE and is computed once, statically: a value is live from the op that defines it
to its last use (a value used inside a loop stays live for the whole loop), and a
collective also holds a receive buffer of its block while it runs. Sizes use the
device's element width (fp16 by default), not the functional precision of the IR.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Block, Operation, SSAValue

from plmr.dialects import mesh
from plmr.dialects.graph import static_shape
from plmr.target.device import Device


def device_bytes(value: SSAValue, device: Device) -> int:
    if not isinstance(value.type, TensorType):
        return 0
    return math.prod(static_shape(value, "value")) * device.elem_bytes


@dataclass
class SramReport:
    """The peak live set of one PE."""

    peak_bytes: int = 0
    at: str = ""
    """The op at which the peak occurs."""
    live: list[tuple[str, int]] = field(default_factory=list[tuple[str, int]])
    """(value, bytes) of the live set at the peak, largest first."""


def _name(value: SSAValue) -> str:
    if value.name_hint:
        return f"%{value.name_hint}"
    owner = value.owner
    if isinstance(owner, Operation):
        return f"a result of {owner.name}"
    parent = owner.parent_op()
    return f"a block argument of {parent.name if parent else 'the body'}"


def _linearize(block: Block, order: dict[Operation, int], counter: list[int]) -> None:
    for op in block.ops:
        order[op] = counter[0]
        counter[0] += 1
        for region in op.regions:
            for inner in region.blocks:
                _linearize(inner, order, counter)
        order[op] = counter[0]  # an op with regions "ends" after its body
        counter[0] += 1


def _ancestor_in(op: Operation, block: Block) -> Operation | None:
    while op.parent_block() is not block:
        parent = op.parent_op()
        if parent is None:
            return None
        op = parent
    return op


Interval = tuple[int, int, SSAValue, int]
"""(first point, last point, value, bytes) of a value that lives in a PE's SRAM."""


def live_intervals(
    spmd: mesh.SpmdOp, device: Device, resident: Collection[SSAValue] = ()
) -> tuple[list[Interval], list[tuple[int, Operation]], int]:
    """
    Where each value of `spmd`'s body lives: its interval over the body's program points,
    the ops in program order with their points, and the number of points. Values in
    `resident` (blocks kept in SRAM beside the body, such as a layer's weights, which the
    body reads in place) are not part of the body's live set.
    """
    body = spmd.body.block
    end: dict[Operation, int] = {}
    _linearize(body, end, [0])
    start: dict[Operation, int] = {}
    counter = [0]

    def number(block: Block) -> None:
        for op in block.ops:
            start[op] = counter[0]
            counter[0] += 1
            for region in op.regions:
                for inner in region.blocks:
                    number(inner)
            counter[0] += 1

    number(body)
    intervals: list[Interval] = []

    def add(value: SSAValue, born: int, block: Block) -> None:
        if value in resident:
            return
        size = device_bytes(value, device)
        if size == 0:
            return
        last = born
        for use in value.uses:
            user = use.operation
            if user.regions and user.parent_block() is block:
                # Consumed on entry (e.g. a loop's initial value).
                last = max(last, start[user])
                continue
            anc = _ancestor_in(user, block)
            if anc is not None:
                last = max(last, end[anc])
        intervals.append((born, last, value, size))

    def collect(block: Block, born: int) -> None:
        for arg in block.args:
            add(arg, born, block)
        for op in block.ops:
            for res in op.results:
                add(res, end[op] if op.regions else start[op], block)
            for region in op.regions:
                for inner in region.blocks:
                    collect(inner, start[op] + 1)

    collect(body, 0)
    events: list[tuple[int, Operation]] = sorted(
        ((start[op], op) for op in start), key=lambda e: e[0]
    )
    return intervals, events, counter[0]


def spmd_sram(
    spmd: mesh.SpmdOp, device: Device, resident: Collection[SSAValue] = ()
) -> SramReport:
    """
    The peak SRAM one PE needs for the body of `spmd`, less the blocks of `resident`
    (`live_intervals`).
    """
    intervals, events, points_count = live_intervals(spmd, device, resident)
    report = SramReport()
    if not events:
        return report
    # Bytes live at every point: a sweep over the intervals' ends (a difference array).
    delta = np.zeros(points_count + 2, dtype=np.int64)
    if intervals:
        born = np.array([b for b, _, _, _ in intervals], dtype=np.int64)
        dies = np.array([e for _, e, _, _ in intervals], dtype=np.int64)
        sizes = np.array([s for _, _, _, s in intervals], dtype=np.int64)
        np.add.at(delta, born, sizes)
        np.add.at(delta, dies + 1, -sizes)
    live_bytes = np.cumsum(delta)
    extras = [
        device_bytes(op.results[0], device)
        if isinstance(op, mesh.CommOp) and op.results
        else 0
        for _, op in events
    ]
    points = np.array([point for point, _ in events], dtype=np.int64)
    totals = live_bytes[points] + np.array(extras, dtype=np.int64)
    i = int(np.argmax(totals))  # the first point of the peak
    if totals[i] <= 0:
        return report
    point, op = events[i]
    live = [(v, s) for (b, e, v, s) in intervals if b <= point <= e]
    report.peak_bytes = int(totals[i])
    report.at = str(op).splitlines()[0].strip() if not op.regions else op.name
    report.live = sorted(((_name(v), s) for v, s in live), key=lambda t: -t[1])
    if extras[i]:
        report.live.append((f"receive buffer of {op.name}", extras[i]))
    return report
