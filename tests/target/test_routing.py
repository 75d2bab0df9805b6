"""
Routes against plans: the rules `mesh-route` assigns to a collective, traced through the
route table from the senders of each stage of the collective's plan, must deliver to
exactly the plan's receivers after exactly the plan's hop counts (in every line of the
grid, with no stray deliveries). Also: the errors of route tables and tracing,
`compress_positions`, and the color budget of the MeshGEMM / GEMV kernels at 32x32.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from plmr.dialects import mesh
from plmr.dialects.context import parse_module
from plmr.dialects.mesh import Port
from plmr.errors import PlmrError
from plmr.lowering.kernels import gemm, gemv
from plmr.passes.mesh_route import (
    COLLECTIVES,
    axis_of,
    collectives_of,
    plan_of,
    route_program,
)
from plmr.target.collectives import Transfer
from plmr.target.device import get_device
from plmr.target.routing import PORT_INDEX, RouteTable, Rule, compress_positions

# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------


def program_with(ops: list[str], grid: tuple[int, int], device: str = "wse2") -> str:
    """A program whose spmd body runs `ops` (each `%rN = ... %b ...`) on 1x1 blocks."""
    rows, cols = grid
    t = f"tensor<{rows}x{cols}xf32>"
    d = f"!mesh.dist<{t}, #mesh.layout<[y, x]>>"
    body = "\n".join(f"    {op}" for op in ops)
    return f"""
mesh.program @p(%a: {t}) -> {t} device "{device}" grid [{rows}, {cols}] {{
  %d = mesh.scatter %a : {t} -> {d}
  %e = mesh.spmd(%d) : ({d}) -> {d} {{
  ^bb0(%y: index, %x: index, %b: tensor<1x1xf32>):
    %c0 = arith.constant 0 : index
{body}
    mesh.yield %b : tensor<1x1xf32>
  }}
  %r = mesh.gather %e : {d} -> {t}
  mesh.return %r : {t}
}}
"""


def the_program(module: ModuleOp) -> mesh.ProgramOp:
    programs = [op for op in module.ops if isinstance(op, mesh.ProgramOp)]
    assert len(programs) == 1
    return programs[0]


def line_mask(axis: str, grid: tuple[int, int], positions: set[int]) -> np.ndarray:
    """PEs at `positions` along `axis`, in every line of the grid."""
    mask = np.zeros(grid, dtype=bool)
    idx = sorted(positions)
    if axis == "x":
        mask[:, idx] = True
    else:
        mask[idx, :] = True
    return mask


def expected_deliveries(
    transfers: list[Transfer], axis: str, grid: tuple[int, int]
) -> set[tuple[int, int, int, int, int]]:
    """(src_y, src_x, dst_y, dst_x, hops) of the transfers in every line."""
    lines = grid[0] if axis == "x" else grid[1]
    out: set[tuple[int, int, int, int, int]] = set()
    for t in transfers:
        for d in t.dsts:
            for line in range(lines):
                if axis == "x":
                    out.add((line, t.src, line, d, abs(d - t.src)))
                else:
                    out.add((t.src, line, d, line, abs(d - t.src)))
    return out


def traced(
    table: RouteTable, color: int, sources: np.ndarray
) -> set[tuple[int, int, int, int, int]]:
    d = table.trace(color, sources)
    rows = zip(
        d.src_y.tolist(),
        d.src_x.tolist(),
        d.dst_y.tolist(),
        d.dst_x.tolist(),
        d.hops.tolist(),
        strict=True,
    )
    got = list(rows)
    assert len(got) == len(set(got)), "a message is delivered twice"
    return set(got)


def color_of(
    table: RouteTable, colors: list[int], t: Transfer, axis: str, grid: tuple[int, int]
) -> int:
    """The color among `colors` whose rules carry transfer `t` (alone) exactly."""
    want = expected_deliveries([t], axis, grid)
    found: list[int] = []
    for c in colors:
        try:
            if traced(table, c, line_mask(axis, grid, {t.src})) == want:
                found.append(c)
        except PlmrError:
            continue
    assert found, f"no color of {colors} carries {t} along {axis} on {grid}"
    return found[0]


def check_routes_carry_plans(module: ModuleOp, relay: bool = False) -> int:
    """Traces every stage of every collective; returns the number of stages checked."""
    program = the_program(module)
    grid = program.grid_shape
    routing = route_program(program, relay)
    table = routing.table
    checked = 0
    for op in collectives_of(program):
        plan = plan_of(op, grid)
        axis = axis_of(op)
        colors = routing.colors[op]
        for stage in plan.stages:
            by_color: dict[int, list[Transfer]] = defaultdict(list)
            for t in stage.transfers:
                by_color[color_of(table, colors, t, axis, grid)].append(t)
            for c, transfers in by_color.items():
                senders = line_mask(axis, grid, {t.src for t in transfers})
                assert traced(table, c, senders) == expected_deliveries(
                    transfers, axis, grid
                ), f"{op.name} stage {stage} on color {c}"
            checked += 1
    return checked


# ---------------------------------------------------------------------------------------
# Routes carry plans
# ---------------------------------------------------------------------------------------

GRIDS = [(1, 5), (3, 4), (4, 7), (5, 3), (2, 9), (8, 8), (6, 1)]

COLLECTIVE_OPS = {
    "shift-linear": "%r = mesh.shift %b axis {a} ring linear : tensor<1x1xf32>",
    "shift-torus": "%r = mesh.shift %b axis {a} ring torus : tensor<1x1xf32>",
    "shift-torus-back": "%r = mesh.shift %b axis {a} ring torus distance -1 : tensor<1x1xf32>",
    "shift-interleaved": "%r = mesh.shift %b axis {a} ring interleaved : tensor<1x1xf32>",
    "shift-interleaved-2": "%r = mesh.shift %b axis {a} ring interleaved distance -2 : tensor<1x1xf32>",
    "broadcast": "%r = mesh.broadcast %b axis {a} root %c0 : tensor<1x1xf32>",
    "allreduce-ktree": "%r = mesh.allreduce sum %b axis {a} : tensor<1x1xf32>",
    "allreduce-ktree-k3": "%r = mesh.allreduce max %b axis {a} k = 3 : tensor<1x1xf32>",
    "allreduce-ktree-groups": "%r = mesh.allreduce sum %b axis {a} groups = 2 : tensor<1x1xf32>",
    "allreduce-pipeline": "%r = mesh.allreduce sum %b axis {a} algorithm pipeline : tensor<1x1xf32>",
    "allreduce-ring": "%r = mesh.allreduce min %b axis {a} algorithm ring : tensor<1x1xf32>",
    "reduce-ktree": "%r = mesh.reduce sum %b axis {a} root %c0 : tensor<1x1xf32>",
    "reduce-pipeline": "%r = mesh.reduce sum %b axis {a} root %c0 algorithm pipeline : tensor<1x1xf32>",
    "reduce-ring": "%r = mesh.reduce sum %b axis {a} root %c0 algorithm ring : tensor<1x1xf32>",
}


def applicable(kind: str, axis: str, grid: tuple[int, int]) -> bool:
    n = grid[1] if axis == "x" else grid[0]
    if "interleaved" in kind and n == 2:
        return False
    return not ("groups" in kind and n < 2)


@pytest.mark.parametrize("grid", GRIDS, ids=lambda g: f"{g[0]}x{g[1]}")
@pytest.mark.parametrize("axis", ["x", "y"])
@pytest.mark.parametrize("kind", COLLECTIVE_OPS)
def test_routes_of_one_collective_carry_its_plan(
    kind: str, axis: str, grid: tuple[int, int]
):
    if not applicable(kind, axis, grid):
        pytest.skip("not a valid op on this grid")
    op = COLLECTIVE_OPS[kind].format(a=axis)
    module = parse_module(program_with([op], grid))
    stages = check_routes_carry_plans(module)
    n = grid[1] if axis == "x" else grid[0]
    if n > 1:
        assert stages > 0


@pytest.mark.parametrize("grid", [(5, 5), (4, 7), (8, 3)], ids=lambda g: f"{g[0]}x{g[1]}")
def test_routes_of_many_collectives_share_the_table(grid: tuple[int, int]):
    """Every collective of one program routed together: colors are shared greedily."""
    ops = [
        COLLECTIVE_OPS[kind].format(a=axis).replace("%r =", f"%r{i} =")
        for i, (kind, axis) in enumerate((k, a) for k in COLLECTIVE_OPS for a in ("x", "y"))
    ]
    module = parse_module(program_with(ops, grid, device="wse2:colors=64"))
    assert check_routes_carry_plans(module) > 0


SMALL_KERNELS = {
    "meshgemm-6x6": lambda: gemm("meshgemm", 12, 12, 12, (6, 6), "wse2"),
    "cannon-5x5": lambda: gemm("cannon", 10, 10, 10, (5, 5), "wse2"),
    "summa-3x4": lambda: gemm("summa", 12, 12, 12, (3, 4), "wse2"),
    "gemm_t-7x7": lambda: gemm("gemm_t", 14, 14, 14, (7, 7), "wse2"),
    "gemv-ktree-k3-8x4": lambda: gemv("ktree", 16, 16, (8, 4), "wse2", k=3),
    "gemv-pipeline-8x4": lambda: gemv("pipeline", 16, 16, (8, 4), "wse2"),
    "gemv-ring-5x4": lambda: gemv("ring", 16, 16, (5, 4), "wse2"),
}


@pytest.mark.parametrize("name", SMALL_KERNELS)
def test_routes_of_kernels_carry_their_plans(name: str):
    assert check_routes_carry_plans(SMALL_KERNELS[name]().module) > 0


def test_the_trace_check_can_fail():
    """A rule redirected by hand no longer carries the plan, and the check notices."""
    grid = (2, 4)
    module = parse_module(
        program_with(["%r = mesh.shift %b axis x ring torus : tensor<1x1xf32>"], grid)
    )
    program = the_program(module)
    routing = route_program(program)
    op = next(iter(routing.colors))
    # One configuration per color and router: 0->1 and 2->3 share color 0, 1->2 takes
    # color 1, and the westward wrap-around 3->0 crosses both, so it needs color 2.
    assert routing.colors[op] == [0, 1, 2]
    wrap = Transfer(3, (0,))
    color = color_of(routing.table, routing.colors[op], wrap, "x", grid)
    assert color == 2
    want = expected_deliveries([wrap], "x", grid)
    # PE 3 now delivers the wrap-around to its own ramp instead of sending it west
    # (written into a copy of the bit masks: the table would refuse such a rule).
    broken = RouteTable(*grid, tx={c: t.copy() for c, t in routing.table.tx.items()})
    broken.tx[color][0, :, 3] = 1
    sources = line_mask("x", grid, {3})
    assert traced(routing.table, color, sources) == want
    got = traced(broken, color, sources)
    assert got == {(y, 3, y, 3, 0) for y in range(2)}
    assert got != want


# ---------------------------------------------------------------------------------------
# Errors of route tables and tracing
# ---------------------------------------------------------------------------------------


def test_route_conflict_names_the_router_and_the_rule():
    table = RouteTable(4, 4)
    table.add(Rule(2, (0, 4, 1), (0, 4, 1), Port.WEST, (Port.EAST,)))
    table.add(Rule(2, (0, 4, 1), (0, 4, 1), Port.WEST, (Port.EAST,)))  # same: fine
    table.add(Rule(2, (1, 3, 1), (1, 2, 1), Port.WEST, (Port.EAST,)))  # a part: fine
    table.add(Rule(3, (0, 4, 1), (0, 4, 1), Port.NORTH, (Port.RAMP,)))  # other color
    # Same color, same input port, other outputs.
    with pytest.raises(PlmrError) as info:
        table.add(Rule(2, (1, 3, 1), (2, 4, 1), Port.WEST, (Port.RAMP, Port.EAST)))
    assert str(info.value) == (
        "route conflict at router (1, 2): color 2 is already configured differently "
        "there (a router holds one route per color); `color 2 rows [1, 3, 1] cols "
        "[2, 4, 1] from west to [ramp, east]` needs another color"
    )
    # Same color, another input port: a router holds one input port per color.
    with pytest.raises(PlmrError) as info:
        table.add(Rule(2, (2, 4, 1), (3, 4, 1), Port.NORTH, (Port.RAMP,)))
    assert str(info.value) == (
        "route conflict at router (2, 3): color 2 is already configured differently "
        "there (a router holds one route per color); `color 2 rows [2, 4, 1] cols "
        "[3, 4, 1] from north to [ramp]` needs another color"
    )
    assert len(table.rules) == 3
    # The refused rules left no entries behind.
    assert table.colors_per_router().tolist() == [[2] * 4] * 4
    assert (table.tx[2][PORT_INDEX[Port.WEST]] == 1 << PORT_INDEX[Port.EAST]).all()
    assert not np.delete(table.tx[2], PORT_INDEX[Port.WEST], axis=0).any()


def test_rule_outside_the_grid():
    table = RouteTable(2, 2)
    with pytest.raises(PlmrError) as info:
        table.add(Rule(0, (0, 3, 1), (0, 1, 1), Port.RAMP, (Port.SOUTH,)))
    assert str(info.value) == (
        "route `color 0 rows [0, 3, 1] cols [0, 1, 1] from ramp to [south]` covers "
        "routers outside the 2x2 grid"
    )


def test_message_leaving_the_grid():
    # Even columns send east, odd columns receive from the west; column 4 has no
    # eastern neighbour.
    table = RouteTable(2, 5)
    table.add(Rule(1, (0, 2, 1), (0, 5, 2), Port.RAMP, (Port.EAST,)))
    table.add(Rule(1, (0, 2, 1), (1, 5, 2), Port.WEST, (Port.RAMP,)))
    sources = np.zeros((2, 5), dtype=bool)
    sources[1, 4] = True
    with pytest.raises(PlmrError) as info:
        table.trace(1, sources)
    assert str(info.value) == (
        "route for color 1 leaves the grid at router (1, 4) towards east"
    )
    # The PEs that do have an eastern neighbour are fine.
    sources[:] = False
    sources[:, [0, 2]] = True
    assert traced(table, 1, sources) == {
        (y, x, y, x + 1, 1) for y in range(2) for x in (0, 2)
    }


def test_message_with_no_route():
    # Row 0 sends south; only columns 0 and 1 of row 1 take the message.
    table = RouteTable(3, 3)
    table.add(Rule(4, (0, 1, 1), (0, 3, 1), Port.RAMP, (Port.SOUTH,)))
    table.add(Rule(4, (1, 2, 1), (0, 2, 1), Port.NORTH, (Port.RAMP,)))
    sources = np.zeros((3, 3), dtype=bool)
    sources[0, 2] = True
    with pytest.raises(PlmrError) as info:
        table.trace(4, sources)
    assert str(info.value) == (
        "no route for color 4 at router (1, 2) from north (message from PE (0, 2)); add "
        "a mesh.route rule or run mesh-route"
    )
    # A PE whose router is configured for another input port cannot send on the color.
    sources[:] = False
    sources[1, 0] = True
    with pytest.raises(PlmrError) as info:
        table.trace(4, sources)
    assert str(info.value) == (
        "no route for color 4 at router (1, 0) from ramp (message from PE (1, 0)); add "
        "a mesh.route rule or run mesh-route"
    )
    sources[:] = False
    sources[0, :2] = True
    assert traced(table, 4, sources) == {(0, x, 1, x, 1) for x in range(2)}


def test_message_on_a_color_nobody_routes():
    table = RouteTable(3, 3)
    sources = np.zeros((3, 3), dtype=bool)
    sources[2, 1] = True
    with pytest.raises(PlmrError) as info:
        table.trace(7, sources)
    assert str(info.value) == (
        "PE (2, 1) sends on color 7, but no router has a route for that color"
    )
    # With no sender, an unrouted color delivers nothing.
    assert traced(table, 7, np.zeros((3, 3), dtype=bool)) == set()


def test_routing_loop():
    # 0 -> 1 -> 2 and back 2 -> 1 -> 0 -> 1 ...: routers 0 and 1 would each need two
    # configurations of color 0, which the table refuses.
    loop = [
        Rule(0, (0, 1, 1), (0, 1, 1), Port.RAMP, (Port.EAST,)),
        Rule(0, (0, 1, 1), (1, 2, 1), Port.WEST, (Port.EAST,)),
        Rule(0, (0, 1, 1), (2, 3, 1), Port.WEST, (Port.WEST,)),
        Rule(0, (0, 1, 1), (1, 2, 1), Port.EAST, (Port.WEST,)),
        Rule(0, (0, 1, 1), (0, 1, 1), Port.EAST, (Port.EAST,)),
    ]
    table = RouteTable(1, 3)
    table.extend(loop[:3])
    with pytest.raises(PlmrError, match=r"^route conflict at router \(0, 1\): color 0 "):
        table.add(loop[3])
    # The tracer still guards against a loop in bit masks written directly.
    masks = np.zeros((5, 1, 3), dtype=np.uint8)
    for rule in loop:
        bits = 0
        for p in rule.tx:
            bits |= 1 << PORT_INDEX[p]
        masks[PORT_INDEX[rule.rx], 0, rule.cols[0]] = bits
    table = RouteTable(1, 3, tx={0: masks})
    sources = np.zeros((1, 3), dtype=bool)
    sources[0, 0] = True
    with pytest.raises(PlmrError) as info:
        table.trace(0, sources)
    assert str(info.value) == (
        "routing loop on color 0: a message from PE (0, 0) never reaches a ramp"
    )


def test_trace_multicast_and_link_load():
    table = RouteTable(1, 4)
    table.add(Rule(3, (0, 1, 1), (0, 1, 1), Port.RAMP, (Port.EAST,)))
    table.add(Rule(3, (0, 1, 1), (1, 3, 1), Port.WEST, (Port.RAMP, Port.EAST)))
    table.add(Rule(3, (0, 1, 1), (3, 4, 1), Port.WEST, (Port.RAMP,)))
    sources = np.zeros((1, 4), dtype=bool)
    sources[0, 0] = True
    d = table.trace(3, sources)
    assert traced(table, 3, sources) == {(0, 0, 0, x, x) for x in (1, 2, 3)}
    # One message on each eastward link 0->1, 1->2, 2->3; nothing else.
    east = d.link_load[2]
    assert east.tolist() == [[1, 1, 1, 0]]
    assert int(d.link_load.sum()) == 3


@pytest.mark.parametrize(
    "second, router",
    [
        # Same color and input port, another output.
        ('color 0 rows [1, 2, 1] cols [0, 2, 1] from ramp to ["north"]', (1, 0)),
        # Same color, another input port at a router already configured for it.
        ('color 0 rows [0, 1, 1] cols [0, 2, 1] from west to ["ramp"]', (0, 0)),
    ],
)
def test_route_program_rejects_clashing_explicit_rules(
    second: str, router: tuple[int, int]
):
    text = f"""
mesh.program @p() -> () device "test-small" grid [2, 2] {{
  mesh.route color 0 rows [0, 2, 1] cols [0, 1, 1] from ramp to ["east"]
  mesh.route {second}
  mesh.return
}}
"""
    program = the_program(parse_module(text))
    with pytest.raises(PlmrError) as info:
        route_program(program)
    rendered = second.replace('"', "")
    assert str(info.value) == (
        f"route conflict at router {router}: color 0 is already configured differently "
        f"there (a router holds one route per color); `{rendered}` needs another color"
    )


def test_relay_marks_every_collective_that_does_not_fit():
    shift = "%r{i} = mesh.shift %b axis x ring torus : tensor<1x1xf32>"
    text = program_with(
        [shift.format(i=0), shift.format(i=1)], (1, 8), "wse2:colors=5,reserved_colors=3"
    )
    program = the_program(parse_module(text))
    routing = route_program(program, relay=True)
    # The torus needs 3 colors on a line (see mesh-route.mlir); 2 are usable, so the
    # wrap-around of each of the two (identical) shifts is relayed.
    assert routing.max_colors == 2
    assert set(routing.relayed) == set(collectives_of(program))


HAND_WRITTEN = [
    'mesh.route color 5 rows [0, 1, 1] cols [0, 1, 1] from ramp to ["east"]',
    'mesh.route color 5 rows [0, 1, 1] cols [1, 2, 1] from west to ["ramp"]',
]


def route_ops(module: ModuleOp) -> list[mesh.RouteOp]:
    ops = the_program(module).body.block.ops
    return [op for op in ops if isinstance(op, mesh.RouteOp)]


def rule_of(op: mesh.RouteOp) -> Rule:
    r, c = op.rows.get_values(), op.cols.get_values()
    return Rule(
        op.color.value.data, (r[0], r[1], r[2]), (c[0], c[1], c[2]), op.rx.data, op.tx_ports
    )


def test_mesh_route_keeps_hand_written_rules():
    from xdsl.context import Context

    from plmr.passes.mesh_route import GENERATED, MeshRoutePass

    shift = "%r = mesh.shift %b axis x ring torus : tensor<1x1xf32>"
    text = program_with([shift], (1, 3)).replace(
        "  mesh.return", "".join(f"  {r}\n" for r in HAND_WRITTEN) + "  mesh.return"
    )
    module = parse_module(text)
    MeshRoutePass().apply(Context(), module)
    first = route_ops(module)
    hand = [rule_of(op) for op in first if GENERATED not in op.attributes]
    assert [r.render() for r in hand] == [
        "color 5 rows [0, 1, 1] cols [0, 1, 1] from ramp to [east]",
        "color 5 rows [0, 1, 1] cols [1, 2, 1] from west to [ramp]",
    ]
    generated = [rule_of(op) for op in first if GENERATED in op.attributes]
    # A 3-PE torus shift: 0->1 on color 0, 1->2 on color 1, and the westward
    # wrap-around 2->0 on color 2 (its routers hold colors 0 and 1 differently): 7 entries.
    assert len(generated) == 7
    assert {r.color for r in generated} == {0, 1, 2}
    # A re-run replaces only the generated rules, with the same ones.
    MeshRoutePass().apply(Context(), module)
    again = route_ops(module)
    assert [rule_of(op) for op in again if GENERATED not in op.attributes] == hand
    assert [rule_of(op) for op in again if GENERATED in op.attributes] == generated
    # The hand-written rules still route color 5.
    table = route_program(the_program(module)).table
    sources = np.zeros((1, 3), dtype=bool)
    sources[0, 0] = True
    assert traced(table, 5, sources) == {(0, 0, 0, 1, 1)}


# ---------------------------------------------------------------------------------------
# compress_positions
# ---------------------------------------------------------------------------------------


def covered(ranges: list[tuple[int, int, int]]) -> list[int]:
    return [p for start, stop, step in ranges for p in range(start, stop, step)]


@given(st.sets(st.integers(0, 300), max_size=60))
@settings(max_examples=300, deadline=None)
def test_compress_positions_covers_exactly_the_input(positions: set[int]):
    ranges = compress_positions(sorted(positions))
    cover = covered(ranges)
    assert sorted(cover) == sorted(positions), "every position exactly once"
    assert len(ranges) <= len(positions)
    for start, stop, step in ranges:
        assert step > 0
        assert start < stop
        assert (stop - 1 - start) % step == 0, "stop is one past the last member"


@pytest.mark.parametrize(
    "positions, ranges",
    [
        ([], []),
        ([4], [(4, 5, 1)]),
        ([0, 1, 2, 3], [(0, 4, 1)]),
        ([1, 3, 5, 7], [(1, 8, 2)]),
        ([0, 2, 4, 5], [(0, 5, 2), (5, 6, 1)]),
        ([3, 3, 1], [(1, 4, 2)]),
    ],
)
def test_compress_positions_examples(
    positions: list[int], ranges: list[tuple[int, int, int]]
):
    assert compress_positions(positions) == ranges


# ---------------------------------------------------------------------------------------
# Color budget of the kernels at scale
# ---------------------------------------------------------------------------------------


BIG_KERNELS = {
    "meshgemm": lambda: gemm("meshgemm", 256, 256, 256, (32, 32), "wse2"),
    "cannon": lambda: gemm("cannon", 256, 256, 256, (32, 32), "wse2"),
    "gemm_t": lambda: gemm("gemm_t", 256, 256, 256, (32, 32), "wse2"),
    "gemv-ktree": lambda: gemv("ktree", 256, 256, (32, 32), "wse2"),
    "gemv-ktree-k3": lambda: gemv("ktree", 256, 256, (32, 32), "wse2", k=3),
    "gemv-ktree-g8": lambda: gemv("ktree", 256, 256, (32, 32), "wse2", groups=8),
    "gemv-pipeline": lambda: gemv("pipeline", 256, 256, (32, 32), "wse2"),
    "gemv-ring": lambda: gemv("ring", 256, 256, (32, 32), "wse2"),
}


def test_summa_needs_a_route_per_root():
    # Each step broadcasts from another root; a router holds one route per color, so
    # SUMMA needs about 2 colors per root position (WaferLLM: "N routing paths per core").
    small = the_program(gemm("summa", 64, 64, 64, (8, 8), "wse2").module)
    assert route_program(small).max_colors == 16
    big = the_program(gemm("summa", 256, 256, 256, (32, 32), "wse2").module)
    with pytest.raises(PlmrError, match="needs more than the 21 usable colors of wse2"):
        route_program(big)
    relayed = route_program(big, relay=True)
    assert len(relayed.relayed) == 2
    assert relayed.max_colors <= get_device("wse2").usable_colors


@pytest.mark.parametrize("name", BIG_KERNELS)
def test_kernels_fit_the_color_budget_at_32x32(name: str):
    program = the_program(BIG_KERNELS[name]().module)
    device = get_device(program.device.spec.data)
    routing = route_program(program)
    counts = routing.table.colors_per_router()
    assert counts.shape == (32, 32)
    assert 1 <= counts.max() <= device.usable_colors
    assert routing.max_colors == counts.max()
    assert not routing.relayed
    ops: list[Operation] = [op for op in program.walk() if isinstance(op, COLLECTIVES)]
    assert set(routing.colors) == set(ops)
