"""
Tests of `passes/neptune/symbolic.py`: which sympy expressions can be built as IR of a
float type (`representable`), and that `emit` refuses a number the type cannot hold.
"""

import pytest
from xdsl.builder import Builder, ImplicitBuilder
from xdsl.dialects.builtin import BFloat16Type, Float16Type, ModuleOp, f32, f64
from xdsl.ir import Attribute, Block, Region
from xdsl.rewriter import InsertPoint

from plmr.errors import PlmrError
from plmr.passes.neptune.symbolic import emit, representable, sp


def test_sympy_splits_a_large_constant_out_of_an_exponential():
    # The reason `representable` exists: exp(s - 1e9) becomes exp(-1e9)·exp(s).
    s, v = sp.symbols("s v", real=True)
    g = v * sp.exp(sp.Float(-1e9, 17) * (1 - s))
    assert not representable(g, f32)
    assert not representable(g, f64)
    assert representable(v * sp.exp(s - 3), f32)


@pytest.mark.parametrize(
    ("number", "elt", "ok"),
    [
        (1e38, f32, True),
        (1e39, f32, False),
        (1e39, f64, True),
        (1e-45, f32, True),  # rounds to the smallest subnormal
        (1e-46, f32, False),  # rounds to 0
        (7e4, Float16Type(), False),
        (1e-8, Float16Type(), False),
        (6e4, Float16Type(), True),
        (1e38, BFloat16Type(), True),
        (0.0, f32, True),
    ],
)
def test_numbers_must_be_finite_and_nonzero_in_the_type(
    number: float, elt: Attribute, ok: bool
):
    x = sp.Symbol("x", real=True)
    assert representable(sp.Float(number, 17) * x, elt) is ok


def test_emit_refuses_a_number_that_rounds_to_zero():
    x = sp.Symbol("x", real=True)
    block = Block(arg_types=[f32])
    ModuleOp(Region([block]))
    with ImplicitBuilder(Builder(InsertPoint.at_end(block))):
        emit(sp.Float(2.0, 17) * x, {x: block.args[0]}, f32)
        with pytest.raises(PlmrError, match="not a finite f32"):
            emit(sp.Float("1e-60", 17) * x, {x: block.args[0]}, f32)
