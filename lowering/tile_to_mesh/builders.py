"""
Small IR builders shared by the emitters of `convert-tile-to-mesh`: index arithmetic,
ring positions, distributed types.
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    IndexType,
    IntegerAttr,
    TensorType,
)
from xdsl.ir import Attribute, SSAValue

from plmr.dialects import mesh
from plmr.dialects.narrow import type_of
from plmr.lowering.tile_to_mesh.analysis import (
    Layout,
    Options,
    layout_band,
    layout_from_attr,
    plain_axes,
)


def const_index(b: Builder, value: int) -> SSAValue:
    return b.insert(arith.ConstantOp(IntegerAttr(value, IndexType()))).result


def mul_index(b: Builder, x: SSAValue, c: int) -> SSAValue:
    if c == 1:
        return x
    return b.insert(arith.MuliOp(x, const_index(b, c))).result


def add_index(b: Builder, x: SSAValue, y: SSAValue) -> SSAValue:
    return b.insert(arith.AddiOp(x, y)).result


def ring_position(b: Builder, coord: SSAValue, ring: str, n: int) -> SSAValue:
    """The logical ring position of a physical coordinate (inverse of the ring order)."""
    if ring == "torus" or n < 3:
        return coord
    evens = (n + 1) // 2
    last_odd = n - 1 if n % 2 == 0 else n - 2
    two = const_index(b, 2)
    half = b.insert(arith.DivUIOp(coord, two)).result
    back = b.insert(arith.SubiOp(const_index(b, last_odd), coord)).result
    odd = add_index(b, const_index(b, evens), b.insert(arith.DivUIOp(back, two)).result)
    parity = b.insert(arith.RemUIOp(coord, two)).result
    is_even = b.insert(arith.CmpiOp(parity, const_index(b, 0), "eq")).result
    return b.insert(arith.SelectOp(is_even, half, odd)).result


def ring_coord(b: Builder, pos: SSAValue, ring: str, n: int) -> SSAValue:
    """The physical coordinate at a logical ring position (the ring order)."""
    if ring == "torus" or n < 3:
        return pos
    evens = (n + 1) // 2
    first = b.insert(arith.CmpiOp(pos, const_index(b, evens), "ult")).result
    even = add_index(b, pos, pos)
    back = b.insert(arith.SubiOp(const_index(b, 2 * n - 1), even)).result
    return b.insert(arith.SelectOp(first, even, back)).result


def dist_type(
    value: SSAValue, layout: Layout, skew: str = "", ring: str = "", chunks: int = 0
):
    t = type_of(value, TensorType)
    return mesh.DistType(
        t,  # pyright: ignore[reportUnknownArgumentType]
        mesh.LayoutAttr(
            plain_axes(layout),
            skew=skew,
            ring=ring,
            chunks=chunks,
            band=layout_band(layout),
        ),
    )


def layout_of(dist: mesh.DistType) -> Layout:
    """The planner's layout of a distributed value (band entries included)."""
    return layout_from_attr(dist.layout.axes, dist.layout.band)


def ktree_groups(opts: Options, axis: str) -> int | None:
    """The K-tree's groups along `axis` (None: the collective's default)."""
    if opts.gemv != "ktree" or opts.groups <= 0 or opts.k < 2:
        return None
    return min(opts.groups, opts.n(axis))


def ring_for(ring: str, n: int) -> str:
    return "torus" if ring == "interleaved" and n < 3 else ring


def element_type(value: SSAValue) -> Attribute:
    t = type_of(value, TensorType)
    return t.element_type  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
