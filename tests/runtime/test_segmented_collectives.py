"""Segmented collectives (`segment = S`): data against numpy, timing, routes, explicit form."""

import numpy as np
import pytest

from plmr.dialects import mesh
from plmr.dialects.context import make_context, parse_module
from plmr.dialects.printing import module_text
from plmr.errors import PlmrError
from plmr.passes.mesh_route import MeshRoutePass
from plmr.runtime.mesh_machine import run_mesh
from plmr.target.collectives import allreduce_plan, segmented_plan


def program(op: str, rows: int, cols: int, root: int = 0, grid_x: int = 2) -> str:
    """A program applying `op` (text using %b and %r) to `[rows, cols]` blocks of 1x1."""
    t = f"tensor<{rows}x{cols}xf32>"
    d = f"!mesh.dist<{t}, #mesh.layout<[y, x]>>"
    return f"""
mesh.program @p(%a: {t}) -> {t} device "wse2" grid [{rows}, {grid_x}] {{
  %d = mesh.scatter %a : {t} -> {d}
  %e = mesh.spmd(%d) : ({d}) -> {d} {{
  ^bb0(%y: index, %x: index, %b: tensor<1x{cols // grid_x}xf32>):
    %r = arith.constant {root} : index
    %s = {op} : tensor<1x{cols // grid_x}xf32>
    mesh.yield %s : tensor<1x{cols // grid_x}xf32>
  }}
  %o = mesh.gather %e : {d} -> {t}
  mesh.return %o : {t}
}}
"""


def segments(x: np.ndarray, s: int) -> tuple[np.ndarray, int]:
    """Rows of `x` as (segments, S, cols) and the number of rows in whole segments."""
    whole = (x.shape[0] // s) * s
    return x[:whole].reshape(x.shape[0] // s, s, x.shape[1]), whole


@pytest.mark.parametrize("rows,s", [(7, 3), (8, 4), (9, 9), (6, 1), (10, 5)])
@pytest.mark.parametrize("kind", ["sum", "max", "min"])
@pytest.mark.parametrize("algorithm", ["ktree", "pipeline", "ring"])
def test_segmented_allreduce_matches_numpy(rows: int, s: int, kind: str, algorithm: str):
    x = np.random.default_rng(rows * s).standard_normal((rows, 4)).astype(np.float32)
    op = f"mesh.allreduce {kind} %b axis y algorithm {algorithm} segment = {s}"
    (got,), _ = run_mesh(parse_module(program(op, rows, 4)), [x])
    seg, whole = segments(x, s)
    fn = {"sum": np.sum, "max": np.max, "min": np.min}[kind]
    want = x.copy()
    want[:whole] = np.broadcast_to(fn(seg, axis=1, keepdims=True), seg.shape).reshape(
        whole, 4
    )
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows,s,root", [(7, 3, 1), (8, 4, 3), (5, 5, 0)])
def test_segmented_reduce_and_broadcast_match_numpy(rows: int, s: int, root: int):
    x = np.random.default_rng(rows).standard_normal((rows, 4)).astype(np.float32)
    seg, whole = segments(x, s)
    op = f"mesh.reduce sum %b axis y root %r groups = 1 segment = {s}"
    (got,), _ = run_mesh(parse_module(program(op, rows, 4, root)), [x])
    want = np.zeros_like(x)
    want[root:whole:s] = seg.sum(axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    op = f"mesh.broadcast %b axis y root %r segment = {s}"
    (got,), _ = run_mesh(parse_module(program(op, rows, 4, root)), [x])
    want = x.copy()
    want[:whole] = np.repeat(seg[:, root], s, axis=0)
    np.testing.assert_array_equal(got, want)


def test_a_segment_root_outside_the_segment_is_an_error():
    text = program("mesh.broadcast %b axis y root %r segment = 3", 7, 4, root=3)
    with pytest.raises(PlmrError, match="root 3 is outside the 3 PEs"):
        run_mesh(parse_module(text), [np.zeros((7, 4), np.float32)])


def test_segmented_plan_tiles_the_segment_plan():
    base = allreduce_plan(4, "ktree", 2, None)
    plan = segmented_plan(base, 10)
    assert plan.n == 10
    assert len(plan.stages) == len(base.stages)
    for seg_stage, stage in zip(base.stages, plan.stages, strict=True):
        assert len(stage.transfers) == 2 * len(seg_stage.transfers)
        # No transfer leaves its segment; positions 8 and 9 take no part.
        for t in stage.transfers:
            assert all(d // 4 == t.src // 4 for d in t.dsts)
            assert t.src < 8
    assert segmented_plan(base, 10) is plan
    assert segmented_plan(base, 4) is base
    with pytest.raises(PlmrError, match="a segment of 4 PEs does not fit a line of 3"):
        segmented_plan(base, 3)


def cycles(op: str, rows: int) -> float:
    text = program(op, rows, 64, grid_x=1)
    _, report = run_mesh(
        parse_module(text), [np.zeros((rows, 64), np.float32)], mode="timing"
    )
    return report.cycles


def test_a_segment_is_timed_like_a_line_of_its_length():
    # Segments of 8 on 64 PEs run at once: as long as one allreduce on an 8-PE line,
    # far shorter than the 64-PE allreduce.
    whole = cycles("mesh.allreduce sum %b axis y", 64)
    seg = cycles("mesh.allreduce sum %b axis y segment = 8", 64)
    line = cycles("mesh.allreduce sum %b axis y", 8)
    assert seg == pytest.approx(line, rel=0.05)
    assert seg < 0.6 * whole


def test_explicit_routes_compute_the_same():
    x = np.random.default_rng(5).standard_normal((7, 4)).astype(np.float32)
    for op in (
        "mesh.allreduce sum %b axis y segment = 3",
        "mesh.reduce max %b axis y root %r segment = 3",
        "mesh.broadcast %b axis y root %r segment = 2",
    ):
        text = program(op, 7, 4, root=1)
        (want,), _ = run_mesh(parse_module(text), [x])
        module = parse_module(text)
        MeshRoutePass(explicit=True).apply(make_context(), module)
        module.verify()
        lowered = module_text(module)
        assert "mesh.send" in lowered
        assert op.split()[0] + " " not in lowered
        (got,), _ = run_mesh(parse_module(lowered), [x])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_segment_of():
    module = parse_module(program("mesh.allreduce sum %b axis y segment = 3", 7, 4))
    ops = [o for o in module.walk() if isinstance(o, mesh.AllreduceOp)]
    assert mesh.segment_of(ops[0], (7, 2)) == 3
    module = parse_module(program("mesh.allreduce sum %b axis y", 7, 4))
    ops = [o for o in module.walk() if isinstance(o, mesh.AllreduceOp)]
    assert mesh.segment_of(ops[0], (7, 2)) == 7


@pytest.mark.parametrize(
    "n,elems,segment", [(64, 32, None), (64, 32, 8), (128, 256, 32), (420, 320, 128)]
)
def test_line_cycles_is_the_runtime_timing_of_one_collective(
    n: int, elems: int, segment: int | None
):
    from plmr.target.collective_stages import line_cycles
    from plmr.target.device import get_device

    op = "mesh.allreduce sum %b axis y"
    plan = allreduce_plan(segment or n, "ktree", 2, None)
    if segment is not None:
        op += f" segment = {segment}"
        plan = segmented_plan(plan, n)
    text = program(op, n, elems, grid_x=1)
    zeros = np.zeros((n, elems), np.float32)
    _, report = run_mesh(parse_module(text), [zeros], mode="timing")
    estimate = float(line_cycles(plan, elems, get_device("wse2")).max())
    assert estimate == pytest.approx(report.cycles, rel=0.02)
