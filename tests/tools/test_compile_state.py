"""
`plmr compile` of a decoder's decode step keeps its KV caches on the wafer
(`graph-kv-state`, on by default): the compiled step, run step after step with the caches
as wafer state, computes what the export computes with the caches kept by the host (2x2
with one blocking, 3x3 with the searched one); the host link carries the token, the position and the logits, whatever the cache's
length; `--no-state` compiles the step as exported; a bad `--state` is one error.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plmr.dialects import mesh
from plmr.dialects.context import load_module, make_context
from plmr.frontend.onnx import import_onnx_file
from plmr.models.export_decode import host_cache_step
from plmr.models.llama_onnx import LlamaOnnxConfig, write_llama_onnx
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.running import run_entry, select_entry
from plmr.runtime.state import Resident, WaferState
from plmr.target.interface import arg_names, state_args

DECODE = Path(__file__).resolve().parents[2] / "examples" / "decode" / "tiny_decode.onnx"
LAYERS, KV_HEADS, ROWS, HEAD_DIM, VOCAB = 2, 2, 32, 8, 64
"""The checked-in tiny decode step: its caches `[1, 2, 31, 8]` in, `[1, 2, 32, 8]` out."""


@pytest.mark.parametrize(
    "grid,blocking",
    [
        # One blocking on 2x2: the state placement, not the blocking search.
        pytest.param("2x2", ["--tile-sizes", "8,8", "--fit-tiles"], id="2x2-one-blocking"),
        # The blocking the search chooses for the step on an odd grid.
        pytest.param("3x3", [], id="3x3-searched"),
    ],
)
def test_compiled_step_keeps_the_cache_and_equals_the_export(
    grid: str, blocking: list[str], tmp_path: Path, cli: Any
):
    out = tmp_path / "step.mlir"
    code, _, err = cli.run(
        [
            "compile",
            str(DECODE),
            "--grid",
            grid,
            "--no-substitute",
            *blocking,
            "-o",
            str(out),
        ]
    )
    assert code == 0, err
    assert "keeps 4 KV cache(s) on the wafer as state" in err
    compiled = load_module(out)
    program = select_entry(compiled, None)
    assert isinstance(program, mesh.ProgramOp)
    names = [f"present.{i}.{k}" for i in range(LAYERS) for k in ("key", "value")]
    assert [s for s in state_args(program) if s] == names
    # Only the token and the position are host inputs: the mask is computed on the wafer.
    host_inputs = [
        n for n, s in zip(arg_names(program), state_args(program), strict=True) if not s
    ]
    assert host_inputs == ["input_ids", "position_ids"]

    original = import_onnx_file(str(DECODE))
    rng = np.random.default_rng(3)
    steps, start = 3, 9
    rows, shape = grid.split("x"), (1, KV_HEADS, ROWS - 1, HEAD_DIM)
    wafer, pasts = WaferState(), {}
    for name in names:
        past = rng.standard_normal(shape).astype(np.float32)
        past[:, :, start:] = 0.0
        pasts[name.replace("present", "past_key_values")] = past
        # The buffer holds the same rows and garbage beyond them, which the mask hides.
        buffer = 100 * rng.standard_normal((1, KV_HEADS, ROWS, HEAD_DIM))
        buffer = buffer.astype(np.float32)
        buffer[:, :, :start] = past[:, :, :start]
        wafer.keep(name, Resident(buffer.shape, (int(rows[0]), int(rows[1])), buffer, None))
    for step in range(steps):
        token, pos = int(rng.integers(0, VOCAB)), start + step
        want = host_cache_step(original, token, pos, pasts, ROWS)
        feeds = [np.asarray([[token]], np.int64), np.asarray([[pos]], np.int64)]
        got, report = run_entry(compiled, program, feeds, state=wafer)
        assert report is not None
        np.testing.assert_allclose(got[0], want, atol=1e-3, rtol=1e-3)
        assert report.host_out_bytes == VOCAB * 4
        for name in names:
            past = pasts[name.replace("present", "past_key_values")]
            kept = wafer.tensor(name)
            np.testing.assert_allclose(
                kept[:, :, : pos + 1], past[:, :, : pos + 1], atol=1e-3
            )


SMALL = LlamaOnnxConfig(
    hidden=32, heads=4, kv_heads=2, ffn=48, vocab=64, seq=1, position_inputs=True
)


def _host_bytes(tmp_path: Path, past: int, kv_state: bool) -> tuple[float, int]:
    """Host bytes of one timed step of a generated export with a cache of `past` rows."""
    path = tmp_path / f"step{past}.onnx"
    write_llama_onnx(path, replace(SMALL, past=past))
    module = import_onnx_file(str(path))
    # One blocking: the bytes that cross the host link do not depend on it.
    options = CompileOptions(
        grid=(2, 2), substitute=False, kv_state=kv_state, tile_sizes=(8, 8), fit_tiles=True
    )
    compile_module(make_context(), module, options)
    program = select_entry(module, None)
    assert isinstance(program, mesh.ProgramOp)
    states = state_args(program)
    inputs = [
        np.zeros(tuple(a.type.get_shape()), np.float32)  # type: ignore[union-attr]
        for a, s in zip(program.body.block.args, states, strict=True)
        if s is None
    ]
    _, report = run_entry(module, program, inputs, mode="timing", state=WaferState())
    assert report is not None
    moved = report.host_in_bytes + report.host_lookup_bytes + report.host_out_bytes
    return moved, report.resident_bytes


def test_host_bytes_per_step_do_not_grow_with_the_cache(tmp_path: Path):
    short, short_resident = _host_bytes(tmp_path, 7, kv_state=True)
    long, long_resident = _host_bytes(tmp_path, 15, kv_state=True)
    # The position (8 B), RoPE's frequencies of the position (computed on the host: half
    # a head of floats) and the token's embedding row in, the logits out; the caches (one
    # layer's keys and values) stay on the wafer and grow there.
    freqs = SMALL.hidden // SMALL.heads // 2 * 4
    assert short == long == 8 + freqs + SMALL.hidden * 4 + SMALL.vocab * 4
    assert (short_resident, long_resident) == (2 * 2 * 8 * 8 * 4, 2 * 2 * 16 * 8 * 4)
    # As exported, the past and the mask come in and the present goes out every step;
    # the position is read on the host only (RoPE's frequencies), so it stays there.
    exported, _ = _host_bytes(tmp_path, 15, kv_state=False)
    assert exported == long - 8 + 8 * 16 + 2 * (2 * 15 * 8 * 4) + 2 * (2 * 16 * 8 * 4)


def test_bad_state_is_one_error(cli: Any, tmp_path: Path):
    out = tmp_path / "never.mlir"
    # A pair the pass refuses stops a plain compile (which then recompiles pass by pass
    # to tell a refusal from an unverified pass: the smallest grid, no substitution) and
    # a pass-by-pass compile (which keeps the state before its first pass).
    plain = ["--grid", "1x1", "--no-substitute"]
    for argv, message in (
        (["--state", "past_key_values.0.key"], "must be IN=OUT"),
        (
            ["--check-each", "--state", "input_ids=present.0.key"],
            "is not Concat('input_ids', new row)",
        ),
        ([*plain, "--state", "nosuch=present.0.key"], "'nosuch' is not an input"),
        (["--state", "a=b", "--no-state"], "--no-state keeps none"),
    ):
        code, _, err = cli.run(["compile", str(DECODE), *argv, "-o", str(out)])
        assert code == 1, err
        assert err.startswith("error: "), err
        assert message in err, err
        assert "Traceback" not in err
        assert not out.exists()
