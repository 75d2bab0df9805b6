"""
Routing plans of mesh programs: the stages of point-to-point transfers each collective
makes (`plmr.target.collectives`), turned into router entries (source ramp → out port,
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
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import cast

import numpy as np
import numpy.typing as npt
from xdsl.dialects import arith
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr
from xdsl.ir import Attribute, Operation

from plmr.dialects import mesh
from plmr.errors import PlmrError
from plmr.target.collectives import (
    Plan,
    Stage,
    Transfer,
    allgather_plan,
    allreduce_plan,
    along_y,
    broadcast_plan,
    reduce_plan,
    segmented_plan,
    shift_plan,
    transfer_path,
)
from plmr.target.device import Device, get_device
from plmr.target.routing import PORT_INDEX, RouteTable, Rule, compress_positions

COLLECTIVES = (
    mesh.ShiftOp,
    mesh.BroadcastOp,
    mesh.AllreduceOp,
    mesh.AllgatherOp,
    mesh.ReduceOp,
    mesh.DiagonalBroadcastOp,
)


def plan_of(op: Operation, grid: tuple[int, int], root: int | None = None) -> Plan:
    """The plan of a collective op on a `[rows, cols]` grid (`root` for rooted ops)."""
    if isinstance(op, mesh.ShiftOp):
        n = mesh.axis_size(op.axis.data, grid)
        return shift_plan(op.ring.data, n, op.distance.value.data)
    segment = mesh.segment_of(op, grid)
    n = mesh.axis_size(axis_of(op), grid)
    if segment != n:
        # The segment's plan, run by every whole segment of the line.
        return segmented_plan(_line_plan(op, segment, root), n)
    return _line_plan(op, n, root)


def _line_plan(op: Operation, n: int, root: int | None) -> Plan:
    """The plan of a broadcast or reduction over a line of `n` PEs."""
    if isinstance(op, mesh.BroadcastOp):
        return broadcast_plan(n, 0 if root is None else root)
    if isinstance(op, mesh.DiagonalBroadcastOp):
        # Each line multicasts from its own root: the slowest line's, at an end (the
        # routes and the timing treat the lines one by one).
        return broadcast_plan(n, 0 if root is None else root)
    if isinstance(op, mesh.AllreduceOp):
        groups = None if op.groups is None else op.groups.value.data
        return allreduce_plan(n, op.algorithm.data, op.k.value.data, groups)
    if isinstance(op, mesh.AllgatherOp):
        groups = None if op.groups is None else op.groups.value.data
        return allgather_plan(n, op.algorithm.data, op.k.value.data, groups)
    if isinstance(op, mesh.ReduceOp):
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


@dataclass(frozen=True)
class _Entries:
    """A transfer's router entries along its line: positions, input port, output bits."""

    entries: list[tuple[int, mesh.Port, tuple[mesh.Port, ...]]]
    positions: npt.NDArray[np.int64]
    rx: npt.NDArray[np.int64]
    bits: npt.NDArray[np.int64]


@lru_cache(maxsize=65536)
def _entry_arrays(t: Transfer, axis: str) -> _Entries:
    entries = _entries(t, axis, (0, 0))
    bits = [sum(1 << PORT_INDEX[p] for p in tx) for _, _, tx in entries]
    return _Entries(
        entries,
        np.array([pos for pos, _, _ in entries], dtype=np.int64),
        np.array([PORT_INDEX[rx] for _, rx, _ in entries], dtype=np.int64),
        np.array(bits, dtype=np.int64),
    )


def _configs(table: npt.NDArray[np.uint8], axis: str, e: _Entries) -> npt.NDArray[np.uint8]:
    """(5, k, L): the configuration of `color` at the k lines of routers of `e`."""
    if axis == "x":
        return table[:, :, e.positions].transpose(0, 2, 1)
    return table[:, e.positions, :]


def _fits(table: RouteTable, color: int, axis: str, e: _Entries) -> bool:
    """Whether every router on the path is free for `color`, or already configured alike."""
    existing = table.tx.get(color)
    if existing is None:
        return True
    config = _configs(existing, axis, e)
    used = np.count_nonzero(config, axis=0)
    k = np.arange(e.positions.size)
    same = config[e.rx, k] == e.bits[:, None]
    # A router holds one configuration per color: free, or this input with these outputs.
    return bool(((used == 0) | (same & (used == 1))).all())


def _carries(table: RouteTable, color: int, axis: str, e: _Entries) -> bool:
    """Whether `color`'s rules already forward as the transfer's entries need."""
    existing = table.tx.get(color)
    if existing is None:
        return False
    config = _configs(existing, axis, e)
    k = np.arange(e.positions.size)
    return bool((config[e.rx, k] == e.bits[:, None]).all())


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
    diagonal: dict[str, list[int]] = {}
    for op in ops:
        axis = axis_of(op)
        if isinstance(op, mesh.DiagonalBroadcastOp):
            # Every diagonal broadcast along an axis has the same routes: the first's
            # color carries the others.
            if axis not in diagonal:
                diagonal[axis] = _route_diagonal(op, axis, grid, device, relay, table)
            routing.colors[op] = list(diagonal[axis])
            if not routing.colors[op] and grid[0] > 1:
                routing.relayed.add(op)
            continue
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
    return list(range(mesh.segment_of(op, grid)))


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
    # A stage that repeats (a ring's steps, a shift by several positions) gets the colors
    # it got the first time: those still fit (its routers hold its own configuration),
    # the ones before them still do not (the table only grew).
    seen: dict[int, tuple[Stage, list[int]]] = {}
    for stage in plan.stages:
        again = seen.get(id(stage))
        if again is not None and again[0] is stage:
            per_stage.append(list(again[1]))
            continue
        per_stage.append([])
        seen[id(stage)] = (stage, per_stage[-1])
        for t in stage.transfers:
            e = _entry_arrays(t, axis)
            color = 0
            while color < budget and not _fits(table, color, axis, e):
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
            table.set_lines(color, axis, e.positions, e.rx, e.bits)
            for pos, rx, tx in e.entries:
                pending.setdefault((color, rx, tx), set()).add(pos)
            if color not in used:
                used.append(color)
    for (color, rx, tx), positions in sorted(
        pending.items(), key=lambda kv: (kv[0][0], min(kv[1]))
    ):
        for span in compress_positions(sorted(positions)):
            table.add(_rule(color, axis, grid, span, rx, tx))
    return used


@lru_cache(maxsize=64)
def _diagonal_config(
    axis: str, n: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], list[Rule]]:
    """
    The router entries of a diagonal broadcast on an `n x n` grid: the input port index
    and output bits of every router (H, W), and the rules that set them (line by line:
    the root's multicast both ways, the positions before it from the far side, those
    after it from the near side, the ends delivering only). Cached: never modify them.
    """
    fwd, back = (
        (mesh.Port.EAST, mesh.Port.WEST)
        if axis == "x"
        else (mesh.Port.SOUTH, mesh.Port.NORTH)
    )
    index = np.arange(n)
    line, pos = index[:, None], index[None, :]
    rx = np.where(
        pos == line,
        PORT_INDEX[mesh.Port.RAMP],
        np.where(pos > line, PORT_INDEX[back], PORT_INDEX[fwd]),
    )
    ramp, east, west = (
        1 << PORT_INDEX[mesh.Port.RAMP],
        1 << PORT_INDEX[fwd],
        1 << PORT_INDEX[back],
    )
    onward = np.where(pos > line, east * (pos < n - 1), west * (pos > 0))
    bits = np.where(
        pos == line, east * (pos < n - 1) + west * (pos > 0), ramp + onward
    ).astype(np.int64)
    rules: list[Rule] = []
    for l in range(n):
        spans: list[tuple[int, int, mesh.Port, tuple[mesh.Port, ...]]] = []
        if l > 0:
            spans.append((0, 1, fwd, (mesh.Port.RAMP,)))
            spans.append((1, l, fwd, (mesh.Port.RAMP, back)))
        out = tuple(p for p, ok in ((fwd, l < n - 1), (back, l > 0)) if ok)
        if out:
            spans.append((l, l + 1, mesh.Port.RAMP, out))
        if l < n - 1:
            spans.append((l + 1, n - 1, back, (mesh.Port.RAMP, fwd)))
            spans.append((n - 1, n, back, (mesh.Port.RAMP,)))
        for start, stop, port, tx in spans:
            if start >= stop:
                continue
            order = tuple(
                q
                for q in (
                    mesh.Port.RAMP,
                    mesh.Port.NORTH,
                    mesh.Port.SOUTH,
                    mesh.Port.EAST,
                    mesh.Port.WEST,
                )
                if q in tx
            )
            lines, along = (l, l + 1, 1), (start, stop, 1)
            rows, cols = (lines, along) if axis == "x" else (along, lines)
            rules.append(Rule(-1, rows, cols, port, order))
    if axis == "y":
        rx, bits = rx.T, bits.T
    return rx, bits, rules


def _route_diagonal(
    op: Operation,
    axis: str,
    grid: tuple[int, int],
    device: Device,
    relay: bool,
    table: RouteTable,
) -> list[int]:
    """
    One color for a diagonal broadcast: the first whose routers are free or already set
    alike at every router of the grid (the routes of an earlier diagonal broadcast along
    the same axis); none (relayed) when no color fits and `relay`.
    """
    n = grid[0]
    if n < 2:
        return []
    rx, bits, rules = _diagonal_config(axis, n)
    ys, xs = np.indices(grid)
    for color in range(device.usable_colors):
        existing = table.tx.get(color)
        if existing is not None:
            used = np.count_nonzero(existing, axis=0)
            same = existing[rx, ys, xs] == bits
            if not ((used == 0) | (same & (used == 1))).all():
                continue
            if (same & (used == 1)).all():
                return [color]  # an earlier diagonal broadcast's routes carry it
        for rule in rules:
            table.add(replace(rule, color=color))
        return [color]
    if not relay:
        raise PlmrError(
            f"'{op.name}' along {axis} needs one of the {device.usable_colors} usable "
            f"colors of {device.name} free at every router (colors 0.."
            f"{device.usable_colors - 1} are taken); use fewer concurrent collectives or "
            "relay mode (mesh-route{relay=true} / --relay)"
        )
    return []


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


def program_routing(
    program: mesh.ProgramOp, relay: bool = False, device: Device | None = None
) -> Routing:
    """
    The routing of a program: read back from the colors and `mesh.route` rules that
    `mesh-route` attached when they carry every collective within the device's colors
    (what routing it again would give), else planned by `route_program`.
    """
    device = get_device(program.device.spec.data) if device is None else device
    attached = attached_routing(program, relay, device)
    return attached if attached is not None else route_program(program, relay, device)


def attached_routing(
    program: mesh.ProgramOp, relay: bool, device: Device
) -> Routing | None:
    """
    The routing `mesh-route` left on a program: every rule in one table, each
    collective's `colors`. None when the program does not carry one that routing it
    again would reproduce: a collective without colors, a color beyond the device's
    budget, a relayed collective without `relay`, clashing rules, or a transfer of a
    collective that no rule of its colors carries.
    """
    ops = collectives_of(program)
    if not ops:
        return None
    budget = device.usable_colors
    colors: dict[Operation, list[int]] = {}
    relayed: set[Operation] = set()
    for op in ops:
        attr = op.attributes.get("colors")
        if not isinstance(attr, ArrayAttr):
            return None
        items = cast(tuple[Attribute, ...], attr.data)
        values = [a.value.data for a in items if isinstance(a, IntegerAttr)]
        if len(values) != len(items) or any(not 0 <= c < budget for c in values):
            return None
        if "relayed" in op.attributes:
            if not relay:
                return None
            relayed.add(op)
        colors[op] = values
    grid = program.grid_shape
    table = RouteTable(grid[0], grid[1])
    try:
        for op in program.body.block.ops:
            if isinstance(op, mesh.RouteOp):
                table.add(_rule_of(op))
    except PlmrError:
        return None
    checked: set[tuple[str, int, tuple[int, ...]]] = set()
    stages: list[Stage] = []  # keeps the checked stages (and so their ids) alive
    for op in ops:
        if op in relayed:
            continue
        axis = axis_of(op)
        for root in roots_of(op, grid):
            for stage in plan_of(op, grid, root).stages:
                key = (axis, id(stage), tuple(colors[op]))
                if key in checked:
                    continue
                for t in stage.transfers:
                    e = _entry_arrays(t, axis)
                    if not any(_carries(table, c, axis, e) for c in colors[op]):
                        return None
                checked.add(key)
                stages.append(stage)
    routing = Routing(table, colors, relayed)
    counts = table.colors_per_router()
    routing.max_colors = int(counts.max()) if counts.size else 0
    return routing


def _rule_of(op: mesh.RouteOp) -> Rule:
    return Rule(
        op.color.value.data,
        triple(op.rows.get_values()),
        triple(op.cols.get_values()),
        op.rx.data,
        op.tx_ports,
    )
