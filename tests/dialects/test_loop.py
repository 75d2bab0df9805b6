"""Tests of the `loop` dialect: builders, result types, verifier messages, syntax."""

import pytest
from xdsl.builder import ImplicitBuilder
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import FloatAttr, IndexType, ModuleOp, TensorType, f32
from xdsl.ir import Block
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.test_value import create_ssa_value

from plmr.dialects.context import parse_module
from plmr.dialects.loop import (
    IteratorKind,
    NestOp,
    ReadOp,
    YieldOp,
    build_nest,
    nest_result_type,
    value_shape,
)

P, R = IteratorKind.PARALLEL, IteratorKind.REDUCTION
T48 = TensorType(f32, [4, 8])


def test_result_type_is_parallel_extents_then_value_shape():
    assert nest_result_type([4], f32) == TensorType(f32, [4])
    assert nest_result_type([4], TensorType(f32, [2])) == TensorType(f32, [4, 2])
    assert nest_result_type([], f32) == f32
    assert nest_result_type([], f32, scalar_ok=False) == TensorType(f32, [])
    assert value_shape(f32) == ()


def test_build_nest_infers_types_and_names():
    x = create_ssa_value(T48)
    zero = create_ssa_value(f32)

    def body(d, a):
        v = ReadOp(x, list(d)).result
        return [arith.AddfOp(a[0], v).result]

    nest = build_nest([4, 8], [P, R], [zero], body)
    nest.verify()
    assert nest.res.types[0] == TensorType(f32, [4])
    assert nest.parallel_dims == (0,)
    assert nest.reduction_dims == (1,)
    assert [d.name_hint for d in nest.dims] == ["i0", "i1"]
    assert nest.accumulators[0].name_hint == "acc"
    assert nest.parallel_extents == (4,)


def _nest(extents, kinds, inits, result_types, yield_types):
    block = Block(arg_types=[IndexType()] * len(extents) + [v.type for v in inits])
    with ImplicitBuilder(block):
        values = [arith.ConstantOp(FloatAttr(1.0, f32)).result for _ in yield_types]
        YieldOp(*values)
    return NestOp(extents, kinds, inits, result_types, block)


@pytest.mark.parametrize(
    "extents, kinds, n_inits, result, message",
    [
        ([4, 8], [P, R], 0, TensorType(f32, [4]), "needs one initial value per result"),
        ([4, 8], [P, P], 0, TensorType(f32, [4]), "expected tensor<4x8xf32>"),
        ([4, 0], [P, P], 0, TensorType(f32, [4, 0]), "extent 0 of dimension 1"),
        ([4], [P, P], 0, TensorType(f32, [4]), "1 extents but 2 iterator kinds"),
        ([4], [P], 1, TensorType(f32, [4]), "takes no initial values"),
    ],
)
def test_verifier_messages(extents, kinds, n_inits, result, message):
    inits = [create_ssa_value(f32) for _ in range(n_inits)]
    nest = _nest(extents, kinds, inits, [result], [f32])
    with pytest.raises(VerifyException, match=message):
        nest.verify()


def test_read_checks_rank():
    with pytest.raises(VerifyException, match="needs 2 indices, got 1"):
        ReadOp(create_ssa_value(T48), [create_ssa_value(IndexType())]).verify()


def test_read_needs_a_tensor():
    with pytest.raises(VerifyException, match="needs a tensor"):
        ReadOp(create_ssa_value(f32), [])


TEXT = """
func.func @f(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %z = arith.constant 0.000000e+00 : f32
  %s = loop.nest (%i, %j) to (4, 8) [parallel, reduction] init(%acc = %z : f32) -> tensor<4xf32> {
    %a = loop.read %x[%i, %j] padding 0.000000e+00 : tensor<4x8xf32>
    %b = arith.addf %acc, %a : f32
    loop.yield %b : f32
  } {loop.remark = "note"}
  func.return %s : tensor<4xf32>
}
"""


def test_custom_syntax_round_trips():
    module = parse_module(TEXT)
    text = str(module)
    assert (
        "loop.nest (%i, %j) to (4, 8) [parallel, reduction] init(%acc = %z : f32)" in text
    )
    assert "padding 0.000000e+00" in text
    assert '{loop.remark = "note"}' in text
    assert str(parse_module(text)) == text
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    nest = next(op for op in fn.body.block.ops if isinstance(op, NestOp))
    read = next(op for op in nest.body.block.ops if isinstance(op, ReadOp))
    assert read.padding is not None
    assert read.padding.value.data == 0.0
    assert isinstance(module, ModuleOp)
