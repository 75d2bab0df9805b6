"""`mesh.allgather` on the mesh machine: its data, its timing and its routes."""

from pathlib import Path

import numpy as np
import pytest

from plmr.dialects import mesh
from plmr.dialects.context import make_context, parse_module
from plmr.passes.mesh_route import MeshRoutePass
from plmr.runtime.mesh_machine import run_mesh
from plmr.target.collectives import allgather_plan, allreduce_plan

PROGRAM = Path(__file__).parents[1] / "filecheck/dialects/mesh/allgather.mlir"


def test_the_blocks_are_concatenated_on_every_pe():
    module = parse_module(PROGRAM.read_text())
    a = np.arange(96, dtype=np.float32).reshape(8, 12)
    (whole, first), _ = run_mesh(module, [a], mode="functional")
    np.testing.assert_array_equal(whole, a)
    np.testing.assert_array_equal(first, a[:, :6])


def _gathers(n: int, width: int, as_sum: bool) -> str:
    """A row of `width` values split over `n` PEs, gathered."""
    per = width // n
    dist = f"!mesh.dist<tensor<{width}xf32>, #mesh.layout<[x]>>"
    out = f"!mesh.dist<tensor<{width}xf32>, #mesh.layout<[-]>>"
    if as_sum:
        # The same move as a sum of the blocks placed in zeros (one per PE).
        body = f"""
    %z = tile.fill 0.0 : tensor<{per * n}xf32>
    %o = arith.muli %x, %c : index
    %p = tile.store %b, %z[%o] : tensor<{per}xf32> -> tensor<{per * n}xf32>
    %r = mesh.allreduce sum %p axis x : tensor<{per * n}xf32>"""
    else:
        body = f"""
    %r = mesh.allgather %b axis x dim 0 : tensor<{per}xf32> -> tensor<{width}xf32>"""
    return f"""
mesh.program @g(%a: tensor<{width}xf32>) -> tensor<{width}xf32> device "wse2" grid [1, {n}] {{
  %d = mesh.scatter %a : tensor<{width}xf32> -> {dist}
  %e = mesh.spmd(%d) : ({dist}) -> {out} {{
  ^bb0(%y: index, %x: index, %b: tensor<{per}xf32>):
    %c = arith.constant {per} : index{body}
    mesh.yield %r : tensor<{width}xf32>
  }}
  %o = mesh.gather %e : {out} -> tensor<{width}xf32>
  mesh.return %o : tensor<{width}xf32>
}}
"""


@pytest.mark.parametrize(("n", "width"), [(4, 64), (16, 1024), (64, 1024)])
def test_an_allgather_is_a_sum_of_placed_blocks_without_the_adds(n: int, width: int):
    # The same values as the zero-padded sum; faster, since nothing is added on the way.
    a = np.random.default_rng(n).standard_normal(width).astype(np.float32)
    results = []
    for as_sum in (False, True):
        module = parse_module(_gathers(n, width, as_sum))
        MeshRoutePass().apply(make_context(), module)
        (got,), report = run_mesh(module, [a], mode="functional")
        np.testing.assert_array_equal(got, a)
        results.append(report.cycles)
    gather, summed = results
    assert gather < summed


def test_the_plan_is_the_allreduces_without_combines():
    for n, k, groups in [(480, 3, None), (16, 2, 4), (7, 1, None)]:
        reduce = allreduce_plan(n, "ktree", k, groups)
        gather = allgather_plan(n, "ktree", k, groups)
        assert [[(t.src, t.dsts) for t in s.transfers] for s in gather.stages] == [
            [(t.src, t.dsts) for t in s.transfers] for s in reduce.stages
        ]
        assert not any(t.combine for s in gather.stages for t in s.transfers)
        assert any(t.combine for s in reduce.stages for t in s.transfers)


def test_routing_gives_an_allgather_its_colors():
    module = parse_module(PROGRAM.read_text())
    MeshRoutePass().apply(make_context(), module)
    gathers = [op for op in module.walk() if isinstance(op, mesh.AllgatherOp)]
    assert len(gathers) == 2
    assert all(op.attributes.get("colors") for op in gathers)


def test_explicit_routing_keeps_an_allgather_a_collective():
    # `mesh-route{explicit}` writes collectives as sends and receives of their plan's
    # stages; an allgather's blocks grow along its chains, so it stays one op.
    module = parse_module(PROGRAM.read_text())
    MeshRoutePass(explicit=True).apply(make_context(), module)
    assert len([op for op in module.walk() if isinstance(op, mesh.AllgatherOp)]) == 2
    a = np.arange(96, dtype=np.float32).reshape(8, 12)
    (whole, first), _ = run_mesh(module, [a], mode="functional")
    np.testing.assert_array_equal(whole, a)
    np.testing.assert_array_equal(first, a[:, :6])
