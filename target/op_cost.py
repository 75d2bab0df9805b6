"""
The compute cycles of one tile op on a PE of a device (the mesh runtime's model, also the
cost the partitioner plans with).
"""

from __future__ import annotations

import math
from typing import cast

from xdsl.dialects import arith
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, Operation

from plmr.dialects import tile
from plmr.dialects.graph import static_shape
from plmr.target.device import Device
from plmr.values import tensor_dtype


def op_cycles(dev: Device, op: Operation) -> float:
    """The compute cycles of one op on one PE (0 for ops that take no time)."""
    if isinstance(op, tile.DotOp):
        return _dot_cycles(dev, op)
    if isinstance(op, tile.TileOp):
        cost = op.cost()
        if cost.flops == 0 and cost.bytes_read == 0 and cost.bytes_written == 0:
            return 0.0
        ratio = _byte_ratio(dev, op)
        return vector_op_cycles(
            dev,
            cost.flops,
            bool(cost.fmacs),
            cost.bytes_read * ratio,
            cost.bytes_written * ratio,
        )
    if isinstance(op, arith.ConstantOp):
        return 0.0
    if op.name.startswith(("arith.", "math.")):
        return 1.0
    return 0.0


def vector_op_cycles(
    dev: Device, flops: float, fmacs: bool, bytes_read: float, bytes_written: float
) -> float:
    """
    One vector op on a PE: its overhead, then its arithmetic at the SIMD width (FMAC
    width for multiply-accumulates) or its SRAM traffic (reads at 16 bytes a cycle,
    writes at 8, in the device's element size), whichever is longer.
    """
    simd = dev.fmac_fp16 if fmacs else dev.simd_fp16
    arithmetic = math.ceil(flops / simd)
    memory = max(bytes_read / 16, bytes_written / 8)
    return dev.op_overhead_cycles + max(arithmetic, math.ceil(memory))


def _dot_cycles(dev: Device, op: tile.DotOp) -> float:
    """
    A block product as the PE runs it: for each row of the left block, one vector
    instruction per scalar of that row, each a multiply-accumulate of a row of the
    right block (N elements) into the output row. An instruction streams N elements at
    the FMAC SIMD width, but no faster than SRAM serves it — as every op: it reads the
    right block's row and the output row (16 bytes per cycle) and writes the output
    row (8 bytes per cycle); on fp16 that is 4 elements per cycle, the bound for rows
    wider than 4 on WSE-3 (calibrated: `benchmarks/calibrate.py`).
    """
    out = static_shape(op.result, "result")
    lhs = static_shape(op.lhs, "lhs")
    batch = math.prod(out[:-2])
    m, n = out[-2], out[-1]
    k = lhs[-2] if op.transpose_a is not None else lhs[-1]
    return block_product_cycles(dev, batch * m, k, n)


def block_product_cycles(dev: Device, rows: int, k: int, n: int) -> float:
    """
    A `rows x k` by `k x n` block product on one PE (`rows` counts the batch): one
    vector instruction per scalar of the left block, each streaming a row of `n`.
    """
    e = dev.elem_bytes
    stream = max(
        math.ceil(n / dev.fmac_fp16), math.ceil(2 * n * e / 16), math.ceil(n * e / 8)
    )
    return (
        dev.op_overhead_cycles
        + rows * dev.row_overhead_cycles
        + rows * k * (dev.dsd_overhead_cycles + stream)
    )


def _byte_ratio(dev: Device, op: Operation) -> float:
    for v in (*op.results, *op.operands):
        t = v.type
        if isinstance(t, TensorType):
            itemsize = tensor_dtype(cast(Attribute, t)).itemsize
            return dev.elem_bytes / itemsize
    return 1.0
