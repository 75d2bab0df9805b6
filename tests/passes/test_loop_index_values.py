"""
`loop-materialize-indices`: loop indices used as values (concatenations of computed values,
masks comparing indices, positions cast to floats) read from constants. Differential: the
loop-level semantics before and after the pass on random inputs, and the compiled mesh
program on square, odd and non-square grids against the loop level.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from xdsl.dialects import func

from plmr.dialects.context import make_context, parse_module
from plmr.passes.loop_index_values import LoopMaterializeIndicesPass, materialize_indices
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import random_inputs, run_entry, select_entry

PROGRAMS = {
    # A concatenation of two computed tensors along the columns.
    "concat": """
func.func @main(%a: tensor<6x6xf32>, %b: tensor<6x3xf32>) -> tensor<6x9xf32> {
  %y = loop.nest (%i, %j) to (6, 9) [parallel, parallel] -> tensor<6x9xf32> {
    %c6 = arith.constant 6 : index
    %lt = arith.cmpi slt, %j, %c6 : index
    %x = loop.read %a[%i, %j] padding 0.0 : tensor<6x6xf32>
    %e = math.exp %x : f32
    %k = arith.subi %j, %c6 : index
    %z = loop.read %b[%i, %k] padding 0.0 : tensor<6x3xf32>
    %n = arith.negf %z : f32
    %v = arith.select %lt, %e, %n : f32
    loop.yield %v : f32
  }
  func.return %y : tensor<6x9xf32>
}
""",
    # A causal mask with an offset, as an additive finfo.min.
    "causal": """
func.func @main(%s: tensor<6x12xf32>) -> tensor<6x12xf32> {
  %y = loop.nest (%i, %j) to (6, 12) [parallel, parallel] -> tensor<6x12xf32> {
    %c5 = arith.constant 5 : index
    %lim = arith.addi %i, %c5 : index
    %ok = arith.cmpi sle, %j, %lim : index
    %x = loop.read %s[%i, %j] : tensor<6x12xf32>
    %zero = arith.constant 0.0 : f32
    %min = arith.constant -3.40282347E+38 : f32
    %m = arith.select %ok, %zero, %min : f32
    %v = arith.addf %x, %m : f32
    loop.yield %v : f32
  }
  func.return %y : tensor<6x12xf32>
}
""",
    # RoPE's angles of positions 0..11 (an index cast to a float) and their cosines.
    "positions": """
func.func @main(%f: tensor<4xf32>) -> tensor<12x4xf32> {
  %y = loop.nest (%p, %d) to (12, 4) [parallel, parallel] -> tensor<12x4xf32> {
    %n = arith.index_cast %p : index to i64
    %x = arith.sitofp %n : i64 to f32
    %w = loop.read %f[%d] : tensor<4xf32>
    %t = arith.mulf %x, %w : f32
    %c = math.cos %t : f32
    loop.yield %c : f32
  }
  func.return %y : tensor<12x4xf32>
}
""",
}


def inputs(text: str) -> list[np.ndarray[Any, Any]]:
    module = parse_module(text)
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    return random_inputs(fn, 3)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_pass_keeps_the_loop_semantics(name: str):
    text = PROGRAMS[name]
    args = inputs(text)
    module = parse_module(text)
    (want,) = evaluate_function(module, "main", args)
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    assert materialize_indices(fn) == 1
    module.verify()
    assert "iota" in str(module)
    (got,) = evaluate_function(module, "main", args)
    np.testing.assert_array_equal(got, want)
    # Nothing is left to rewrite.
    assert materialize_indices(fn) == 0
    LoopMaterializeIndicesPass().apply(make_context(), module)
    (again,) = evaluate_function(module, "main", args)
    np.testing.assert_array_equal(again, want)


@pytest.mark.parametrize("grid", [(2, 2), (3, 3), (2, 4)], ids=str)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_nests_compile_and_run_on_any_grid(name: str, grid: tuple[int, int]):
    text = PROGRAMS[name]
    args = inputs(text)
    (want,) = evaluate_function(parse_module(text), "main", args)
    module = parse_module(text)
    opts = CompileOptions(grid=grid, substitute=False, tile_sizes=(4, 4), fit_tiles=True)
    compile_module(make_context(), module, opts)
    assert "loop.nest" not in str(module)
    entry = select_entry(module, None)
    assert entry.name == "mesh.program"
    (got,), report = run_entry(module, entry, args)
    assert report is not None
    assert report.cycles > 0
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
