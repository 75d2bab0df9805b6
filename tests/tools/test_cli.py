"""The `plmr` and `plmr-opt` command lines: results, and one clean error per bad input."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

PROGRAM = """\
func.func @main(%x: tensor<2x3xf32> {plmr.name = "x"}, %w: tensor<3x4xf32>) -> (tensor<2x4xf32> {plmr.name = "y"}, tensor<2x3xf32>) {
  %m = graph.matmul %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %r = graph.relu %m : tensor<2x4xf32>
  %n = graph.neg %x : tensor<2x3xf32>
  func.return %r, %n : tensor<2x4xf32>, tensor<2x3xf32>
}
"""

TWO_FUNCS = """\
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = graph.exp %x : tensor<4xf32>
  func.return %r : tensor<4xf32>
}
func.func @g(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = func.call @f(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %s = graph.neg %r : tensor<4xf32>
  func.return %s : tensor<4xf32>
}
"""

GATHER = """\
func.func @main(%t: tensor<5x3xf32>, %ids: tensor<7xi64>) -> tensor<7x3xf32> {
  %r = graph.gather %t, %ids : (tensor<5x3xf32>, tensor<7xi64>) -> tensor<7x3xf32>
  func.return %r : tensor<7x3xf32>
}
"""

BAD_SHAPE = """\
func.func @main(%x: tensor<2x3xf32>) -> tensor<3x3xf32> {
  %s = graph.add %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
  func.return %s : tensor<3x3xf32>
}
"""


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "prog.mlir"
    path.write_text(PROGRAM)
    return path


def reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.maximum(x @ w, 0)


# ---------------------------------------------------------------------------------------
# plmr run
# ---------------------------------------------------------------------------------------


def test_run_with_inputs_and_output(program: Path, tmp_path: Path, cli: Any):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x, arg1=w)
    out = tmp_path / "out.npz"
    code, stdout, _ = cli.run(
        ["run", str(program), "--inputs", str(tmp_path / "in.npz"), "--output", str(out)]
    )
    assert code == 0, stdout
    with np.load(out) as data:
        assert sorted(data.files) == ["out1", "y"]
        np.testing.assert_allclose(data["y"], reference(x, w), rtol=1e-6)
        np.testing.assert_array_equal(data["out1"], -x)


def test_run_random_is_deterministic_and_prints_summary(program: Path, cli: Any):
    code, first, _ = cli.run(["run", str(program), "--random", "7"])
    assert code == 0
    assert "@main on random inputs (seed 7)" in first
    assert "y: 2x4 float32 [" in first
    assert "crc32=" in first
    _, again, _ = cli.run(["run", str(program), "--random", "7"])
    _, other, _ = cli.run(["run", str(program), "--random", "8"])
    assert first == again
    assert first != other


def test_run_default_is_seed_zero(program: Path, cli: Any):
    _, default, _ = cli.run(["run", str(program)])
    _, zero, _ = cli.run(["run", str(program), "--random", "0"])
    assert default == zero


def test_run_entry_and_calls(tmp_path: Path, cli: Any):
    path = tmp_path / "two.mlir"
    path.write_text(TWO_FUNCS)
    code, _, err = cli.run(["run", str(path)])
    assert code == 1
    assert "several entries (@f, @g); choose one with --entry" in err
    np.savez(tmp_path / "in.npz", arg0=np.arange(4, dtype=np.float32))
    out = tmp_path / "out.npz"
    code, _, err = cli.run(
        [
            "run",
            str(path),
            "--entry",
            "g",
            "--inputs",
            str(tmp_path / "in.npz"),
            "--output",
            str(out),
        ]
    )
    assert code == 0, err
    with np.load(out) as data:
        np.testing.assert_allclose(data["out0"], -np.exp(np.arange(4, dtype=np.float32)))


def test_random_indices_stay_in_range(tmp_path: Path, cli: Any):
    path = tmp_path / "gather.mlir"
    path.write_text(GATHER)
    code, out, err = cli.run(["run", str(path), "--random", "3"])
    assert code == 0, err
    assert "out0: 7x3 float32" in out


@pytest.mark.parametrize(
    "arrays, message",
    [
        (
            {"x": np.ones((2, 3), np.float32)},
            "missing input(s) arg1 for @main (expected keys: x, arg1)",
        ),
        (
            {"x": np.ones((2, 2), np.float32), "arg1": np.ones((3, 4), np.float32)},
            "input x has shape (2, 2), but @main expects tensor<2x3xf32>",
        ),
        (
            {"x": np.ones((2, 3), np.float32), "arg1": np.ones((3, 4)), "z": np.ones(1)},
            "unexpected key(s) z (expected keys: x, arg1)",
        ),
        (
            {"x": np.ones((2, 3), np.complex64), "arg1": np.ones((3, 4), np.float32)},
            "input x has dtype complex64, which cannot be converted to the element type f32",
        ),
    ],
)
def test_run_bad_inputs(program: Path, tmp_path: Path, cli: Any, arrays, message):
    np.savez(tmp_path / "in.npz", **arrays)
    code, _, err = cli.run(["run", str(program), "--inputs", str(tmp_path / "in.npz")])
    assert code == 1
    assert message in err
    assert "Traceback" not in err


def test_run_unreadable_inputs(program: Path, tmp_path: Path, cli: Any):
    bad = tmp_path / "in.npz"
    bad.write_text("not a zip")
    code, _, err = cli.run(["run", str(program), "--inputs", str(bad)])
    assert code == 1
    assert f"{bad} is not an .npz archive" in err
    assert "allow_pickle" not in err


def test_run_unparsable_program(tmp_path: Path, cli: Any):
    path = tmp_path / "bad.mlir"
    path.write_text(
        "func.func @f(%a: tensor<2xf32>) {\n  %r = graph.relu %a tensor<2xf32>\n"
        "  func.return %r : tensor<2xf32>\n}\n"
    )
    code, _, err = cli.run(["run", str(path)])
    assert code == 1
    assert f"cannot parse {path}" in err
    assert f"{path}:2:" in err
    assert "Expected ':'" in err


def test_run_unverifiable_program(tmp_path: Path, cli: Any):
    path = tmp_path / "bad.mlir"
    path.write_text(BAD_SHAPE)
    code, _, err = cli.run(["run", str(path)])
    assert code == 1
    assert "'graph.add' in @main" in err
    assert "does not verify" in err
    assert err.count("\n") == 1  # one message


def test_run_unknown_op(tmp_path: Path, cli: Any):
    path = tmp_path / "bad.mlir"
    path.write_text(
        'func.func @f() {\n  "graph.frobnicate"() : () -> ()\n  func.return\n}\n'
    )
    code, _, err = cli.run(["run", str(path)])
    assert code == 1
    assert "graph.frobnicate is not registered" in err


def test_run_missing_file_and_conflicting_options(program: Path, tmp_path: Path, cli: Any):
    code, _, err = cli.run(["run", str(tmp_path / "nope.mlir")])
    assert (code, err.strip()) == (1, f"error: no such file: {tmp_path / 'nope.mlir'}")
    np.savez(tmp_path / "in.npz", x=np.ones((2, 3)))
    code, _, err = cli.run(
        ["run", str(program), "--inputs", str(tmp_path / "in.npz"), "--random", "1"]
    )
    assert code == 1
    assert "either --inputs or --random" in err


def test_run_failure_writes_no_output(tmp_path: Path, cli: Any):
    path = tmp_path / "bad.mlir"
    path.write_text(BAD_SHAPE)
    out = tmp_path / "out.npz"
    code, _, _ = cli.run(["run", str(path), "--output", str(out)])
    assert code == 1
    assert list(tmp_path.iterdir()) == [path]


def test_unknown_command_and_option(program: Path, cli: Any):
    code, _, err = cli.run(["frobnicate"])
    assert code == 2
    assert "No such command 'frobnicate'" in err
    code, _, err = cli.run(["run", str(program), "--bogus"])
    assert code == 2
    assert "No such option" in err


# ---------------------------------------------------------------------------------------
# plmr-opt
# ---------------------------------------------------------------------------------------


def test_opt_round_trip(program: Path, cli: Any):
    code, out, _ = cli.opt([str(program)])
    assert code == 0
    assert "graph.matmul %x, %w" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["-p", "no-such-pass"],
            "bad pass pipeline: Unrecognized passes: ['no-such-pass']",
        ),
        (["-p", "canonicalize{bogus=1}"], 'Provided arguments ["bogus"] not found'),
        (["-p", "canonicalize{"], "Error parsing pass pipeline specification"),
    ],
)
def test_opt_bad_pipeline(program: Path, cli: Any, args, message):
    code, _, err = cli.opt([str(program), *args])
    assert code == 1
    assert err.startswith("plmr-opt: error: ")
    assert message in err


def test_opt_bad_program(tmp_path: Path, cli: Any):
    path = tmp_path / "bad.mlir"
    path.write_text(BAD_SHAPE)
    out = tmp_path / "out.mlir"
    code, _, err = cli.opt([str(path), "-o", str(out)])
    assert code == 1
    assert (
        "result type tensor<3x3xf32> does not match the inferred type tensor<2x3xf32>"
        in err
    )
    assert not out.exists()


def test_opt_missing_file(tmp_path: Path, cli: Any):
    code, _, err = cli.opt([str(tmp_path / "nope.mlir")])
    assert code == 1
    assert "no such file" in err


def test_opt_writes_output_file(program: Path, tmp_path: Path, cli: Any):
    out = tmp_path / "out.mlir"
    code, _, _ = cli.opt([str(program), "-o", str(out)])
    assert code == 0
    assert "graph.relu" in out.read_text()


# ---------------------------------------------------------------------------------------
# The installed entry points: no traceback reaches the user
# ---------------------------------------------------------------------------------------


def test_entry_points_report_errors_without_traceback(cli: Any, tmp_path: Path):
    path = tmp_path / "bad.mlir"
    path.write_text(BAD_SHAPE)
    for argv in (
        [cli.script("plmr"), "run", str(path)],
        [cli.script("plmr-opt"), str(path)],
        [cli.script("plmr-opt"), str(path), "-p", "nope"],
        [cli.script("plmr"), "import", str(tmp_path / "missing.onnx")],
    ):
        proc = subprocess.run(argv, capture_output=True, text=True)
        assert proc.returncode == 1, (argv, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert "error:" in proc.stderr
