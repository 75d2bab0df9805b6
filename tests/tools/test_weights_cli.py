"""
Weights by reference on the command line: a program imported with its weights in a
safetensors file computes bit for bit what the same program with inline weights computes,
at the graph level and compiled for 2x2; bad weights files are one error, no traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from plmr.models.llama_onnx import LlamaOnnxConfig, write_llama_onnx

EXAMPLE = (
    Path(__file__).resolve().parents[2] / "examples" / "onnx" / "transformer_block.onnx"
)


def _results(path: Path) -> dict[str, Any]:
    with np.load(path) as data:
        return {k: np.asarray(data[k]) for k in data.files}


def _compile_and_run(cli: Any, program: Path, tmp: Path, tag: str) -> dict[str, Any]:
    mesh = tmp / f"{tag}.mesh.mlir"
    argv = [
        "compile",
        str(program),
        "--grid",
        "2x2",
        "--tile-sizes",
        "8,8",
        # TASO with weights by reference: the hf export llama_external's test.
        "--no-substitute",
        "-o",
        str(mesh),
    ]
    code, _, err = cli.run(argv)
    assert code == 0, err
    out = tmp / f"{tag}.npz"
    code, _, err = cli.run(["run", str(mesh), "--random", "3", "--output", str(out)])
    assert code == 0, err
    return _results(out)


def test_by_reference_equals_inline_bit_for_bit(cli: Any, tmp_path: Path):
    ref_dir, inline_dir = tmp_path / "ref", tmp_path / "inline"
    ref_dir.mkdir()
    inline_dir.mkdir()
    by_ref, inline = ref_dir / "tb.mlir", inline_dir / "tb.mlir"
    assert cli.run(["import", str(EXAMPLE), "-o", str(by_ref)])[0] == 0
    code, _, err = cli.run(
        ["import", str(EXAMPLE), "-o", str(inline), "--inline-limit", "1000000000"]
    )
    assert code == 0, err
    text = by_ref.read_text()
    assert text.count("graph.weight") == 3  # the FFN (the attention weights are 1 KiB)
    assert 'in "tb.safetensors"' in text
    assert "graph.weight" not in inline.read_text()
    assert not (inline_dir / "tb.safetensors").exists()
    # Two hex digits per byte of the three 16x32 float32 weights (6 KiB) are gone.
    assert len(inline.read_text()) - len(text) > 12_000
    stored = load_file(str(ref_dir / "tb.safetensors"))
    assert len(stored) == 3
    # Graph level.
    for tag, program in (("ref", by_ref), ("inline", inline)):
        out = tmp_path / f"{tag}.graph.npz"
        code, _, err = cli.run(["run", str(program), "--random", "3", "--output", str(out)])
        assert code == 0, err
    want = _results(tmp_path / "inline.graph.npz")
    got = _results(tmp_path / "ref.graph.npz")
    assert list(got) == list(want) == ["y"]
    np.testing.assert_array_equal(got["y"], want["y"])
    # Compiled for 2x2 and run on the modelled wafer.
    want = _compile_and_run(cli, inline, tmp_path, "inline")
    got = _compile_and_run(cli, by_ref, tmp_path, "ref")
    np.testing.assert_array_equal(got["y"], want["y"])


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("shape", "holds it as F32 [32, 16], the program expects F32 [16, 32]"),
        ("name", "has no tensor of that name"),
        ("missing", "does not exist"),
    ],
)
def test_a_mismatched_weights_file_is_one_error(
    cli: Any, tmp_path: Path, damage: str, message: str
):
    program = tmp_path / "tb.mlir"
    assert cli.run(["import", str(EXAMPLE), "-o", str(program)])[0] == 0
    weights = tmp_path / "tb.safetensors"
    stored = load_file(str(weights))
    if damage == "shape":
        stored["ffn.up.weight"] = np.ascontiguousarray(stored["ffn.up.weight"].T)
        save_file(stored, str(weights))
    elif damage == "name":
        stored["renamed"] = stored.pop("ffn.up.weight")
        save_file(stored, str(weights))
    else:
        weights.unlink()
    for argv in (["run", str(program)], ["compile", str(program), "--grid", "2x2"]):
        code, out, err = cli.run(argv)
        assert code == 1, out
        assert "Traceback" not in err
        (line,) = err.strip().splitlines()
        assert line.startswith("error: weight '"), line
        assert str(weights) in line
        assert message in line
        assert "--weights DIR_OR_FILE" in line


def test_plmr_opt_checks_every_pass_of_a_program_by_reference(cli: Any, tmp_path: Path):
    """`--check-each` runs each pass's input and output on the same weights."""
    config = LlamaOnnxConfig(hidden=32, heads=4, kv_heads=2, ffn=48, vocab=40, seq=4)
    model = tmp_path / "model" / "llama.onnx"
    model.parent.mkdir()
    write_llama_onnx(model, config)
    program = tmp_path / "llama.mlir"
    assert cli.run(["import", str(model), "-o", str(program)])[0] == 0
    text = program.read_text()
    assert 'in "model/llama.onnx.data" at ' in text
    out = tmp_path / "out" / "llama.loop.mlir"
    out.parent.mkdir()
    code, _, err = cli.opt(
        [str(program), "-p", "convert-graph-to-loop", "--check-each", "-o", str(out)]
    )
    assert code == 0, err
    assert "convert-graph-to-loop" in err
    assert 'file = "../model/llama.onnx.data"' in out.read_text()
    # Moved: found with --weights.
    moved = tmp_path / "moved"
    (tmp_path / "model").rename(moved)
    code, _, err = cli.opt([str(program), "-p", "convert-graph-to-loop", "--check-each"])
    assert code == 1
    assert "does not exist" in err
    code, _, err = cli.opt(
        [
            str(program),
            "-p",
            "convert-graph-to-loop",
            "--check-each",
            "--weights",
            str(moved),
        ]
    )
    assert code == 0, err
