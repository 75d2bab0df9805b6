"""`mesh-shape-trees`: K-trees with a line's groups compute what the default trees did."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from xdsl.dialects.builtin import IntegerAttr, ModuleOp

from plmr.dialects import mesh
from plmr.dialects.context import parse_module
from plmr.errors import PassOptionError
from plmr.passes.mesh_trees import (
    TRIES,
    allreduce_cycles,
    group_options,
    shape_program,
    shape_trees,
)
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.mesh_machine import run_mesh
from plmr.target.collectives import ktree_levels
from plmr.target.device import get_device

LINE = """
mesh.program @line(%a: tensor<6xNxf32>) -> (tensor<6xf32>, tensor<6xf32>) device "wse2" grid [1, N] {
  %da = mesh.scatter %a : tensor<6xNxf32> -> !mesh.dist<tensor<6xNxf32>, #mesh.layout<[-, x]>>
  %s, %t = mesh.spmd(%da) : (!mesh.dist<tensor<6xNxf32>, #mesh.layout<[-, x]>>) -> (!mesh.dist<tensor<6xf32>, #mesh.layout<[-]>>, !mesh.dist<tensor<6xf32>, #mesh.layout<[-]>>) {
  ^bb0(%y: index, %x: index, %blk: tensor<6x1xf32>):
    %q = tile.reshape %blk : tensor<6x1xf32> -> tensor<6xf32>
    %r = mesh.allreduce sum %q axis x k = K : tensor<6xf32>
    %m = mesh.allreduce max %q axis x k = K : tensor<6xf32>
    mesh.yield %r, %m : tensor<6xf32>, tensor<6xf32>
  }
  %rs = mesh.gather %s : !mesh.dist<tensor<6xf32>, #mesh.layout<[-]>> -> tensor<6xf32>
  %rt = mesh.gather %t : !mesh.dist<tensor<6xf32>, #mesh.layout<[-]>> -> tensor<6xf32>
  mesh.return %rs, %rt : tensor<6xf32>, tensor<6xf32>
}
"""


def line(n: int, k: int) -> ModuleOp:
    return parse_module(LINE.replace("N", str(n)).replace("K", str(k)))


def allreduces(module: ModuleOp) -> list[mesh.AllreduceOp]:
    return [op for op in module.walk() if isinstance(op, mesh.AllreduceOp)]


def groups_of(module: ModuleOp) -> list[int | None]:
    return [
        None if op.groups is None else op.groups.value.data for op in allreduces(module)
    ]


@pytest.mark.parametrize("n", [7, 63, 97, 255])
@pytest.mark.parametrize("k", [2, 3])
def test_every_shape_computes_the_same(n: int, k: int):
    """
    Each groups the pass may choose, on odd lines: the mesh machine's sums and maxima
    of random blocks are those of the default tree (and of numpy)."""
    rng = np.random.default_rng(n * 10 + k)
    a = rng.standard_normal((6, n)).astype(np.float32)
    (want_sum, want_max), _ = run_mesh(line(n, k), [a])
    np.testing.assert_allclose(want_sum, a.sum(axis=1), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(want_max, a.max(axis=1))
    options = group_options(n)
    assert options[0] is None
    assert len(options) > 1
    for groups in options[1:]:
        assert groups is not None
        module = line(n, k)
        for op in allreduces(module):
            op.properties["groups"] = IntegerAttr(groups, 64)
        module.verify()
        assert len(ktree_levels(n, k, groups)[0]) == groups
        (got_sum, got_max), _ = run_mesh(module, [a])
        np.testing.assert_allclose(got_sum, want_sum, rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(got_max, want_max)
    # The pass's own choice too, and it is the fastest of the options on the line.
    module = line(n, k)
    (shape,) = shape_trees(module)
    (got_sum, got_max), _ = run_mesh(module, [a])
    np.testing.assert_allclose(got_sum, want_sum, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got_max, want_max)
    device = get_device("wse2")
    ops = allreduces(module)
    best = min(sum(allreduce_cycles(op, g, (1, n), device) for op in ops) for g in options)
    assert shape.cycles == pytest.approx(best)
    assert shape.cycles <= shape.default_cycles
    assert groups_of(module) == [shape.groups] * 2


@pytest.mark.parametrize("n", [97, 255])
def test_the_shaped_line_is_faster_in_the_simulator(n: int):
    """The mesh machine's timing, off -> on: the chosen groups save what the pass said."""
    zeros = [np.zeros((6, n), np.float32)]
    _, before = run_mesh(line(n, 3), zeros, mode="timing")
    module = line(n, 3)
    (shape,) = shape_trees(module)
    assert shape.groups is not None
    _, after = run_mesh(module, zeros, mode="timing")
    assert after.cycles < before.cycles
    saved = shape.default_cycles - shape.cycles
    assert before.cycles - after.cycles == pytest.approx(saved, rel=0.25)


def test_a_shape_that_does_not_route_is_undone():
    module = line(255, 3)
    (program,) = [op for op in module.ops if isinstance(op, mesh.ProgramOp)]
    asked: list[list[int | None]] = []

    def refuse(p: mesh.ProgramOp) -> bool:
        asked.append(groups_of(module))
        return False

    (shape,) = shape_program(program, refuse)
    # The fastest shapes are tried (at most TRIES), each undone.
    assert len(asked) == TRIES
    assert all(groups[0] is not None for groups in asked)
    assert not shape.routed
    assert shape.groups is None
    assert groups_of(module) == [None, None]
    assert shape.cycles == shape.default_cycles


def test_phases_let_a_line_take_a_deeper_tree():
    """
    With `phases`, the K = 2 trees of a 255-PE line become the K = 3 tree with the
    best groups (what `gemv = auto` chose had to fit the colors of the whole program);
    the results are unchanged on random inputs and the simulator's cycles fall."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((6, 255)).astype(np.float32)
    (want_sum, want_max), _ = run_mesh(line(255, 2), [a])
    _, before = run_mesh(line(255, 2), [a], mode="timing")
    module = line(255, 2)
    (kept,) = shape_trees(line(255, 2))
    assert kept.k == 2
    (shape,) = shape_trees(module, phases=(2, 3))
    assert shape.k == 3
    assert shape.groups is not None
    assert [op.k.value.data for op in allreduces(module)] == [3, 3]
    assert shape.cycles < kept.cycles
    (got_sum, got_max), _ = run_mesh(module, [a])
    _, after = run_mesh(module, [a], mode="timing")
    np.testing.assert_allclose(got_sum, a.sum(axis=1), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got_max, want_max)
    np.testing.assert_allclose(want_sum, a.sum(axis=1), rtol=1e-4, atol=1e-4)
    assert after.cycles < before.cycles
    with pytest.raises(PassOptionError, match="phases must be at least 2"):
        shape_trees(line(255, 2), phases=(1, 3))


def test_own_groups_and_other_algorithms_are_left_alone():
    module = line(97, 3)
    first, second = allreduces(module)
    first.properties["groups"] = IntegerAttr(5, 64)
    second.properties["algorithm"] = mesh.AllreduceOp(
        "max", second.operands[0], "x", "pipeline"
    ).algorithm
    assert shape_trees(module) == []
    assert groups_of(module) == [5, None]


GEMV = """
func.func @gemv(%x: tensor<1x255xf32>, %w: tensor<255x8xf32>) -> tensor<1x8xf32> {
  %y = graph.matmul %x, %w : (tensor<1x255xf32>, tensor<255x8xf32>) -> tensor<1x8xf32>
  func.return %y : tensor<1x8xf32>
}
"""


def test_the_pipeline_shapes_trees_under_gemv_auto_only():
    from plmr.dialects.context import make_context

    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 255)).astype(np.float32)
    w = rng.standard_normal((255, 8)).astype(np.float32)
    base = CompileOptions(grid=(255, 2), substitute=False, tile_sizes=(4, 1), gemv="auto")
    results: dict[tuple[str, bool], tuple[list[int | None], float]] = {}
    for gemv, shape in (("auto", True), ("auto", False), ("ktree", True)):
        opts = dataclasses.replace(base, gemv=gemv, shape_trees=shape)
        module = compile_module(make_context(), parse_module(GEMV), opts)
        (got,), _ = run_mesh(module, [x, w])
        np.testing.assert_allclose(got, x @ w, rtol=1e-4, atol=1e-4)
        _, timed = run_mesh(module, [x, w], mode="timing")
        results[gemv, shape] = (groups_of(module), timed.cycles)
    assert results["auto", True][0]
    assert all(g is not None for g in results["auto", True][0])
    assert results["auto", False][0] == [None] * len(results["auto", False][0])
    assert results["ktree", True][0] == [None] * len(results["ktree", True][0])
    assert results["auto", True][1] < results["auto", False][1]
