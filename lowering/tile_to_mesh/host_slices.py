"""
Host slices for `convert-tile-to-mesh`: a nest that reads a host tensor (an argument, a
constant) at a fixed index of some dimension — one head's weights of a weight over
heads, once the heads run one after the other (`loop-split-heads`) — reads the slice
at that index, placed on its own (`mesh.scatter ... offsets`), so that its PEs hold one
head's blocks rather than every head's.

```mlir
%w = tile.load %wq[%c3, %k, %d] : tensor<8x64x16xf32> -> tensor<1x4x4xf32>
// becomes
%s = tensor.extract_slice %wq[3, 0, 0] [1, 64, 16] [1, 1, 1] : ... to tensor<1x64x16xf32>
%w = tile.load %s[%c0, %k, %d] : tensor<1x64x16xf32> -> tensor<1x4x4xf32>
```
"""

from __future__ import annotations

from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    IndexType,
    IntegerAttr,
)
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from plmr.dialects import tile
from plmr.dialects.graph import static_shape

HostSlice = tuple[SSAValue, tuple[int, ...]]
"""The host tensor a slice is taken from, and its offsets."""


def _is_host(value: SSAValue, block: Block) -> bool:
    if isinstance(value, BlockArgument):
        return value.owner is block
    op = value.owner
    return (
        isinstance(op, arith.ConstantOp)
        and isinstance(op.value, DenseIntOrFPElementsAttr | DenseResourceAttr)
        and op.parent_block() is block
    )


def _constant(value: SSAValue) -> int | None:
    op = value.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


def slice_host_reads(block: Block) -> dict[SSAValue, HostSlice]:
    """
    Rewrites the loads of host tensors at constant indices within the tensor (block
    size 1, dimension larger than 1) in the top-level nests of a function body to loads of slices; returns
    each slice's source and offsets.
    """
    slices: dict[SSAValue, HostSlice] = {}
    made: dict[tuple[SSAValue, tuple[int, ...], tuple[int, ...]], SSAValue] = {}
    """The slices taken, by source, offsets and sizes (one offset, several sizes)."""
    rewriter = Rewriter()
    first = block.first_op
    for top in [op for op in block.ops if isinstance(op, tile.ForOp)]:
        for load in [op for op in top.walk() if isinstance(op, tile.LoadOp)]:
            src = load.source
            if not _is_host(src, block):
                continue
            shape = static_shape(src, "source")
            blk = static_shape(load.result, "block")
            offsets = [0] * len(shape)
            sizes = list(shape)
            for j, idx in enumerate(load.offsets):
                c = _constant(idx)
                if c is None or blk[j] != 1 or shape[j] == 1:
                    continue
                if not 0 <= c < shape[j]:
                    # A padded load outside the tensor (a concatenation's other part):
                    # it reads only padding, and no slice holds it.
                    continue
                offsets[j], sizes[j] = c, 1
            if sizes == list(shape):
                continue
            key = (src, tuple(offsets))
            part = made.get((*key, tuple(sizes)))
            if part is None:
                op = tensor.ExtractSliceOp.from_static_parameters(src, offsets, sizes)
                owner = src.owner
                where = (
                    InsertPoint.after(owner)
                    if isinstance(owner, Operation)
                    else InsertPoint.before(first)
                    if first is not None
                    else InsertPoint.at_end(block)
                )
                rewriter.insert_op(op, where)
                if src.name_hint:
                    op.result.name_hint = src.name_hint
                part = op.result
                made[(*key, tuple(sizes))] = part
                slices[part] = key
            zero = arith.ConstantOp(IntegerAttr(0, IndexType()))
            rewriter.insert_op(zero, InsertPoint.before(load))
            indices = [
                zero.result if sizes[j] == 1 and shape[j] > 1 else v
                for j, v in enumerate(load.offsets)
            ]
            old = list(load.offsets)
            load.operands = [part, *indices]
            for v in old:
                if isinstance(v.owner, arith.ConstantOp) and not v.uses:
                    rewriter.erase_op(v.owner)
    return slices
