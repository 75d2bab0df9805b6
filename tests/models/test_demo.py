"""`plmr demo`: the main job (the tiny LLaMA-style model on the wafer, then the ONNX check)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from plmr.tools.cli import main as plmr_main


def test_demo_runs_the_model_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    code = plmr_main(["demo", "--grid", "2x2", "--steps", "4", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "numpy     [" in out
    assert ": equal" in out
    assert "tokens/s on the simulated wafer" in out
    assert "peaks: SRAM" in out
    assert "all outputs equal ONNX within" in out
    trace = json.loads((tmp_path / "decode_trace.json").read_text())
    assert trace["traceEvents"]
    lines = [line for line in out.splitlines() if "heatmap" in line]
    assert lines
    if "skipped" not in lines[0]:
        assert (tmp_path / "decode_heatmap.png").stat().st_size > 0


def test_demo_onnx_only(capsys: pytest.CaptureFixture[str]):
    assert plmr_main(["demo", "--no-llm"]) == 0
    out = capsys.readouterr().out
    assert "LLaMA-style" not in out
    assert "all outputs equal ONNX within" in out
    rows = [line for line in out.splitlines() if line.startswith("hf/llama ")]
    assert len(rows) == 1
    assert rows[0].endswith("ok (torch, stored)")
    assert (
        "(hf/llama.onnx, transformers' LlamaForCausalLM) equals torch within 0.0001" in out
    )


def _hf_copy(tmp_path: Path, shift: float) -> Path:
    """A copy of the demo's Hugging Face export whose stored logits are moved by `shift`."""
    from plmr.models import demo

    path = tmp_path / "hf" / demo.HF_EXPORT.name
    path.parent.mkdir(parents=True)
    shutil.copy(demo.HF_EXPORT, path)
    stored = demo.torch_outputs(demo.HF_EXPORT)
    stored["logits"] = stored["logits"] + np.float32(shift)
    np.savez(path.with_suffix(".npz"), **stored)
    return path


def test_demo_checks_the_hf_export_against_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from plmr.models import demo

    lines: list[str] = []
    monkeypatch.setattr(demo, "HF_EXPORT", _hf_copy(tmp_path, 0.0))
    assert demo.run_demo(0, lines.append)
    monkeypatch.setattr(demo, "HF_EXPORT", _hf_copy(tmp_path / "moved", 1e-2))
    lines.clear()
    assert not demo.run_demo(0, lines.append)
    assert any(line.startswith("hf/llama ") and "MISMATCH" in line for line in lines)
    assert "LlamaForCausalLM) MISMATCH with torch above 0.0001" in lines[-1]


def test_demo_without_the_hf_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from plmr.models import demo

    monkeypatch.setattr(demo, "HF_EXPORT", tmp_path / "llama.onnx")
    lines: list[str] = []
    assert not demo.run_demo(0, lines.append)
    assert f"no Hugging Face export at {tmp_path / 'llama.onnx'}" in lines


def test_demo_rejects_too_many_steps(capsys: pytest.CaptureFixture[str]):
    assert plmr_main(["demo", "--steps", "40"]) == 1
    assert "--steps must be between 1 and 24" in capsys.readouterr().err
