"""`mesh.diagonal_broadcast` on the mesh machine: its data, its timing and its routes."""

from pathlib import Path

import numpy as np
import pytest

from plmr.dialects import mesh
from plmr.dialects.context import make_context, parse_module
from plmr.passes.mesh_route import MeshRoutePass
from plmr.runtime.mesh_machine import run_mesh
from plmr.target.device import get_device
from plmr.target.route_plan import route_program

PROGRAM = Path(__file__).parents[1] / "filecheck/dialects/mesh/diagonal-broadcast.mlir"


def test_each_line_gets_its_diagonal_block():
    # Rows split over x, wanted over y: PE (y, x) holds rows 2x..2x+1 and receives rows
    # 2y..2y+1 from PE (y, y).
    module = parse_module(PROGRAM.read_text())
    a = np.arange(24, dtype=np.float32).reshape(6, 4)
    (got,), _ = run_mesh(module, [a], mode="functional")
    np.testing.assert_array_equal(got, a)


def _moves(n: int, rows: int, diagonal: bool, axis: str = "x") -> str:
    """Rows split over `axis` on an n x n grid, moved to the other axis."""
    other = "y" if axis == "x" else "x"
    total = rows * n
    have = f"!mesh.dist<tensor<{total}x64xf32>, #mesh.layout<[{axis}, -]>>"
    want = f"!mesh.dist<tensor<{total}x64xf32>, #mesh.layout<[{other}, -]>>"
    coord, own = ("%x", "%y") if axis == "x" else ("%y", "%x")
    if diagonal:
        body = f"%r = mesh.diagonal_broadcast %b axis {axis} : tensor<{rows}x64xf32>"
    else:
        # The same move as a sum along the line in which only the diagonal PE adds its
        # block.
        body = f"""%z = tile.fill 0.0 : tensor<{rows}x64xf32>
    %same = arith.cmpi eq, {coord}, {own} : index
    %p = tile.select %same, %b, %z : tensor<{rows}x64xf32>
    %r = mesh.allreduce sum %p axis {axis} : tensor<{rows}x64xf32>"""
    return f"""
mesh.program @m(%a: tensor<{total}x64xf32>) -> tensor<{total}x64xf32> device "wse2" grid [{n}, {n}] {{
  %d = mesh.scatter %a : tensor<{total}x64xf32> -> {have}
  %e = mesh.spmd(%d) : ({have}) -> {want} {{
  ^bb0(%y: index, %x: index, %b: tensor<{rows}x64xf32>):
    {body}
    mesh.yield %r : tensor<{rows}x64xf32>
  }}
  %o = mesh.gather %e : {want} -> tensor<{total}x64xf32>
  mesh.return %o : tensor<{total}x64xf32>
}}
"""


@pytest.mark.parametrize(("n", "axis"), [(2, "x"), (5, "y"), (16, "x"), (32, "y")])
def test_a_diagonal_broadcast_moves_as_the_one_block_sum_did_faster(n: int, axis: str):
    a = np.random.default_rng(n).standard_normal((4 * n, 64)).astype(np.float32)
    cycles = []
    for diagonal in (True, False):
        module = parse_module(_moves(n, 4, diagonal, axis))
        MeshRoutePass().apply(make_context(), module)
        (got,), report = run_mesh(module, [a], mode="functional")
        np.testing.assert_array_equal(got, a)
        cycles.append(report.cycles)
    assert cycles[0] < cycles[1], cycles


@pytest.mark.parametrize("axis", ["x", "y"])
def test_one_color_routes_every_line_to_its_own_root(axis: str):
    # Tracing the color from the diagonal PEs reaches every PE of each one's line, and
    # no other: one route per line, all on one color.
    n = 7
    module = parse_module(_moves(n, 4, True, axis))
    (program,) = [op for op in module.walk() if isinstance(op, mesh.ProgramOp)]
    routing = route_program(program, False)
    (op,) = [op for op in module.walk() if isinstance(op, mesh.DiagonalBroadcastOp)]
    (color,) = routing.colors[op]
    sources = np.eye(n, dtype=bool)
    delivery = routing.table.trace(color, sources)
    pairs = set(
        zip(
            delivery.src_y.tolist(),
            delivery.src_x.tolist(),
            delivery.dst_y.tolist(),
            delivery.dst_x.tolist(),
            strict=True,
        )
    )
    line = [
        (i, i, i, p) if axis == "x" else (i, i, p, i) for i in range(n) for p in range(n)
    ]
    want = {t for t in line if t[2:] != t[:2]}
    assert pairs - {t for t in pairs if t[2:] == t[:2]} == want
    # A second diagonal broadcast along the same axis rides the same routes.
    twice = _moves(n, 4, True, axis).replace(
        "mesh.yield %r",
        f"%r2 = mesh.diagonal_broadcast %r axis {axis} : tensor<4x64xf32>\n    mesh.yield %r2",
    )
    module = parse_module(twice)
    (program,) = [op for op in module.walk() if isinstance(op, mesh.ProgramOp)]
    routing = route_program(program, False)
    colors = {tuple(c) for op, c in routing.colors.items()}
    assert colors == {(color,)}
    assert int(routing.table.colors_per_router().max()) == 1


def test_the_colors_run_out_as_one_error():
    # Every color taken at some router: one error naming the op, or relayed.
    from plmr.errors import PlmrError
    from plmr.target.route_plan import route_collectives
    from plmr.target.routing import RouteTable, Rule

    device = get_device("wse2")
    module = parse_module(_moves(3, 4, True))
    (op,) = [op for op in module.walk() if isinstance(op, mesh.DiagonalBroadcastOp)]
    table = RouteTable(3, 3)
    for color in range(device.usable_colors):
        table.add(Rule(color, (0, 1, 1), (0, 1, 1), mesh.Port.NORTH, (mesh.Port.RAMP,)))
    with pytest.raises(PlmrError, match="needs one of the 21 usable colors"):
        route_collectives([op], (3, 3), device, table=table)
    relayed = route_collectives([op], (3, 3), device, relay=True, table=table)
    assert op in relayed.relayed
