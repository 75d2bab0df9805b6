"""
`loop-split-heads`: batched nests split per head keep the program's semantics at the loop
level and through the mesh (the heads form of LLaMA prefill, graph vs mesh on random
inputs, even and uneven grids); readers that cannot be split read the reassembled
tensor; `plmr compile` splits only when the batched program does not fit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.dialects import func

from plmr.dialects import mesh
from plmr.dialects.context import make_context, parse_module
from plmr.dialects.loop import NestOp
from plmr.errors import PlmrError
from plmr.frontend.onnx.core import import_onnx_file
from plmr.frontend.onnx.weights import WeightsOptions
from plmr.models.llama import ProgramBuilder, get_config
from plmr.models.llama_onnx import LlamaOnnxConfig, write_llama_onnx
from plmr.passes.neptune.split_heads import split_module_heads
from plmr.passes.pipeline import (
    CompileOptions,
    compile_module,
    from_loop_level,
    to_loop_level,
    weight_passes,
)
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import functions, random_inputs, run_entry, select_entry

Arrays = list[np.ndarray[Any, Any]]

PROJ = """
func.func @main(%a: tensor<9x16xf32>, %wq: tensor<3x16x4xf32>, %wo: tensor<3x4x8xf32>)
    -> (tensor<9x8xf32>, tensor<3x9x4xf32>) {
  %q = graph.matmul %a, %wq : (tensor<9x16xf32>, tensor<3x16x4xf32>) -> tensor<3x9x4xf32>
  %s = graph.softmax %q axis = 2 : tensor<3x9x4xf32>
  %o = graph.matmul %s, %wo : (tensor<3x9x4xf32>, tensor<3x4x8xf32>) -> tensor<3x9x8xf32>
  %r = graph.reduce sum %o axes = [0] : tensor<3x9x8xf32> -> tensor<9x8xf32>
  func.return %r, %q : tensor<9x8xf32>, tensor<3x9x4xf32>
}
"""
"""Per head: a projection, a row-wise softmax, an output projection; summed over heads."""

WIDE = """
func.func @main(%a: tensor<4x64xf32>, %wq: tensor<4x64x16xf32>) -> tensor<4x4x16xf32> {
  %q = graph.matmul %a, %wq : (tensor<4x64xf32>, tensor<4x64x16xf32>) -> tensor<4x4x16xf32>
  %s = graph.softmax %q axis = 2 : tensor<4x4x16xf32>
  func.return %s : tensor<4x4x16xf32>
}
"""
"""Four heads of wide weights: batched, a PE of a 2x2 grid holds two heads' blocks."""

INNER = """
func.func @main(%q: tensor<2x4x3xf32>, %w: tensor<2x3x5xf32>) -> tensor<4x5xf32> {
  %c0 = arith.constant 0.000000e+00 : f32
  %p = loop.nest (%h, %i, %j, %k) to (2, 4, 5, 3) [parallel, parallel, parallel, reduction]
      init(%acc = %c0 : f32) -> tensor<2x4x5xf32> {
    %x = loop.read %q[%h, %i, %k] : tensor<2x4x3xf32>
    %y = loop.read %w[%h, %k, %j] : tensor<2x3x5xf32>
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    loop.yield %s : f32
  }
  %t = loop.nest (%i, %j) to (4, 5) [parallel, parallel] -> tensor<4x5xf32> {
    %z = arith.constant 0.000000e+00 : f32
    %inner = loop.nest (%h) to (2) [reduction] init(%a = %z : f32) -> f32 {
      %v = loop.read %p[%h, %i, %j] : tensor<2x4x5xf32>
      %b = arith.maximumf %a, %v : f32
      loop.yield %b : f32
    }
    loop.yield %inner : f32
  }
  func.return %t : tensor<4x5xf32>
}
"""
"""A reader of the batched tensor at the index of an inner nest: it cannot be split."""


def _inputs(module: Any, seed: int) -> Arrays:
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    return random_inputs(fn, seed)


def _nest_names(module: Any) -> list[str]:
    return [
        op.res[0].name_hint or ""
        for fn in functions(module)
        for op in fn.body.block.ops
        if isinstance(op, NestOp)
    ]


def _assert_close(got: Arrays, want: Arrays) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4 * float(np.abs(w).max()))


def _llama_prefill() -> str:
    return ProgramBuilder(get_config("tiny"), None, "heads").prefill(8, [0], head=False)


VIEW = """
func.func @main(%a: tensor<8x16xf32>, %wq: tensor<2x16x4xf32>)
    -> (tensor<8x4xf32>, tensor<2x4x8xf32>) {
  %q = graph.matmul %a, %wq : (tensor<8x16xf32>, tensor<2x16x4xf32>) -> tensor<2x8x4xf32>
  %t = graph.transpose %q perm = [0, 2, 1] : tensor<2x8x4xf32> -> tensor<2x4x8xf32>
  %r = graph.reduce sum %q axes = [0] : tensor<2x8x4xf32> -> tensor<8x4xf32>
  func.return %r, %t : tensor<8x4xf32>, tensor<2x4x8xf32>
}
"""
"""A stored view of the heads whose nest yields the split tensor's read as it is."""


@pytest.mark.parametrize("text", [PROJ, VIEW, "llama"], ids=["proj", "view", "llama"])
def test_split_keeps_the_loop_level_semantics(text: str):
    source = _llama_prefill() if text == "llama" else text
    module = parse_module(source)
    to_loop_level(make_context(), module, CompileOptions(substitute=False))
    fn = functions(module)[0]
    name = fn.sym_name.data
    args = _inputs(module, 1)
    want = evaluate_function(module, name, args)
    assert split_module_heads(module)
    module.verify()
    names = _nest_names(module)
    assert any("_h0" in n for n in names)
    assert any("_h1" in n for n in names)
    _assert_close(evaluate_function(module, name, args), want)


def test_projection_split_per_head_and_sum_unrolled():
    module = parse_module(PROJ)
    to_loop_level(make_context(), module, CompileOptions(substitute=False))
    before = [n for n in _nest_names(module)]
    split_module_heads(module)
    names = _nest_names(module)
    # Three heads of the projection, the softmax's nests and the output projection.
    assert sum(n.startswith("q_h") for n in names) == 3
    assert len(names) > len(before)
    # The sum over heads has no reduction left; the returned %q is reassembled.
    last = [
        op
        for op in functions(module)[0].body.block.ops
        if isinstance(op, NestOp) and op.res[0].name_hint == "r"
    ]
    assert len(last) == 1
    assert not last[0].is_reduction
    assert "q" in names


def test_reader_at_an_inner_index_reads_the_reassembled_tensor():
    module = parse_module(INNER)
    args = _inputs(module, 2)
    (want,) = evaluate_function(module, "main", args)
    assert split_module_heads(module)
    module.verify()
    names = _nest_names(module)
    assert names.count("p_h0") == 1
    assert names.count("p_h1") == 1
    # %t still reads the whole %p, rebuilt from the heads' tensors.
    assert "p" in names
    assert names[-1] == "t"
    (got,) = evaluate_function(module, "main", args)
    _assert_close([got], [want])


def _compiled_split(
    text: str, grid: tuple[int, int], tiles: tuple[int, int]
) -> tuple[Any, Arrays, Arrays]:
    module = parse_module(text)
    fn = functions(module)[0]
    args = _inputs(module, 3)
    want = evaluate_function(module, fn.sym_name.data, args)
    opts = CompileOptions(grid=grid, substitute=False, tile_sizes=tiles, fit_tiles=True)
    ctx = make_context()
    to_loop_level(ctx, module, opts)
    assert split_module_heads(module)
    from_loop_level(ctx, module, opts)
    module.verify()
    entry = select_entry(module, None)
    assert entry.name == "mesh.program"
    got, report = run_entry(module, entry, args)
    assert report is not None
    assert report.cycles > 0
    return module, got, want


@pytest.mark.parametrize("grid", [(2, 2), (3, 3), (2, 4)])
def test_split_projection_on_the_mesh_matches_the_graph(grid: tuple[int, int]):
    module, got, want = _compiled_split(PROJ, grid, (4, 4))
    _assert_close(got, want)
    # Each head's weights are placed on their own, never the weights of every head.
    heads: dict[str, set[int]] = {"wq": set(), "wo": set()}
    for op in module.walk():
        if not isinstance(op, mesh.ScatterOp) or op.input.name_hint not in heads:
            continue
        assert op.offsets is not None
        heads[op.input.name_hint].add(op.offsets.get_values()[0])
    assert heads == {"wq": {0, 1, 2}, "wo": {0, 1, 2}}


@pytest.mark.parametrize("grid", [(2, 2), (2, 4)])
def test_split_llama_prefill_on_the_mesh_matches_the_graph(grid: tuple[int, int]):
    _, got, want = _compiled_split(_llama_prefill(), grid, (8, 8))
    _assert_close(got, want)


def test_compile_splits_only_when_the_batched_program_does_not_fit():
    def compiled(device: str) -> Any:
        module = parse_module(WIDE)
        opts = CompileOptions(
            grid=(2, 2), device=device, substitute=False, tile_sizes=(4, 4), fit_tiles=True
        )
        compile_module(make_context(), module, opts)
        return module

    def spmds(module: Any) -> list[str]:
        return [
            op.results[0].name_hint or ""
            for op in module.walk()
            if isinstance(op, mesh.SpmdOp) and op.results
        ]

    roomy = spmds(compiled("wse2"))
    assert roomy
    assert not any("_h" in n for n in roomy)
    tight = compiled("wse2:sram_kib=2")
    names = spmds(tight)
    assert any(n.startswith("q_h") for n in names)
    module = parse_module(WIDE)
    args = _inputs(module, 4)
    want = evaluate_function(module, "main", args)
    got, _ = run_entry(tight, select_entry(tight, None), args)
    _assert_close(got, want)


def test_compile_reports_the_split_programs_overflow():
    module = parse_module(WIDE)
    opts = CompileOptions(
        grid=(2, 2),
        device="wse2:sram_kib=1",
        substitute=False,
        tile_sizes=(4, 4),
        fit_tiles=True,
    )
    with pytest.raises(PlmrError, match="bytes of SRAM"):
        compile_module(make_context(), module, opts)


def test_exported_attention_split_behind_its_unit_batch(tmp_path: Path):
    # An ONNX export's attention nest: batch 1, then 4 query heads; FlashAttention fused.
    config = LlamaOnnxConfig(
        hidden=32, heads=4, kv_heads=2, ffn=64, vocab=16, seq=8, embedding=False
    )
    write_llama_onnx(tmp_path / "p.onnx", config)
    module = import_onnx_file(
        str(tmp_path / "p.onnx"), weights=WeightsOptions(inline_limit=1 << 30)
    )
    ctx = make_context()
    opts = CompileOptions(outline_layers=False)
    for rewrite in weight_passes(opts):
        rewrite.apply(ctx, module)
    to_loop_level(ctx, module, opts)
    name = functions(module)[0].sym_name.data
    args = _inputs(module, 4)
    want = evaluate_function(module, name, args)
    assert "probs_max" in _nest_names(module)
    assert split_module_heads(module)
    module.verify()
    names = _nest_names(module)
    assert [n for n in names if n.startswith("probs_max")] == [
        f"probs_max_h0x{h}" for h in range(4)
    ]
    _assert_close(evaluate_function(module, name, args), want)
