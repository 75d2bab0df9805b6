"""
`plmr bench kv`: the KV-cache capacity of the shift scheme vs. tail concatenation and
the cycles of one shift append, as one JSON object with `--json`; one clean error for a
bad model, grid or device.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

KV_KEYS = {
    "max_tokens_shift",
    "max_tokens_concat",
    "ratio",
    "weight_bytes_per_pe",
    "bytes_per_token_per_pe",
    "stages",
    "append_cycles",
    "cycles",
    "mode",
}


@pytest.mark.parametrize("mode", ["timing", "functional"])
@pytest.mark.parametrize(
    ("model", "grid"), [("llama3-8b", "360x360"), ("llama2-13b", "300x200")]
)
def test_bench_kv_json(model: str, grid: str, mode: str, cli: Any):
    argv = ["bench", "kv", "--model", model, "--grid", grid, "--mode", mode, "--json"]
    code, out, err = cli.run(argv)
    assert code == 0, err
    data = cli.one_json_object(out)
    assert KV_KEYS <= set(data)
    rows = int(grid.split("x")[0])
    assert data["model"] == model
    assert data["mode"] == mode
    assert data["max_tokens_shift"] == rows * data["max_tokens_concat"] > 0
    assert data["ratio"] == pytest.approx(rows)
    assert data["stages"] >= 1
    assert data["weight_bytes_per_pe"] > 0
    assert data["bytes_per_token_per_pe"] > 0
    assert data["append_cycles"] == pytest.approx(data["cycles"])
    if mode == "functional":
        assert data["check"]["passed"] is True


def test_bench_kv_text(cli: Any):
    code, out, err = cli.run(["bench", "kv", "--grid", "360x360"])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "kv cache: llama3-8b on 360x360 PEs (wse2)"
    assert any(line.startswith("  ratio       360.0x") for line in lines)
    assert any("cycles per shift append" in line for line in lines)
    # Three stages of 360x360 on one WSE-2 (994x750: 2x2 regions), in snake order.
    assert any(
        line.startswith("  placement   3 stage(s) of 360x360 on 1 wafer(s) of wse2")
        and "2x2 regions each" in line
        for line in lines
    )
    top = lines.index("   wafer 0")
    assert lines[top + 1] == "  |00000111111.|"
    assert lines[top + 3] == "  |.....222222.|"


def test_bench_kv_places_a_large_model_on_several_wafers(cli: Any):
    code, out, err = cli.run(
        ["bench", "kv", "--model", "qwen2-72b", "--grid", "420x420", "--json"]
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["stages"] == 21
    assert data["wafers"] == 11
    stages = data["placement"]["stages"]
    assert [(s["wafer"], s["origin"]) for s in stages[:3]] == [
        (0, [0, 0]),
        (0, [420, 0]),
        (1, [0, 0]),
    ]
    assert data["placement"]["pes_used"] == 21 * 420 * 420


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--model", "gpt2", "--grid", "360x360"],
            "unknown model 'gpt2' (presets: tiny, llama3-8b",
        ),
        (["--grid", "360by360"], "bad grid '360by360'"),
        (["--grid", "0x4"], "both sizes must be positive"),
        (["--grid", "8x8"], "the LM head alone needs"),
        (["--grid", "1000x1000"], "does not fit wse2"),
        (["--model", "llama2-13b", "--grid", "120x96"], "one layer needs 57908 B per PE"),
        (["--grid", "360x360", "--device", "wse9"], "unknown device 'wse9'"),
        (
            ["--model", "qwen2-72b", "--grid", "420x420", "--device", "wse2:wafers=4"],
            "needs 21 pipeline stages of 420x420 PEs",
        ),
    ],
)
def test_bench_kv_errors(argv: list[str], message: str, cli: Any):
    code, out, err = cli.run(["bench", "kv", *argv, "--json"])
    assert code == 1
    assert out == ""
    assert err.startswith("error: ")
    assert message in err
    assert err.count("\n") == 1
    assert "Traceback" not in err
