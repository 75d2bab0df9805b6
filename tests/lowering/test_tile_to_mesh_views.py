"""
Read views of `convert-tile-to-mesh`: a tensor that one nest reads indexed by different
loops (a RoPE table at the query and at the key rows of FlashAttention, the query and
key columns of one merged projection) is read through one view per indexing, each
placed on its own. Compiled programs, simulated in functional mode, equal the reference
on random inputs; without views the table is held whole and the attention is refused.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, SSAValue

from plmr.dialects import mesh
from plmr.dialects.context import make_context, parse_module
from plmr.dialects.graph import static_shape
from plmr.errors import PlmrError
from plmr.frontend.onnx import import_onnx_file
from plmr.lowering.tile_to_mesh import NestPlan
from plmr.lowering.tile_to_mesh import program as tile_to_mesh_program
from plmr.lowering.tile_to_mesh.relayout import gather_order
from plmr.models.llama_onnx import LlamaOnnxConfig, write_llama_onnx
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.mesh_machine import run_mesh
from plmr.runtime.running import random_inputs, run_function, select_function

L, D = 64, 16
T, S = f"tensor<{L}x{D}xf32>", f"tensor<{L}x{L}xf32>"

ROPE_TABLE = f"""
func.func @main(%q: {T}, %k: {T}, %v: {T}, %cos: {T}) -> {T} {{
  %qc = graph.mul %q, %cos : ({T}, {T}) -> {T}
  %kc = graph.mul %k, %cos : ({T}, {T}) -> {T}
  %s = graph.matmul %qc, %kc transpose_b : ({T}, {T}) -> {S}
  %p = graph.softmax %s : {S}
  %o = graph.matmul %p, %v : ({S}, {T}) -> {T}
  func.return %o : {T}
}}"""

X, W, QK = f"tensor<{L}x8xf32>", f"tensor<8x{2 * D}xf32>", f"tensor<{L}x{2 * D}xf32>"
MERGED = f"""
func.func @main(%x: {X}, %w: {W}, %v: {T}) -> {T} {{
  %qk = graph.matmul %x, %w : ({X}, {W}) -> {QK}
  %q = graph.slice %qk starts = [0, 0] ends = [{L}, {D}] steps = [1, 1] : {QK} -> {T}
  %k = graph.slice %qk starts = [0, {D}] ends = [{L}, {2 * D}] steps = [1, 1] : {QK} -> {T}
  %s = graph.matmul %q, %k transpose_b : ({T}, {T}) -> {S}
  %p = graph.softmax %s : {S}
  %o = graph.matmul %p, %v : ({S}, {T}) -> {T}
  func.return %o : {T}
}}"""


def _compile(text: str, kib: int) -> tuple[ModuleOp, ModuleOp, list[NestPlan]]:
    module = parse_module(text)
    opts = CompileOptions(
        grid=(4, 4), device=f"wse2:sram_kib={kib}", substitute=False, fit_tiles=True
    )
    plans: list[NestPlan] = []
    compiled = compile_module(make_context(), module.clone(), opts, plans=plans)
    return module, compiled, plans


def _assert_matches(module: ModuleOp, compiled: ModuleOp, seed: int) -> None:
    fn = select_function(module, None)
    inputs = random_inputs(fn, seed)
    want = run_function(module, fn, inputs)
    got, _ = run_mesh(compiled, inputs, mode="functional")
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)


def _attention_inputs(compiled: ModuleOp) -> list[mesh.ScatterOp | None]:
    (spmd,) = [
        op
        for op in compiled.walk()
        if isinstance(op, mesh.SpmdOp) and op.outputs[0].name_hint == "o"
    ]
    return [v.owner if isinstance(v.owner, mesh.ScatterOp) else None for v in spmd.inputs]


@pytest.mark.parametrize("seed", [0, 1])
def test_a_table_read_at_query_and_key_rows_is_placed_twice(seed: int):
    module, compiled, plans = _compile(ROPE_TABLE, 6)
    (plan,) = [p for p in plans if p.name == "o"]
    assert plan.mode == "merge"
    assert dict(plan.axes) == {"x": "i0", "y": "i1"}
    tables = [
        s.result.type
        for s in _attention_inputs(compiled)
        if s is not None and s.input.name_hint == "cos"
    ]
    # The queries' rows over x, the keys' rows over y: a quarter of the table each.
    assert [str(t.layout) for t in tables] == [
        "#mesh.layout<[x, -]>",
        "#mesh.layout<[y, -]>",
    ]
    _assert_matches(module, compiled, seed)


def test_without_views_the_table_is_held_whole_and_refused(
    monkeypatch: pytest.MonkeyPatch,
):
    def no_views(block: Block) -> dict[SSAValue, SSAValue]:
        del block
        return {}

    monkeypatch.setattr(tile_to_mesh_program, "split_read_views", no_views)
    with pytest.raises(PlmrError, match=r"%o does not fit .* needs 8192 bytes"):
        _compile(ROPE_TABLE, 6)


def test_query_and_key_columns_of_one_projection_read_through_views():
    module, compiled, plans = _compile(MERGED, 16)
    (plan,) = [p for p in plans if p.name == "o"]
    assert plan.mode == "merge"
    (spmd,) = [
        op
        for op in compiled.walk()
        if isinstance(op, mesh.SpmdOp) and op.outputs[0].name_hint == "o"
    ]
    # The projection's result enters twice, moved to the queries' and the keys' layouts.
    assert [v.name_hint for v in spmd.inputs].count("qk") == 2
    _assert_matches(module, compiled, 2)


EXPORT = LlamaOnnxConfig(hidden=64, heads=2, kv_heads=1, ffn=128, vocab=64, seq=128)
"""A one-layer prefill export whose Q/K/V projections `graph-merge-matmuls` merges."""


def _export(tmp_path: Path) -> ModuleOp:
    write_llama_onnx(tmp_path / "model.onnx", EXPORT)
    return import_onnx_file(str(tmp_path / "model.onnx"))


def test_a_prefill_export_fits_through_views(tmp_path: Path):
    """
    The attention of a LLaMA prefill export reads the merged projection's result at the
    query rows (Q, rotated Q) and at the key rows (K, rotated K, V), and the RoPE tables
    at both: through views each is split as the rows that read it, and the layer fits
    8x8 PEs (without them it is refused: the test below); the program equals the
    reference on random token ids.
    """
    module = _export(tmp_path)
    plans: list[NestPlan] = []
    opts = CompileOptions(grid=(8, 8), fit_tiles=True)
    compiled = compile_module(make_context(), module.clone(), opts, plans=plans)
    (plan,) = [p for p in plans if p.name == "probs_max"]
    assert plan.mode == "merge"
    # The queries over one axis, the keys over the other (either way round on 8x8).
    assert sorted(dict(plan.axes).values()) == ["i2", "i3"]
    _assert_matches(module, compiled, 0)


def test_without_views_the_prefill_export_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    def no_views(block: Block) -> dict[SSAValue, SSAValue]:
        del block
        return {}

    monkeypatch.setattr(tile_to_mesh_program, "split_read_views", no_views)
    opts = CompileOptions(grid=(8, 8), fit_tiles=True)
    with pytest.raises(PlmrError, match=r"%probs_max does not fit a 8x8 grid"):
        compile_module(make_context(), _export(tmp_path), opts)


def test_dims_wanted_whole_are_gathered_before_a_diagonal_move():
    # [y, x] wanted as [x, -]: the columns first (their axis x is wanted by the rows).
    assert gather_order(("-", "y", "x"), ("-", "x", "-")) == [2, 0, 1]
    # Nothing to free: in order.
    assert gather_order(("y", "x"), ("-", "-")) == [0, 1]
    assert gather_order(("y", "-"), ("x", "-")) == [0, 1]


CROSSED = """
func.func @main(%T: tensor<64x64xf32>, %C: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : index
  %zero = tile.fill 0.000000e+00 : tensor<16x16xf32>
  %ri = tile.for %i = 0 to 64 step 16 iter_args(%ci = %C) -> (tensor<64x64xf32>) parallel {
    %rj = tile.for %j = 0 to 64 step 16 iter_args(%cj = %ci) -> (tensor<64x64xf32>) parallel {
      %acc = tile.for %k = 0 to 64 step 16 iter_args(%c = %zero) -> (tensor<16x16xf32>) reduction {
        %a = tile.load %T[%i, %c0] : tensor<64x64xf32> -> tensor<16x16xf32>
        %b = tile.load %T[%c0, %j] : tensor<64x64xf32> -> tensor<16x16xf32>
        %d = tile.load %T[%c0, %k] : tensor<64x64xf32> -> tensor<16x16xf32>
        %e = tile.load %T[%k, %c0] : tensor<64x64xf32> -> tensor<16x16xf32>
        %ab = tile.dot %a, %b, %c : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
        %de = tile.dot %d, %e, %ab : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
        tile.yield %de : tensor<16x16xf32>
      }
      %cj2 = tile.store %acc, %cj[%i, %j] : tensor<16x16xf32> -> tensor<64x64xf32>
      tile.yield %cj2 : tensor<64x64xf32>
    }
    tile.yield %rj : tensor<64x64xf32>
  }
  func.return %ri : tensor<64x64xf32>
}
"""


def test_loads_that_each_agree_with_the_first_but_not_with_each_other_get_views():
    """
    `%a` indexes rows by `i`, `%b` columns by `j`, `%d` columns by `k`, `%e` rows by `k`:
    none conflicts with `%a` alone, but `%d` conflicts with `%b` (columns by `j` and by
    `k`) and `%e` with `%a` (rows by `i` and by `k`). No two loads of one tensor or view
    index a dimension by two loops.
    """
    from xdsl.dialects import func

    from plmr.dialects import tile
    from plmr.lowering.tile_to_mesh.views import split_read_views

    module = parse_module(CROSSED)
    (fn,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    t = fn.body.block.args[0]
    views = split_read_views(fn.body.block)
    loads = {op.result.name_hint: op for op in fn.walk() if isinstance(op, tile.LoadOp)}
    assert loads["a"].source is t
    assert loads["b"].source is t
    # `%d` and `%e` agree with each other (both by `k`, in different dimensions).
    assert loads["d"].source is loads["e"].source is not t
    assert views == {loads["d"].source: t}


GEMM = """
func.func @main(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %c = graph.matmul %a, %a : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %d = graph.matmul %c, %b : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  func.return %d : tensor<64x64xf32>
}
"""
"""`%a` read as both operands of one product: the rows rotate one way, the columns the
other (Cannon's skew; in 8 KiB, where the whole rows and columns do not fit)."""


@pytest.mark.parametrize(
    ("text", "kib"),
    [(ROPE_TABLE, 48), (MERGED, 48), (GEMM, 8)],
    ids=["rope", "merged", "gemm"],
)
def test_the_planner_counts_every_block_the_nest_places(text: str, kib: int):
    """
    The SRAM the planner chose each mapping by is at least the blocks the emitted nest
    holds: its operands' (views of one tensor share a block only where the emitter
    places one) and its outputs'.
    """
    module, compiled, plans = _compile(text, kib)
    fn = select_function(module, None)
    inputs = random_inputs(fn, 0)
    got, _ = run_mesh(compiled, inputs, mode="functional")
    np.testing.assert_allclose(got[0], run_function(module, fn, inputs)[0], rtol=1e-3)
    modes: set[str] = set()
    for plan in plans:
        modes.add(plan.mode)
        args = plan.spmd.body.block.args[2:]
        held = sum(4 * math.prod(static_shape(a, "block")) for a in args)
        outs = plan.spmd.body.block.last_op
        assert outs is not None
        held += sum(4 * math.prod(static_shape(v, "block")) for v in outs.operands)
        assert plan.sram >= held, plan.name
    assert modes - {"local"}
