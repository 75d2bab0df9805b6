"""
Differential tests of the nests `convert-loop-to-tile` once left at the loop level (the
refusals `plmr fuzz` counted, and a partial-rotary export): each is blocked, and the tile
program and the compiled mesh program give the loop level's results on random inputs.
"""

from pathlib import Path

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator
from xdsl.context import Context

from plmr.dialects.context import make_context, parse_module
from plmr.dialects.loop import REMARK_ATTR, NestOp
from plmr.frontend.onnx import import_onnx_file
from plmr.lowering.loop_to_tile import ConvertLoopToTilePass
from plmr.models.llama_onnx import LlamaOnnxConfig, write_llama_onnx
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.running import random_inputs, run_entry, select_entry

ROOT = Path(__file__).resolve().parents[2]
GAPS = ROOT / "tests" / "filecheck" / "lowering" / "convert-loop-to-tile-gaps.mlir"


def _programs() -> dict[str, str]:
    """The functions of the FileCheck file, one program each, by name."""
    out: dict[str, str] = {}
    for part in GAPS.read_text().split("// -----"):
        text = "\n".join(x for x in part.splitlines() if not x.startswith("//"))
        name = text.split("func.func @", 1)[1].split("(", 1)[0]
        out[name] = text
    return out


PROGRAMS = _programs()


def _assert_close(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        scale = max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * scale)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("sizes", [(4, 4), (2, 8), (4, 16), (1, 1)])
def test_blocked_nest_matches_the_loop_level(name: str, sizes: tuple[int, int]):
    module = parse_module(PROGRAMS[name])
    fn = select_entry(module, None)
    for seed in (0, 1):
        args = random_inputs(fn, seed)
        want, _ = run_entry(module, fn, args)
        tiled = module.clone()
        ConvertLoopToTilePass(tile_sizes=sizes).apply(Context(), tiled)
        tiled.verify()
        left = [op for op in tiled.walk() if isinstance(op, NestOp)]
        assert not left, left[0].attributes.get(REMARK_ATTR)
        got, _ = run_entry(tiled, select_entry(tiled, None), args)
        _assert_close(got, want)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("grid", [(2, 2), (1, 3)])
def test_compiled_program_matches_the_loop_level(name: str, grid: tuple[int, int]):
    module = parse_module(PROGRAMS[name])
    fn = select_entry(module, None)
    args = random_inputs(fn, 3)
    want, _ = run_entry(module, fn, args)
    compile_module(make_context(), module, CompileOptions(grid=grid, substitute=False))
    got, _ = run_entry(module, select_entry(module, None), args)
    _assert_close(got, want)


def test_partial_rotary_export_compiles_on_4x4(tmp_path: Path):
    """RoPE on the first half of each head (GPT-NeoX's partial rotary) fits a 4x4 grid."""
    config = LlamaOnnxConfig(
        hidden=64, heads=4, kv_heads=2, ffn=128, vocab=64, seq=8, rotary_dim=8
    )
    path = tmp_path / "partial.onnx"
    write_llama_onnx(path, config)
    ids = np.random.default_rng(0).integers(0, config.vocab, (1, config.seq))
    (want,) = ReferenceEvaluator(str(path)).run(None, {"input_ids": ids})
    module = import_onnx_file(str(path))
    (imported,), _ = run_entry(module, select_entry(module, None), [ids])
    _assert_close([imported], [np.asarray(want)])
    # Fixed blocks: the blocking search (18 s) finds a program as well.
    options = CompileOptions(grid=(4, 4), substitute=False, tile_sizes=(8, 8))
    compile_module(make_context(), module, options)
    (got,), report = run_entry(module, select_entry(module, None), [ids])
    _assert_close([got], [np.asarray(want)])
    assert report is not None
    assert report.max_sram_bytes <= report.sram_capacity
