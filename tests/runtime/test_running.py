"""Tests of `plmr.runtime.running`: random inputs that fit the ops that consume them."""

from __future__ import annotations

import numpy as np
from xdsl.parser import Parser

from plmr.dialects.context import make_context
from plmr.runtime.running import random_inputs, run_function, select_function

SOURCE = """
func.func @main(%d: tensor<5x3xf32>, %i: tensor<4x3xi64>, %j: tensor<6xi32>,
                %m: tensor<4x3xi1>, %n: tensor<7xi64>, %k: tensor<2x2xi32>) -> tensor<4x3xf32> {
  %g = graph.gather_elements %d, %i axis = 0 : (tensor<5x3xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>
  %c = graph.cast %j : tensor<6xi32> -> tensor<6xi64>
  %r = graph.reshape %c : tensor<6xi64> -> tensor<2x3xi64>
  %h = graph.gather %d, %r axis = 1 : (tensor<5x3xf32>, tensor<2x3xi64>) -> tensor<5x2x3xf32>
  %s = graph.slice %k starts = [0, 0] ends = [2, 1] steps = [1, 1] : tensor<2x2xi32> -> tensor<2x1xi32>
  %e = graph.gather_elements %d, %s axis = 1 : (tensor<5x3xf32>, tensor<2x1xi32>) -> tensor<2x1xf32>
  %z = graph.constant dense<0.0> : tensor<4x3xf32>
  %w = graph.where %m, %g, %z : (tensor<4x3xi1>, tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  func.return %w : tensor<4x3xf32>
}
"""


def test_random_inputs_fit_their_consumers():
    module = Parser(make_context(), SOURCE).parse_module()
    fn = select_function(module, None)
    for seed in range(5):
        d, i, j, m, n, k = random_inputs(fn, seed)
        assert d.dtype == np.float32
        assert i.dtype == np.int64
        assert j.dtype == np.int32
        assert m.dtype == np.bool_
        # gather_elements along axis 0 of a 5x3 tensor; through a cast and a reshape
        # into a gather along axis 1 (size 3); through a slice into axis 1 (size 3).
        assert 0 <= i.min()
        assert i.max() < 5
        assert 0 <= j.min()
        assert j.max() < 3
        assert 0 <= k.min()
        assert k.max() < 3
        # Unused integers are small non-negative numbers.
        assert 0 <= n.min()
        assert n.max() < 8
        (out,) = run_function(module, fn, [d, i, j, m, n, k])
        assert out.shape == (4, 3)
    masks = np.concatenate([random_inputs(fn, s)[3].reshape(-1) for s in range(5)])
    assert masks.any()
    assert not masks.all()
