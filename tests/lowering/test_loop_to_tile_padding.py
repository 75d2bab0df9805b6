"""
Padded reduction blocks (`lowering/loop_to_tile/padding.py`): with `fit`, a reduction
no axis divides is cut in blocks of `ceil(extent / n)`, one per PE, when a padding of
its reads leaves every accumulator as it is (zeros for a product or a sum of squares,
`-inf` for a maximum or a softmax's scores); its loads are padded so and, on the mesh,
limited to where the tensor ends in each PE's share (`tile.load ... limits`), whatever
the share holds past it. A term no padding neutralises (`Σ (x + 1)`), a shifted read or
a read of a longer tensor keeps blocks that divide the reduction.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.rewriter import Rewriter

from plmr.dialects import tile
from plmr.dialects.context import make_context, parse_module
from plmr.lowering.loop_to_tile import ConvertLoopToTilePass
from plmr.lowering.tile_to_mesh import NestPlan, lower_module, parse_options
from plmr.passes.pipeline import CompileOptions, to_loop_level
from plmr.runtime.mesh_machine import run_mesh
from plmr.runtime.running import random_inputs, run_function, select_function


def _program(m: int, k: int, n: int) -> str:
    """
    `exp(x)·exp(w)` over `k`, and `Σ exp(x)²`: on the mesh, the shares' padding past
    `k` holds `exp(0)` in both factors of the product.
    """
    x, w, o, s = (
        f"tensor<{m}x{k}xf32>",
        f"tensor<{k}x{n}xf32>",
        f"tensor<{m}x{n}xf32>",
        f"tensor<{m}x1xf32>",
    )
    return f"""
    func.func @main(%x: {x}, %w: {w}) -> ({o}, {s}, {x}, {w}) {{
      %e = graph.exp %x : {x}
      %v = graph.exp %w : {w}
      %p = graph.matmul %e, %v : ({x}, {w}) -> {o}
      %sq = graph.mul %e, %e : ({x}, {x}) -> {x}
      %s = graph.reduce sum %sq axes = [1] keepdims : {x} -> {s}
      func.return %p, %s, %e, %v : {o}, {s}, {x}, {w}
    }}"""


def _reference(text: str, seed: int) -> tuple[list[Any], list[Any]]:
    """Random inputs of the graph program and its results."""
    reference = parse_module(text)
    fn = select_function(reference, None)
    inputs = random_inputs(fn, seed)
    return inputs, run_function(reference, fn, inputs)


def _tile_level(text: str, grid: tuple[int, int], fuse: str = "auto") -> ModuleOp:
    module = parse_module(text)
    opts = CompileOptions(grid=grid, substitute=False, chunks=1, fit_tiles=True, fuse=fuse)
    to_loop_level(make_context(), module, opts)
    ConvertLoopToTilePass(tile_sizes=(16, 16), fit=True, fit_grid=grid, spread=True).apply(
        make_context(), module
    )
    return module


def _reduction_steps(module: ModuleOp, extent: int) -> list[int]:
    return [
        op.step.value.data
        for op in module.walk()
        if isinstance(op, tile.ForOp)
        and op.kind.data == tile.LoopKind.REDUCTION
        and op.ub.value.data == extent
    ]


CASES = [
    # (M, K, N), grid, the block of K: ceil(K / the longest axis K spans)
    ((2, 50, 7), (3, 4), 13),
    ((3, 23, 5), (2, 5), 5),
    ((1, 61, 9), (4, 4), 16),
    # 4 blocks of 12 split over the 2-axis would be 24 a PE where the layout gives 23:
    # the reduction goes over the 4-axis, one block a PE.
    ((2, 45, 64), (2, 4), 12),
]


@pytest.mark.parametrize(
    ("sizes", "grid", "block"),
    CASES,
    ids=[f"{'x'.join(map(str, c[0]))}-{c[1][0]}x{c[1][1]}" for c in CASES],
)
def test_padded_reductions_match_reference(
    sizes: tuple[int, int, int], grid: tuple[int, int], block: int
):
    text = _program(*sizes)
    inputs, want = _reference(text, 3)

    tiled = _tile_level(text, grid)
    k = sizes[1]
    steps = _reduction_steps(tiled, k)
    # The product is padded with zeros; `Σ exp(x)²`, its `exp` fused into the
    # reduction, with `-inf` (`exp(-inf)² = 0`).
    assert set(steps) == {block}
    assert k % block != 0
    tfn = select_function(tiled, None)
    for got, ref in zip(run_function(tiled, tfn, inputs), want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)

    lowered = tiled.clone()
    lower_module(
        lowered, parse_options(grid, "wse2", "meshgemm", "ktree", 2, fit_tiles=True)
    )
    limited = [op for op in lowered.walk() if isinstance(op, tile.LoadOp) and op.limits]
    assert limited
    got, _ = run_mesh(lowered, inputs, mode="functional")
    for g, ref in zip(got, want, strict=True):
        np.testing.assert_allclose(g, ref, rtol=1e-4, atol=1e-4)


def test_without_limits_the_padding_enters_the_sums():
    """The shares' padding holds `exp(0)`: the limits are what keep it out."""
    sizes, grid = (2, 50, 7), (3, 4)
    text = _program(*sizes)
    inputs, want = _reference(text, 3)
    lowered = _tile_level(text, grid)
    lower_module(
        lowered, parse_options(grid, "wse2", "meshgemm", "ktree", 2, fit_tiles=True)
    )
    for op in [o for o in lowered.walk() if isinstance(o, tile.LoadOp) and o.limits]:
        padding = op.padding.value.data if op.padding else None
        shape = tile.static_shape(op.result, "block")
        Rewriter.replace_op(op, tile.LoadOp(op.source, list(op.offsets), shape, padding))
    got, _ = run_mesh(lowered, inputs, mode="functional")
    assert not np.allclose(got[0], want[0], rtol=1e-3)


def _reduction(update: str, init: str) -> str:
    """A loop nest over `x`'s 50 columns: `acc' = update(acc, x[i, k])`."""
    return f"""
    func.func @main(%x: tensor<2x50xf32>) -> tensor<2xf32> {{
      %init = arith.constant {init} : f32
      %s = loop.nest (%i, %k) to (2, 50) [parallel, reduction] init(%acc = %init : f32) -> tensor<2xf32> {{
        %v = loop.read %x[%i, %k] : tensor<2x50xf32>
        %one = arith.constant 1.0 : f32
        {update}
        loop.yield %r : f32
      }}
      func.return %s : tensor<2xf32>
    }}"""


def _blocked(text: str, grid: tuple[int, int]) -> tuple[ModuleOp, ModuleOp]:
    module = parse_module(text)
    tiled = module.clone()
    ConvertLoopToTilePass(tile_sizes=(16, 16), fit=True, fit_grid=grid, spread=True).apply(
        make_context(), tiled
    )
    return module, tiled


@pytest.mark.parametrize(
    ("update", "init", "padding"),
    [
        ("%r = arith.maximumf %acc, %v : f32", "0xFF800000", -math.inf),
        ("%e = arith.mulf %v, %v : f32\n%r = arith.addf %acc, %e : f32", "0.0", 0.0),
    ],
    ids=["max", "sum-of-squares"],
)
def test_a_neutral_padding_is_found(update: str, init: str, padding: float):
    """A maximum's reads pad with `-inf`, a sum of squares' with zeros."""
    text = _reduction(update, init)
    module, tiled = _blocked(text, (3, 4))
    assert _reduction_steps(tiled, 50) == [13]
    (load,) = [op for op in tiled.walk() if isinstance(op, tile.LoadOp)]
    assert load.padding is not None
    assert load.padding.value.data == padding
    inputs = random_inputs(select_function(module, None), 3)
    want = run_function(module, select_function(module, None), inputs)
    got = run_function(tiled, select_function(tiled, None), inputs)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)


def test_a_term_no_padding_neutralises_keeps_blocks_that_divide():
    """`Σ (x + 1)`: a padded lane adds 1 (zeros) or -inf: the blocks divide 50."""
    update = "%w = arith.addf %v, %one : f32\n%r = arith.addf %acc, %w : f32"
    _, tiled = _blocked(_reduction(update, "0.0"), (3, 4))
    steps = _reduction_steps(tiled, 50)
    assert steps
    assert all(50 % s == 0 for s in steps)


def test_a_rolling_softmax_and_pv_pad_scores_with_minus_infinity():
    """
    FlashAttention's rolling update over 50 keys on 3x4: the scores pad with `-inf`
    (their max ignores them, `exp` makes them 0), `v` with zeros; the scores and `v`
    are computed on the mesh (`exp`), so the shares' padding holds `exp(0)`.
    """
    s, v, o = "tensor<3x50xf32>", "tensor<50x8xf32>", "tensor<3x8xf32>"
    text = f"""
    func.func @main(%a: {s}, %b: {v}) -> ({o}, {s}, {v}) {{
      %x = graph.exp %a : {s}
      %w = graph.exp %b : {v}
      %p = graph.softmax %x : {s}
      %y = graph.matmul %p, %w : ({s}, {v}) -> {o}
      func.return %y, %x, %w : {o}, {s}, {v}
    }}"""
    grid = (3, 4)
    inputs, want = _reference(text, 7)
    module = _tile_level(text, grid, fuse="rolling")
    assert 13 in _reduction_steps(module, 50)
    pads = {
        op.padding.value.data
        for op in module.walk()
        if isinstance(op, tile.LoadOp) and op.padding is not None
    }
    assert -math.inf in pads
    got = run_function(module, select_function(module, None), inputs)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)
    lower_module(
        module, parse_options(grid, "wse2", "meshgemm", "ktree", 2, fit_tiles=True)
    )
    got, _ = run_mesh(module, inputs, mode="functional")
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("gemm", ["meshgemm", "cannon"])
def test_a_rotated_reduction_limits_each_chunk(gemm: str):
    """
    A GEMM whose reduction rotates (MeshGEMM, Cannon: 6 KiB of SRAM leave no room for a
    PE's rows of both operands whole) over a padded last block of 13 of its 50: each
    step's chunk is limited to where the reduction ends in it.
    """
    a, b, o = "tensor<64x50xf32>", "tensor<50x64xf32>", "tensor<64x64xf32>"
    text = f"""
    func.func @main(%x: {a}, %y: {b}) -> ({o}, {a}, {b}) {{
      %e = graph.exp %x : {a}
      %w = graph.exp %y : {b}
      %p = graph.matmul %e, %w : ({a}, {b}) -> {o}
      func.return %p, %e, %w : {o}, {a}, {b}
    }}"""
    grid = (4, 4)
    inputs, want = _reference(text, 5)
    tiled = _tile_level(text, grid)
    assert 13 in _reduction_steps(tiled, 50)
    plans: list[NestPlan] = []
    options = parse_options(grid, "wse2:sram_kib=6", gemm, "ktree", 2, fit_tiles=True)
    lower_module(tiled, options, plans)
    assert [p.mode for p in plans if p.name == "p"] == ["rotate"]
    assert [op for op in tiled.walk() if isinstance(op, tile.LoadOp) and op.limits]
    got, _ = run_mesh(tiled, inputs, mode="functional")
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)


def _window(update: str, width: int) -> str:
    """A loop nest over 50 columns of `x` (`width` wide): `acc' = acc + update`."""
    return f"""
    func.func @main(%x: tensor<2x{width}xf32>) -> tensor<2xf32> {{
      %init = arith.constant 0.0 : f32
      %s = loop.nest (%i, %k) to (2, 50) [parallel, reduction] init(%acc = %init : f32) -> tensor<2xf32> {{
        {update}
        %r = arith.addf %acc, %g : f32
        loop.yield %r : f32
      }}
      func.return %s : tensor<2xf32>
    }}"""


@pytest.mark.parametrize(
    ("update", "width"),
    [
        (
            "%one = arith.constant 1 : index\n%k1 = arith.addi %k, %one : index\n"
            "%a = loop.read %x[%i, %k1] : tensor<2x51xf32>\n"
            "%b = loop.read %x[%i, %k] : tensor<2x51xf32>\n"
            "%g = arith.subf %a, %b : f32",
            51,
        ),
        ("%g = loop.read %x[%i, %k] : tensor<2x60xf32>", 60),
    ],
    ids=["shifted", "prefix"],
)
def test_a_read_past_the_padded_lanes_keeps_blocks_that_divide(update: str, width: int):
    """
    `Σ x[k+1] - x[k]`, or a sum over the first 50 of 60 columns: a padded lane would
    read real data (`x[50]`), not padding, so the blocks divide the 50.
    """
    module, tiled = _blocked(_window(update, width), (3, 4))
    steps = _reduction_steps(tiled, 50)
    assert steps
    assert all(50 % s == 0 for s in steps)
    inputs = random_inputs(select_function(module, None), 3)
    want = run_function(module, select_function(module, None), inputs)
    got = run_function(tiled, select_function(tiled, None), inputs)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


def test_a_padded_nested_reduction_split_over_bands_is_limited():
    """
    `Σ exp(x)` over two reduction dims on 2x8: the inner one (45, padded blocks of 6)
    is split within bands of the x axis, the outer over the bands: its loads are
    limited too.
    """
    x = "tensor<2x2x45xf32>"
    text = f"""
    func.func @main(%x: {x}) -> tensor<2xf32> {{
      %e = graph.exp %x : {x}
      %s = graph.reduce sum %e axes = [1, 2] : {x} -> tensor<2xf32>
      func.return %s : tensor<2xf32>
    }}"""
    grid = (2, 8)
    inputs, want = _reference(text, 3)
    module = _tile_level(text, grid)
    assert 6 in _reduction_steps(module, 45)
    plans: list[NestPlan] = []
    lower_module(
        module, parse_options(grid, "wse2", "meshgemm", "ktree", 2, fit_tiles=True), plans
    )
    (plan,) = [p for p in plans if p.name == "s"]
    assert "x%" in plan.mapping()
    assert [op for op in module.walk() if isinstance(op, tile.LoadOp) and op.limits]
    got, _ = run_mesh(module, inputs, mode="functional")
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4)
