"""
Typed access to verified IR (`plmr.dialects.narrow`): the typed result on a program that
holds the fact, one `PlmrError` naming expected and found on one that does not.
"""

from __future__ import annotations

import pytest
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IntegerAttr, TensorType, f32, i32
from xdsl.ir import Block, Region

from plmr.dialects.narrow import expect, terminator, type_of
from plmr.errors import PlmrError


def _fn(ops: list[arith.ConstantOp | func.ReturnOp]) -> func.FuncOp:
    fn = func.FuncOp("main", ((), ()), Region(Block()))
    fn.body.block.add_ops(ops)
    return fn


def test_terminator_returns_the_typed_last_op():
    ret = func.ReturnOp()
    fn = _fn([arith.ConstantOp(IntegerAttr(1, i32)), ret])
    assert terminator(fn.body.block, func.ReturnOp) is ret


def test_a_missing_terminator_names_the_op_whose_body_lacks_it():
    fn = _fn([arith.ConstantOp(IntegerAttr(1, i32))])
    with pytest.raises(PlmrError, match=r"body of 'func.func' ends in 'arith.constant'"):
        terminator(fn.body.block, func.ReturnOp)
    with pytest.raises(PlmrError, match=r"ends in nothing, expected 'func.return'"):
        terminator(Block(), func.ReturnOp)


def test_type_of_narrows_a_value_type_or_names_its_producer():
    block = Block(arg_types=[TensorType(f32, [2, 3])])
    assert type_of(block.args[0], TensorType).get_shape() == (2, 3)
    const = arith.ConstantOp(IntegerAttr(1, i32))
    with pytest.raises(PlmrError, match=r"value of 'arith.constant' has type i32"):
        type_of(const.result, TensorType)


def test_expect_names_what_it_checked():
    assert expect(3, int, "a tag") == 3
    with pytest.raises(PlmrError, match=r"a tag is a str, expected a int"):
        expect("x", int, "a tag")
