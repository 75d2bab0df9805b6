"""`plmr compile` and the `plmr-compile` pass: whole-pipeline results and clean errors."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plmr.tools.cli import main as plmr_main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MLP = EXAMPLES / "onnx" / "mlp.mlir"
MLP_ONNX = EXAMPLES / "onnx" / "mlp.onnx"
CONV_BLOCK = EXAMPLES / "onnx" / "conv_block.mlir"
DECODE_CAUSAL = EXAMPLES / "attention" / "decode_causal.mlir"

FAST = ["--no-substitute", "--tile-sizes", "2,4"]
"""Skips TASO (slow rule loading) and the search over blockings."""

PASS = "plmr-compile{grid=2,2 substitute=false tile-sizes=2,4}"

MALFORMED = """\
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %r = graph.relu %a tensor<2xf32>
  func.return %r : tensor<2xf32>
}
"""


def assert_one_error(err: str) -> None:
    """One `error:` message, first on stderr, and no traceback."""
    assert "Traceback" not in err
    assert err.startswith("error: "), err
    assert sum(line.startswith("error:") for line in err.splitlines()) == 1, err


@pytest.fixture(scope="module")
def mlp_mesh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/onnx/mlp.mlir compiled for a 2x4 grid."""
    out = tmp_path_factory.mktemp("mlp") / "mlp_mesh.mlir"
    assert plmr_main(["compile", str(MLP), "--grid", "2x4", *FAST, "-o", str(out)]) == 0
    return out


# ---------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------


def test_compile_writes_a_routed_mesh_program(tmp_path: Path, cli: Any):
    out = tmp_path / "out.mlir"
    code, stdout, err = cli.run(
        ["compile", str(MLP), "--grid", "2x4", *FAST, "-o", str(out)]
    )
    assert code == 0, err
    assert stdout == ""
    assert err.strip() == f"wrote {out}"
    text = out.read_text()
    assert (
        'mesh.program @main(%x: tensor<4x16xf32>) -> tensor<4x10xf32> device "wse2"' in text
    )
    assert "grid [2, 4]" in text
    assert "graph." not in text
    assert "loop.nest" not in text


def test_compile_to_stdout(cli: Any):
    code, stdout, err = cli.run(["compile", str(MLP), "--grid", "2x2", *FAST])
    assert code == 0, err
    assert "mesh.program @main" in stdout
    assert "grid [2, 2]" in stdout


def test_compiled_program_runs(mlp_mesh: Path, cli: Any):
    code, stdout, err = cli.run(["run", str(mlp_mesh)])
    assert code == 0, err
    assert "@main on random inputs (seed 0):" in stdout
    assert "logits: 4x10 float32" in stdout
    assert "program @main on wse2 2x4 (functional mode)" in stdout


def test_compiled_program_matches_the_graph(mlp_mesh: Path, tmp_path: Path, cli: Any):
    graph_out = tmp_path / "a.npz"
    mesh_out = tmp_path / "b.npz"
    code, _, err = cli.run(["run", str(MLP), "--random", "3", "--output", str(graph_out)])
    assert code == 0, err
    code, stdout, err = cli.run(
        ["run", str(mlp_mesh), "--random", "3", "--output", str(mesh_out)]
    )
    assert code == 0, err
    assert f"wrote 1 result(s) of @main to {mesh_out}" in stdout
    with np.load(graph_out) as a, np.load(mesh_out) as b:
        # The compiled program keeps the model's names (`logits`).
        assert a.files == b.files == ["logits"]
        for ka, kb in zip(a.files, b.files, strict=True):
            assert a[ka].shape == b[kb].shape == (4, 10)
            assert a[ka].dtype == b[kb].dtype
            np.testing.assert_allclose(b[kb], a[ka], rtol=1e-3, atol=1e-3)
            assert np.abs(a[ka]).max() > 0


def test_compiled_program_timing_report(mlp_mesh: Path, tmp_path: Path, cli: Any):
    report = tmp_path / "report.json"
    code, stdout, err = cli.run(
        ["run", str(mlp_mesh), "--mode", "timing", "--report", str(report)]
    )
    assert code == 0, err
    assert "(timing mode: results are placeholders)" in stdout
    assert report.read_text().strip()


def test_compile_onnx_model(mlp_mesh: Path, tmp_path: Path, cli: Any):
    out = tmp_path / "out.mlir"
    code, _, err = cli.run(
        ["compile", str(MLP_ONNX), "--grid", "2x4", *FAST, "-o", str(out)]
    )
    assert code == 0, err
    # mlp.mlir is the import of mlp.onnx: both compile to the same program.
    assert out.read_text() == mlp_mesh.read_text()


def test_compile_with_substitution(tmp_path: Path, cli: Any, monkeypatch):
    from plmr.passes.taso import substitute

    calls: list[tuple[int, list[substitute.FunctionReport]]] = []
    original = substitute.substitute_module

    def spy(module, alpha=1.05, budget=1000, *args, **kwargs):
        reports = original(module, alpha, budget, *args, **kwargs)
        calls.append((budget, reports))
        return reports

    monkeypatch.setattr(substitute, "substitute_module", spy)
    out = tmp_path / "out.mlir"
    code, _, err = cli.run(
        ["compile", str(MLP), "--grid", "2x4", "--tile-sizes", "2,4", "-o", str(out)]
    )
    assert code == 0, err
    assert len(calls) == 1
    budget, reports = calls[0]
    assert budget == 100  # the default --budget
    assert [r.name for r in reports] == ["main"]
    assert reports[0].explored >= 1
    assert "mesh.program @main" in out.read_text()


def test_generic_output_parses_back(tmp_path: Path, cli: Any):
    out = tmp_path / "generic.mlir"
    code, _, err = cli.run(
        ["compile", str(MLP), "--grid", "2x2", *FAST, "--generic", "-o", str(out)]
    )
    assert code == 0, err
    generic = out.read_text()
    assert generic.startswith('"builtin.module"() ({')
    assert '"mesh.program"()' in generic
    code, custom, err = cli.opt([str(out)])
    assert code == 0, err
    assert "mesh.program @main" in custom
    # Printing the generic form back in the custom form gives the plain compile output.
    code, direct, err = cli.run(["compile", str(MLP), "--grid", "2x2", *FAST])
    assert code == 0, err
    assert custom.strip() == direct.strip()


# ---------------------------------------------------------------------------------------
# The plmr-compile pass
# ---------------------------------------------------------------------------------------


def test_plmr_compile_pass_in_plmr_opt(cli: Any):
    code, out, err = cli.opt([str(MLP), "-p", PASS])
    assert code == 0, err
    assert "mesh.program @main" in out
    assert "grid [2, 2]" in out
    code, direct, _ = cli.run(["compile", str(MLP), "--grid", "2x2", *FAST])
    assert out.strip() == direct.strip()


def test_plmr_compile_pass_in_xdsl_opt(cli: Any):
    proc = subprocess.run(
        [cli.script("xdsl-opt"), str(MLP), "-p", PASS], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "mesh.program @main" in proc.stdout
    assert "grid [2, 2]" in proc.stdout


def test_plmr_compile_pass_bad_option(cli: Any):
    code, _, err = cli.opt([str(MLP), "-p", "plmr-compile{grid=2}"])
    assert code == 1
    assert err.startswith("plmr-opt: error: ")
    assert "plmr-compile: grid must be ROWS,COLS, got [2]" in err


# ---------------------------------------------------------------------------------------
# Errors: exit status 1, one `error:` line, no traceback, no output file
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "program, args, messages",
    [
        pytest.param(
            MLP,
            ["--grid", "0x4"],
            ["bad grid '0x4': both sizes must be positive"],
            id="grid-0",
        ),
        pytest.param(
            MLP, ["--grid", "abc"], ["bad grid 'abc': expected ROWSxCOLS"], id="grid-abc"
        ),
        pytest.param(
            MLP,
            ["--tile-sizes", "x"],
            ["bad --tile-sizes 'x': expected P,R e.g. 8,4"],
            id="tile-sizes-x",
        ),
        pytest.param(
            MLP,
            ["--tile-sizes", "0,4"],
            ["bad --tile-sizes '0,4': expected P,R e.g. 8,4"],
            id="tile-sizes-0",
        ),
        pytest.param(
            MLP,
            ["--grid", "2x4", "--tile-sizes", "3,4"],
            ["convert-loop-to-tile: tile size 3 does not divide the extent 4"],
            id="tile-size-not-dividing",
        ),
        pytest.param(
            DECODE_CAUSAL,
            ["--grid", "1x1", "--device", "wse2:sram_kib=16"],
            ["does not fit a 1x1 grid of wse2", "bytes of SRAM", "a PE has 16384"],
            id="sram",
        ),
        pytest.param(
            MLP,
            ["--device", "nosuch"],
            ["unknown device 'nosuch'; presets: wse2, wse3"],
            id="device",
        ),
        pytest.param(
            MLP,
            ["--grid", "800x800", "--tile-sizes", "2,4"],
            ["a 800x800 grid does not fit wse2 (994x750 PEs)"],
            id="grid-larger-than-device",
        ),
        pytest.param(
            MLP,
            ["--grid", "995x4", "--tile-sizes", "2,4"],
            ["a 995x4 grid does not fit wse2 (994x750 PEs)"],
            id="rows-larger-than-device",
        ),
    ],
)
def test_compile_errors(
    tmp_path: Path, cli: Any, program: Path, args: list[str], messages: list[str]
):
    out = tmp_path / "out.mlir"
    code, stdout, err = cli.run(
        ["compile", str(program), "--no-substitute", *args, "-o", str(out)]
    )
    assert code == 1
    assert stdout == ""
    assert_one_error(err)
    assert err.count("\n") == 1, err
    for message in messages:
        assert message in err
    assert list(tmp_path.iterdir()) == []


def test_compile_missing_file(tmp_path: Path, cli: Any):
    missing = tmp_path / "nope.mlir"
    out = tmp_path / "out.mlir"
    code, _, err = cli.run(["compile", str(missing), *FAST, "-o", str(out)])
    assert (code, err.strip()) == (1, f"error: no such file: {missing}")
    code, _, err = cli.run(["compile", str(tmp_path / "nope.onnx"), *FAST, "-o", str(out)])
    assert code == 1
    assert_one_error(err)
    assert "nope.onnx" in err
    assert list(tmp_path.iterdir()) == []


def test_compile_malformed_mlir(tmp_path: Path, cli: Any):
    path = tmp_path / "bad.mlir"
    path.write_text(MALFORMED)
    out = tmp_path / "out.mlir"
    code, _, err = cli.run(["compile", str(path), *FAST, "-o", str(out)])
    assert code == 1
    assert_one_error(err)
    # The parse error names the place and shows it under the `error:` line.
    assert err.splitlines()[0] == f"error: cannot parse {path}:"
    assert f"{path}:2:" in err
    assert "Expected ':'" in err
    assert not out.exists()


def test_compile_nothing_to_compile(tmp_path: Path, cli: Any):
    path = tmp_path / "id.mlir"
    path.write_text(
        "func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
        "  func.return %a : tensor<2xf32>\n}\n"
    )
    code, _, err = cli.run(["compile", str(path), *FAST])
    assert code == 1
    assert_one_error(err)
    assert "no graph, loop or tile operations to compile" in err


def test_compile_bad_choice_is_a_usage_error(tmp_path: Path, cli: Any):
    out = tmp_path / "out.mlir"
    code, _, err = cli.run(["compile", str(MLP), *FAST, "--gemm", "foo", "-o", str(out)])
    assert code == 2
    assert "Invalid value for '--gemm': 'foo' is not one of" in err
    assert "Traceback" not in err
    assert not out.exists()


def test_compile_bad_count_is_a_usage_error(tmp_path: Path, cli: Any):
    out = tmp_path / "out.mlir"
    code, _, err = cli.run(["compile", str(MLP), *FAST, "--k", "0", "-o", str(out)])
    assert code == 2
    assert "Invalid value for '--k': expected a positive integer, got 0" in err
    assert "Traceback" not in err
    assert not out.exists()


def test_entry_point_errors_without_traceback(cli: Any, tmp_path: Path):
    out = tmp_path / "out.mlir"
    for args, message in (
        (["--grid", "abc"], "bad grid 'abc'"),
        (["--grid", "2x4", "--tile-sizes", "3,4"], "tile size 3 does not divide"),
    ):
        proc = subprocess.run(
            [
                cli.script("plmr"),
                "compile",
                str(MLP),
                "--no-substitute",
                *args,
                "-o",
                str(out),
            ],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 1, proc.stderr
        assert_one_error(proc.stderr)
        assert proc.stderr.count("\n") == 1
        assert message in proc.stderr
        assert not out.exists()


def _compile_mlp(tmp_path: Path, grid: str, cli: Any) -> Path:
    out = tmp_path / "mlp_mesh.mlir"
    args = ["compile", str(MLP), "--grid", grid, "--no-substitute", "--tile-sizes", "2,4"]
    code, _, err = cli.run([*args, "-o", str(out)])
    assert code == 0, err
    return out


def test_compiled_program_takes_the_models_inputs(tmp_path: Path, cli: Any):
    """Inputs saved for the model (by name) feed the compiled program too."""
    out = _compile_mlp(tmp_path, "2x4", cli)
    inputs = tmp_path / "in.npz"
    np.savez(inputs, x=np.ones((4, 16), np.float32))
    code, stdout, err = cli.run(["run", str(out), "--inputs", str(inputs)])
    assert code == 0, err
    assert "logits: 4x10 float32" in stdout


def test_compiling_a_mesh_program_says_so(tmp_path: Path, cli: Any):
    out = _compile_mlp(tmp_path, "2x2", cli)
    code, _, err = cli.run(["compile", str(out), "--grid", "2x2", "--no-substitute"])
    assert code == 1
    assert "already a mesh program" in err


def test_relay_lets_routing_share_colors():
    """Without --relay a program needing more colors than a router has is refused."""
    from plmr.dialects.context import load_module, make_context
    from plmr.errors import PlmrError
    from plmr.passes.pipeline import CompileOptions, compile_module

    path = EXAMPLES / "onnx" / "transformer_block.mlir"
    # Routing needs the colors alike with TASO's substitutions or without, and with
    # one blocking as with the searched one: none, and one blocking.
    opts = CompileOptions(
        grid=(4, 4), device="wse2:colors=5", substitute=False, tile_sizes=(8, 8)
    )
    with pytest.raises(PlmrError, match="needs more than the 2 usable colors"):
        compile_module(make_context(), load_module(path), opts)
    relayed = compile_module(
        make_context(),
        load_module(path),
        dataclasses.replace(opts, relay=True),
    )
    assert "relay" in str(relayed)


UNEVEN = """\
func.func @main(%x: tensor<1x100xf32>, %w: tensor<100x100xf32>) -> tensor<1x100xf32> {
  %y = graph.matmul %x, %w : (tensor<1x100xf32>, tensor<100x100xf32>) -> tensor<1x100xf32>
  func.return %y : tensor<1x100xf32>
}
"""
"""A GEMV whose 50 blocks of 2 divide over neither axis of a 7x7 grid."""


def test_fit_tiles_compiles_what_does_not_divide_over_the_grid(tmp_path: Path, cli: Any):
    from plmr.dialects.context import load_module
    from plmr.runtime.running import random_inputs, run_entry, select_entry

    src = tmp_path / "gemv.mlir"
    src.write_text(UNEVEN)
    out = tmp_path / "out.mlir"
    args = ["compile", str(src), "--grid", "7x7", "--device", "wse2:sram_kib=8"]
    args += ["--no-substitute", "-o", str(out)]
    code, _, err = cli.run(args)
    assert code != 0
    assert_one_error(err)
    assert "is a multiple of the 7 or 7 PEs of an axis" in err
    assert "--fit-tiles" in err
    assert not out.exists()
    code, _, err = cli.run([*args, "--fit-tiles"])
    assert code == 0, err
    source, compiled = load_module(src), load_module(out)
    inputs = random_inputs(select_entry(source, None), 3)
    want, _ = run_entry(source, select_entry(source, None), inputs)
    got, _ = run_entry(compiled, select_entry(compiled, None), inputs)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


def test_fit_tiles_cannot_be_combined_with_a_schedule(tmp_path: Path, cli: Any):
    schedule = tmp_path / "s.json"
    schedule.write_text("{}")
    code, _, err = cli.run(
        ["compile", str(MLP), "--schedule", str(schedule), "--fit-tiles"]
    )
    assert code != 0
    assert_one_error(err)
    assert "--fit-tiles cannot be combined with --schedule" in err


@pytest.mark.parametrize(
    ("flags", "same_as"),
    [([], ["--gemv", "auto"]), (["--k", "3"], ["--gemv", "ktree", "--k", "3"])],
    ids=["default", "k"],
)
def test_large_grids_take_auto_allreduces_unless_k_is_given(
    tmp_path: Path, cli: Any, flags: list[str], same_as: list[str]
):
    """
    On 20x20 (more than 64 PEs) `plmr compile` compiles as `--gemv auto` (each
    allreduce's K-tree timed on its line); with `--k 3`, as the K-tree of 3 everywhere.
    """
    program = tmp_path / "gemv.mlir"
    program.write_text(
        """
    func.func @main(%x: tensor<1x4000xf32>, %w: tensor<4000x400xf32>) -> tensor<1x400xf32> {
      %y = graph.matmul %x, %w : (tensor<1x4000xf32>, tensor<4000x400xf32>) -> tensor<1x400xf32>
      func.return %y : tensor<1x400xf32>
    }"""
    )
    base = ["compile", str(program), "--grid", "20x20", "--no-substitute"]
    code, chosen, err = cli.run([*base, *flags])
    assert code == 0, err
    code, explicit, err = cli.run([*base, *same_as])
    assert code == 0, err
    assert chosen == explicit
    if not flags:
        # Over a line of 20 PEs auto's groups of 5 time fastest: not K = 2's tree.
        code, k2, err = cli.run([*base, "--gemv", "ktree"])
        assert code == 0, err
        assert chosen != k2
