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
from plmr.runtime.collectives import Transfer
from plmr.runtime.device import get_device
from plmr.runtime.routing import RouteTable, Rule, compress_positions
from plmr.tools.loading import parse_module

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
    module = parse_module(
        program_with(["%r = mesh.shift %b axis x ring torus : tensor<1x1xf32>"], (2, 4))
    )
    program = the_program(module)
    routing = route_program(program)
    table = routing.table
    # PE 3 now delivers the wrap-around to its own ramp instead of sending it west.
    table.tx[0][0, :, 3] = 1
    stage = plan_of(next(iter(routing.colors)), (2, 4)).stages[0]
    got = traced(table, 0, line_mask("x", (2, 4), {t.src for t in stage.transfers}))
    assert got != expected_deliveries(list(stage.transfers), "x", (2, 4))


# ---------------------------------------------------------------------------------------
# Errors of route tables and tracing
# ---------------------------------------------------------------------------------------


def test_route_conflict_names_the_router_and_the_rule():
    table = RouteTable(4, 4)
    table.add(Rule(2, (0, 4, 1), (0, 4, 1), Port.WEST, (Port.EAST,)))
    table.add(Rule(2, (0, 4, 1), (0, 4, 1), Port.WEST, (Port.EAST,)))  # same: fine
    table.add(Rule(2, (0, 4, 1), (0, 4, 1), Port.NORTH, (Port.RAMP,)))  # other port
    with pytest.raises(PlmrError) as info:
        table.add(Rule(2, (1, 3, 1), (2, 4, 1), Port.WEST, (Port.RAMP, Port.EAST)))
    assert str(info.value) == (
        "route conflict at router (1, 2): color 2 from west already goes elsewhere; "
        "`color 2 rows [1, 3, 1] cols [2, 4, 1] from west to [ramp, east]` needs another "
        "color"
    )
    assert len(table.rules) == 2


def test_rule_outside_the_grid():
    table = RouteTable(2, 2)
    with pytest.raises(PlmrError) as info:
        table.add(Rule(0, (0, 3, 1), (0, 1, 1), Port.RAMP, (Port.SOUTH,)))
    assert str(info.value) == (
        "route `color 0 rows [0, 3, 1] cols [0, 1, 1] from ramp to [south]` covers "
        "routers outside the 2x2 grid"
    )


def test_message_leaving_the_grid():
    table = RouteTable(2, 4)
    table.add(Rule(1, (0, 2, 1), (0, 4, 1), Port.RAMP, (Port.EAST,)))
    table.add(Rule(1, (0, 2, 1), (1, 4, 1), Port.WEST, (Port.RAMP,)))
    sources = np.zeros((2, 4), dtype=bool)
    sources[1, 3] = True
    with pytest.raises(PlmrError) as info:
        table.trace(1, sources)
    assert str(info.value) == (
        "route for color 1 leaves the grid at router (1, 3) towards east"
    )
    # The PEs that do have an eastern neighbour are fine.
    sources[:] = False
    sources[:, :3] = True
    assert traced(table, 1, sources) == {
        (y, x, y, x + 1, 1) for y in range(2) for x in range(3)
    }


def test_message_with_no_route():
    table = RouteTable(3, 3)
    table.add(Rule(4, (0, 3, 1), (0, 3, 1), Port.RAMP, (Port.SOUTH,)))
    table.add(Rule(4, (1, 2, 1), (0, 3, 1), Port.NORTH, (Port.RAMP,)))
    sources = np.zeros((3, 3), dtype=bool)
    sources[1, 2] = True
    with pytest.raises(PlmrError) as info:
        table.trace(4, sources)
    assert str(info.value) == (
        "no route for color 4 at router (2, 2) from north (message from PE (1, 2)); add "
        "a mesh.route rule or run mesh-route"
    )


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
    table = RouteTable(1, 3)
    table.add(Rule(0, (0, 1, 1), (0, 1, 1), Port.RAMP, (Port.EAST,)))
    table.add(Rule(0, (0, 1, 1), (1, 2, 1), Port.WEST, (Port.EAST,)))
    table.add(Rule(0, (0, 1, 1), (2, 3, 1), Port.WEST, (Port.WEST,)))
    table.add(Rule(0, (0, 1, 1), (1, 2, 1), Port.EAST, (Port.WEST,)))
    table.add(Rule(0, (0, 1, 1), (0, 1, 1), Port.EAST, (Port.EAST,)))
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


def test_route_program_rejects_clashing_explicit_rules():
    text = """
mesh.program @p() -> () device "test-small" grid [2, 2] {
  mesh.route color 0 rows [0, 2, 1] cols [0, 1, 1] from ramp to ["east"]
  mesh.route color 0 rows [1, 2, 1] cols [0, 2, 1] from ramp to ["north"]
  mesh.return
}
"""
    program = the_program(parse_module(text))
    with pytest.raises(PlmrError) as info:
        route_program(program)
    assert str(info.value) == (
        "route conflict at router (1, 0): color 0 from ramp already goes elsewhere; "
        "`color 0 rows [1, 2, 1] cols [0, 2, 1] from ramp to [north]` needs another color"
    )


@pytest.mark.xfail(
    strict=True,
    reason="mesh-route erases every mesh.route of a program before routing it, so the "
    "hand-written rules of mesh.send / mesh.recv are lost (route_program then reads no "
    "explicit rules) and the program no longer runs",
)
def test_mesh_route_keeps_hand_written_rules():
    from xdsl.context import Context

    from plmr.passes.mesh_route import MeshRoutePass

    text = """
mesh.program @p() -> () device "test-small" grid [1, 2] {
  mesh.route color 5 rows [0, 1, 1] cols [0, 1, 1] from ramp to ["east"]
  mesh.route color 5 rows [0, 1, 1] cols [1, 2, 1] from west to ["ramp"]
  mesh.return
}
"""
    module = parse_module(text)
    MeshRoutePass().apply(Context(), module)
    routes = [
        op for op in the_program(module).body.block.ops if isinstance(op, mesh.RouteOp)
    ]
    assert len(routes) == 2


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
    "summa": lambda: gemm("summa", 256, 256, 256, (32, 32), "wse2"),
    "gemv-ktree": lambda: gemv("ktree", 256, 256, (32, 32), "wse2"),
    "gemv-ktree-k3": lambda: gemv("ktree", 256, 256, (32, 32), "wse2", k=3),
    "gemv-ktree-g8": lambda: gemv("ktree", 256, 256, (32, 32), "wse2", groups=8),
    "gemv-pipeline": lambda: gemv("pipeline", 256, 256, (32, 32), "wse2"),
    "gemv-ring": lambda: gemv("ring", 256, 256, (32, 32), "wse2"),
}


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
