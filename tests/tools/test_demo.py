"""`plmr demo`: the main job (the tiny LLaMA-style model on the wafer, then the ONNX check)."""

from __future__ import annotations

import json
from pathlib import Path

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
    assert "LLaMA" not in out
    assert "all outputs equal ONNX within" in out


def test_demo_rejects_too_many_steps(capsys: pytest.CaptureFixture[str]):
    assert plmr_main(["demo", "--steps", "40"]) == 1
    assert "--steps must be between 1 and 24" in capsys.readouterr().err
