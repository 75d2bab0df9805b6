"""
The lowering of `convert-graph-to-loop` for RoPE's rotation, `x·R` with `R` the `h x h`
signed permutation of `rotate_half` (a constant: `graph-canonicalize` writes an
export's `Concat(Neg(x[..., h/2:]), x[..., :h/2])` so, and `graph-fold-rotate-half`
leaves it where it does not fold it into a projection's weights).

As a product, the rotation is a reduction over `h` with `h` multiply-adds per element:
on a wafer it costs as much as a projection by an `h x h` weight, and the mesh
partitioner prices it so. It is an index map: each output element is one input element,
negated in the first half,

    out[..., j] = j < h/2 ? -x[..., j + h/2] : x[..., j - h/2]

one parallel nest of two shifted reads (each outside the tensor for the other half,
where it reads the padding 0 and the select drops it), which `neptune-fuse` fuses into
the nest that reads the rotation (RoPE's `x·cos + rotate_half(x)·sin`) and the mesh runs
on the PE that holds each row whenever the head dimension is whole there. The values
are the product's: `R` holds one `±1` per column and zeros, so each output of the
product is `±x_i` plus exact zeros.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr
from xdsl.ir import SSAValue

from plmr.dialects import graph
from plmr.dialects.loop import ReadOp
from plmr.lowering.loop_builders import index, map_nest
from plmr.runtime.weights import rotate_half
from plmr.values import dense_to_numpy

ROTATION_LIMIT = 1024
"""The largest `h` recognised (R holds `h²` values to compare)."""


def rotation_width(op: graph.MatmulOp) -> int:
    """`h` if `op` is `x·R` with `R` rotate_half's `h x h` signed permutation; else 0."""
    if op.transpose_a is not None or op.transpose_b is not None:
        return 0
    owner = op.rhs.owner
    if not isinstance(owner, graph.ConstantOp | arith.ConstantOp):
        return 0
    shape = graph.static_shape(op.rhs, "rhs")
    h = shape[0] if len(shape) == 2 else 0
    if h == 0 or shape[1] != h or h % 2 or h > ROTATION_LIMIT:
        return 0
    if graph.static_shape(op.lhs, "lhs")[-1:] != (h,):
        return 0
    value = owner.value
    if not isinstance(value, DenseIntOrFPElementsAttr):
        return 0  # a constant by reference (a weight) is no rotation
    values = dense_to_numpy(value)
    if not np.array_equal(values, rotate_half(np.eye(h, dtype=values.dtype), h)):
        return 0
    return h


def lower_rotation(op: graph.MatmulOp, h: int) -> SSAValue:
    """`x·R` (`rotation_width(op) == h`) as one parallel nest of two shifted reads."""
    x = op.lhs
    out = graph.static_shape(op.result, "result")
    last = len(out) - 1
    half = h // 2

    def body(idx: Sequence[SSAValue]) -> SSAValue:
        j = idx[last]
        high = [*idx[:last], arith.AddiOp(j, index(half)).result]
        low = [*idx[:last], arith.SubiOp(j, index(half)).result]
        negated = arith.NegfOp(ReadOp(x, high, padding=0.0).result).result
        first = arith.CmpiOp(j, index(half), "slt").result
        kept = ReadOp(x, low, padding=0.0).result
        return arith.SelectOp(first, negated, kept).result

    return map_nest(out, body, graph.element_type(op.result))


__all__ = ["ROTATION_LIMIT", "lower_rotation", "rotation_width"]
