"""
Padded blocks (`convert-loop-to-tile{fit spread}`): a parallel dimension no axis divides
is cut in blocks of `ceil(extent / n)` elements, the last ending past the extent (its
loads padded, its stores clipped), one block per PE instead of a run of one-element
blocks. The tile program and the mesh program compiled from it equal the graph program
on random inputs, on odd and non-square grids, with a non-linear epilogue on the padded
lanes.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects import tile
from plmr.dialects.context import make_context, parse_module
from plmr.lowering.loop_to_tile import ConvertLoopToTilePass
from plmr.lowering.tile_to_mesh import NestPlan, lower_module, parse_options
from plmr.passes.blocking_search import blocking_trials
from plmr.passes.pipeline import CompileOptions, to_loop_level
from plmr.runtime.mesh_machine import run_mesh
from plmr.runtime.running import random_inputs, run_function, select_function


def _program(m: int, k: int, n: int) -> str:
    a, b, c = f"tensor<{m}x{k}xf32>", f"tensor<{k}x{n}xf32>", f"tensor<{m}x{n}xf32>"
    return f"""
    func.func @main(%a: {a}, %b: {b}) -> {c} {{
      %c = graph.matmul %a, %b : ({a}, {b}) -> {c}
      %e = graph.exp %c : {c}
      %t = graph.reciprocal %e : {c}
      func.return %t : {c}
    }}"""


def _tile_level(text: str, grid: tuple[int, int], sizes: tuple[int, int]) -> ModuleOp:
    module = parse_module(text)
    opts = CompileOptions(grid=grid, substitute=False, chunks=1, fit_tiles=True)
    to_loop_level(make_context(), module, opts)
    ConvertLoopToTilePass(tile_sizes=sizes, fit=True, fit_grid=grid, spread=True).apply(
        make_context(), module
    )
    return module


CASES = [
    # (M, K, N), grid, (P, R): N divides over no axis; blocks of ceil(N / n)
    ((4, 12, 20), (3, 3), (8, 8), 7),
    ((2, 16, 31), (2, 4), (8, 8), 8),
    ((3, 10, 23), (5, 7), (8, 8), 4),
]


@pytest.mark.parametrize(
    ("sizes", "grid", "tiles", "block"),
    CASES,
    ids=[f"{'x'.join(map(str, c[0]))}-{c[1][0]}x{c[1][1]}" for c in CASES],
)
def test_padded_blocks_match_reference(
    sizes: tuple[int, int, int],
    grid: tuple[int, int],
    tiles: tuple[int, int],
    block: int,
):
    text = _program(*sizes)
    reference = parse_module(text)
    fn = select_function(reference, None)
    inputs = random_inputs(fn, 5)
    want = run_function(reference, fn, inputs)

    tiled = _tile_level(text, grid, tiles)
    n = sizes[2]
    loops = [
        op
        for op in tiled.walk()
        if isinstance(op, tile.ForOp) and op.ub.value.data == n and op.step.value.data > 1
    ]
    assert [lp.step.value.data for lp in loops] == [block]
    assert n % block != 0
    clipped = [op for op in tiled.walk() if isinstance(op, tile.StoreOp) and op.clip]
    assert clipped
    tfn = select_function(tiled, None)
    np.testing.assert_allclose(
        run_function(tiled, tfn, inputs)[0], want[0], rtol=1e-5, atol=1e-6
    )

    plans: list[NestPlan] = []
    lowered = tiled.clone()
    options = parse_options(grid, "wse2", "meshgemm", "ktree", 2, fit_tiles=True)
    lower_module(lowered, options, plans)
    # The padded blocks are split over an axis: one block per PE.
    (plan,) = plans
    split = {name for _, name in plan.axes}
    assert any(name in split and count == -(-n // block) for name, count in plan.loops)
    got, _ = run_mesh(lowered, inputs, mode="functional")
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)


def test_dividing_extent_is_not_padded():
    tiled = _tile_level(_program(4, 12, 24), (3, 3), (8, 8))
    assert not [op for op in tiled.walk() if isinstance(op, tile.StoreOp) and op.clip]
    assert not [op for op in tiled.walk() if isinstance(op, tile.LoadOp) and op.padding]


@pytest.mark.parametrize("fit", [False, True])
def test_blocking_trials_offer_the_padded_block_with_fit_tiles(fit: bool):
    module = parse_module(_program(1, 32, 52))
    opts = CompileOptions(grid=(3, 3), substitute=False, chunks=1, fit_tiles=fit)
    to_loop_level(make_context(), module, opts)
    parallel = {p for (p, _), _ in blocking_trials(module, opts)}
    # 52 over 3 PEs: blocks of ceil(52 / 3) = 18, larger than the fixed candidates.
    assert (18 in parallel) == fit


def test_short_dimension_stays_whole_beside_padded_splits():
    # A prefill projection [L, K] x [K, hd] on 7x7: L and K split in one padded block
    # per PE (ceil(20 / 7) = 3), hd = 6 is shorter than an axis. It stays one block of 6
    # (one product per PE and one allreduce), not six blocks of one column.
    text = """
    func.func @main(%a: tensor<20x20xf32>, %b: tensor<20x6xf32>) -> tensor<20x6xf32> {
      %c = graph.matmul %a, %b : (tensor<20x20xf32>, tensor<20x6xf32>) -> tensor<20x6xf32>
      func.return %c : tensor<20x6xf32>
    }"""
    grid = (7, 7)
    tiled = _tile_level(text, grid, (3, 3))
    steps = {
        op.ub.value.data: op.step.value.data
        for op in tiled.walk()
        if isinstance(op, tile.ForOp)
    }
    assert steps == {20: 3, 6: 6}
    reference = parse_module(text)
    fn = select_function(reference, None)
    inputs = random_inputs(fn, 7)
    want = run_function(reference, fn, inputs)
    lowered = tiled.clone()
    plans: list[NestPlan] = []
    lower_module(
        lowered, parse_options(grid, "wse2", "meshgemm", "ktree", 2, fit_tiles=True), plans
    )
    got, _ = run_mesh(lowered, inputs, mode="functional")
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)
