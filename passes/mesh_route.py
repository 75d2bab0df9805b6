"""
`mesh-route`: assigns colors to every collective of a mesh program and emits the route
rules (`mesh.route`) that carry its transfers, router by router.

Each collective is planned as stages of point-to-point transfers along its axis
(`plmr.target.collectives`); every transfer becomes router entries (source ramp → out
port, pass-through routers, destination port → ramp, multicasts merged). Colors are
assigned greedily: a transfer reuses the first color whose existing entries do not
conflict with its own at any router. Collectives with the same pattern share colors.
The result is checked against the device's color budget; with `relay = true`, transfers
that do not fit are marked to be relayed in software (each extra hop costs β).

The planning lives in `plmr.target.route_plan` (the mesh runtime times unrouted programs
with it); this module emits its rules and lowers collectives to explicit sends/receives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    ArrayAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    UnitAttr,
    i64,
)
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from plmr.dialects import mesh, tile
from plmr.target.route_plan import (
    COLLECTIVES,
    GENERATED,
    Routing,
    axis_of,
    collectives_of,
    plan_of,
    roots_of,
    route_collectives,
    route_program,
    triple,
)
from plmr.target.routing import Rule, compress_positions

# ---------------------------------------------------------------------------------------
# Explicit lowering: collectives -> stages of mesh.send / mesh.recv
# ---------------------------------------------------------------------------------------


def _index(value: int) -> Operation:
    return arith.ConstantOp(IntegerAttr(value, IndexType()))


def _member(
    pos: SSAValue, positions: Sequence[int], n: int, out: list[Operation]
) -> SSAValue:
    """An i1 that holds where `pos` is one of `positions` (as strided ranges)."""

    def emit(op: Operation) -> SSAValue:
        out.append(op)
        return op.results[0]

    terms: list[SSAValue] = []
    for start, stop, step in compress_positions(sorted(set(positions))):
        conds: list[SSAValue] = []
        if start > 0:
            conds.append(emit(arith.CmpiOp(pos, emit(_index(start)), "uge")))
        if stop < n:
            conds.append(emit(arith.CmpiOp(pos, emit(_index(stop)), "ult")))
        if step > 1:
            offset = emit(arith.SubiOp(pos, emit(_index(start))))
            rem = emit(arith.RemUIOp(offset, emit(_index(step))))
            conds.append(emit(arith.CmpiOp(rem, emit(_index(0)), "eq")))
        if not conds:
            conds.append(emit(arith.ConstantOp(IntegerAttr(1, IntegerType(1)))))
        term = conds[0]
        for c in conds[1:]:
            term = emit(arith.AndIOp(term, c))
        terms.append(term)
    if not terms:
        return emit(arith.ConstantOp(IntegerAttr(0, IntegerType(1))))
    result = terms[0]
    for t in terms[1:]:
        result = emit(arith.OrIOp(result, t))
    return result


def lowerable(op: Operation, routing: Routing, grid: tuple[int, int]) -> bool:
    """Whether a collective can be written as explicit sends and receives."""
    if op in routing.relayed or op not in routing.transfer_colors:
        return False
    if isinstance(op, mesh.AllreduceOp) and op.algorithm.data == "ring":
        return False  # its steps move 1/n of the block: kept as a collective
    if isinstance(op, mesh.AllgatherOp):
        return False  # its blocks grow along the chains: kept as a collective
    if isinstance(op, mesh.DiagonalBroadcastOp):
        return False  # each line has its own root: kept as a collective
    return len(roots_of(op, grid)) == 1


def lower_collective(op: Operation, routing: Routing, grid: tuple[int, int]) -> None:
    """Replaces a routed collective by its stages of `mesh.send` / `mesh.recv`."""
    spmd = op.parent_op()
    while spmd is not None and not isinstance(spmd, mesh.SpmdOp):
        spmd = spmd.parent_op()
    assert spmd is not None
    axis = axis_of(op)
    pos = spmd.body.block.args[1 if axis == "x" else 0]
    n = mesh.axis_size(axis, grid)
    root = roots_of(op, grid)[0]
    plan = plan_of(op, grid, root)
    colors = routing.transfer_colors[op]
    value: SSAValue = getattr(op, "input")
    t = value.type
    new: list[Operation] = []
    zero = tile.FillOp(0.0, t)
    new.append(zero)
    cur = value
    kind = getattr(op, "kind", None)
    for stage, stage_colors in zip(plan.stages, colors, strict=True):
        groups: dict[int, tuple[set[int], set[int]]] = {}
        for transfer, color in zip(stage.transfers, stage_colors, strict=True):
            senders, receivers = groups.setdefault(color, (set(), set()))
            senders.add(transfer.src)
            receivers.update(transfer.dsts)
        received: list[tuple[SSAValue, SSAValue]] = []
        for color, (senders, receivers) in sorted(groups.items()):
            send_mask = _member(pos, sorted(senders), n, new)
            recv_mask = _member(pos, sorted(receivers), n, new)
            new.append(mesh.SendOp(cur, color, send_mask))
            recv = mesh.RecvOp(t, color, recv_mask)
            new.append(recv)
            received.append((recv_mask, recv.result))
        if isinstance(op, mesh.ShiftOp):
            nxt: SSAValue = zero.result
        else:
            nxt = cur
        for mask, data in received:
            if stage.transfers and stage.transfers[0].combine:
                assert isinstance(kind, mesh.CombineKindAttr)
                combined = tile.MapOp([nxt, data], {"sum": "add"}.get(kind.data, kind.data))
                new.append(combined)
                data = combined.result
            select = tile.SelectOp(mask, data, nxt)
            new.append(select)
            nxt = select.result
        cur = nxt
    if isinstance(op, mesh.ShiftOp) and not plan.stages:
        cur = value
    if isinstance(op, mesh.ReduceOp):
        assert root is not None
        size = mesh.segment_of(op, grid)
        roots = list(range(root, (n // size) * size, size))
        is_root = _member(pos, roots, n, new)
        keep = tile.SelectOp(is_root, cur, zero.result)
        new.append(keep)
        cur = keep.result
    Rewriter.insert_op(new, InsertPoint.before(op))
    Rewriter.replace_op(op, [], [cur])


@dataclass(frozen=True)
class MeshRoutePass(ModulePass):
    """
    Assigns colors to the collectives of every `mesh.program` and emits its route rules.

    Each collective gets a `colors` attribute; the program gets one `mesh.route` per
    rule, e.g. for a 4-PE interleaved shift along x:

    ```mlir
    %r = mesh.shift %b axis x ring interleaved {colors = [0, 1, 2]} : tensor<4x4xf32>
    mesh.route color 0 rows [0, 4, 1] cols [0, 1, 1] from ramp to ["east"]
    ```
    """

    name = "mesh-route"

    relay: bool = False
    """Let collectives that exceed the color budget relay through software (cost β/hop)."""

    explicit: bool = False
    """Also lower each routed collective into its stages of `mesh.send` / `mesh.recv` on
    the assigned colors, with masks of the sending and receiving PEs (ring allreduces,
    relayed collectives and roots that change at run time stay collectives)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for program in [p for p in op.walk() if isinstance(p, mesh.ProgramOp)]:
            self._route(program)

    def _route(self, program: mesh.ProgramOp) -> None:
        generated = [
            o
            for o in program.body.block.ops
            if isinstance(o, mesh.RouteOp) and GENERATED in o.attributes
        ]
        for old in generated:
            Rewriter.erase_op(old)
        routing = route_program(program, self.relay)
        explicit = {
            Rule(
                o.color.value.data,
                triple(o.rows.get_values()),
                triple(o.cols.get_values()),
                o.rx.data,
                o.tx_ports,
            )
            for o in program.body.block.ops
            if isinstance(o, mesh.RouteOp)
        }
        for coll, colors in routing.colors.items():
            coll.attributes["colors"] = ArrayAttr([IntegerAttr(c, i64) for c in colors])
            if coll in routing.relayed:
                coll.attributes["relayed"] = IntegerAttr(1, i64)
        if self.explicit:
            grid = program.grid_shape
            for coll in list(routing.colors):
                if lowerable(coll, routing, grid):
                    lower_collective(coll, routing, grid)
        anchor = program.body.block.last_op
        assert anchor is not None
        for rule in [r for r in routing.table.rules if r not in explicit]:
            route = mesh.RouteOp(rule.color, rule.rows, rule.cols, rule.rx, rule.tx)
            if not self.explicit:
                # Explicit sends and receives rely on these rules: then they are kept.
                route.attributes[GENERATED] = UnitAttr()
            Rewriter.insert_op(route, InsertPoint.before(anchor))


__all__ = [
    "COLLECTIVES",
    "GENERATED",
    "MeshRoutePass",
    "Routing",
    "axis_of",
    "collectives_of",
    "lower_collective",
    "lowerable",
    "plan_of",
    "roots_of",
    "route_collectives",
    "route_program",
]
