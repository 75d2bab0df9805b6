"""
`loop-materialize-indices`: an index used as a value becomes a read of a constant.

A concatenation lowers to a `select` on a comparison of the loop index (`i < 8`), a
causal mask compares a row index with a column index, a `Range` of run-time length casts
an index to an integer. Blocks of the tile level hold data, not indices: the blocker
cannot make a block of `i`. This pass gives every such use a data form that any level
runs and the mesh distributes like other inputs: the index `i` of a dimension of extent
`e` is read from a function-level constant `[0, 1, …, e-1]` (`tensor<e x i64>`) at
`[i]`, and the index arithmetic above it (`+`, `-`, `·`, `/`, `%`, min, max, constants)
is redone in `i64`. A comparison of indices becomes a comparison of the `i64` values (the
same result: loop indices and their sums are far from the `i64` range), a cast of an
index to an integer is the `i64` value (truncated to narrower types).

```mlir
%c8 = arith.constant 8 : index
%lt = arith.cmpi slt, %i, %c8 : index
// becomes, with %iota = arith.constant dense<[0, ..., 15]> : tensor<16xi64> before the nest
%v = loop.read %iota[%i] : tensor<16xi64>
%c8_1 = arith.constant 8 : i64
%lt = arith.cmpi slt, %v, %c8_1 : i64
```

An index made from data (`index_cast` of a loaded integer: a gather) compared as a value
is that integer; the reads at it stay as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    TensorType,
    i64,
)
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern
from xdsl.rewriter import InsertPoint

from plmr.dialects.loop import NestOp, ReadOp
from plmr.dialects.narrow import type_of
from plmr.lowering.loop_to_tile.blocks import INDEX_OPS

"""Index arithmetic redone on `i64` values."""


class _NotAffine(Exception):
    """The index is computed from data: it stays an index."""


@dataclass
class _Function:
    """The rewrite of the nests of one function."""

    block: Block
    iotas: dict[int, SSAValue]
    """The constant `[0, …, e-1]` of each extent `e`, placed at the function's start."""
    extents: dict[SSAValue, int]

    def iota(self, extent: int, rewriter: PatternRewriter) -> SSAValue:
        if extent not in self.iotas:
            values = np.arange(extent, dtype=np.int64)
            attr = DenseIntOrFPElementsAttr.from_list(
                TensorType(i64, [extent]), values.tolist()
            )
            op = arith.ConstantOp(attr)
            op.result.name_hint = f"iota{extent}"
            first = self.block.first_op
            assert first is not None
            rewriter.insert(op, InsertPoint.before(first))
            self.iotas[extent] = op.result
        return self.iotas[extent]

    def value(
        self,
        index: SSAValue,
        before: Operation,
        memo: dict[SSAValue, SSAValue],
        rewriter: PatternRewriter,
    ) -> SSAValue:
        """The `i64` value of `index`, built before `before`."""
        if index in memo:
            return memo[index]
        op = index.owner
        new: Operation
        if isinstance(index, BlockArgument):
            extent = self.extents.get(index)
            if extent is None:
                raise _NotAffine
            new = ReadOp(self.iota(extent, rewriter), [index])
        elif isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
            new = arith.ConstantOp(IntegerAttr(op.value.value.data, i64))
        elif isinstance(op, arith.IndexCastOp) and isinstance(
            source := op.input.type, IntegerType
        ):
            # An index made from data (a gather's): its value is the integer itself.
            width = source.bitwidth
            if width == 64:
                memo[index] = op.input
                return op.input
            new = (
                arith.ExtSIOp(op.input, i64)
                if width < 64
                else arith.TruncIOp(op.input, i64)
            )
        elif isinstance(op, INDEX_OPS):
            lhs = self.value(op.lhs, before, memo, rewriter)
            rhs = self.value(op.rhs, before, memo, rewriter)
            new = type(op)(lhs, rhs)
        else:
            raise _NotAffine
        rewriter.insert(new, InsertPoint.before(before))
        memo[index] = new.results[0]
        return new.results[0]


@dataclass
class _IndexAsValue(RewritePattern):
    """A comparison or integer cast of indices in a nest of the function, on `i64` values."""

    fn: _Function
    count: int = 0

    def _in_a_nest(self, op: Operation) -> bool:
        """Whether `op` is inside a nest at the top of the function."""
        top = op.parent_op()
        while top is not None and top.parent_block() is not self.fn.block:
            top = top.parent_op()
        return isinstance(top, NestOp)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        cmp = isinstance(op, arith.CmpiOp) and isinstance(op.lhs.type, IndexType)
        cast = isinstance(op, arith.IndexCastOp) and isinstance(op.input.type, IndexType)
        if not (cmp or cast) or not self._in_a_nest(op):
            return
        memo: dict[SSAValue, SSAValue] = {}
        try:
            if isinstance(op, arith.CmpiOp):
                lhs = self.fn.value(op.lhs, op, memo, rewriter)
                rhs = self.fn.value(op.rhs, op, memo, rewriter)
                rewriter.replace(op, arith.CmpiOp(lhs, rhs, op.predicate.value.data))
            elif isinstance(op, arith.IndexCastOp):
                out = type_of(op.result, IntegerType)
                value = self.fn.value(op.input, op, memo, rewriter)
                if out.width.data == 64:
                    rewriter.replace(op, [], [value])
                elif out.width.data < 64:
                    rewriter.replace(op, arith.TruncIOp(value, out))
                else:
                    rewriter.replace(op, arith.ExtSIOp(value, out))
            self.count += 1
        except _NotAffine:
            for v in reversed(list(memo.values())):
                if isinstance(v.owner, Operation) and not v.uses:
                    rewriter.erase(v.owner)


def materialize_indices(fn: func.FuncOp) -> int:
    """Rewrites the uses of indices as values in the nests of `fn`; returns how many."""
    extents: dict[SSAValue, int] = {}
    for op in fn.walk():
        if isinstance(op, NestOp):
            for arg, e in zip(op.dims, op.extents, strict=True):
                extents[arg] = e
    pattern = _IndexAsValue(_Function(fn.body.block, {}, extents))
    PatternRewriteWalker(pattern, apply_recursively=False).rewrite_region(fn.body)
    return pattern.count


@dataclass(frozen=True)
class LoopMaterializeIndicesPass(ModulePass):
    """Reads an index used as a value from a constant `[0, …, e-1]` (see module)."""

    name = "loop-materialize-indices"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in op.walk():
            if isinstance(fn, func.FuncOp) and not fn.is_declaration:
                materialize_indices(fn)
