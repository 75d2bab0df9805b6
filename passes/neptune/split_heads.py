"""
`loop-split-heads`: time-multiplexed heads. Every batched nest (a matmul-like reduction
over leading head dimensions) is split into one nest per head, and so is every nest
that reads a head's slice of a split result; a reduction over heads (the sum of the
heads' output projections) is unrolled into a sum of the heads' tensors. An export's
nests carry a batch of one before the heads (`[1, H, L, S]`), and its fused attention
holds the rows of `P·V` in a vector accumulator: the heads behind the unit batch are
split all the same.

On a large grid the head dimensions (8 KV heads, 4 queries per KV head) are far smaller
than an axis of the mesh (480 PEs): a batched projection `[Hkv, G, L, hd]` split over
`L` and the reduction keeps every head's weights on every row of PEs, which does not
fit SRAM. Split per head, each head's GEMM runs over all PEs, the heads one after the
other, and the weights of all heads are spread over the whole grid. The pipeline runs
this pass when no mapping of the batched program fits the grid (`plmr-compile`).

A head's slice of a split tensor that is still used whole (a result of the function, a
nest that cannot be split) is reassembled by a nest summing the heads' slices, each
weighted by a one-hot row of an identity matrix.

```mlir
%q = loop.nest (%h, %l, %d, %k) to (2, 8, 4, 16) [parallel, parallel, parallel, reduction]
    init(%acc = %zero : f32) -> tensor<2x8x4xf32> {
  %x = loop.read %a[%l, %k] : tensor<8x16xf32>
  %w = loop.read %wq[%h, %k, %d] : tensor<2x16x4xf32>
  ...
}
// becomes, for h = 0 and h = 1:
%q_h0 = loop.nest (%l, %d, %k) to (8, 4, 16) [parallel, parallel, reduction] ... {
  %c0 = arith.constant 0 : index
  %w = loop.read %wq[%c0, %k, %d] : tensor<2x16x4xf32>
  ...
}
```
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    Float32Type,
    IndexType,
    IntegerAttr,
    ModuleOp,
    TensorType,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.hints import isa

from plmr.dialects.loop import IteratorKind, NestOp, ReadOp, YieldOp, build_nest
from plmr.passes.neptune.nests import function_blocks, top_nests

MAX_COPIES = 256
"""The most nests one nest is split into (or body copies it unrolls to): heads, not rows."""

Combo = tuple[int, ...]
"""The constant values of a nest's split dimensions (one head)."""


@dataclass
class Split:
    """A tensor computed one head at a time: its leading `extents` are the heads."""

    extents: tuple[int, ...]
    parts: dict[Combo, SSAValue] = field(default_factory=lambda: {})


@dataclass(frozen=True)
class Plan:
    """How one nest is split: its leading `heads` dims, its unrolled reduction dims."""

    heads: int
    unrolled: tuple[int, ...]


# ---------------------------------------------------------------------------------------
# Index arithmetic
# ---------------------------------------------------------------------------------------


def _fold(op: Operation, a: int, b: int) -> int | None:
    """`a op b` for the index arithmetic of head indices, None for anything else."""
    if isinstance(op, arith.AddiOp):
        return a + b
    if isinstance(op, arith.SubiOp):
        return a - b
    if isinstance(op, arith.MuliOp):
        return a * b
    if b == 0:
        return None
    if isinstance(op, arith.DivUIOp | arith.DivSIOp):
        return a // b
    if isinstance(op, arith.RemUIOp | arith.RemSIOp):
        return a % b
    return None


_ARITH = (
    arith.AddiOp,
    arith.SubiOp,
    arith.MuliOp,
    arith.DivUIOp,
    arith.DivSIOp,
    arith.RemUIOp,
    arith.RemSIOp,
)


def constant_index(value: SSAValue) -> int | None:
    """The value of an index built from constants by + - · / %, if it is one."""
    op = value.owner
    if isinstance(op, arith.ConstantOp):
        attr = op.value
        return attr.value.data if isinstance(attr, IntegerAttr) else None
    if not isinstance(op, _ARITH):
        return None
    a, b = (constant_index(v) for v in op.operands)
    if a is None or b is None:
        return None
    return _fold(op, a, b)


def _index_roots(value: SSAValue) -> set[SSAValue] | None:
    """The block arguments an index is built from, None if it is not index arithmetic."""
    if isinstance(value, BlockArgument):
        return {value}
    op = value.owner
    if isinstance(op, arith.ConstantOp):
        return set()
    if not isinstance(op, _ARITH):
        return None
    roots: set[SSAValue] = set()
    for v in op.operands:
        sub = _index_roots(v)
        if sub is None:
            return None
        roots |= sub
    return roots


# ---------------------------------------------------------------------------------------
# Planning
# ---------------------------------------------------------------------------------------


def batch_dims(nest: NestOp) -> int:
    """
    The leading parallel dims of a reduction nest before its matrix's rows and columns:
    its last two parallel dims, or its last one where a vector accumulator holds the
    columns (an attention nest's `P·V` rows of `hd` values). Leading dims of extent 1
    (an export's batch of one) count with the heads behind them; none if all are 1.
    """
    if not nest.is_reduction:
        return 0
    vector = any(isa(t, TensorType[Attribute]) for t in nest.inits.types)
    par = nest.parallel_dims
    count = 0
    for i in range(len(par) - (1 if vector else 2)):
        if par[i] != i:
            break
        count += 1
    ext = nest.extents
    if all(e == 1 for e in ext[:count]):
        return 0
    return count


def plan_nest(nest: NestOp, split: dict[SSAValue, Split], seed: bool) -> Plan | None:
    """
    The leading dims to split (enough to fix the head of every split tensor the nest
    reads) and the reduction dims to unroll; None if the nest reads a split tensor at a
    head it cannot fix (an index of an inner loop, or of a non-leading parallel dim).
    """
    dims: list[SSAValue] = list(nest.dims)
    kinds = nest.kinds
    heads = batch_dims(nest) if seed else 0
    unrolled: set[int] = set()
    for op in nest.walk():
        if not isinstance(op, ReadOp) or op.source not in split:
            continue
        for idx in op.indices[: len(split[op.source].extents)]:
            roots = _index_roots(idx)
            if roots is None:
                return None
            for root in roots:
                if root not in dims:
                    return None
                pos = dims.index(root)
                if kinds[pos] == IteratorKind.PARALLEL:
                    heads = max(heads, pos + 1)
                else:
                    unrolled.add(pos)
    if any(kinds[i] != IteratorKind.PARALLEL for i in range(heads)):
        return None
    if heads + len(unrolled) >= nest.rank:
        return None
    ext = nest.extents
    if math.prod(ext[:heads]) * math.prod(ext[i] for i in unrolled) > MAX_COPIES:
        return None
    return Plan(heads, tuple(sorted(unrolled)))


# ---------------------------------------------------------------------------------------
# Rewriting
# ---------------------------------------------------------------------------------------


def _index(value: int) -> arith.ConstantOp:
    return arith.ConstantOp(IntegerAttr(value, IndexType()))


def _retarget_reads(
    ops: Sequence[Operation], split: dict[SSAValue, Split]
) -> dict[SSAValue, SSAValue]:
    """
    Reads of a split tensor at constant heads read that head's tensor; returns each
    replaced read's result with its replacement (a value the nest yields as read).
    """
    replaced: dict[SSAValue, SSAValue] = {}
    for top in ops:
        for op in list(top.walk()):
            if not isinstance(op, ReadOp) or op.source not in split:
                continue
            s = split[op.source]
            n = len(s.extents)
            combo = tuple(constant_index(v) for v in op.indices[:n])
            if any(c is None for c in combo):
                raise AssertionError("a split read's head is not constant")
            part = s.parts[tuple(c for c in combo if c is not None)]
            padding = None if op.padding is None else op.padding.value.data
            new = ReadOp(part, list(op.indices[n:]), padding)
            replaced[op.result] = new.result
            Rewriter.replace_op(op, new)
    return replaced


def _body_for(
    nest: NestOp, plan: Plan, combo: Combo, split: dict[SSAValue, Split]
) -> tuple[Block, list[SSAValue]]:
    """The body of one head's nest and the initial values of its accumulators."""
    ext, kinds = nest.extents, nest.kinds
    keep = [i for i in range(nest.rank) if i >= plan.heads and i not in plan.unrolled]
    reduces = any(kinds[i] == IteratorKind.REDUCTION for i in keep)
    acc_types: list[Attribute] = list(nest.inits.types) if reduces else []
    block = Block(arg_types=[IndexType()] * len(keep) + acc_types)
    for arg, i in zip(block.args, keep, strict=False):
        arg.name_hint = nest.dims[i].name_hint
    consts: dict[int, SSAValue] = {}
    for i, c in enumerate(combo):
        op = _index(c)
        block.add_op(op)
        consts[i] = op.result
    accs: list[SSAValue]
    if reduces:
        accs = list(block.args[len(keep) :])
    elif nest.is_reduction:
        accs = []
        for init in nest.inits:
            owner = init.owner
            if isinstance(owner, arith.ConstantOp):
                copy = owner.clone()
                block.add_op(copy)
                accs.append(copy.result)
            else:
                accs.append(init)
    else:
        accs = []
    new_args = dict(zip(keep, block.args[: len(keep)], strict=True))
    old_yield = nest.yield_op
    body_ops = [op for op in nest.body.block.ops if op is not old_yield]
    values: list[SSAValue] = []
    for u in itertools.product(*(range(ext[i]) for i in plan.unrolled)):
        mapper: dict[SSAValue, SSAValue] = {}
        for i, d in enumerate(nest.dims):
            if i in consts:
                mapper[d] = consts[i]
            elif i in new_args:
                mapper[d] = new_args[i]
        for i, c in zip(plan.unrolled, u, strict=True):
            op = _index(c)
            block.add_op(op)
            mapper[nest.dims[i]] = op.result
        for old_acc, acc in zip(nest.accumulators, accs, strict=True):
            mapper[old_acc] = acc
        cloned: list[Operation] = []
        for op in body_ops:
            copy = op.clone(value_mapper=mapper)
            block.add_op(copy)
            cloned.append(copy)
        replaced = _retarget_reads(cloned, split)
        values = [mapper.get(v, v) for v in old_yield.values]
        values = [replaced.get(v, v) for v in values]
        accs = values
    block.add_op(YieldOp(*values))
    inits = list(nest.inits) if reduces else []
    return block, inits


def _split_nest(
    nest: NestOp, plan: Plan, split: dict[SSAValue, Split]
) -> list[tuple[Combo, NestOp]]:
    ext, kinds = nest.extents, nest.kinds
    keep = [i for i in range(nest.rank) if i >= plan.heads and i not in plan.unrolled]
    out: list[tuple[Combo, NestOp]] = []
    for combo in itertools.product(*(range(ext[i]) for i in range(plan.heads))):
        block, inits = _body_for(nest, plan, combo, split)
        types: list[Attribute] = []
        for r in nest.res:
            t = r.type
            if isa(t, TensorType[Attribute]):
                types.append(TensorType(t.element_type, t.get_shape()[plan.heads :]))
            else:
                types.append(t)
        new = NestOp(
            [ext[i] for i in keep],
            [kinds[i] for i in keep],
            inits,
            types,
            block,
            dict(nest.attributes),
        )
        suffix = "_h" + "x".join(str(c) for c in combo) if combo else ""
        for old, res in zip(nest.res, new.res, strict=True):
            if old.name_hint:
                res.name_hint = old.name_hint + suffix
        out.append((combo, new))
    return out


def _identity(n: int) -> arith.ConstantOp:
    eye = np.eye(n, dtype=np.float32)
    t = TensorType(Float32Type(), (n, n))
    return arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(t, eye.ravel().tolist()))


def _assemble(value: SSAValue, s: Split, at: Operation) -> SSAValue:
    """A nest rebuilding the whole tensor from its heads' tensors (inserted before `at`)."""
    t = value.type
    assert isa(t, TensorType[Attribute])
    shape = t.get_shape()
    k = len(s.extents)
    eyes: list[SSAValue | None] = []
    rewriter = Rewriter()
    for e in s.extents:
        if e == 1:
            eyes.append(None)
            continue
        eye = _identity(e)
        rewriter.insert_op(eye, InsertPoint.before(at))
        eyes.append(eye.result)

    def body(idx: Sequence[BlockArgument], accs: Sequence[BlockArgument]) -> list[SSAValue]:
        del accs
        total: SSAValue | None = None
        for combo, part in s.parts.items():
            term: SSAValue = ReadOp(part, list(idx[k:])).result
            for j, c in enumerate(combo):
                eye = eyes[j]
                if eye is None:
                    continue
                w = ReadOp(eye, [idx[j], _index(c).result]).result
                term = arith.MulfOp(term, w).result
            total = term if total is None else arith.AddfOp(total, term).result
        assert total is not None
        return [total]

    nest = build_nest(shape, [IteratorKind.PARALLEL] * len(shape), [], body)
    rewriter.insert_op(nest, InsertPoint.before(at))
    out = nest.res[0]
    if value.name_hint:
        out.name_hint = value.name_hint
    return out


def split_heads(block: Block) -> bool:
    """Splits the batched nests of a function body per head; whether any was split."""
    split: dict[SSAValue, Split] = {}
    replaced: list[NestOp] = []
    rewriter = Rewriter()
    for nest in top_nests(block):
        reads_split = any(
            isinstance(op, ReadOp) and op.source in split for op in nest.walk()
        )
        seed = batch_dims(nest) > 0
        if not reads_split and not seed:
            continue
        plan = plan_nest(nest, split, seed)
        if plan is None or (plan.heads == 0 and not plan.unrolled and not reads_split):
            continue
        parts = _split_nest(nest, plan, split)
        for _, new in parts:
            rewriter.insert_op(new, InsertPoint.before(nest))
        replaced.append(nest)
        if plan.heads == 0:
            (only,) = parts
            for old, res in zip(nest.res, only[1].res, strict=True):
                old.replace_all_uses_with(res)
            continue
        heads = nest.extents[: plan.heads]
        for i, old in enumerate(nest.res):
            split[old] = Split(heads, {combo: new.res[i] for combo, new in parts})
    for nest in reversed(replaced):
        outside = [
            r
            for r in nest.res
            if r in split and any(not _inside(u.operation, replaced) for u in r.uses)
        ]
        for r in outside:
            whole = _assemble(r, split[r], nest)
            r.replace_uses_with_if(whole, lambda u: not _inside(u.operation, replaced))
    inits = {v.owner for nest in replaced for v in nest.inits}
    for nest in reversed(replaced):
        rewriter.erase_op(nest, safe_erase=False)
    for op in inits:
        if isinstance(op, arith.ConstantOp) and not op.result.uses:
            rewriter.erase_op(op)
    return bool(replaced)


def _inside(op: Operation, nests: Sequence[NestOp]) -> bool:
    top = op
    while (parent := top.parent_op()) is not None and isinstance(parent, NestOp):
        top = parent
    return any(top is n for n in nests)


def split_module_heads(module: ModuleOp) -> bool:
    """`split_heads` on every function of the module."""
    changed = False
    for block in function_blocks(module):
        changed = split_heads(block) or changed
    return changed


@dataclass(frozen=True)
class LoopSplitHeadsPass(ModulePass):
    """Splits batched loop nests per head (see the module docstring)."""

    name = "loop-split-heads"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        del ctx
        split_module_heads(op)
