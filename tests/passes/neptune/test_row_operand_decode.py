"""
A generated LLaMA decode step (the position an input, RoPE's tables computed at run time)
over a cache of 128 rows: `neptune-fuse` stores the rotated query once instead of
recomputing it for every cached row the scores read, and the compiled step on 2x2, 3x3
and 2x4, its caches kept on the wafer, computes what the export computes with the caches
kept by the host.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plmr.dialects import mesh
from plmr.dialects.context import make_context
from plmr.dialects.loop import NestOp, ReadOp
from plmr.frontend.onnx import import_onnx_file
from plmr.models.export_decode import host_cache_step
from plmr.models.llama_onnx import LlamaOnnxConfig, write_llama_onnx
from plmr.passes.pipeline import CompileOptions, compile_module, keep_state, to_loop_level
from plmr.runtime.running import run_entry, select_entry
from plmr.runtime.state import Resident, WaferState
from plmr.target.interface import state_args

CONFIG = LlamaOnnxConfig(
    hidden=32, heads=4, kv_heads=2, ffn=48, vocab=64, seq=1, past=127, position_inputs=True
)
ROWS, HEAD_DIM = CONFIG.past + 1, CONFIG.hidden // CONFIG.heads


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("decode") / "step.onnx"
    write_llama_onnx(path, CONFIG)
    return path


def _reads(nest: NestOp, name: str) -> bool:
    return any(isinstance(op, ReadOp) and op.source.name_hint == name for op in nest.walk())


def test_the_rotated_query_is_computed_once(export: Path):
    module = import_onnx_file(str(export))
    options = CompileOptions(grid=(2, 2), substitute=False, kv_state=True, fit_tiles=True)
    keep_state(module, options)
    module = to_loop_level(make_context(), module, options)
    nests = [op for op in module.walk() if isinstance(op, NestOp)]
    top = [n for n in nests if isinstance(n.parent_op(), type(nests[0].parent_op()))]
    # The nest that reads the cache (`kcat`) reads the stored rotation, not the tables.
    readers = [n for n in top if _reads(n, "kcat")]
    assert readers
    assert not any(_reads(n, "rope_cos") or _reads(n, "rope_sin") for n in readers)
    # The rotation is a map of its own, reading the tables and the projection by heads
    # (Q, K and V merged: graph-fold-heads, graph-merge-matmuls).
    assert any(
        not n.is_reduction and _reads(n, "rope_cos") and _reads(n, "heads_proj")
        for n in top
    )


@pytest.mark.parametrize("grid", [(2, 2), (3, 3), (2, 4)], ids=["2x2", "3x3", "2x4"])
def test_compiled_step_equals_the_export(export: Path, grid: tuple[int, int]):
    original = import_onnx_file(str(export))
    compiled = import_onnx_file(str(export))
    options = CompileOptions(
        grid=grid, substitute=False, kv_state=True, tile_sizes=(8, 8), fit_tiles=True
    )
    compile_module(make_context(), compiled, options)
    program = select_entry(compiled, None)
    assert isinstance(program, mesh.ProgramOp)
    names = [s for s in state_args(program) if s]
    assert names == ["present.0.key", "present.0.value"]
    rng = np.random.default_rng(sum(grid))
    start = 100
    wafer = WaferState()
    pasts: dict[str, np.ndarray[Any, Any]] = {}
    shape = (1, CONFIG.kv_heads, ROWS - 1, HEAD_DIM)
    for name in names:
        past = rng.standard_normal(shape).astype(np.float32)
        past[:, :, start:] = 0.0
        pasts[name.replace("present", "past_key_values")] = past
        # Rows beyond the position hold garbage, which the mask hides.
        buffer = 100 * rng.standard_normal((1, CONFIG.kv_heads, ROWS, HEAD_DIM))
        buffer = buffer.astype(np.float32)
        buffer[:, :, :start] = past[:, :, :start]
        wafer.keep(name, Resident(buffer.shape, grid, buffer, None))
    for step in range(2):
        token, pos = int(rng.integers(0, CONFIG.vocab)), start + step
        want = host_cache_step(original, token, pos, pasts, ROWS)
        feeds = [np.asarray([[token]], np.int64), np.asarray([[pos]], np.int64)]
        got, _ = run_entry(compiled, program, feeds, state=wafer)
        np.testing.assert_allclose(got[0], want, atol=1e-3, rtol=1e-3)
