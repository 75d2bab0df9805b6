"""
Routing plans read back from a routed program: `attached_routing` rebuilds, from the
`colors` and `mesh.route` rules that `mesh-route` attached, exactly the table that
routing the program again gives (so `mesh-check-limits` and the runtime route once per
compile), and refuses (None: route again) a program whose attached routes are missing,
stale, over budget or relayed without relay. Also: the vectorised `_fits` against a
router-by-router reference, and a plan with repeated stages routed as the same stages
spelled out one by one.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, i64
from xdsl.rewriter import Rewriter

from plmr.dialects import mesh
from plmr.lowering.kernels import gemm, gemv
from plmr.passes.mesh_route import MeshRoutePass
from plmr.target import route_plan
from plmr.target.collectives import Plan, Stage, Transfer, shift_plan
from plmr.target.device import get_device
from plmr.target.route_plan import (
    Routing,
    attached_routing,
    collectives_of,
    program_routing,
    route_program,
)
from plmr.target.routing import PORT_INDEX, PORTS, RouteTable


def routed(module: ModuleOp, relay: bool = False) -> mesh.ProgramOp:
    MeshRoutePass(relay=relay).apply(Context(), module)
    programs = [op for op in module.ops if isinstance(op, mesh.ProgramOp)]
    assert len(programs) == 1
    return programs[0]


def same_routing(a: Routing, b: Routing) -> None:
    assert sorted(a.table.tx) == sorted(b.table.tx)
    for color, table in b.table.tx.items():
        np.testing.assert_array_equal(a.table.tx[color], table)
    assert a.colors == b.colors
    assert a.relayed == b.relayed
    assert a.max_colors == b.max_colors


KERNELS = {
    "meshgemm-6x6": lambda: gemm("meshgemm", 12, 12, 12, (6, 6), "wse2").module,
    "cannon-5x5": lambda: gemm("cannon", 10, 10, 10, (5, 5), "wse2").module,
    "summa-3x4": lambda: gemm("summa", 12, 12, 12, (3, 4), "wse2").module,
    "gemv-ktree-k3-8x4": lambda: gemv("ktree", 16, 16, (8, 4), "wse2", k=3).module,
    "gemv-pipeline-8x4": lambda: gemv("pipeline", 16, 16, (8, 4), "wse2").module,
    "gemv-ring-5x4": lambda: gemv("ring", 16, 16, (5, 4), "wse2").module,
}


@pytest.mark.parametrize("name", KERNELS)
def test_attached_routing_is_the_routing_again(name: str):
    program = routed(KERNELS[name]())
    device = get_device(program.device.spec.data)
    attached = attached_routing(program, False, device)
    assert attached is not None
    same_routing(attached, route_program(program, False, device))


def test_relayed_routes_are_read_back_only_with_relay():
    big = gemm("summa", 256, 256, 256, (32, 32), "wse2").module
    program = routed(big, relay=True)
    device = get_device("wse2")
    attached = attached_routing(program, True, device)
    assert attached is not None
    assert len(attached.relayed) == 2
    same_routing(attached, route_program(program, True, device))
    assert attached_routing(program, False, device) is None


def test_mesh_verify_routes_once(monkeypatch: pytest.MonkeyPatch):
    """After mesh-route, verification and the runtime read the routes back."""
    from plmr.passes.mesh_check_limits import check_program

    program = routed(KERNELS["gemv-ktree-k3-8x4"]())
    calls: list[int] = []
    planner = route_plan.route_collectives

    def counted(*args: object, **kwargs: object) -> Routing:
        calls.append(1)
        return planner(*args, **kwargs)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(route_plan, "route_collectives", counted)
    check = check_program(program)
    assert calls == []
    assert check.max_routes == route_program(program).max_colors
    assert calls == [1]


def first_collective(program: mesh.ProgramOp) -> mesh.CommOp:
    op = collectives_of(program)[0]
    assert isinstance(op, mesh.CommOp)
    return op


def test_a_collective_without_colors_is_routed_again():
    program = routed(KERNELS["meshgemm-6x6"]())
    del first_collective(program).attributes["colors"]
    assert attached_routing(program, False, get_device("wse2")) is None
    # program_routing then plans it, as mesh-route did.
    routing = program_routing(program)
    assert first_collective(program) in routing.colors


def test_missing_rules_are_routed_again():
    program = routed(KERNELS["cannon-5x5"]())
    device = get_device("wse2")
    rules = [op for op in program.body.block.ops if isinstance(op, mesh.RouteOp)]
    assert attached_routing(program, False, device) is not None
    Rewriter.erase_op(rules[-1])
    assert attached_routing(program, False, device) is None
    same_routing(program_routing(program, False, device), route_program(program))


def test_colors_beyond_the_budget_are_routed_again():
    program = routed(KERNELS["gemv-pipeline-8x4"]())
    op = first_collective(program)
    op.attributes["colors"] = ArrayAttr([IntegerAttr(99, i64)])
    assert attached_routing(program, False, get_device("wse2")) is None


def test_a_color_that_does_not_carry_the_transfers_is_routed_again():
    program = routed(KERNELS["gemv-ring-5x4"]())
    device = get_device("wse2")
    op = first_collective(program)
    colors = [c.value.data for c in op.attributes["colors"].data]  # pyright: ignore
    unused = next(c for c in range(device.usable_colors) if c not in colors)
    op.attributes["colors"] = ArrayAttr([IntegerAttr(unused, i64)])
    assert attached_routing(program, False, device) is None


def reference_fits(table: RouteTable, color: int, axis: str, t: Transfer) -> bool:
    """Router by router: free for `color`, or holding exactly this input and outputs."""
    existing = table.tx.get(color)
    if existing is None:
        return True
    for pos, rx, tx in route_plan._entry_arrays(t, axis).entries:  # pyright: ignore[reportPrivateUsage]
        bits = sum(1 << PORT_INDEX[p] for p in tx)
        lines = existing[:, :, pos].T if axis == "x" else existing[:, pos, :].T
        for router in lines:
            used = [i for i in range(len(PORTS)) if router[i] != 0]
            if used and used != [PORT_INDEX[rx]]:
                return False
            if used and router[PORT_INDEX[rx]] != bits:
                return False
    return True


@settings(max_examples=60, deadline=None)
@given(
    axis=st.sampled_from(["x", "y"]),
    configs=st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 31)),
        max_size=12,
    ),
    src=st.integers(0, 5),
    dsts=st.sets(st.integers(0, 5), min_size=1, max_size=3),
)
def test_fits_agrees_with_a_router_by_router_check(
    axis: str,
    configs: list[tuple[int, int, int]],
    src: int,
    dsts: set[int],
):
    table = RouteTable(3, 6) if axis == "x" else RouteTable(6, 3)
    color = table.tx.setdefault(0, np.zeros((5, table.rows, table.cols), dtype=np.uint8))
    for pos, port, bits in configs:
        line = (slice(None), pos) if axis == "x" else (pos, slice(None))
        color[(port, *line)] = bits
    t = Transfer(src, tuple(sorted(dsts)))
    entries = route_plan._entry_arrays(t, axis)  # pyright: ignore[reportPrivateUsage]
    fits = route_plan._fits(table, 0, axis, entries)  # pyright: ignore[reportPrivateUsage]
    assert fits == reference_fits(table, 0, axis, t)


def test_repeated_stages_route_like_distinct_ones():
    """A stage object repeated in a plan gets the colors of the same stage spelled out."""
    shared = shift_plan("torus", 6, 4)
    assert all(s is shared.stages[0] for s in shared.stages)
    spelled = Plan(shared.n, [Stage(tuple(s.transfers)) for s in shared.stages])
    device = get_device("wse2")
    got: list[list[list[int]]] = []
    tables: list[RouteTable] = []
    for plan in (shared, spelled):
        table = RouteTable(1, 6)
        routing = Routing(table)
        op = object()
        route_plan._route_plan(  # pyright: ignore[reportPrivateUsage]
            op,  # pyright: ignore[reportArgumentType]
            plan,
            "x",
            (1, 6),
            device,
            False,
            table,
            routing,
        )
        got.append(routing.transfer_colors[op])  # pyright: ignore[reportArgumentType]
        tables.append(table)
    assert got[0] == got[1]
    assert tables[0].rules == tables[1].rules
    # The torus of 6: 0->1, 2->3, 4->5 share color 0, 1->2, 3->4 color 1, and the
    # westward wrap-around 5->0 crosses both: color 2; every step the same.
    assert got[0] == [[0, 1, 0, 1, 0, 2]] * 4
