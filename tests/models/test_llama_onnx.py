"""The generated LLaMA exports: a decode step over a cache agrees with the prompt's graph."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

from plmr.models.llama_onnx import LlamaOnnxConfig, write_llama_onnx

SMALL = LlamaOnnxConfig(hidden=32, heads=4, kv_heads=2, ffn=48, vocab=64, layers=2)


def _run(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    model = onnx.load(str(path))  # loads the external data beside it
    names = [o.name for o in model.graph.output]
    outs = ReferenceEvaluator(model).run(None, feeds)
    return dict(zip(names, [np.asarray(o) for o in outs], strict=True))


def test_a_decode_step_over_the_prompts_cache_is_the_prompts_next_row(tmp_path: Path):
    """
    The prompt of 6 tokens (its caches as outputs) and a decode step of the 7th token over
    the caches of the first 6 give the same logits as the prompt of all 7 tokens.
    """
    ids = np.random.default_rng(1).integers(0, SMALL.vocab, size=(1, 7), dtype=np.int64)
    whole = replace(SMALL, seq=7)
    prompt = replace(SMALL, seq=6, present=True)
    step = replace(SMALL, seq=1, past=6)
    for name, c in (("whole", whole), ("prompt", prompt), ("step", step)):
        write_llama_onnx(tmp_path / f"{name}.onnx", c)
    expected = _run(tmp_path / "whole.onnx", {"input_ids": ids})["logits"]
    first = _run(tmp_path / "prompt.onnx", {"input_ids": ids[:, :6]})
    assert sorted(first) == [
        "logits",
        *(f"present.{i}.{k}" for i in range(2) for k in ("key", "value")),
    ]
    assert first["present.0.key"].shape == (1, 2, 6, 8)
    np.testing.assert_allclose(first["logits"], expected[:, :6], rtol=1e-4, atol=1e-5)
    feeds = {"input_ids": ids[:, 6:]}
    feeds |= {
        k.replace("present", "past_key_values"): v
        for k, v in first.items()
        if k != "logits"
    }
    second = _run(tmp_path / "step.onnx", feeds)
    assert second["present.1.value"].shape == (1, 2, 7, 8)
    np.testing.assert_allclose(second["logits"], expected[:, 6:], rtol=1e-4, atol=1e-5)
    # Not trivially equal: the step's row differs from the prompt's last one.
    assert not np.allclose(expected[:, 6], expected[:, 5], atol=1e-3)
