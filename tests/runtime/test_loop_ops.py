"""
Tests of the vectorised reference semantics of `loop` nests (`plmr.runtime.loop_ops`):
vectorised and sequential reductions, nested nests with tensor accumulators, padded and
out-of-range reads, evaluation in boxes, and `plmr run` on loop- and tile-level programs.
"""

from pathlib import Path

import numpy as np
import pytest

from plmr.dialects.context import parse_module
from plmr.errors import PlmrError
from plmr.runtime import loop_ops
from plmr.runtime.reference import evaluate_function
from plmr.tools.cli import main

PROGRAM = """
func.func @main(%x: tensor<4x8xf32>, %v: tensor<8x2xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4x2xf32>, tensor<4x8xf32>) {
  %lo = arith.constant -3.40282347e+38 : f32
  %zero = arith.constant 0.000000e+00 : f32
  %zeros = arith.constant dense<0.000000e+00> : tensor<2xf32>
  %s = loop.nest (%i, %j) to (4, 8) [parallel, reduction] init(%acc = %zero : f32) -> tensor<4xf32> {
    %a = loop.read %x[%i, %j] : tensor<4x8xf32>
    %b = arith.mulf %a, %a : f32
    %c = arith.addf %acc, %b : f32
    loop.yield %c : f32
  }
  %m, %l, %o = loop.nest (%i, %j) to (4, 8) [parallel, reduction] init(%m0 = %lo : f32, %l0 = %zero : f32, %a0 = %zeros : tensor<2xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4x2xf32>) {
    %a = loop.read %x[%i, %j] : tensor<4x8xf32>
    %mn = arith.maximumf %m0, %a : f32
    %d = arith.subf %m0, %mn : f32
    %r = math.exp %d : f32
    %e = arith.subf %a, %mn : f32
    %p = math.exp %e : f32
    %lr = arith.mulf %l0, %r : f32
    %ln = arith.addf %lr, %p : f32
    %an = loop.nest (%k) to (2) [parallel] -> tensor<2xf32> {
      %w = loop.read %v[%j, %k] : tensor<8x2xf32>
      %pw = arith.mulf %p, %w : f32
      %old = loop.read %a0[%k] : tensor<2xf32>
      %ar = arith.mulf %old, %r : f32
      %n = arith.addf %ar, %pw : f32
      loop.yield %n : f32
    }
    loop.yield %mn, %ln, %an : f32, f32, tensor<2xf32>
  }
  %sh = loop.nest (%i, %j) to (4, 8) [parallel, parallel] -> tensor<4x8xf32> {
    %c1 = arith.constant 1 : index
    %jm = arith.subi %j, %c1 : index
    %a = loop.read %x[%i, %jm] padding 5.000000e+00 : tensor<4x8xf32>
    loop.yield %a : f32
  }
  func.return %s, %l, %o, %sh : tensor<4xf32>, tensor<4xf32>, tensor<4x2xf32>, tensor<4x8xf32>
}
"""


def expected(x: np.ndarray, v: np.ndarray) -> list[np.ndarray]:
    e = np.exp(x - x.max(1, keepdims=True))
    shifted = np.concatenate([np.full((4, 1), 5.0, np.float32), x[:, :-1]], axis=1)
    return [(x * x).sum(1), e.sum(1), e @ v, shifted]


@pytest.fixture(name="inputs")
def fixture_inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    return [x, rng.standard_normal((8, 2)).astype(np.float32)]


def test_reductions_nested_nests_and_padding(inputs: list[np.ndarray]):
    module = parse_module(PROGRAM)
    results = evaluate_function(module, "main", inputs)
    for got, want in zip(results, expected(*inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_pure_reductions_are_vectorised_and_recurrences_sequential():
    module = parse_module(PROGRAM)
    nests = [op for op in module.walk() if op.name == "loop.nest"]
    assert loop_ops.combiner_of(nests[0]) is not None  # acc + x²
    assert loop_ops.combiner_of(nests[1]) is None  # l·exp(m − m') + p


def test_boxes_give_the_same_results(
    inputs: list[np.ndarray], monkeypatch: pytest.MonkeyPatch
):
    module = parse_module(PROGRAM)
    whole = evaluate_function(module, "main", inputs)
    monkeypatch.setattr(loop_ops, "BOX_ELEMENTS", 3)
    boxed = evaluate_function(module, "main", inputs)
    for a, b in zip(whole, boxed, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_out_of_range_read_is_an_error():
    module = parse_module(
        """
        func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
          %y = loop.nest (%i) to (4) [parallel] -> tensor<4xf32> {
            %c1 = arith.constant 1 : index
            %j = arith.addi %i, %c1 : index
            %a = loop.read %x[%j] : tensor<4xf32>
            loop.yield %a : f32
          }
          func.return %y : tensor<4xf32>
        }
        """
    )
    with pytest.raises(PlmrError, match=r"index 4 is outside dimension 0 \(size 4\)"):
        evaluate_function(module, "main", [np.zeros(4, np.float32)])


def test_a_large_reduction_runs_in_bounded_memory():
    n = 512
    t = f"tensor<{n}x{n}xf32>"
    module = parse_module(
        f"""
        func.func @main(%a: {t}, %b: {t}) -> {t} {{
          %z = arith.constant 0.000000e+00 : f32
          %c = loop.nest (%i, %j, %k) to ({n}, {n}, {n}) [parallel, parallel, reduction] init(%acc = %z : f32) -> {t} {{
            %x = loop.read %a[%i, %k] : {t}
            %y = loop.read %b[%k, %j] : {t}
            %p = arith.mulf %x, %y : f32
            %s = arith.addf %acc, %p : f32
            loop.yield %s : f32
          }}
          func.return %c : {t}
        }}
        """
    )
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    (c,) = evaluate_function(module, "main", [a, b])
    np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3)


TILE_PROGRAM = """
func.func @main(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %o = tensor.empty() : tensor<8x8xf32>
  %r = tile.for %i = 0 to 8 step 4 iter_args(%acc = %o) -> (tensor<8x8xf32>) parallel {
    %c0 = arith.constant 0 : index
    %b = tile.load %x[%i, %c0] : tensor<8x8xf32> -> tensor<4x8xf32>
    %e = tile.map exp %b : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %s = tile.store %e, %acc[%i, %c0] : tensor<4x8xf32> -> tensor<8x8xf32>
    tile.yield %s : tensor<8x8xf32>
  }
  func.return %r : tensor<8x8xf32>
}
"""


def test_plmr_run_executes_loop_and_tile_programs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    loop_file = tmp_path / "loop.mlir"
    loop_file.write_text(PROGRAM)
    assert main(["run", str(loop_file)]) == 0
    assert "out2: 4x2 float32" in capsys.readouterr().out
    tile_file = tmp_path / "tile.mlir"
    tile_file.write_text(TILE_PROGRAM)
    assert main(["run", str(tile_file)]) == 0
    assert "out0: 8x8 float32" in capsys.readouterr().out
