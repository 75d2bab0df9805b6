"""
Rolling-update reductions split over a mesh axis and merged (split-K, the `merge`
mapping): prefill attention with its queries over one axis and its keys over the other,
against the reference semantics on square, non-square and uneven grids, causal.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import StringAttr

from plmr.dialects import mesh, tile
from plmr.dialects.context import make_context, parse_module
from plmr.lowering.loop_to_tile import ConvertLoopToTilePass
from plmr.lowering.tile_to_mesh import NestPlan
from plmr.lowering.tile_to_mesh.rolling_merge import rolling_roles
from plmr.passes.pipeline import CompileOptions, compile_module, to_loop_level
from plmr.runtime.mesh_machine import run_mesh
from plmr.runtime.running import run_function, select_function


def attention(heads: int, kv_heads: int, length: int, dim: int) -> str:
    """Causal prefill attention with grouped KV heads; the mask is an input."""
    g = heads // kv_heads
    q = f"tensor<{kv_heads}x{g}x{length}x{dim}xf32>"
    kv = f"tensor<{kv_heads}x1x{length}x{dim}xf32>"
    s = f"tensor<{kv_heads}x{g}x{length}x{length}xf32>"
    mask = f"tensor<{length}x{length}xf32>"
    return f"""
    func.func @main(%q: {q}, %k: {kv}, %v: {kv}, %mask: {mask}) -> {q} {{
      %s = graph.matmul %q, %k transpose_b : ({q}, {kv}) -> {s}
      %ss = graph.scale %s by {1 / np.sqrt(dim):.8f} : {s}
      %sm = graph.add %ss, %mask : ({s}, {mask}) -> {s}
      %p = graph.softmax %sm : {s}
      %o = graph.matmul %p, %v : ({s}, {kv}) -> {q}
      func.return %o : {q}
    }}"""


def _inputs(heads: int, kv_heads: int, length: int, dim: int) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    g = heads // kv_heads
    q = rng.standard_normal((kv_heads, g, length, dim)).astype(np.float32)
    k = rng.standard_normal((kv_heads, 1, length, dim)).astype(np.float32)
    v = rng.standard_normal((kv_heads, 1, length, dim)).astype(np.float32)
    future = np.triu(np.ones((length, length), np.float32), 1)
    return [q, k, v, (-1.0e9 * future).astype(np.float32)]


CASES = [
    # heads, kv heads, length, head dim, grid, blocks
    (1, 1, 96, 16, (2, 2), (8, 8)),
    (1, 1, 96, 16, (3, 3), (8, 8)),
    (2, 1, 96, 16, (2, 4), (8, 8)),
    (1, 1, 100, 16, (5, 5), (4, 4)),
    (1, 1, 50, 8, (3, 3), (1, 1)),
    (4, 2, 64, 8, (4, 2), (4, 4)),
    (1, 1, 100, 8, (3, 3), (2, 2)),
]


@pytest.mark.parametrize(
    ("heads", "kv_heads", "length", "dim", "grid", "blocks"),
    CASES,
    ids=[f"h{c[0]}-kv{c[1]}-L{c[2]}-{c[4][0]}x{c[4][1]}-b{c[5][0]}" for c in CASES],
)
def test_keys_split_over_an_axis_merge_exactly(
    heads: int,
    kv_heads: int,
    length: int,
    dim: int,
    grid: tuple[int, int],
    blocks: tuple[int, int],
):
    module = parse_module(attention(heads, kv_heads, length, dim))
    inputs = _inputs(heads, kv_heads, length, dim)
    want = run_function(module, select_function(module, None), inputs)
    plans: list[NestPlan] = []
    opts = CompileOptions(grid=grid, substitute=False, tile_sizes=blocks, fit_tiles=True)
    compiled = compile_module(make_context(), module.clone(), opts, plans)
    merged = [p for p in plans if p.mode == "merge"]
    assert merged, [p.mapping() for p in plans]
    # Queries over one axis, keys over the other: no PE repeats another's work.
    assert len(merged[0].axes) == 2
    reduces = [op for op in merged[0].spmd.walk() if isinstance(op, mesh.AllreduceOp)]
    assert sorted(op.kind.data.value for op in reduces) == ["max", "sum", "sum"]
    assert not any(isinstance(op, mesh.ShiftOp) for op in merged[0].spmd.walk())
    got, _ = run_mesh(compiled, inputs, mode="functional")
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def _rolling_loops(length: int) -> list[tile.ForOp]:
    """The reduction loops of the tiled attention (blocks of 8)."""
    module = parse_module(attention(2, 1, length, 8))
    opts = CompileOptions(grid=(2, 2), substitute=False)
    to_loop_level(make_context(), module, opts)
    ConvertLoopToTilePass(tile_sizes=(8, 8)).apply(make_context(), module)
    return [
        op
        for op in module.walk()
        if isinstance(op, tile.ForOp) and op.kind.data == tile.LoopKind.REDUCTION
    ]


def test_rolling_roles_of_the_fused_attention():
    """The maximum, then the sum and the output, both repaired by exp(m - m')."""
    rolling = [r for r in map(rolling_roles, _rolling_loops(32)) if r is not None]
    assert len(rolling) == 1
    roles = rolling[0]
    assert [r.kind for r in roles] == ["max", "scaled", "scaled"]
    assert {r.maximum for r in roles[1:]} == {0}


def test_a_term_not_linear_in_the_repair_is_not_merged():
    """exp(s - m') turned into tanh(s - m'): no longer repairable by exp(m - m')."""
    loops = _rolling_loops(32)
    red = next(r for r in loops if rolling_roles(r) is not None)
    exps = [
        op
        for op in red.body.block.ops
        if isinstance(op, tile.MapOp) and op.kind_name == "exp"
    ]
    # The first exp is the probabilities' (the scores minus the new maximum).
    exps[0].properties["kind"] = StringAttr("tanh")
    assert rolling_roles(red) is None


def test_plain_sums_are_not_rolling():
    module = parse_module("""
    func.func @main(%a: tensor<16x32xf32>, %b: tensor<32x16xf32>) -> tensor<16x16xf32> {
      %c = graph.matmul %a, %b : (tensor<16x32xf32>, tensor<32x16xf32>) -> tensor<16x16xf32>
      func.return %c : tensor<16x16xf32>
    }""")
    to_loop_level(make_context(), module, CompileOptions(substitute=False))
    ConvertLoopToTilePass(tile_sizes=(8, 8)).apply(make_context(), module)
    reds = [
        op
        for op in module.walk()
        if isinstance(op, tile.ForOp) and op.kind.data == tile.LoopKind.REDUCTION
    ]
    assert reds
    assert all(rolling_roles(r) is None for r in reds)
