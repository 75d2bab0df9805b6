"""
`plmr bench decode|prefill` (`plmr.models.bench`): the step is assembled from compiled
and simulated programs, and for the two-layer `tiny` model it is exactly the whole
model's decode program plus its KV appends; the CLI prints one JSON object or one
clean error; `benchmarks/llm.py --quick` writes its table.
"""

from __future__ import annotations

import json
import runpy
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import pytest

from plmr.models.bench import (
    _timed,  # pyright: ignore[reportPrivateUsage]
    bench_config,
    bench_llm,
    default_options,
    stage_hop_cycles,
)
from plmr.models.llama import ProgramBuilder, get_config
from plmr.runtime.device import get_device
from plmr.tools.cli import main as plmr_main

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "llm.py"


def test_tiny_decode_is_the_whole_model_plus_its_appends():
    result = bench_llm("decode", "tiny", (4, 4))
    config = bench_config("tiny", (4, 4), result.tokens)
    dev = get_device("wse2")
    whole, _, _ = _timed(
        ProgramBuilder(config, None).decode(), default_options("tiny", (4, 4), "wse2"), dev
    )
    assert result.n_layers == 2
    assert result.stages == 1
    assert result.kv_append_cycles > 0
    want = float(whole.cycles) + 2 * result.kv_append_cycles
    assert result.step_cycles == pytest.approx(want, rel=1e-9)
    assert result.tokens_per_second == pytest.approx(dev.clock_hz / result.step_cycles)
    assert result.first_cycles + result.layer_cycles == pytest.approx(float(whole.cycles))
    assert 0 < result.sram_bytes_per_core <= result.sram_capacity
    assert 0 < result.routes_per_router <= result.route_capacity
    assert 0.0 < result.layer_compute_fraction <= 1.0


def test_tiny_prefill_counts_the_prompt():
    result = bench_llm("prefill", "tiny", (2, 2), tokens=4)
    dev = get_device("wse2")
    assert result.tokens == 4
    assert result.kv_append_cycles == 0.0
    assert result.tokens_per_second == pytest.approx(4 * dev.clock_hz / result.step_cycles)
    assert result.to_json()["ttft_ms"] == pytest.approx(result.step_seconds * 1e3)


def test_models_are_padded_to_the_grid():
    config = bench_config("llama3-8b", (420, 420), 4096)
    assert (config.dim, config.ffn_dim, config.vocab, config.max_seq) == (
        4200,
        14700,
        128520,
        4200,
    )
    assert config.head_dim == 128
    assert bench_config("tiny", (4, 4), 32) == bench_config("tiny", (2, 2), 32)


def test_a_stage_hop_crosses_the_grid():
    dev = get_device("wse2")
    small = stage_hop_cycles(get_config("llama3-8b"), (120, 120), dev)
    large = stage_hop_cycles(get_config("llama3-8b"), (420, 420), dev)
    assert 420 * dev.hop_cycles < large
    assert small < large


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = plmr_main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_prints_one_json_object(capsys: pytest.CaptureFixture[str]):
    code, out, _ = run(
        ["bench", "decode", "--model", "tiny", "--grid", "2x2", "--json"], capsys
    )
    assert code == 0
    lines = out.strip().splitlines()
    assert len(lines) == 1
    data = json.loads(lines[0])
    for key in ("layer_cycles", "step_cycles", "tokens_per_second", "tpot_ms", "stages"):
        assert key in data
    assert data["waferllm"]["tokens_per_second"] == 2700.0


def test_cli_prints_a_report(capsys: pytest.CaptureFixture[str]):
    code, out, _ = run(["bench", "prefill", "--model", "tiny", "--grid", "2x2"], capsys)
    assert code == 0
    assert "tokens/s" in out
    assert "WaferLLM" in out
    assert "stages" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "gpt5"], "unknown model 'gpt5'"),
        (["--grid", "2000x2000"], "does not fit wse2"),
        (["--tokens", "0"], "must be >= 1"),
        (["--tile-sizes", "a,b"], "bad --tile-sizes"),
    ],
)
def test_cli_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]):
    code, out, err = run(["bench", "decode", "--grid", "2x2", *argv], capsys)
    assert code != 0
    assert out == ""
    assert message in err
    assert "Traceback" not in err


def test_benchmark_quick_table(capsys: pytest.CaptureFixture[str]):
    namespace = runpy.run_path(str(SCRIPT), run_name="llm_bench")
    main = cast(Callable[[Sequence[str]], int], namespace["main"])
    assert main(["--quick", "--jobs", "1"]) == 0
    text = capsys.readouterr().out
    rows = [line for line in text.splitlines() if line.startswith("| tiny")]
    assert [r.split("|")[1].strip() for r in rows] == ["tiny decode", "tiny prefill"]


def test_odd_grids_pad_the_model():
    result = bench_llm("prefill", "tiny", (3, 3), tokens=4)
    assert result.padded == {
        "dim": 66,
        "ffn_dim": 129,
        "vocab": 258,
        "tokens": 6,
        "padded": 1,
    }
    dev = get_device("wse2")
    # Throughput counts the prompt's tokens, not the padding.
    assert result.tokens_per_second == pytest.approx(4 * dev.clock_hz / result.step_cycles)
