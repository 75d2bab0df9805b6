"""
convert-tile-to-mesh and the plmr-compile pipeline: compiled mesh programs, simulated in
functional mode, equal the reference semantics of the source program (differential tests
on random inputs), on square and non-square grids; plus structure and error checks.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.passes import PassPipeline

from plmr.dialects import mesh, tile
from plmr.dialects.context import load_module, make_context, parse_module
from plmr.dialects.graph import static_shape
from plmr.errors import PlmrError
from plmr.passes import get_all_passes
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.mesh_machine import run_mesh
from plmr.runtime.running import random_inputs, run_function, select_function

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _reference(module: ModuleOp, seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    fn = select_function(module, None)
    inputs = random_inputs(fn, seed)
    return inputs, run_function(module, fn, inputs)


def _check(module: ModuleOp, opts: CompileOptions, seed: int = 0) -> ModuleOp:
    inputs, want = _reference(module, seed)
    compiled = compile_module(make_context(), module.clone(), opts)
    got, _ = run_mesh(compiled, inputs, mode="functional")
    assert len(got) == len(want)
    for w, g in zip(want, got, strict=True):
        assert g.shape == w.shape
        scale = max(1.0, float(np.max(np.abs(w))))
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-3 * scale)
    return compiled


CASES = [
    ("onnx/mlp.mlir", (2, 4)),
    ("onnx/mlp.mlir", (4, 2)),
    ("onnx/mlp.mlir", (3, 3)),
    ("onnx/attention.mlir", (2, 4)),
    ("onnx/attention.mlir", (4, 4)),
    ("onnx/rnn_cell.mlir", (2, 2)),
    ("onnx/rnn_cell.mlir", (4, 2)),
    ("onnx/transformer_block.mlir", (2, 4)),
    ("onnx/transformer_block.mlir", (4, 4)),
    ("attention/prefill_causal.mlir", (2, 4)),
    ("attention/prefill_gqa.mlir", (4, 2)),
    ("attention/decode_causal.mlir", (2, 4)),
    ("attention/decode_gqa.mlir", (4, 4)),
    ("graph/softmax_attention.mlir", (4, 2)),
]


@pytest.mark.parametrize(
    ("path", "grid"), CASES, ids=[f"{p}-{g[0]}x{g[1]}" for p, g in CASES]
)
def test_compiled_examples_match_reference(path: str, grid: tuple[int, int]):
    module = load_module(EXAMPLES / path)
    compiled = _check(
        module, CompileOptions(grid=grid, tile_sizes=(2, 4), substitute=False)
    )
    (program,) = [op for op in compiled.ops if isinstance(op, mesh.ProgramOp)]
    assert program.grid_shape == grid
    # Operands are placed in the layout they are read in (Q·Kᵀ is a dot with transpose_b on
    # blocks placed as stored): only a transpose written in the program itself (e.g. the
    # head split of the ONNX transformer block) leaves a local block transpose.
    if "graph.transpose" not in (EXAMPLES / path).read_text():
        assert not any(isinstance(op, tile.TransposeOp) for op in compiled.walk())


GEMM_CHAIN = """
func.func @main(%a: tensor<{n}x{n}xf32>, %b: tensor<{n}x{n}xf32>, %c: tensor<{n}x{h}xf32>) -> tensor<{n}x{h}xf32> {{
  %ab = graph.matmul %a, %b : (tensor<{n}x{n}xf32>, tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32>
  %r = graph.relu %ab : tensor<{n}x{n}xf32>
  %o = graph.matmul %r, %c : (tensor<{n}x{n}xf32>, tensor<{n}x{h}xf32>) -> tensor<{n}x{h}xf32>
  func.return %o : tensor<{n}x{h}xf32>
}}
"""


@pytest.mark.parametrize("gemm", ["meshgemm", "cannon", "summa"])
@pytest.mark.parametrize("grid", [(2, 2), (3, 3), (4, 2), (2, 4)])
def test_gemm_algorithms_agree(gemm: str, grid: tuple[int, int]):
    module = parse_module(GEMM_CHAIN.format(n=24, h=16))
    opts = CompileOptions(grid=grid, gemm=gemm, tile_sizes=(2, 2), substitute=False)
    _check(module, opts, seed=1)


@pytest.mark.parametrize(
    ("grid", "n", "tiles", "device", "rings"),
    [
        ((3, 3), 144, (16, 16), "wse2", {"interleaved"}),
        ((4, 2), 96, (8, 8), "wse2:sram_kib=24", {"interleaved", "torus"}),
    ],
)
@pytest.mark.parametrize("gemm", ["meshgemm", "cannon", "summa"])
def test_large_gemms_circulate_operands(
    grid: tuple[int, int],
    n: int,
    tiles: tuple[int, int],
    device: str,
    rings: set[str],
    gemm: str,
):
    """Blocks too large to replicate: the reduction runs as Cannon/MeshGEMM or SUMMA."""
    module = parse_module(GEMM_CHAIN.format(n=n, h=n // 3 if grid[0] == 3 else n // 2))
    opts = CompileOptions(
        grid=grid, gemm=gemm, device=device, tile_sizes=tiles, substitute=False
    )
    compiled = _check(module, opts, seed=1)
    ops = list(compiled.walk())
    shifts = [op for op in ops if isinstance(op, mesh.ShiftOp)]
    if gemm == "summa":
        assert not shifts
        assert any(isinstance(op, mesh.BroadcastOp) for op in ops)
        return
    assert shifts
    used = {op.ring.data for op in shifts}
    assert used <= (rings if gemm == "meshgemm" else {"torus"}), used
    # Operands read by the circulating reduction are placed pre-aligned (skewed).
    skews = [
        op.result.type.layout
        for op in ops
        if isinstance(op, mesh.ScatterOp) and isinstance(op.result.type, mesh.DistType)
    ]
    assert {layout.skew.data for layout in skews} >= {"x", "y"}
    assert all(
        layout.chunks.data == math.lcm(*grid) for layout in skews if layout.skew.data
    )


@pytest.mark.parametrize("gemv", ["ktree", "pipeline", "ring"])
def test_decode_gemvs_alternate_axes(gemv: str):
    text = """
    func.func @main(%x: tensor<1x256xf32>, %w1: tensor<256x256xf32>, %w2: tensor<256x256xf32>) -> tensor<1x256xf32> {
      %h = graph.matmul %x, %w1 : (tensor<1x256xf32>, tensor<256x256xf32>) -> tensor<1x256xf32>
      %o = graph.matmul %h, %w2 : (tensor<1x256xf32>, tensor<256x256xf32>) -> tensor<1x256xf32>
      func.return %o : tensor<1x256xf32>
    }
    """
    module = parse_module(text)
    opts = CompileOptions(grid=(4, 4), gemv=gemv, tile_sizes=(16, 16), substitute=False)
    compiled = _check(module, opts, seed=2)
    reduces = [op for op in compiled.walk() if isinstance(op, mesh.AllreduceOp)]
    assert reduces
    assert {op.algorithm.data for op in reduces} == {gemv}
    axes = [op.axis.data for op in reduces]
    assert set(axes) == {"x", "y"}, axes


def test_tile_program_through_the_pass():
    """convert-tile-to-mesh on its own, as plmr-opt/xdsl-opt users run it."""
    ctx = make_context()
    module = load_module(EXAMPLES / "onnx/mlp.mlir", ctx)
    inputs, want = _reference(module, 5)
    PassPipeline.parse_spec(
        get_all_passes(),
        "convert-graph-to-loop,convert-loop-to-tile{tile-sizes=2,4},"
        'convert-tile-to-mesh{grid=2,4 device="wse3" gemm="cannon"}',
    ).apply(ctx, module)
    assert not any(
        isinstance(op, tile.ForOp) and op.parent_op() is module for op in module.walk()
    )
    (program,) = [op for op in module.ops if isinstance(op, mesh.ProgramOp)]
    assert program.device.spec.data == "wse3"
    got, _ = run_mesh(module, inputs, mode="functional")
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)


def test_timing_mode_runs_compiled_programs():
    module = load_module(EXAMPLES / "onnx/transformer_block.mlir")
    # One blocking: the timing run is checked here, not the blocking search.
    compiled = compile_module(
        make_context(),
        module,
        CompileOptions(grid=(4, 4), substitute=False, tile_sizes=(8, 8)),
    )
    fn_inputs = [np.zeros((1, 8, 16), np.float32)]
    _, report = run_mesh(compiled, fn_inputs, mode="timing")
    assert report.cycles > 0


def test_larger_grids_are_faster():
    module = parse_module(GEMM_CHAIN.format(n=64, h=32))
    cycles: list[float] = []
    for grid in ((1, 1), (2, 2), (4, 4)):
        compiled = compile_module(
            make_context(), module.clone(), CompileOptions(grid=grid, substitute=False)
        )
        inputs = [np.zeros((64, 64), np.float32)] * 2 + [np.zeros((64, 32), np.float32)]
        _, report = run_mesh(compiled, inputs, mode="timing")
        cycles.append(report.cycles)
    assert cycles[0] > 2 * cycles[1] > 4 * cycles[2], cycles


def test_program_too_large_for_its_grid():
    # Neither batched nor one head at a time (loop-split-heads): the batched program's
    # nest is named.
    module = load_module(EXAMPLES / "attention/decode_causal.mlir")
    with pytest.raises(PlmrError) as info:
        compile_module(
            make_context(),
            module,
            CompileOptions(
                grid=(1, 1),
                device="wse2:sram_kib=16",
                tile_sizes=(2, 4),
                substitute=False,
            ),
        )
    message = str(info.value)
    assert "does not fit a 1x1 grid of wse2" in message
    assert "bytes of SRAM, a PE has 16384" in message
    assert "_h0" not in message


_SLICES_AT_OFFSETS = """
builtin.module {
  func.func @main(%x: tensor<1x2xf32>, %w: tensor<2x6144xf32>) -> tensor<1x2048xf32> {
    %qkv = graph.matmul %x, %w : (tensor<1x2xf32>, tensor<2x6144xf32>) -> tensor<1x6144xf32>
    %q, %k, %r = graph.split %qkv axis = 1 sizes = [2048, 2048, 2048] : tensor<1x6144xf32> -> (tensor<1x2048xf32>, tensor<1x2048xf32>, tensor<1x2048xf32>)
    %y = graph.mul %q, %r : (tensor<1x2048xf32>, tensor<1x2048xf32>) -> tensor<1x2048xf32>
    %z = graph.add %y, %k : (tensor<1x2048xf32>, tensor<1x2048xf32>) -> tensor<1x2048xf32>
    func.return %z : tensor<1x2048xf32>
  }
}
"""


@pytest.mark.parametrize("sram_kib", [20, 24])
def test_refusal_names_the_operand_gathered_whole(sram_kib: int):
    # The pieces of one matmul's result, read at offsets of the consumer's index: the
    # consumer's placement gathers the whole product (24 KiB) on every PE, and the
    # refusal says so, whether the planner's estimate refuses it or the measured peak.
    module = parse_module(_SLICES_AT_OFFSETS)
    with pytest.raises(PlmrError) as info:
        compile_module(
            make_context(),
            module,
            CompileOptions(
                grid=(4, 4), device=f"wse2:sram_kib={sram_kib}", substitute=False
            ),
        )
    message = str(info.value)
    assert "the nest computing %z does not fit a 4x4 grid" in message
    assert "it gathers %qkv (1x6144) whole on every PE" in message


def test_smaller_sram_device_is_rejected_precisely():
    module = load_module(EXAMPLES / "onnx/mlp.mlir")
    with pytest.raises(PlmrError, match=r"needs \d+ bytes of SRAM, a PE has 1024"):
        compile_module(
            make_context(),
            module,
            CompileOptions(grid=(1, 1), device="wse2:sram_kib=1", substitute=False),
        )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"grid": (0, 4)}, "grid must be two positive sizes"),
        ({"grid": (800, 800)}, "does not fit wse2"),
        ({"gemm": "foo"}, "unknown gemm 'foo'"),
        ({"gemv": "foo"}, "unknown gemv 'foo'"),
        ({"k": 0}, "k must be >= 1"),
    ],
)
def test_bad_options(options: dict[str, object], message: str):
    module = load_module(EXAMPLES / "onnx/mlp.mlir")
    opts = CompileOptions(substitute=False, **options)  # pyright: ignore[reportArgumentType]
    with pytest.raises(PlmrError, match=message):
        compile_module(make_context(), module, opts)


def test_strided_padded_convolutions_compile():
    """
    conv_block's padded, strided windows are padded tile loads: nothing is left at the
    loop level, and the mesh program equals the graph program."""
    module = load_module(EXAMPLES / "onnx/conv_block.mlir")
    fn = select_function(module, None)
    inputs = random_inputs(fn, seed=0)
    want = run_function(module, fn, inputs)
    # One blocking (8x8 blocks shrunk to divisors): the padded loads are checked here,
    # not the blocking search.
    opts = CompileOptions(grid=(2, 2), substitute=False, tile_sizes=(8, 8), fit_tiles=True)
    compile_module(make_context(), module, opts)
    assert "loop.nest" not in str(module)
    got, _ = run_mesh(module, inputs)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("gemm", ["meshgemm", "cannon", "summa"])
def test_ring_attention_on_small_pes(gemm: str):
    """Keys too large to replicate: K and V circulate (rolling update per chunk)."""
    module = load_module(EXAMPLES / "attention/prefill_causal.mlir")
    opts = CompileOptions(
        grid=(2, 4), gemm=gemm, device="wse2:sram_kib=7", substitute=False, relay=True
    )
    compiled = _check(module, opts, seed=4)
    ops = list(compiled.walk())
    moves = [op for op in ops if isinstance(op, mesh.ShiftOp | mesh.BroadcastOp)]
    assert moves
    assert {op.axis.data for op in moves} == {"x"}
    assert not any(isinstance(op, tile.TransposeOp) for op in ops)


def test_keys_computed_along_one_axis_move_to_the_other_block_by_block():
    """
    A prefill layer on small PEs: the keys are computed with their rows split over x,
    ring attention wants them split over y. Each PE gets its block from the PE of its
    row whose column equals its row (`mesh.diagonal_broadcast` along x), never a whole
    strip; the program computes the graph's values (`_check`).
    """
    from plmr.models.llama import LlamaConfig, ProgramBuilder

    config = LlamaConfig(
        "t",
        dim=24,
        n_layers=1,
        n_heads=2,
        n_kv_heads=1,
        ffn_dim=48,
        vocab=8,
        max_seq=24,
        head_dim_override=128,
    )
    builder = ProgramBuilder(config, None, form="per-head")
    module = parse_module(builder.prefill(24, layers=[0], head=False))
    opts = CompileOptions(
        grid=(6, 6),
        device="wse2:sram_kib=16",
        substitute=False,
        tile_sizes=(4, 4),
        fit_tiles=True,
        chunks=6,
    )
    compiled = _check(module, opts, seed=1)
    diagonal = [op for op in compiled.walk() if isinstance(op, mesh.DiagonalBroadcastOp)]
    assert diagonal
    assert "x" in {op.axis.data for op in diagonal}


@pytest.mark.parametrize(
    ("gemm", "grid"), [("meshgemm", 4), ("meshgemm", 3), ("cannon", 4)]
)
def test_an_intermediate_is_skewed_by_one_pass_round_the_ring(gemm: str, grid: int):
    """
    Cannon's pre-skew of a computed operand (relu(A·B) in (A·B)·D): each block passes
    once round the ring and every PE keeps its own, in two blocks of SRAM; no row strip
    is gathered.
    """
    n = 16 * grid
    t = f"tensor<{n}x{n}xf32>"
    module = parse_module(f"""
    func.func @main(%a: {t}, %b: {t}, %d: {t}) -> {t} {{
      %t = graph.matmul %a, %b : ({t}, {t}) -> {t}
      %r = graph.relu %t : {t}
      %c = graph.matmul %r, %d : ({t}, {t}) -> {t}
      func.return %c : {t}
    }}""")
    opts = CompileOptions(
        grid=(grid, grid),
        gemm=gemm,
        device="wse2:sram_kib=6",
        substitute=False,
        tile_sizes=(16, 16),
    )
    compiled = _check(module, opts)
    realign = [
        op
        for op in compiled.walk()
        if isinstance(op, tile.ForOp)
        and any(isinstance(o, mesh.ShiftOp) for o in op.body.block.ops)
        and any(o.name == "arith.cmpi" for o in op.body.block.ops)
    ]
    assert len(realign) == 1
    (spmd,) = [
        op
        for op in compiled.walk()
        if isinstance(op, mesh.SpmdOp) and any(o.name_hint == "c" for o in op.outputs)
    ]
    # No all-gathered strip of %r: every block in the nest is one 16x16 chunk.
    shapes = {
        tuple(static_shape(v, "v"))
        for op in spmd.walk()
        for v in op.results
        if isinstance(v.type, TensorType)
    }
    assert max(math.prod(s) for s in shapes) <= 2 * 16 * 16


@pytest.mark.parametrize(
    ("gemv", "algorithm"), [("pipeline", "pipeline"), ("ring", "ktree")]
)
def test_relayout_gathers_follow_the_gemv_option(gemv: str, algorithm: str):
    # A relayout's all-gather takes the GEMV algorithm of the options; an allgather has
    # no ring (its blocks grow along the chains), so `ring` gathers with a K-tree. The
    # program equals the graph's either way.
    module = load_module(EXAMPLES / "onnx/attention.mlir")
    opts = CompileOptions(grid=(4, 4), gemv=gemv, substitute=False)
    compiled = _check(module, opts)
    gathers = [op for op in compiled.walk() if isinstance(op, mesh.AllgatherOp)]
    assert gathers
    assert {op.algorithm.data for op in gathers} == {algorithm}
