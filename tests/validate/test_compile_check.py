"""
`plmr compile --check-each`: the checked pass-by-pass pipeline produces exactly what
`compile_module` produces (same stages, same blocking search), and reports every pass.
"""

from pathlib import Path

import pytest
from click.testing import CliRunner

from plmr.dialects.context import load_module, make_context, parse_module
from plmr.dialects.printing import module_text
from plmr.models.llama import LlamaConfig, ProgramBuilder
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.tools.cli import cli
from plmr.validate.check_each import Checker, CheckOptions
from plmr.validate.compile_check import compile_checked

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("name", "opts"),
    [
        ("onnx/mlp.mlir", CompileOptions(grid=(2, 2), substitute=False)),
        (
            "onnx/attention.mlir",
            CompileOptions(grid=(3, 3), tile_sizes=(2, 4), substitute=False),
        ),
        ("onnx/rnn_cell.mlir", CompileOptions(grid=(1, 4), tile_sizes=(4, 4), budget=5)),
    ],
    ids=["mlp-search", "attention-3x3", "rnn-taso"],
)
def test_checked_compile_equals_compile_module(name: str, opts: CompileOptions):
    ctx = make_context()
    want = load_module(EXAMPLES / name, ctx)
    compile_module(ctx, want, opts)
    got = load_module(EXAMPLES / name, ctx)
    lines: list[str] = []
    checker = Checker(CheckOptions(), lines.append)
    compile_checked(ctx, got, opts, checker)
    assert module_text(got) == module_text(want)
    specs = [c.spec.split("{")[0] for c in checker.checks]
    assert specs[-6:] == [
        "convert-tile-to-mesh",
        "mesh-fuse-softmax",
        "mesh-pack-allreduces",
        "mesh-fuse-softmax",  # the three-nest form, once packed
        "mesh-route",
        "mesh-check-limits",
    ]
    assert "convert-graph-to-loop" in specs
    assert "convert-loop-to-tile" in specs
    assert all(c.error is not None and c.error <= 1e-4 for c in checker.checks)
    assert len(lines) == len(checker.checks) + 2


def test_plmr_compile_check_each_prints_every_pass(tmp_path: Path):
    out = tmp_path / "mlp.mesh.mlir"
    result = CliRunner().invoke(
        cli,
        [
            "compile",
            str(EXAMPLES / "onnx/mlp.mlir"),
            "--grid",
            "2x2",
            "--no-substitute",
            "--tile-sizes",
            "2,4",
            "--check-each",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert lines[0] == "check-each: @main on random inputs (seed 0), tolerance 1e-04"
    assert any(
        "convert-loop-to-tile{tile_sizes=2,4}" in line and " tile " in line
        for line in lines
    )
    assert any("mesh-check-limits" in line and " mesh " in line for line in lines)
    assert "mesh.program" in out.read_text()


def test_checked_compile_chooses_the_bands_compile_module_chooses():
    # On a grid the blocking is tried with and without bands (a decode step's 4 KV heads
    # over bands of 4 rows of a 16x16 grid: only the banded trial has them; 8x8 has
    # none); the checked pipeline keeps
    # the trial compile_module keeps.
    config = LlamaConfig(
        "b",
        dim=72,
        n_layers=1,
        n_heads=8,
        n_kv_heads=4,
        ffn_dim=40,
        vocab=20,
        max_seq=20,
        head_dim_override=16,
    )
    text = ProgramBuilder(config, None, one_projection=True).decode()
    opts = CompileOptions(
        grid=(16, 16), tile_sizes=(8, 8), substitute=False, chunks=1, fit_tiles=True
    )
    ctx = make_context()
    want = parse_module(text)
    compile_module(ctx, want, opts)
    assert "band y 4" in module_text(want)
    got = parse_module(text)
    checker = Checker(CheckOptions(), lambda _: None)
    compile_checked(ctx, got, opts, checker)
    assert module_text(got) == module_text(want)
    assert all(c.error is not None and c.error <= 1e-4 for c in checker.checks)
