"""
Weights at rest (`convert-tile-to-mesh{rest-weights}`, `plmr compile` on grids of more
than 64 PEs): a layer's own weight (an argument listed in `plmr.weight_args`, as the
layer body compiled once lists them) that a nest reads replicated along an axis is
placed split along it and gathered in the nest. The programs equal the reference on
random inputs; a stage's layers keep their weights in their share of the grid's SRAM,
so a layered prefill whose per-head weights would be copied along a whole axis compiles
once per layer instead of being refused by the stage capacity check.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects import mesh
from plmr.dialects.context import make_context, parse_module
from plmr.errors import PlmrError
from plmr.frontend.onnx import import_onnx_file
from plmr.lowering.loop_to_tile import ConvertLoopToTilePass
from plmr.lowering.tile_to_mesh import RestRefusal, lower_module, memo, parse_options
from plmr.models.llama_onnx import LlamaOnnxConfig, write_llama_onnx
from plmr.passes.layer_programs import layer_bytes
from plmr.passes.pipeline import CompileOptions, compile_module, large_grid, to_loop_level
from plmr.runtime.mesh_machine import run_mesh
from plmr.runtime.running import random_inputs, run_entry, run_function, select_entry
from plmr.target.device import get_device
from plmr.target.interface import weight_args
from plmr.target.sram import spmd_sram

PROGRAM = """
func.func @main(%x: tensor<{h}x{m}x{k}xf32>, %w: tensor<{h}x{k}x{n}xf32>)
    -> tensor<{h}x{m}x{n}xf32> attributes {{plmr.weight_args = [1 : i64]}} {{
  %y = graph.matmul %x, %w : (tensor<{h}x{m}x{k}xf32>, tensor<{h}x{k}x{n}xf32>)
      -> tensor<{h}x{m}x{n}xf32>
  func.return %y : tensor<{h}x{m}x{n}xf32>
}}
"""


def _scatters(module: ModuleOp) -> dict[str, tuple[str, ...]]:
    return {
        op.result.name_hint or "?": op.result.type.layout.axes
        for op in module.walk()
        if isinstance(op, mesh.ScatterOp)
    }


CASES = [
    # (heads, M, K, N), grid, tiles
    ((1, 8, 16, 6), (4, 4), (2, 4)),
    ((2, 9, 12, 5), (3, 4), (3, 4)),
    ((3, 6, 10, 4), (5, 2), (2, 2)),
]


@pytest.mark.parametrize(("sizes", "grid", "tiles"), CASES)
def test_weights_at_rest_match_reference(
    sizes: tuple[int, int, int, int], grid: tuple[int, int], tiles: tuple[int, int]
):
    h, m, k, n = sizes
    text = PROGRAM.format(h=h, m=m, k=k, n=n)
    reference = parse_module(text)
    fn = select_entry(reference, None)
    inputs = random_inputs(fn, 3)
    want = run_function(reference, fn, inputs)
    programs: dict[bool, ModuleOp] = {}
    for rest in (False, True):
        module = parse_module(text)
        opts = CompileOptions(grid=grid, substitute=False, chunks=1, fit_tiles=True)
        to_loop_level(make_context(), module, opts)
        ConvertLoopToTilePass(tile_sizes=tiles, fit=True, fit_grid=grid).apply(
            make_context(), module
        )
        options = parse_options(
            grid, "wse2", "meshgemm", "ktree", 2, fit_tiles=True, rest_weights=rest
        )
        lower_module(module, options)
        got, _ = run_mesh(module, inputs, mode="functional")
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
        programs[rest] = module
    # Every weight block at rest is split over every axis where a dimension allows it.
    for name, layout in _scatters(programs[True]).items():
        if name.startswith("w"):
            assert {"x", "y"} <= set(layout), (name, layout)
    assert _scatters(programs[True]) != _scatters(programs[False])


def _layered(tmp: Path, rest: bool | None) -> tuple[ModuleOp, ModuleOp]:
    tmp.mkdir()
    config = LlamaOnnxConfig(
        hidden=64, heads=4, kv_heads=2, ffn=128, vocab=64, seq=24, layers=2, seed=2
    )
    write_llama_onnx(tmp / "llama.onnx", config)
    source = import_onnx_file(str(tmp / "llama.onnx"))
    opts = CompileOptions(
        grid=(12, 12),
        outline_layers=True,
        substitute=False,
        fit_tiles=True,
        rest_weights=rest,
    )
    return source, compile_module(make_context(), source.clone(), opts)


def test_a_layered_prefill_fits_with_its_weights_at_rest(tmp_path: Path):
    assert large_grid((12, 12))
    # The per-head projections read their weights with the rows split over y and a
    # copy along x: one layer's copies do not fit a PE beside the working set.
    with pytest.raises(PlmrError, match="one layer's weights need 31488 B per PE"):
        _layered(tmp_path / "copies", False)
    # By default on this grid, the weights rest split over both axes.
    source, module = _layered(tmp_path / "rest", None)
    body = next(
        p
        for p in module.ops
        if isinstance(p, mesh.ProgramOp) and p.sym_name.data == "main.layer"
    )
    weights, _ = layer_bytes(body, weight_args(body))
    assert 0 < weights < 37632 // 20
    src_fn, fn = select_entry(source, None), select_entry(module, None)
    inputs = random_inputs(src_fn, 0)
    want = run_function(source, src_fn, inputs)
    got, report = run_entry(module, fn, inputs)
    assert report is not None
    scale = float(np.abs(want[0]).max())
    assert float(np.abs(got[0] - want[0]).max()) <= 1e-5 * scale


def _gemv(name: str, weights: bool) -> str:
    attr = " attributes {plmr.weight_args = [1 : i64]}" if weights else ""
    return f"""
func.func @{name}(%x: tensor<4x328xf32>, %w: tensor<328x128xf32>) -> tensor<4x128xf32>{attr} {{
  %y = graph.matmul %x, %w : (tensor<4x328xf32>, tensor<328x128xf32>) -> tensor<4x128xf32>
  func.return %y : tensor<4x128xf32>
}}"""


def _lower(text: str, copies: bool) -> ModuleOp:
    module = parse_module(text)
    opts = CompileOptions(grid=(4, 4), substitute=False, chunks=1)
    to_loop_level(make_context(), module, opts)
    ConvertLoopToTilePass(tile_sizes=(4, 328)).apply(make_context(), module)
    options = parse_options(
        (4, 4), "wse2", "meshgemm", "ktree", 2, rest_weights=True, rest_copies=copies
    )
    lower_module(module, options)
    return module


def test_a_nest_whose_gathers_do_not_fit_reads_copies():
    # A PE holds the weight's whole 328 rows of its 32 columns: 41,984 B. Gathered from
    # rest it would hold its strip and the gathered block at once (over the 49,152 B of
    # a PE): the nest is refused at rest, and reads copies with `rest_copies`. The
    # memo, warm with the same nest of a function without weights, does not hand it
    # that nest's mapping, nor the reverse.
    memo.clear()
    for text in (_gemv("b", True), _gemv("a", False) + _gemv("b", True)):
        with pytest.raises(RestRefusal, match="only with copies of them"):
            _lower(text, False)
        module = _lower(text, True)
        (program,) = [
            p
            for p in module.ops
            if isinstance(p, mesh.ProgramOp) and p.sym_name.data == "b"
        ]
        (scatter,) = [
            op
            for op in program.walk()
            if isinstance(op, mesh.ScatterOp)
            and op.operands[0] is program.body.block.args[1]
        ]
        assert scatter.result.type.layout.axes == ("-", "x")
        for spmd in (op for op in module.walk() if isinstance(op, mesh.SpmdOp)):
            assert spmd_sram(spmd, get_device("wse2")).peak_bytes <= 49152
    reference = parse_module(_gemv("b", True))
    fn = select_entry(reference, None)
    inputs = random_inputs(fn, 4)
    got, _ = run_mesh(_lower(_gemv("b", True), True), inputs, mode="functional")
    want = run_function(reference, fn, inputs)[0]
    scale = float(np.abs(want).max())
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-5 * scale)


def test_the_blocking_search_takes_copies_only_when_no_blocking_fits_at_rest():
    # With the blocks fixed (4, 328) no blocking fits at rest: `plmr compile` takes the
    # copies. (The 12x12 export above has blockings that fit at rest: it keeps them.)
    opts = CompileOptions(
        grid=(4, 4), substitute=False, chunks=1, tile_sizes=(4, 328), rest_weights=True
    )
    module = compile_module(make_context(), parse_module(_gemv("b", True)), opts)
    (scatter,) = [
        op
        for op in module.walk()
        if isinstance(op, mesh.ScatterOp)
        and op.result.type.tensor.shape.data[0].data == 328
    ]
    assert scatter.result.type.layout.axes == ("-", "x")
