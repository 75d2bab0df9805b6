"""
Builders of `loop` nests and of the scalar code in their bodies, shared by the lowerings
of `convert-graph-to-loop`. They build at the current implicit builder's insertion point.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
)
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from plmr.dialects import graph
from plmr.dialects.loop import IteratorKind, ReadOp, build_nest
from plmr.dialects.op_table import OpTable
from plmr.errors import PlmrError

P = IteratorKind.PARALLEL
R = IteratorKind.REDUCTION

Shape = tuple[int, ...]


# ---------------------------------------------------------------------------------------
# Scalar helpers (used inside nest bodies under an implicit builder)
# ---------------------------------------------------------------------------------------


def index(v: int) -> SSAValue:
    """An `index` constant."""
    return arith.ConstantOp(IntegerAttr(v, IndexType())).result


def const(v: float, elt: Attribute) -> SSAValue:
    """A scalar constant of element type `elt`."""
    if isinstance(elt, AnyFloat):
        return arith.ConstantOp(FloatAttr(float(v), elt)).result
    if isinstance(elt, IntegerType):
        width = cast(IntegerType, elt).width.data
        return arith.ConstantOp(IntegerAttr(int(v), width)).result
    raise PlmrError(f"no constants of type {elt}")


def is_float(v: SSAValue) -> bool:
    return isinstance(v.type, AnyFloat)


def add(a: SSAValue, b: SSAValue) -> SSAValue:
    return (arith.AddfOp(a, b) if is_float(a) else arith.AddiOp(a, b)).result


def sub(a: SSAValue, b: SSAValue) -> SSAValue:
    return (arith.SubfOp(a, b) if is_float(a) else arith.SubiOp(a, b)).result


def mul(a: SSAValue, b: SSAValue) -> SSAValue:
    return (arith.MulfOp(a, b) if is_float(a) else arith.MuliOp(a, b)).result


def div(a: SSAValue, b: SSAValue) -> SSAValue:
    return (arith.DivfOp(a, b) if is_float(a) else arith.DivSIOp(a, b)).result


def maximum(a: SSAValue, b: SSAValue) -> SSAValue:
    return (arith.MaximumfOp(a, b) if is_float(a) else arith.MaxSIOp(a, b)).result


def minimum(a: SSAValue, b: SSAValue) -> SSAValue:
    return (arith.MinimumfOp(a, b) if is_float(a) else arith.MinSIOp(a, b)).result


def neg(a: SSAValue) -> SSAValue:
    if is_float(a):
        return arith.NegfOp(a).result
    return arith.SubiOp(const(0, a.type), a).result


def exp(a: SSAValue) -> SSAValue:
    return mathd.ExpOp(a).result


def lowest(elt: Attribute) -> float:
    """The lowest finite value of an element type (the start of a running max)."""
    if isinstance(elt, AnyFloat):
        return float(np.finfo(np_float(elt)).min)
    if isinstance(elt, IntegerType):
        return -(2 ** (cast(IntegerType, elt).width.data - 1))
    raise PlmrError(f"no lowest value for {elt}")


def highest(elt: Attribute) -> float:
    if isinstance(elt, AnyFloat):
        return float(np.finfo(np_float(elt)).max)
    if isinstance(elt, IntegerType):
        return 2 ** (cast(IntegerType, elt).width.data - 1) - 1
    raise PlmrError(f"no highest value for {elt}")


def np_float(elt: AnyFloat) -> type[np.floating]:
    return {16: np.float16, 32: np.float32, 64: np.float64}.get(elt.bitwidth, np.float32)


def shape_of(v: SSAValue) -> Shape:
    return graph.static_shape(v, "value")


def element_of(v: SSAValue) -> Attribute:
    return graph.element_type(v)


def broadcast_read(src: SSAValue, out_idx: Sequence[SSAValue]) -> SSAValue:
    """Reads `src` at the output index `out_idx` under numpy broadcasting."""
    shape = shape_of(src)
    off = len(out_idx) - len(shape)
    idx = [index(0) if d == 1 else out_idx[off + a] for a, d in enumerate(shape)]
    return ReadOp(src, idx).result


# ---------------------------------------------------------------------------------------
# Nest helpers
# ---------------------------------------------------------------------------------------


def map_nest(
    shape: Shape, fn: Callable[[Sequence[SSAValue]], SSAValue], elt: Attribute
) -> SSAValue:
    """
    A parallel nest over `shape` whose body yields `fn(indices)`. A rank-0 result is a
    nest with one reduction dimension of extent 1 whose body ignores the accumulator.
    """
    if not shape:
        init = const(0, elt)
        nest = build_nest([1], [R], [init], lambda d, a: [fn(())], scalar_results=False)
        return nest.res[0]
    nest = build_nest(shape, [P] * len(shape), [], lambda d, a: [fn(d)])
    return nest.res[0]


def reduce_nest(
    par_shape: Shape,
    red_shape: Shape,
    init: float,
    elt: Attribute,
    term: Callable[[Sequence[SSAValue], Sequence[SSAValue]], SSAValue],
    combine: Callable[[SSAValue, SSAValue], SSAValue],
) -> SSAValue:
    """
    A nest with parallel dims `par_shape` then reduction dims `red_shape`, computing
    `acc = combine(acc, term(par indices, red indices))` from `init`.
    """
    start = const(init, elt)
    npar = len(par_shape)

    def body(d: Sequence[BlockArgument], a: Sequence[BlockArgument]) -> list[SSAValue]:
        return [combine(a[0], term(d[:npar], d[npar:]))]

    nest = build_nest(
        [*par_shape, *red_shape],
        [P] * npar + [R] * len(red_shape),
        [start],
        body,
        scalar_results=False,
    )
    return nest.res[0]


# ---------------------------------------------------------------------------------------
# Lowerings of elementwise ops
# ---------------------------------------------------------------------------------------

Lowering = Callable[[Operation], list[SSAValue]]
LoweringTable = OpTable[[], list[SSAValue]]
"""Lowerings by op class: (op) -> replacement values (built in place)."""


def binary_lowering(fn: Callable[[SSAValue, SSAValue], SSAValue]) -> Lowering:
    def lower(op: Operation) -> list[SSAValue]:
        lhs, rhs = op.operands
        out = op.results[0]

        def body(idx: Sequence[SSAValue]) -> SSAValue:
            return fn(broadcast_read(lhs, idx), broadcast_read(rhs, idx))

        return [map_nest(shape_of(out), body, element_of(out))]

    return lower


def unary_lowering(fn: Callable[[SSAValue], SSAValue]) -> Lowering:
    def lower(op: Operation) -> list[SSAValue]:
        x = op.operands[0]
        return [map_nest(shape_of(x), lambda idx: fn(ReadOp(x, idx).result), element_of(x))]

    return lower
