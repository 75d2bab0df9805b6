"""Tests of the work of one tile op (`op_work`), the machine model's per-op cost."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest
from xdsl.dialects import arith
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    BFloat16Type,
    FloatAttr,
    IndexType,
    TensorType,
    bf16,
    f16,
    f32,
    i1,
    i8,
)
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.utils.test_value import create_ssa_value

from plmr.dialects import tile
from plmr.dialects.tile import (
    BINARY_KINDS,
    UNARY_KINDS,
    BroadcastOp,
    CastOp,
    DotOp,
    FillOp,
    ForOp,
    LoadOp,
    MapOp,
    ReduceOp,
    ReshapeOp,
    StoreOp,
    Tile,
    TileOp,
    TransposeOp,
    YieldOp,
    nbytes,
)
from plmr.target.op_cost import TRANSCENDENTAL_COST, OpCost, map_kind_cost, op_work


def tensor(shape: Sequence[int], elt: Attribute = f32) -> SSAValue:
    """A fresh SSA value of type `tensor<shape x elt>`."""
    return create_ssa_value(TensorType(elt, shape))


def index() -> SSAValue:
    return create_ssa_value(IndexType())


def _loop(lb: int, ub: int, step: int, kind: str, inits: Sequence[SSAValue]) -> ForOp:
    block = Block(arg_types=[IndexType(), *(v.type for v in inits)])
    block.add_op(YieldOp(*block.args[1:]))
    return ForOp(lb, ub, step, kind, inits, block)


FREE_OPS = {ReshapeOp, ForOp, YieldOp}
"""The ops that do no work of their own (a reshape renames a block; a loop's work is its
body's)."""


def test_every_tile_op_that_works_has_its_work_counted():
    """A new `tile` op that reads or writes SRAM needs an `op_work` entry."""
    registered = set(op_work.registry) - {object}
    for op in Tile.operations:
        assert (op in registered) != (op in FREE_OPS), (
            f"{op.name}: register its work in plmr.target.op_cost or list it as free"
        )
    assert all(issubclass(op, TileOp) for op in registered)


def test_ops_of_other_dialects_do_no_work():
    assert op_work(arith.ConstantOp(FloatAttr(1.0, f32))) == OpCost()


def test_op_cost_adds_up():
    a = OpCost(flops=10, fmacs=False, bytes_read=4, bytes_written=8)
    b = OpCost(flops=5, fmacs=True, bytes_read=1, bytes_written=2)
    assert a + b == OpCost(15, True, 5, 10)
    assert a + OpCost() == a
    assert OpCost() == OpCost(0, False, 0, 0)


CHEAP_KINDS = {"neg", "abs", "relu", "add", "sub", "mul", "max", "min"}
"""Kinds that cost one operation per element; the others are transcendental."""


def _kind_cost(kind: str) -> int:
    return 1 if kind in CHEAP_KINDS else 8


def test_map_kind_cost():
    for kind in (*UNARY_KINDS, *BINARY_KINDS):
        assert map_kind_cost(kind) == _kind_cost(kind), kind
    assert TRANSCENDENTAL_COST == 8


def _body(arg_types: Sequence[Attribute], make: Any) -> Region:
    block = Block(arg_types=arg_types)
    ops = make(*block.args)
    block.add_ops([*ops, YieldOp(ops[-1] if ops else block.args[0])])
    return Region(block)


def test_costs_of_data_movement():
    assert op_work(FillOp(0, TensorType(f32, (16, 16)))) == OpCost(bytes_written=1024)
    load = LoadOp(tensor((64, 64), f16), [index(), index()], (16, 32))
    assert op_work(load) == OpCost(bytes_written=1024)
    store = StoreOp(tensor((16, 16)), tensor((64, 64)), [index(), index()])
    assert op_work(store) == OpCost(bytes_read=1024)
    bcast = BroadcastOp(tensor((16, 1)), (16, 64))
    assert op_work(bcast) == OpCost(bytes_read=64, bytes_written=4096)
    cast = CastOp(tensor((16, 8)), f16)
    assert op_work(cast) == OpCost(flops=128, bytes_read=512, bytes_written=256)
    tr = TransposeOp(tensor((16, 8), i8), (1, 0))
    assert op_work(tr) == OpCost(bytes_read=128, bytes_written=128)
    assert op_work(ReshapeOp(tensor((4, 16)), (64,))) == OpCost()
    assert op_work(_loop(0, 64, 16, "reduction", [tensor((4, 4))])) == OpCost()


@pytest.mark.parametrize(
    "lhs, rhs, ta, tb, elt, macs",
    [
        ((16, 8), (8, 32), False, False, f32, 16 * 32 * 8),
        ((8, 16), (8, 32), True, False, f32, 16 * 32 * 8),
        ((16, 8), (32, 8), False, True, f32, 16 * 32 * 8),
        ((8, 16), (32, 8), True, True, f32, 16 * 32 * 8),
        ((64, 1), (1, 64), False, False, f32, 64 * 64),
        ((1, 64), (64, 1), False, False, f32, 64),
        ((4, 16, 8), (4, 8, 32), False, False, f16, 4 * 16 * 32 * 8),
        ((2, 8, 16), (2, 32, 8), True, True, i8, 2 * 16 * 32 * 8),
    ],
)
def test_dot_cost(
    lhs: tuple[int, ...],
    rhs: tuple[int, ...],
    ta: bool,
    tb: bool,
    elt: Attribute,
    macs: int,
):
    size = nbytes(elt)
    a, b = tensor(lhs, elt), tensor(rhs, elt)
    op = DotOp(a, b, transpose_a=ta, transpose_b=tb)
    out = math.prod(tile.static_shape(op.result, "result")) * size
    read = (math.prod(lhs) + math.prod(rhs)) * size
    assert op_work(op) == OpCost(flops=macs, fmacs=True, bytes_read=read, bytes_written=out)
    acc = DotOp(
        a, b, tensor(tile.static_shape(op.result, "r"), elt), transpose_a=ta, transpose_b=tb
    )
    assert op_work(acc) == OpCost(macs, True, read + out, out)


def test_reduce_cost():
    op = ReduceOp("max", tensor((16, 64)), 1)
    assert op_work(op) == OpCost(flops=1024, bytes_read=4096, bytes_written=64)
    op = ReduceOp("sum", tensor((2, 4, 8), f16), 0)
    assert op_work(op) == OpCost(flops=64, bytes_read=128, bytes_written=64)


@pytest.mark.parametrize("kind", UNARY_KINDS)
def test_unary_map_cost(kind: str):
    op = MapOp([tensor((16, 64))], kind)
    per = _kind_cost(kind)
    assert op_work(op) == OpCost(flops=1024 * per, bytes_read=4096, bytes_written=4096)
    assert not op_work(op).fmacs


@pytest.mark.parametrize("kind", BINARY_KINDS)
def test_binary_map_cost(kind: str):
    # Broadcasting: the flops count output elements, the reads each input once.
    op = MapOp([tensor((16, 64)), tensor((16, 1))], kind)
    per = _kind_cost(kind)
    assert op_work(op) == OpCost(flops=1024 * per, bytes_read=4096 + 64, bytes_written=4096)


def test_map_body_cost():
    x = tensor((16, 64))
    # arith.constant is free; arith ops cost 1 and math ops a transcendental each.
    scale = MapOp(
        [x],
        body=_body(
            [f32],
            lambda v: [c := arith.ConstantOp(FloatAttr(0.5, f32)), arith.MulfOp(v, c)],
        ),
    )
    assert op_work(scale) == OpCost(flops=1024, bytes_read=4096, bytes_written=4096)
    exp_sub = MapOp(
        [x, tensor((16, 1))],
        body=_body([f32, f32], lambda a, b: [d := arith.SubfOp(a, b), mathd.ExpOp(d)]),
    )
    assert op_work(exp_sub) == OpCost(
        flops=1024 * (1 + TRANSCENDENTAL_COST), bytes_read=4096 + 64, bytes_written=4096
    )
    # A body that does nothing still costs one operation per element.
    identity = MapOp([x], body=_body([f32], lambda v: []))
    assert op_work(identity) == OpCost(flops=1024, bytes_read=4096, bytes_written=4096)
    # The output element type decides the bytes written.
    half = MapOp(
        [x],
        body=_body([f32], lambda v: [arith.TruncFOp(v, f16)]),
        result_type=TensorType(f16, (16, 64)),
    )
    half.verify()
    assert op_work(half) == OpCost(flops=1024, bytes_read=4096, bytes_written=2048)
    # A masked select on i1 blocks (graph.where of a graph.cmp): compare, select and
    # the cheap math ops (abs, floor, ceil) cost one each; i1 elements are one byte.
    mask = MapOp(
        [x, tensor((16, 64), i1)],
        body=_body(
            [f32, i1],
            lambda v, m: [
                a := mathd.AbsFOp(v),
                f := mathd.FloorOp(a),
                c := mathd.CeilOp(f),
                arith.SelectOp(m, c, v),
            ],
        ),
    )
    mask.verify()
    assert op_work(mask) == OpCost(
        flops=1024 * 4, bytes_read=4096 + 1024, bytes_written=4096
    )
    compare = MapOp(
        [x, x],
        body=_body([f32, f32], lambda a, b: [arith.CmpfOp(a, b, "olt")]),
        result_type=TensorType(i1, (16, 64)),
    )
    compare.verify()
    assert op_work(compare) == OpCost(flops=1024, bytes_read=8192, bytes_written=1024)


def test_bf16_blocks_are_two_bytes_per_element():
    assert isinstance(bf16, BFloat16Type)
    op = LoadOp(tensor((64, 64), bf16), [index(), index()], (16, 16))
    assert op_work(op) == OpCost(bytes_written=512)


def test_a_scalar_body_costs_its_ops_like_a_map_body():
    from plmr.target.op_cost import TRANSCENDENTAL_COST, scalar_body_cost

    def body(x: SSAValue) -> SSAValue:
        half = arith.ConstantOp(FloatAttr(0.5, f32)).result
        return arith.MulfOp(mathd.TanhOp(x).result, half).result

    # The constant is free, the tanh transcendental, the product one flop.
    assert scalar_body_cost(body, f32) == TRANSCENDENTAL_COST + 1
    assert scalar_body_cost(lambda x: x, f32) == 0
