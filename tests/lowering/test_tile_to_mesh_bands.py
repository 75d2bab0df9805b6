"""
Banded mappings of `convert-tile-to-mesh` (heads over bands of PEs, the head dimension
blocked within each band) and the blocking that exposes the heads loop
(`convert-loop-to-tile{bands}`): compiled programs, simulated in functional mode, equal
the graph program they come from and numpy's decode step, and the banded tile program
equals the loop program, on grids with padded bands and uneven axes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects import mesh
from plmr.dialects.context import make_context, parse_module
from plmr.lowering.loop_to_tile import ConvertLoopToTilePass, may_band
from plmr.lowering.tile_to_mesh import NestPlan, lower_module, parse_options
from plmr.lowering.tile_to_mesh.analysis import (
    entry_parts,
    layout_band,
    layout_from_attr,
    plain_axes,
)
from plmr.models.llama import (
    LlamaConfig,
    ProgramBuilder,
)
from plmr.passes.pipeline import CompileOptions, to_loop_level
from plmr.runtime.mesh_machine import run_mesh
from plmr.runtime.running import random_inputs, run_function, select_function

ATTENTION = """
func.func @attn(%q: tensor<4x1xDxf32>, %k: tensor<4x40xDxf32>, %v: tensor<4x40xDxf32>) -> tensor<4x1xDxf32> {
  %s = graph.matmul %q, %k transpose_b : (tensor<4x1xDxf32>, tensor<4x40xDxf32>) -> tensor<4x1x40xf32>
  %p = graph.softmax %s : tensor<4x1x40xf32>
  %o = graph.matmul %p, %v : (tensor<4x1x40xf32>, tensor<4x40xDxf32>) -> tensor<4x1xDxf32>
  func.return %o : tensor<4x1xDxf32>
}
"""


def _tile_level(text: str, grid: tuple[int, int], bands: bool) -> ModuleOp:
    module = parse_module(text)
    opts = CompileOptions(grid=grid, substitute=False, chunks=1, fit_tiles=True)
    to_loop_level(make_context(), module, opts)
    ConvertLoopToTilePass(tile_sizes=(8, 8), fit=True, fit_grid=grid, bands=bands).apply(
        make_context(), module
    )
    return module


def _lowered(module: ModuleOp, grid: tuple[int, int]) -> tuple[ModuleOp, list[NestPlan]]:
    plans: list[NestPlan] = []
    lowered = module.clone()
    lower_module(lowered, parse_options(grid, "wse2", "meshgemm", "ktree", 2), plans)
    return lowered, plans


def _banded(plans: list[NestPlan]) -> list[str]:
    return [p.mapping() for p in plans if any("/" in a for a, _ in p.axes)]


def test_layout_entries_of_bands():
    grid = (102, 41)
    assert entry_parts("y/25", grid) == 4  # 4 bands of 25 rows, 2 rows of padding
    assert entry_parts("y%25", grid) == 25
    assert entry_parts("x", grid) == 41
    assert entry_parts("-", grid) == 1
    layout = ("y/25", "x", "y%25")
    assert plain_axes(layout) == ["y", "x", "y"]
    assert layout_band(layout) == ("y", 25)
    assert layout_from_attr(plain_axes(layout), layout_band(layout)) == layout
    # One dim on the banded axis is the one over the bands.
    assert layout_from_attr(["y", "-", "x"], ("y", 25)) == ("y/25", "-", "x")


@pytest.mark.parametrize(
    "grid,width",
    [
        ((100, 40), 25),  # 4 bands of 25 rows, the head dimension 4 per PE
        ((102, 41), 25),  # 2 rows past the last band; 40 positions over 41 columns
        ((103, 37), 25),  # 3 rows past the last band; 2 positions per column, padded
    ],
)
def test_banded_attention_equals_the_graph_program(grid: tuple[int, int], width: int):
    text = ATTENTION.replace("D", "96")
    # The reference is the graph program, not the banded tile program between them: that
    # one equals the loop program (the test below), and interpreting its ~200,000 tile ops
    # cost seconds per grid.
    program = parse_module(text)
    fn = select_function(program, None)
    inputs = random_inputs(fn, 3)
    want = run_function(program, fn, inputs)
    tiled = _tile_level(text, grid, bands=True)
    lowered, plans = _lowered(tiled, grid)
    banded = _banded(plans)
    # Every nest keeps the heads over bands: no layout change between them.
    assert len(banded) == len(plans), [p.mapping() for p in plans]
    assert f"i3(96) -> y%{width} [allreduce]" in banded[0], banded
    segments = [
        op.segment.value.data
        for op in lowered.walk()
        if isinstance(op, mesh.AllreduceOp) and op.segment is not None
    ]
    assert segments == [width]
    assert not any(isinstance(op, mesh.BroadcastOp) for op in lowered.walk())
    got, _ = run_mesh(lowered, inputs, mode="functional")
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)


def test_without_room_for_bands_the_heads_stay_whole():
    """On 40x40 the head dimension (24) is short: the planner keeps no band."""
    text = ATTENTION.replace("D", "24")
    assert may_band(_loop_level(text, (40, 40)), (40, 40))
    assert not may_band(_loop_level(text, (16, 16)), (16, 16))
    tiled = _tile_level(text, (40, 40), bands=True)
    _, plans = _lowered(tiled, (40, 40))
    assert not _banded(plans)


@pytest.mark.parametrize("grid", [(100, 40), (64, 64)])
def test_blocking_for_bands_keeps_the_loop_semantics(grid: tuple[int, int]):
    """`convert-loop-to-tile{bands}`: the tile program equals the loop program."""
    loops = _loop_level(ATTENTION.replace("D", "96"), grid)
    fn = select_function(loops, None)
    inputs = random_inputs(fn, 5)
    want = run_function(loops, fn, inputs)
    tiled = loops.clone()
    ConvertLoopToTilePass(tile_sizes=(8, 8), fit=True, fit_grid=grid, bands=True).apply(
        make_context(), tiled
    )
    got = run_function(tiled, select_function(tiled, None), inputs)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)


def _loop_level(text: str, grid: tuple[int, int]) -> ModuleOp:
    module = parse_module(text)
    opts = CompileOptions(grid=grid, substitute=False, chunks=1, fit_tiles=True)
    return to_loop_level(make_context(), module, opts)


@pytest.mark.parametrize(
    "kv_heads,grid",
    [
        (2, (20, 20)),  # bands of 10 rows
        (2, (21, 21)),  # one row past the last band
        (3, (26, 27)),  # 3 bands of 8 rows, 2 rows of padding
    ],
)
def test_banded_decode_step_equals_numpy(
    kv_heads: int, grid: tuple[int, int], decode_case: Callable[..., Any]
):
    """
    A decode step of the heads program (one projection GEMV, RoPE, scores over the
    cache, softmax, P·V, output projection, FFN) blocked for bands gives numpy's logits
    and K row; the returned K and V are gathered from their bands.
    """
    config = LlamaConfig(
        "b",
        dim=16 * kv_heads + 8,
        n_layers=1,
        n_heads=2 * kv_heads,
        n_kv_heads=kv_heads,
        ffn_dim=40,
        vocab=20,
        max_seq=20,
        head_dim_override=16,
    )
    case = decode_case(config)
    text = ProgramBuilder(config, case.weights, one_projection=True).decode()
    lowered, plans = _lowered(_tile_level(text, grid, bands=True), grid)
    banded = _banded(plans)
    assert any("y%" in m or "x%" in m for m in banded), [p.mapping() for p in plans]
    got, _ = run_mesh(lowered, case.args, mode="functional")
    case.check(got, list(range(kv_heads)))
