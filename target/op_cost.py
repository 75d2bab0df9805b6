"""
The work and the compute cycles of one tile op on a PE of a device (the mesh runtime's
model, also the cost the partitioner plans with): `op_work` counts an op's arithmetic and
SRAM traffic, `op_cycles` turns that into cycles with the device's SIMD widths.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import singledispatch
from typing import cast

from xdsl.builder import ImplicitBuilder
from xdsl.dialects import arith
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, Block, Operation, SSAValue

from plmr.dialects import tile
from plmr.dialects.graph import static_shape
from plmr.target.device import Device
from plmr.values import tensor_dtype

# ---------------------------------------------------------------------------------------
# Work: arithmetic and SRAM traffic of one op
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpCost:
    """Work of one op on one core: arithmetic operations and SRAM traffic."""

    flops: int = 0
    """Arithmetic operations (a fused multiply-add counts as one)."""
    fmacs: bool = False
    """True when `flops` are multiply-accumulates (they use the FMAC SIMD width)."""
    bytes_read: int = 0
    bytes_written: int = 0

    def __add__(self, other: OpCost) -> OpCost:
        return OpCost(
            self.flops + other.flops,
            self.fmacs or other.fmacs,
            self.bytes_read + other.bytes_read,
            self.bytes_written + other.bytes_written,
        )


TRANSCENDENTAL_COST = 8
"""Flops charged per element for exp/log/erf/tanh/sigmoid-like functions."""

_CHEAP_KINDS = {"neg", "abs", "relu", "add", "sub", "mul", "max", "min"}

_CHEAP_MATH = {"math.absf", "math.absi", "math.floor", "math.ceil"}
"""`math` ops of a map body that cost one flop per element, like `arith`."""


def body_op_cost(name: str) -> int:
    """Flops per element of one op of a `tile.map` body."""
    if name.startswith("arith.") or name in _CHEAP_MATH:
        return 1
    return TRANSCENDENTAL_COST


def scalar_body_cost(body: Callable[[SSAValue], SSAValue], elt: Attribute) -> int:
    """
    Flops per element of a scalar body (`UnaryMeaning.body`): the cost of the `tile.map`
    it becomes, built once on a scalar of type `elt`.
    """
    block = Block(arg_types=[elt])
    with ImplicitBuilder(block):
        body(block.args[0])
    return block_cost(block)


def block_cost(block: Block) -> int:
    """Flops per element of a map body: its ops but the constants and the yield."""
    return sum(
        body_op_cost(op.name)
        for op in block.ops
        if not isinstance(op, tile.YieldOp) and op.name != "arith.constant"
    )


def map_kind_cost(kind: str) -> int:
    """Flops per element of a named `tile.map` kind."""
    return 1 if kind in _CHEAP_KINDS else TRANSCENDENTAL_COST


def nelems(value: SSAValue) -> int:
    return math.prod(static_shape(value, "value"))


@singledispatch
def op_work(op: Operation) -> OpCost:
    """
    The work of `op` on one core: zero for ops that only rename or reshape a block in
    place (`tile.reshape`, `tile.for` itself, `tile.yield`) and for ops of other dialects.
    """
    return OpCost()


@op_work.register
def _fill_work(op: tile.FillOp) -> OpCost:
    return OpCost(bytes_written=tile.nbytes(op.result.type))


@op_work.register
def _load_work(op: tile.LoadOp) -> OpCost:
    return OpCost(bytes_written=tile.nbytes(op.result.type))


@op_work.register
def _store_work(op: tile.StoreOp) -> OpCost:
    return OpCost(bytes_read=tile.nbytes(op.block.type))


@op_work.register
def _dot_work(op: tile.DotOp) -> OpCost:
    lhs, out = static_shape(op.lhs, "lhs"), static_shape(op.result, "result")
    k = lhs[-2] if op.transpose_a is not None else lhs[-1]
    macs = math.prod(out) * k
    read = tile.nbytes(op.lhs.type) + tile.nbytes(op.rhs.type)
    if op.acc is not None:
        read += tile.nbytes(op.acc.type)
    written = tile.nbytes(op.result.type)
    return OpCost(flops=macs, fmacs=True, bytes_read=read, bytes_written=written)


@op_work.register(tile.ReduceOp)
@op_work.register(tile.CastOp)
def _per_input_element_work(op: tile.ReduceOp | tile.CastOp) -> OpCost:
    """One flop per input element, the input read and the result written."""
    return OpCost(
        flops=nelems(op.input),
        bytes_read=tile.nbytes(op.input.type),
        bytes_written=tile.nbytes(op.result.type),
    )


@op_work.register
def _map_work(op: tile.MapOp) -> OpCost:
    n = nelems(op.result)
    if op.kind_name is not None:
        per = map_kind_cost(op.kind_name)
    else:
        per = block_cost(op.body.block)
    read = sum(tile.nbytes(v.type) for v in op.inputs)
    return OpCost(
        flops=n * max(per, 1), bytes_read=read, bytes_written=tile.nbytes(op.result.type)
    )


@op_work.register(tile.BroadcastOp)
@op_work.register(tile.TransposeOp)
def _copy_work(op: tile.BroadcastOp | tile.TransposeOp) -> OpCost:
    """A block copied into another shape: read once, written once."""
    return OpCost(
        bytes_read=tile.nbytes(op.input.type), bytes_written=tile.nbytes(op.result.type)
    )


@op_work.register
def _select_work(op: tile.SelectOp) -> OpCost:
    return OpCost(
        flops=nelems(op.result),
        bytes_read=tile.nbytes(op.on_true.type),
        bytes_written=tile.nbytes(op.result.type),
    )


@op_work.register
def _lookup_work(op: tile.LookupOp) -> OpCost:
    # Host work: the selected rows are copied once, nothing runs on a PE.
    return OpCost(flops=0, bytes_read=0, bytes_written=0)


# ---------------------------------------------------------------------------------------
# Cycles
# ---------------------------------------------------------------------------------------


def op_cycles(dev: Device, op: Operation) -> float:
    """The compute cycles of one op on one PE (0 for ops that take no time)."""
    if isinstance(op, tile.DotOp):
        return _dot_cycles(dev, op)
    if isinstance(op, tile.TileOp):
        cost = op_work(op)
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
