"""
Tests of `convert-loop-to-tile`: differential (tile program vs graph reference, random
inputs) on unfused and fused programs, the FlashAttention structure, nests left at the
loop level, tile-size errors, and the memory-traffic counts (static = executed; fused
attention moves fewer bytes).
"""

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects import tile
from plmr.dialects.context import load_module, parse_module
from plmr.dialects.graph import static_shape
from plmr.dialects.loop import REMARK_ATTR, NestOp
from plmr.errors import PlmrError
from plmr.lowering.graph_to_loop import ConvertGraphToLoopPass
from plmr.lowering.loop_to_tile import ConvertLoopToTilePass
from plmr.passes.neptune.fuse import NeptuneFusePass
from plmr.runtime.reference import evaluate_function, run_tile_function
from plmr.runtime.running import random_inputs, select_function
from plmr.runtime.tile_ops import TileStats
from plmr.runtime.traffic import static_traffic

ROOT = Path(__file__).resolve().parents[2]
ATTENTION = ROOT / "examples" / "graph" / "softmax_attention.mlir"


def to_tile(
    module: ModuleOp, fuse: bool, sizes: tuple[int, ...] = (8, 16)
) -> tuple[ModuleOp, TileStats]:
    """Lowers to tile (optionally fusing), runs it and checks it against the graph."""
    fn = select_function(module, None)
    name = fn.sym_name.data
    args = random_inputs(fn, 0)
    want = evaluate_function(module, name, args)
    ConvertGraphToLoopPass().apply(Context(), module)
    if fuse:
        NeptuneFusePass(remarks=False).apply(Context(), module)
    ConvertLoopToTilePass(tile_sizes=sizes).apply(Context(), module)
    module.verify()
    got, stats = run_tile_function(module, name, args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * float(np.abs(w).max()))
    static = static_traffic(module, name)
    assert (static.bytes_loaded, static.bytes_stored) == (
        stats.bytes_loaded,
        stats.bytes_stored,
    )
    return module, stats


PROGRAMS = {
    "matmul": """
        func.func @main(%a: tensor<16x32xf32>, %b: tensor<32x24xf32>) -> tensor<16x24xf32> {
          %c = graph.matmul %a, %b : (tensor<16x32xf32>, tensor<32x24xf32>) -> tensor<16x24xf32>
          func.return %c : tensor<16x24xf32>
        }""",
    "softmax_rows": """
        func.func @main(%a: tensor<8x64xf32>) -> tensor<8x64xf32> {
          %p = graph.softmax %a : tensor<8x64xf32>
          func.return %p : tensor<8x64xf32>
        }""",
    "layernorm": """
        func.func @main(%x: tensor<8x32xf32>, %g: tensor<32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
          %y = graph.layernorm %x, %g, %b : (tensor<8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
          func.return %y : tensor<8x32xf32>
        }""",
    "mlp": """
        func.func @main(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
          %h = graph.matmul %x, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
          %hb = graph.add %h, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
          %y = graph.gelu %hb : tensor<8x16xf32>
          func.return %y : tensor<8x16xf32>
        }""",
}


@pytest.mark.parametrize("fuse", [False, True], ids=["unfused", "fused"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_tile_programs_match_the_reference(name: str, fuse: bool):
    module, _ = to_tile(parse_module(PROGRAMS[name]), fuse)
    assert not [op for op in module.walk() if isinstance(op, NestOp)]


@pytest.mark.parametrize(
    "path",
    [ROOT / "examples" / "onnx" / "mlp.mlir", ROOT / "examples" / "onnx" / "rnn_cell.mlir"],
    ids=lambda p: p.name,
)
def test_imported_models(path: Path):
    to_tile(load_module(path), fuse=True, sizes=(2, 8))


def test_fused_attention_has_the_flash_attention_structure():
    module, fused = to_tile(load_module(ATTENTION), fuse=True)
    loops = [op for op in module.walk() if isinstance(op, tile.ForOp)]
    kinds = [op.kind.data.value for op in loops]
    assert kinds == ["parallel", "reduction"]
    reduction = loops[1]
    assert [str(t) for t in reduction.res.types] == [
        "tensor<8xf32>",
        "tensor<8xf32>",
        "tensor<8x32xf32>",
    ]
    body = list(reduction.body.block.ops)
    assert sum(isinstance(op, tile.DotOp) for op in body) == 2  # Q·Kᵀ and P·V
    assert [op.source.name_hint for op in body if isinstance(op, tile.LoadOp)] == ["k", "v"]
    stores = [op for op in module.walk() if isinstance(op, tile.StoreOp)]
    assert len(stores) == 1  # only the output: the division is the epilogue
    _, unfused = to_tile(load_module(ATTENTION), fuse=False)
    assert fused.bytes_moved < unfused.bytes_moved / 2


CONV_POOL = """
    func.func @main(%image: tensor<1x2x8x8xf32>, %w: tensor<2x2x3x3xf32>, %b: tensor<2xf32>) -> tensor<1x2x2x2xf32> {
      %c = graph.conv2d %image, %w, %b pads = [1, 1, 1, 1] : (tensor<1x2x8x8xf32>, tensor<2x2x3x3xf32>, tensor<2xf32>) -> tensor<1x2x8x8xf32>
      %r = graph.relu %c : tensor<1x2x8x8xf32>
      %m = graph.pool max %r kernel = [2, 2] strides = [2, 2] : tensor<1x2x8x8xf32> -> tensor<1x2x4x4xf32>
      %a = graph.pool avg %m kernel = [3, 3] strides = [2, 2] pads = [1, 1, 1, 1] : tensor<1x2x4x4xf32> -> tensor<1x2x2x2xf32>
      func.return %a : tensor<1x2x2x2xf32>
    }"""
"""conv_block.mlir's layers at a small size: its pools are nests that stay loops."""


@pytest.mark.parametrize(
    "program",
    [
        pytest.param(lambda: parse_module(CONV_POOL), id="conv-pool"),
        # The imported model itself (the same layers, 3x16x16 in, 8 channels).
        pytest.param(
            lambda: load_module(ROOT / "examples" / "onnx" / "conv_block.mlir"),
            id="conv_block",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_untileable_nests_stay_loops_and_still_run(program: Callable[[], ModuleOp]):
    module, _ = to_tile(program(), fuse=False, sizes=(2, 2))
    left = [op for op in module.walk() if isinstance(op, NestOp)]
    assert left
    assert all(REMARK_ATTR in op.attributes for op in left)
    assert static_traffic(module, "main").loop_bytes > 0


def test_tile_sizes_that_do_not_divide_are_an_error():
    module = parse_module(PROGRAMS["matmul"])
    ConvertGraphToLoopPass().apply(Context(), module)
    with pytest.raises(PlmrError, match="tile size 6 does not divide the extent 16"):
        ConvertLoopToTilePass(tile_sizes=(6, 8)).apply(Context(), module)


@pytest.mark.parametrize("sizes", [(), (8, 8, 8), (0, 8)])
def test_bad_tile_size_lists_are_an_error(sizes: tuple[int, ...]):
    module = parse_module(PROGRAMS["matmul"])
    with pytest.raises(PlmrError, match="tile-sizes must be one or two positive sizes"):
        ConvertLoopToTilePass(tile_sizes=sizes).apply(Context(), module)


def test_sram_estimate_grows_with_the_blocks():
    small, _ = to_tile(load_module(ATTENTION), fuse=True, sizes=(4, 8))
    large, _ = to_tile(load_module(ATTENTION), fuse=True, sizes=(16, 16))
    assert static_traffic(small, "main").sram_peak < static_traffic(large, "main").sram_peak


def test_fit_shrinks_blocks_to_divisors():
    """With fit, a block that does not divide its dimension becomes its largest divisor."""
    from plmr.dialects.context import make_context, parse_module
    from plmr.lowering.loop_to_tile import ConvertLoopToTilePass

    text = """
    func.func @f(%a: tensor<12x10xf32>) -> tensor<12x10xf32> {
      %r = graph.relu %a : tensor<12x10xf32>
      func.return %r : tensor<12x10xf32>
    }
    """
    ctx = make_context()
    module = parse_module(text, ctx=ctx)
    from plmr.dialects import tile
    from plmr.lowering.graph_to_loop import ConvertGraphToLoopPass

    ConvertGraphToLoopPass().apply(ctx, module)
    with pytest.raises(PlmrError, match="does not divide"):
        ConvertLoopToTilePass(tile_sizes=(4, 4)).apply(ctx, module.clone())
    ConvertLoopToTilePass(tile_sizes=(4, 4), fit=True).apply(ctx, module)
    steps = sorted(op.step.value.data for op in module.walk() if isinstance(op, tile.ForOp))
    # 12 keeps blocks of 4; 10 gets blocks of 2, its largest divisor <= 4.
    assert steps == [2, 4]


GEMV_WX = """
func.func @main(%x: tensor<1x60xf32>, %w: tensor<60x24xf32>) -> tensor<1x24xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %y = loop.nest (%i, %j, %k) to (1, 24, 60) [parallel, parallel, reduction] init(%acc = %zero : f32) -> tensor<1x24xf32> {
    %a = loop.read %w[%k, %j] : tensor<60x24xf32>
    %b = loop.read %x[%i, %k] : tensor<1x60xf32>
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    loop.yield %s : f32
  }
  func.return %y : tensor<1x24xf32>
}
"""


@pytest.mark.parametrize(
    ("grid", "steps"),
    [
        ((), [4, 5]),  # the largest divisors of 24 and 60 that are <= 5
        ((4, 4), [3, 5]),  # 24 / 3 = 8 blocks (4 does not divide 24 / 4 = 6); 60 / 5
        ((7, 7), [24, 60]),  # no divisor <= 5 gives a multiple of 7 blocks: whole
    ],
)
def test_fit_grid_picks_blocks_an_axis_can_split(grid: tuple[int, ...], steps: list[int]):
    """The blocks chosen for a grid; the vector of the GEMV is the dot's left operand."""
    from plmr.dialects import tile

    module = parse_module(GEMV_WX)
    fn = select_function(module, None)
    args = random_inputs(fn, 0)
    want = evaluate_function(module, "main", args)
    ConvertLoopToTilePass(tile_sizes=(5, 5), fit=True, fit_grid=grid).apply(
        Context(), module
    )
    got, _ = run_tile_function(module, "main", args)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    fors = [op.step.value.data for op in module.walk() if isinstance(op, tile.ForOp)]
    assert sorted(fors) == steps
    (dot,) = [op for op in module.walk() if isinstance(op, tile.DotOp)]
    assert static_shape(dot.lhs, "lhs")[0] == 1
    assert dot.transpose_a is None
