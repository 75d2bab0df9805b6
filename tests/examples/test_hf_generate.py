"""
Greedy generation with the Hugging Face decoder exports (`examples/hf/<family>_prefill`
and `<family>_decode`): their KV caches become wafer state (`graph-kv-state`), and the
tokens equal torch's stored greedy tokens, on a 2x2 wafer where only the position, the
token's embedding row and the logits cross the host link, and at the graph level up to
the cache's last row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.dialects import func

from plmr.errors import PlmrError
from plmr.frontend.onnx import import_onnx_file
from plmr.models.export_decode import ExportDecoder
from plmr.passes.kv_state import kv_state
from plmr.passes.pipeline import CompileOptions
from plmr.runtime.running import run_function, select_entry
from plmr.target.interface import arg_names, result_names, state_args

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"
FAMILIES = ("llama", "qwen2", "mistral")
LAYERS, KV_HEADS, HEAD_DIM, DIM, VOCAB = 2, 2, 16, 64, 128
PROMPT, CONTEXT, GENERATED = 8, 72, 64
CACHE_BYTES = 2 * LAYERS * KV_HEADS * CONTEXT * HEAD_DIM * 4
"""Every layer's K and V buffers of `CONTEXT` rows, float32."""
WAFER = CompileOptions(grid=(2, 2), substitute=False, tile_sizes=(8, 8), fit_tiles=True)
"""One blocking, no substitution search: the compile of `test_hf_decoders.py`."""


def greedy(family: str) -> tuple[list[int], list[int]]:
    """The prompt and torch's greedy tokens."""
    with np.load(HF / f"{family}_greedy.npz") as data:
        prompt = [int(t) for t in data["input_ids"].reshape(-1)]
        return prompt, [int(t) for t in data["tokens"]]


def decoder(family: str, options: CompileOptions | None, cache: Any = None) -> Any:
    prefill = import_onnx_file(str(HF / f"{family}_prefill.onnx"))
    decode = import_onnx_file(str(HF / f"{family}_decode.onnx"))
    if cache is None:
        return ExportDecoder(prefill, decode, None, options)
    return ExportDecoder(prefill, decode, None, options, compiler=cache.compile)


@pytest.mark.parametrize(
    "steps",
    [
        # The cache fills from 9 to 17 rows: past the second block of 8 rows.
        9,
        # To 23 rows; the graph-level test below runs to the cache's last row.
        pytest.param(15, marks=pytest.mark.slow),
    ],
)
@pytest.mark.parametrize("family", FAMILIES)
def test_wafer_generation_equals_torch(family: str, steps: int, compile_cache: Any):
    prompt, want = greedy(family)
    model = decoder(family, WAFER, compile_cache)
    assert model.capacity == CONTEXT
    result = model.generate(prompt, steps)
    assert result.tokens == want[: steps + 1]
    decode = [s.report for s in result.steps if s.kind == "decode"]
    assert len(decode) == steps
    for step, report in enumerate(decode):
        assert report is not None
        # The position in (8 B) with RoPE's tables of it (computed on the host: cos and
        # sin, a head of 16 floats each), the token's embedding row looked up by the
        # host, the logits out: the same at every step while the cache fills, and the
        # caches (36,864 B) stay on the wafer.
        assert report.host_in_bytes == 8 + 2 * HEAD_DIM * 4
        assert report.host_lookup_bytes == DIM * 4
        assert report.host_out_bytes == VOCAB * 4
        assert report.resident_bytes == CACHE_BYTES
        # Buffers the prefill left in another layout are re-placed on the wafer by the
        # first step only; later steps find them where the step before left them.
        assert report.state_moved_bytes <= (CACHE_BYTES if step == 0 else 0)


@pytest.mark.parametrize("family", FAMILIES)
def test_graph_level_generation_fills_the_cache(family: str):
    """
    The decode export's cache (71 + 1 rows) is longer than the prompt (8): generation
    continues to torch's 64th token at position 70, and one more step than the cache
    holds is an error.
    """
    prompt, want = greedy(family)
    model = decoder(family, None)
    assert model.capacity == CONTEXT != PROMPT
    assert model.generate(prompt, GENERATED - 1).tokens == want
    with pytest.raises(PlmrError, match="exceed the cache of 72 rows"):
        model.generate(prompt, CONTEXT - PROMPT + 1)


@pytest.mark.parametrize("family", FAMILIES)
def test_rewritten_step_masks_rows_beyond_the_position(family: str, hf: Any):
    """
    torch's stored step has the prompt's cache right-aligned in 71 rows and
    `attention_mask` zero before it; the rewritten step holds it in rows 0..7 of a
    72-row buffer with garbage after them, computes the mask from the position (8),
    and gives torch's logits.
    """
    inputs, want = hf.stored(f"{family}_decode")
    module = import_onnx_file(str(HF / f"{family}_decode.onnx"))
    assert kv_state(module) == 2 * LAYERS
    fn = select_entry(module, None)
    assert isinstance(fn, func.FuncOp)
    assert "attention_mask" not in arg_names(fn)
    rng = np.random.default_rng(0)
    args: list[Any] = []
    for name, state in zip(arg_names(fn), state_args(fn), strict=True):
        if state is None:
            args.append(inputs[name])
            continue
        past = inputs[state.replace("present", "past_key_values")]
        buffer = 100 * rng.standard_normal((1, KV_HEADS, CONTEXT, HEAD_DIM))
        buffer[:, :, :PROMPT] = past[:, :, CONTEXT - 1 - PROMPT :]
        args.append(buffer.astype(np.float32))
    outs = dict(zip(result_names(fn), run_function(module, fn, args), strict=True))
    hf.assert_close({"logits": outs["logits"]}, {"logits": want["logits"]}, 1e-4)
    for c in (f"{n}.{kv}" for n in range(LAYERS) for kv in ("key", "value")):
        row = outs[f"present.{c}"][:, :, PROMPT]
        np.testing.assert_allclose(row, want[f"present.{c}"][:, :, -1], atol=1e-5)
