"""
`loop-simplify-indices`: folds the `div` / `rem` of a reshape's index map at the loop level.

A reshape or a head split lowers to reads whose indices linearise and delinearise
(`((h·G + g)·hd + d) / hd`, `… % hd`); once the producer's map is inlined into its
consumer, the linear form is known. For an index `c·H + L` divided by `c` (with `H` a
sum of non-negative index terms and `0 ≤ L < c` by the loop extents),

    (c·H + L) / c  =  H        (c·H + L) % c  =  L

so the reads become `dim + offset` again and the blocker can tile them: a reshape that
only regroups a dimension never moves data. Indices the bounds do not prove in range
are left as they are. A loop index of extent one is 0, and arithmetic that reduces to
one index (`(i0 + i1)·96 + i2` with unit i0, i1) or to a constant is replaced by it, so
that the partitioner sees the index itself and can split the tensor it reads.

```mlir
%i = arith.muli %h, %c16 : index        // h < 4
%j = arith.addi %i, %d : index          // d < 16
%q = arith.divui %j, %c16 : index       // -> %h
%r = arith.remui %j, %c16 : index       // -> %d
```
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from plmr.dialects.loop import NestOp

Affine = dict[SSAValue | None, int]
"""Coefficients of index values; the key None holds the constant."""


def _const(v: SSAValue) -> int | None:
    op = v.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


def _affine(v: SSAValue) -> Affine:
    """`v` as a linear form of the values it is built from by +, - and · by constants."""
    c = _const(v)
    if c is not None:
        return {None: c}
    op = v.owner
    if isinstance(op, arith.AddiOp | arith.SubiOp):
        sign = 1 if isinstance(op, arith.AddiOp) else -1
        out = dict(_affine(op.lhs))
        for k, coef in _affine(op.rhs).items():
            out[k] = out.get(k, 0) + sign * coef
        return {k: c for k, c in out.items() if c or k is None}
    if isinstance(op, arith.MuliOp):
        for a, b in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            factor = _const(b)
            if factor is not None:
                return {
                    k: c * factor for k, c in _affine(a).items() if c * factor or k is None
                }
    return {v: 1}


@dataclass(frozen=True)
class _Bounds:
    """Extents of the loop indices of the nests of a function."""

    extent: dict[SSAValue, int]

    def upper(self, v: SSAValue | None) -> int | None:
        """The largest value of a term (None: unbounded)."""
        if v is None:
            return 0
        e = self.extent.get(v)
        return None if e is None else e - 1


def _split(form: Affine, c: int, bounds: _Bounds) -> tuple[Affine, Affine] | None:
    """`form = c·H + L` with `0 ≤ L < c` (H's terms non-negative), or None."""
    high: Affine = {}
    low: Affine = {}
    for k, coef in form.items():
        if k is None:
            high[None] = (coef // c) if coef >= 0 else 0
            if coef < 0:
                return None
            if coef % c:
                low[None] = coef % c
            continue
        if coef % c == 0 and coef > 0:
            high[k] = coef // c
        else:
            low[k] = coef
    top = 0
    for k, coef in low.items():
        if coef < 0:
            return None
        u = bounds.upper(k) if k is not None else 1
        if u is None:
            return None
        top += coef * u
    if top >= c:
        return None
    return high, low


def _emit(form: Affine, before: Operation, rewriter: PatternRewriter) -> SSAValue:
    """Builds `form` with arith ops before `before`."""
    ops: list[Operation] = []

    def const(v: int) -> SSAValue:
        op = arith.ConstantOp(IntegerAttr(v, IndexType()))
        ops.append(op)
        return op.result

    total: SSAValue | None = None
    for k, coef in form.items():
        if k is None:
            continue
        term = k
        if coef != 1:
            mul = arith.MuliOp(k, const(coef))
            ops.append(mul)
            term = mul.result
        if total is None:
            total = term
        else:
            add = arith.AddiOp(total, term)
            ops.append(add)
            total = add.result
    offset = form.get(None, 0)
    if total is None:
        total = const(offset)
    elif offset:
        add = arith.AddiOp(total, const(offset))
        ops.append(add)
        total = add.result
    rewriter.insert(ops, InsertPoint.before(before))
    return total


class _UnitIndexIsZero(RewritePattern):
    """A loop index of extent one is 0 (a head axis of one, a batch of one)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: NestOp, rewriter: PatternRewriter, /):
        block = op.body.block
        for arg, e in zip(op.dims, op.extents, strict=True):
            if e != 1 or not arg.uses or block.first_op is None:
                continue
            zero = arith.ConstantOp(IntegerAttr(0, IndexType()))
            rewriter.insert(zero, InsertPoint.before(block.first_op))
            rewriter.replace_all_uses_with(arg, zero.result)


class _OneIndexOrConstant(RewritePattern):
    """`i·1 + 0`, `0·96 + i`: index arithmetic that is one index as it is, or a constant."""

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: arith.AddiOp | arith.SubiOp | arith.MuliOp, rewriter: PatternRewriter, /
    ):
        if not isinstance(op.result.type, IndexType) or not op.result.uses:
            return
        form = _affine(op.result)
        terms = [k for k in form if k is not None]
        if terms and (len(terms) > 1 or form[terms[0]] != 1 or form.get(None, 0)):
            return
        value = terms[0] if terms else _emit(form, op, rewriter)
        rewriter.replace_all_uses_with(op.result, value)


@dataclass
class _ProvenDivRem(RewritePattern):
    """`(c·H + L) / c` -> `H` and `(c·H + L) % c` -> `L` where the extents prove `L < c`."""

    bounds: _Bounds

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: arith.DivUIOp | arith.RemUIOp, rewriter: PatternRewriter, /
    ):
        c = _const(op.rhs)
        if c is None or c <= 0:
            return
        parts = _split(_affine(op.lhs), c, self.bounds)
        if parts is None:
            return
        high, low = parts
        if any(k is not None and not _non_negative(k) for k in high):
            return
        value = _emit(high if isinstance(op, arith.DivUIOp) else low, op, rewriter)
        rewriter.replace(op, [], [value])


_INDEX_ARITH = (
    arith.ConstantOp,
    arith.AddiOp,
    arith.SubiOp,
    arith.MuliOp,
    arith.DivUIOp,
    arith.RemUIOp,
)


class _DeadIndexArith(RewritePattern):
    """Index arithmetic left without uses by the folds above."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if (
            isinstance(op, _INDEX_ARITH)
            and isinstance(op.results[0].type, IndexType)
            and not op.results[0].uses
        ):
            rewriter.erase(op)


def simplify_indices(root: ModuleOp) -> None:
    """
    Folds the provable index `div` / `rem` under `root`, and the index arithmetic that
    reduces to one loop index or a constant (a unit loop index is 0).

    Each kind of fold is a pattern, and they run one after the other (unit indices, then
    index sums, then `div` / `rem`): a `div` is proved on the sums already reduced to
    one index, and the terms a fold emits are not folded again.
    """
    extent: dict[SSAValue, int] = {}
    for op in root.walk():
        if isinstance(op, NestOp):
            extent.update(zip(op.dims, op.extents, strict=True))
    bounds = _Bounds(extent)
    for pattern in (
        _UnitIndexIsZero(),
        _OneIndexOrConstant(),
        _ProvenDivRem(bounds),
        _DeadIndexArith(),
    ):
        PatternRewriteWalker(pattern).rewrite_module(root)


def _non_negative(v: SSAValue) -> bool:
    """Index values built from loop indices and unsigned ops are never negative."""
    if isinstance(v, BlockArgument):
        return True
    return isinstance(v.owner, arith.DivUIOp | arith.RemUIOp)


class LoopSimplifyIndicesPass(ModulePass):
    """Folds the index `div` / `rem` of reshapes whose bounds prove them (see module doc)."""

    name = "loop-simplify-indices"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        del ctx
        simplify_indices(op)
