"""convert-tile-to-mesh names what it cannot place at the top of a function precisely."""

import pytest

from plmr.dialects.context import parse_module
from plmr.errors import PlmrError
from plmr.lowering.tile_to_mesh import lower_module, parse_options

SCALAR_AT_TOP = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = arith.constant 2 : index
  %m = arith.muli %c, %c : index
  %e = tensor.empty() : tensor<4xf32>
  %t = tile.for %i = 0 to 4 step 2 iter_args(%acc = %e) -> (tensor<4xf32>) parallel {
    %b = tile.load %x[%i] : tensor<4xf32> -> tensor<2xf32>
    %s = tile.store %b, %acc[%i] : tensor<2xf32> -> tensor<4xf32>
    tile.yield %s : tensor<4xf32>
  }
  func.return %t : tensor<4xf32>
}
"""

UNTILED_NEST = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = loop.nest (%i) to (4) [parallel] -> tensor<4xf32> {
    %a = loop.read %x[%i] : tensor<4xf32>
    loop.yield %a : f32
  }
  func.return %e : tensor<4xf32>
}
"""


def test_an_op_that_is_not_a_nest_is_not_called_an_untiled_nest():
    module = parse_module(SCALAR_AT_TOP)
    with pytest.raises(PlmrError) as info:
        lower_module(module, parse_options((2, 2), "wse2", "meshgemm", "ktree", 2))
    assert str(info.value) == (
        "convert-tile-to-mesh: 'arith.muli' at the top of @main cannot be placed on the "
        "mesh (expected tile nests, straight-line tile ops, constants and the return)"
    )


def test_an_untiled_loop_nest_is_named_as_such():
    module = parse_module(UNTILED_NEST)
    with pytest.raises(PlmrError, match=r"a 'loop\.nest' here was left untiled by"):
        lower_module(module, parse_options((2, 2), "wse2", "meshgemm", "ktree", 2))
