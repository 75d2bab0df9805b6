"""
Routing plans of mesh programs: the stages of point-to-point transfers each collective
makes (`plmr.runtime.collectives`), turned into router entries (source ramp → out port,
pass-through routers, destination port → ramp, multicasts merged) with colors assigned
greedily: a transfer reuses the first color whose existing entries do not conflict with
its own at any router, and collectives with the same pattern share colors. The result is
checked against the device's color budget; with `relay = true`, transfers that do not fit
are marked to be relayed in software (each extra hop costs β).

The `mesh-route` pass emits these plans as `mesh.route` rules; the mesh runtime uses them
to time collectives of programs that were not routed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    IntegerAttr,
)
from xdsl.ir import Operation

from plmr.dialects import mesh
from plmr.errors import PlmrError
from plmr.runtime.collectives import (
    Plan,
    Transfer,
    allreduce_plan,
    along_y,
    broadcast_plan,
    reduce_plan,
    shift_plan,
    transfer_path,
)
from plmr.runtime.device import Device, get_device
from plmr.runtime.routing import RouteTable, Rule, compress_positions

COLLECTIVES = (mesh.ShiftOp, mesh.BroadcastOp, mesh.AllreduceOp, mesh.ReduceOp)


def plan_of(op: Operation, grid: tuple[int, int], root: int | None = None) -> Plan:
    """The plan of a collective op on a `[rows, cols]` grid (`root` for rooted ops)."""
    if isinstance(op, mesh.ShiftOp):
        n = mesh.axis_size(op.axis.data, grid)
        return shift_plan(op.ring.data, n, op.distance.value.data)
    if isinstance(op, mesh.BroadcastOp):
        n = mesh.axis_size(op.axis.data, grid)
        return broadcast_plan(n, 0 if root is None else root)
    if isinstance(op, mesh.AllreduceOp):
        n = mesh.axis_size(op.axis.data, grid)
        groups = None if op.groups is None else op.groups.value.data
        return allreduce_plan(n, op.algorithm.data, op.k.value.data, groups)
    if isinstance(op, mesh.ReduceOp):
        n = mesh.axis_size(op.axis.data, grid)
        groups = None if op.groups is None else op.groups.value.data
        algorithm = op.algorithm.data
        if algorithm == "ring":
            algorithm = "pipeline"
        return reduce_plan(
            n, algorithm, op.k.value.data, groups, 0 if root is None else root
        )
    raise PlmrError(f"'{op.name}' is not a collective")


def axis_of(op: Operation) -> str:
    axis = getattr(op, "axis", None)
    if not isinstance(axis, mesh.AxisAttr):
        raise PlmrError(f"'{op.name}' has no axis")
    return axis.data


@dataclass
class Routing:
    """Colors of every collective, the rules that carry them, and the color budget used."""

    table: RouteTable
    colors: dict[Operation, list[int]] = field(default_factory=dict[Operation, list[int]])
    relayed: set[Operation] = field(default_factory=set[Operation])
    max_colors: int = 0
    transfer_colors: dict[Operation, list[list[int]]] = field(
        default_factory=dict[Operation, list[list[int]]]
    )
    """Per collective with a single plan: the color of each transfer, stage by stage."""


def _entries(
    t: Transfer, axis: str, grid: tuple[int, int]
) -> list[tuple[int, mesh.Port, tuple[mesh.Port, ...]]]:
    out: list[tuple[int, mesh.Port, tuple[mesh.Port, ...]]] = []
    for pos, (rx, tx) in transfer_path(t).items():
        if axis == "y":
            rx, tx = along_y(rx), tuple(along_y(p) for p in tx)
        out.append((pos, rx, tx))
    del grid
    return out


def _rule(
    color: int,
    axis: str,
    grid: tuple[int, int],
    span: tuple[int, int, int],
    rx: mesh.Port,
    tx: tuple[mesh.Port, ...],
) -> Rule:
    full_rows, full_cols = (0, grid[0], 1), (0, grid[1], 1)
    if axis == "x":
        return Rule(color, full_rows, span, rx, tx)
    return Rule(color, span, full_cols, rx, tx)


def _fits(
    table: RouteTable,
    color: int,
    axis: str,
    grid: tuple[int, int],
    entries: Sequence[tuple[int, mesh.Port, tuple[mesh.Port, ...]]],
) -> bool:
    """Whether every router on the path is free for `color`, or already configured alike."""
    existing = table.tx.get(color)
    if existing is None:
        return True
    from plmr.runtime.routing import PORT_INDEX

    for pos, rx, tx in entries:
        bits = 0
        for p in tx:
            bits |= 1 << PORT_INDEX[p]
        config = existing[:, :, pos] if axis == "x" else existing[:, pos, :]
        i = PORT_INDEX[rx]
        same = config[i] == bits
        others_free = (np.delete(config, i, axis=0) == 0).all(axis=0)
        empty = (config == 0).all(axis=0)
        if not (empty | (same & others_free)).all():
            return False
    return True


def route_collectives(
    ops: Sequence[Operation],
    grid: tuple[int, int],
    device: Device,
    relay: bool = False,
    table: RouteTable | None = None,
) -> Routing:
    """Assigns colors and route rules to the given collective ops of one program."""
    table = RouteTable(grid[0], grid[1]) if table is None else table
    routing = Routing(table)
    patterns: dict[tuple[str, str], list[int]] = {}
    relayed_patterns: set[tuple[str, str]] = set()
    pattern_colors: dict[tuple[str, str], list[list[int]]] = {}
    # Plans are cached (shared objects): spell each one's transfers once.
    spelled: dict[int, tuple[Plan, str]] = {}
    for op in ops:
        axis = axis_of(op)
        used: list[int] = []
        for root in roots_of(op, grid):
            plan = plan_of(op, grid, root)
            known = spelled.get(id(plan))
            if known is None or known[0] is not plan:
                known = spelled[id(plan)] = (plan, repr([s.transfers for s in plan.stages]))
            key = (axis, known[1])
            if key not in patterns:
                patterns[key] = _route_plan(
                    op, plan, axis, grid, device, relay, table, routing
                )
                if op in routing.relayed:
                    relayed_patterns.add(key)
                pattern_colors[key] = routing.transfer_colors[op]
            elif key in relayed_patterns:
                # The same transfers as a collective that did not fit: relayed too.
                routing.relayed.add(op)
            if key in pattern_colors:
                routing.transfer_colors[op] = pattern_colors[key]
            used += [c for c in patterns[key] if c not in used]
            if op in routing.relayed:
                break
        routing.colors[op] = used
    counts = table.colors_per_router()
    routing.max_colors = int(counts.max()) if counts.size else 0
    return routing


def roots_of(op: Operation, grid: tuple[int, int]) -> list[int | None]:
    """The roots a rooted collective may use: its constant root, else every position."""
    if not isinstance(op, mesh.BroadcastOp | mesh.ReduceOp):
        return [None]
    owner = op.root.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return [owner.value.value.data]
    return list(range(mesh.axis_size(op.axis.data, grid)))


def _route_plan(
    op: Operation,
    plan: Plan,
    axis: str,
    grid: tuple[int, int],
    device: Device,
    relay: bool,
    table: RouteTable,
    routing: Routing,
) -> list[int]:
    """Colors for every transfer of one plan (greedy), and the rules that carry them."""
    budget = device.usable_colors
    used: list[int] = []
    pending: dict[tuple[int, mesh.Port, tuple[mesh.Port, ...]], set[int]] = {}
    per_stage: list[list[int]] = []
    routing.transfer_colors[op] = per_stage
    for stage in plan.stages:
        per_stage.append([])
        for t in stage.transfers:
            entries = _entries(t, axis, grid)
            color = 0
            while color < budget and not _fits(table, color, axis, grid, entries):
                color += 1
            if color >= budget:
                if not relay:
                    raise PlmrError(
                        f"'{op.name}' along {axis} needs more than the {budget} usable "
                        f"colors of {device.name} at some router (colors 0..{budget - 1} "
                        "are taken); use fewer concurrent collectives, a smaller K, or "
                        "relay mode (mesh-route{relay=true} / --relay)"
                    )
                routing.relayed.add(op)
                per_stage[-1].append(-1)
                continue
            per_stage[-1].append(color)
            for pos, rx, tx in entries:
                table.mark(_rule(color, axis, grid, (pos, pos + 1, 1), rx, tx))
                pending.setdefault((color, rx, tx), set()).add(pos)
            if color not in used:
                used.append(color)
    for (color, rx, tx), positions in sorted(
        pending.items(), key=lambda kv: (kv[0][0], min(kv[1]))
    ):
        for span in compress_positions(sorted(positions)):
            table.add(_rule(color, axis, grid, span, rx, tx))
    return used


def collectives_of(program: mesh.ProgramOp) -> list[Operation]:
    return [op for op in program.walk() if isinstance(op, COLLECTIVES)]


def triple(values: Sequence[int]) -> tuple[int, int, int]:
    """The first three of `values` (a strided range: start, stop, step)."""
    return (values[0], values[1], values[2])


GENERATED = "generated"
"""Attribute marking the `mesh.route` rules that `mesh-route` emitted for collectives."""


def route_program(
    program: mesh.ProgramOp, relay: bool = False, device: Device | None = None
) -> Routing:
    """Routes a program: its hand-written `mesh.route` rules plus its collectives."""
    device = get_device(program.device.spec.data) if device is None else device
    grid = program.grid_shape
    table = RouteTable(grid[0], grid[1])
    for op in program.body.block.ops:
        if isinstance(op, mesh.RouteOp) and GENERATED not in op.attributes:
            r, c = triple(op.rows.get_values()), triple(op.cols.get_values())
            table.add(
                Rule(
                    op.color.value.data,
                    (r[0], r[1], r[2]),
                    (c[0], c[1], c[2]),
                    op.rx.data,
                    op.tx_ports,
                )
            )
    return route_collectives(collectives_of(program), grid, device, relay, table)
