"""
`plmr generate`: a user's prefill and decode exports generate the reference tokens with
the KV caches as state (at the graph level, and on a 2x2 wafer where only the token, the
position and the logits cross the host link); bad input is one error.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plmr.models import export_decode
from plmr.models.export_decode import ExportDecoder

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "decode"
PREFILL = str(EXAMPLES / "tiny_prefill.onnx")
DECODE = str(EXAMPLES / "tiny_decode.onnx")
TOKENS = str(EXAMPLES / "tiny_tokens.npz")
HF = EXAMPLES.parent / "hf"


def test_generate_at_graph_level_equals_the_reference(cli: Any):
    code, out, err = cli.run(
        [
            "generate",
            PREFILL,
            DECODE,
            "--grid",
            "graph",
            "--steps",
            "20",
            "--expect",
            TOKENS,
        ]
    )
    assert code == 0, err
    want = " ".join(str(int(t)) for t in np.load(TOKENS)["tokens"])
    assert f"tokens      {want}" in out
    assert "all 21 tokens equal" in out


class _OneBlocking(ExportDecoder):
    """
    `ExportDecoder` compiling both programs with one blocking (8x8 blocks, fitted to the
    grid) instead of searching for it: `test_compile_state.py` runs the search on this
    decode step; here the generation loop and its host traffic are checked.
    """

    def __init__(self, prefill: Any, decode: Any, pairs: Any, options: Any, *rest: Any):
        if options is not None:
            options = replace(options, tile_sizes=(8, 8), fit_tiles=True)
        super().__init__(prefill, decode, pairs, options, *rest)


def test_generate_on_the_wafer_keeps_the_cache_there(
    cli: Any, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(export_decode, "ExportDecoder", _OneBlocking)
    code, out, err = cli.run(
        [
            "generate",
            PREFILL,
            DECODE,
            "--grid",
            "2x2",
            "--steps",
            "16",
            "--expect",
            TOKENS,
            # The substitutions are tested on these exports elsewhere; without them
            # both programs compile in a third less time.
            "--no-substitute",
        ]
    )
    assert code == 0, err
    assert "all 17 tokens equal" in out
    decode = [line.split() for line in out.splitlines() if line.startswith("decode ")]
    assert len(decode) == 16
    for row in decode:
        # position_ids in (8 B) and the rows the host looks up (the token's embedding,
        # 32 floats, and the position's cos and sin rows, 8 floats each: 192 B), 64
        # logits out; the caches (4 of 2x32x8 floats, 8,192 B) stay on the wafer.
        assert row[3:5] == ["200", "B"]
        assert row[5:7] == ["256", "B"]
        assert row[7:9] == ["8,192", "B"]


def test_a_mismatch_is_an_error(tmp_path: Path, cli: Any):
    ref = np.load(TOKENS)
    bad = ref["tokens"].copy()
    bad[3] += 1
    path = tmp_path / "bad.npz"
    np.savez(path, prompt=ref["prompt"], tokens=bad)
    code, _, err = cli.run(
        [
            "generate",
            PREFILL,
            DECODE,
            "--grid",
            "graph",
            "--steps",
            "4",
            "--expect",
            str(path),
        ]
    )
    assert code == 1
    assert f"token 3 is {int(ref['tokens'][3])}, {path} has {int(bad[3])}" in err


def test_bad_state_pairs_are_one_error(cli: Any):
    for state, message in (
        (
            "past_key_values.0.key=present.0.value",
            "'present.0.value' is not Concat('past_key_values.0.key', new row)",
        ),
        ("past_key_values.0.key", "state pair 'past_key_values.0.key' must be IN=OUT"),
        ("past.k=present.0.key", "'past.k' is not an input"),
        ("a=b", "names neither an input nor an output"),
    ):
        code, out, err = cli.run(
            [
                "generate",
                PREFILL,
                DECODE,
                "--grid",
                "graph",
                "--prompt",
                "1,2,3,4",
                "--state",
                state,
            ]
        )
        assert code == 1, out
        assert message in err
        assert err.count("error:") == 1
        assert "Traceback" not in err


def test_bad_prompts_are_one_error(cli: Any):
    code, _, err = cli.run(
        ["generate", PREFILL, DECODE, "--grid", "graph", "--prompt", "1,x"]
    )
    assert code == 1
    assert "bad --prompt '1,x'" in err
    code, _, err = cli.run(
        ["generate", PREFILL, DECODE, "--grid", "graph", "--prompt", "1,2"]
    )
    assert code == 1
    assert "the prefill takes prompts of 4 tokens, got 2" in err
    code, _, err = cli.run(
        [
            "generate",
            PREFILL,
            DECODE,
            "--grid",
            "graph",
            "--prompt",
            "1,2,3,4",
            "--steps",
            "40",
        ]
    )
    assert code == 1
    assert "exceed the cache of 32 rows" in err


def test_expect_reads_the_prompt_from_input_ids(cli: Any):
    prefill, decode = (str(HF / f"llama_{k}.onnx") for k in ("prefill", "decode"))
    expect = str(HF / "llama_greedy.npz")
    code, out, err = cli.run(
        [
            "generate",
            prefill,
            decode,
            "--grid",
            "graph",
            "--steps",
            "20",
            "--expect",
            expect,
        ]
    )
    assert code == 0, err
    assert "prompt of 8 tokens, KV cache of 72 rows as state" in out
    assert f"tokens      {' '.join(map(str, np.load(expect)['tokens'][:21]))}" in out
    assert f"all 21 tokens equal {expect}" in out
    code, _, err = cli.run(
        [
            "generate",
            prefill,
            decode,
            "--grid",
            "graph",
            "--prompt",
            "1,2,3,4,5,6,7,8",
            "--expect",
            expect,
        ]
    )
    assert code == 1
    assert err.count("error:") == 1
    assert f"--prompt differs from the prompt 'input_ids' of {expect}" in err
    code, out, err = cli.run(
        [
            "generate",
            prefill,
            decode,
            "--grid",
            "graph",
            "--steps",
            "64",
            "--expect",
            expect,
        ]
    )
    assert code == 1
    assert out == ""
    assert f"{expect} holds 64 tokens, 64 steps generate 65; run at most --steps 63" in err
