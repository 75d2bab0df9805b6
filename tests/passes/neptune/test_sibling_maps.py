"""
neptune-fuse merges map nests of the same extents that do not read each other into one
nest with both results (one `mesh.spmd` on the mesh); the program's semantics stay, at
the loop level and compiled to the mesh.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from plmr.dialects.context import make_context, parse_module
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.mesh_machine import run_mesh
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import random_inputs, select_function

PROGRAM = """
func.func @main(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = graph.mul %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = graph.sub %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = graph.add %a, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %a, %b, %c : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
"""


def test_independent_maps_merge_and_keep_their_results(fuse: Callable[..., Any]):
    fused = fuse(PROGRAM)
    # a and b in one nest; c reads a, so it stays apart.
    assert [len(n.res) for n in fused.nests] == [2, 1]
    for g, w in zip(fused.results(), fused.want, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("grid", [(2, 2), (2, 4)])
def test_merged_maps_on_the_mesh(grid: tuple[int, int]):
    module = parse_module(PROGRAM)
    fn = select_function(module, None)
    args = random_inputs(fn, 1)
    want = evaluate_function(module, "main", args)
    opts = CompileOptions(grid=grid, substitute=False, tile_sizes=(2, 2), fit_tiles=True)
    compiled = compile_module(make_context(), module, opts)
    got, _ = run_mesh(compiled, args, mode="functional")
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6)


APART = """
func.func @main(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x8xf32>) {
  %a = graph.mul %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = graph.reduce sum %x axes = [-1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %s = graph.mul %r, %r : (tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %b = graph.sub %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %a, %s, %b : tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x8xf32>
}
"""


def test_maps_with_a_reduction_between_them_stay_apart(fuse: Callable[..., Any]):
    # b could join a (it reads only the inputs), but a reduction nest lies between
    # them: a later layer's map does not move into an earlier layer.
    fused = fuse(APART)
    # a; r; r·r (other extents); b.
    assert [len(n.res) for n in fused.nests] == [1, 1, 1, 1]
    assert [n.is_reduction for n in fused.nests] == [False, True, False, False]
    for g, w in zip(fused.results(), fused.want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6)
