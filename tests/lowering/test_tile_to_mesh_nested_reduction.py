"""
A reduction over several dimensions (decode's output projection reduces the head
dimension and the heads: `Σ_{d,h} o[d,h]·W[d,h,:]`): the outermost reduction splits
over an axis, the ones inside it run whole on each PE, and the partial sums are
allreduced once. The compiled program gives the reference results.
"""

from __future__ import annotations

import numpy as np
import pytest

from plmr.dialects import mesh
from plmr.dialects.context import make_context, parse_module
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.mesh_machine import run_mesh
from plmr.runtime.running import random_inputs, run_function, select_function


def heads_projection(hd: int, heads: int, out: int, kind: str) -> str:
    o, w = f"tensor<{hd}x{heads}x1xf32>", f"tensor<{hd}x{heads}x{out}xf32>"
    p, r = f"tensor<{hd}x{heads}x{out}xf32>", f"tensor<{out}xf32>"
    return f"""
    func.func @main(%o: {o}, %w: {w}) -> {r} {{
      %p = graph.mul %o, %w : ({o}, {w}) -> {p}
      %r = graph.reduce {kind} %p axes = [0, 1] : {p} -> {r}
      func.return %r : {r}
    }}"""


@pytest.mark.parametrize("kind", ["sum", "max"])
@pytest.mark.parametrize(("hd", "grid"), [(16, (4, 4)), (12, (3, 3)), (16, (2, 4))])
def test_nested_reduction_splits_over_an_axis(kind: str, hd: int, grid: tuple[int, int]):
    module = parse_module(heads_projection(hd, 2, 24, kind))
    fn = select_function(module, None)
    args = random_inputs(fn, 0)
    want = run_function(module, fn, args)
    opts = CompileOptions(grid=grid, substitute=False, tile_sizes=(4, 4), fit_tiles=True)
    compiled = compile_module(make_context(), module, opts)
    reduces = [op for op in compiled.walk() if isinstance(op, mesh.AllreduceOp)]
    assert [op.kind.data for op in reduces] == [kind]
    got, _ = run_mesh(compiled, args, mode="functional")
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
