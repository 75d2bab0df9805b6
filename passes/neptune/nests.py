"""
IR utilities on `loop.nest`s: inlining producers into their readers, hoisting
loop-invariant ops out of nested nests, merging common subexpressions, removing dead
ops, and dependence queries on nest bodies.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import cast

from xdsl.builder import (
    Builder,
    ImplicitBuilder,
    _current_builder,  # pyright: ignore[reportPrivateUsage]
)
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import (
    AnyFloat,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    ModuleOp,
    TensorType,
)
from xdsl.ir import (
    Attribute,
    Block,
    BlockArgument,
    Operation,
    OpResult,
    SSAValue,
)
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import Pure
from xdsl.transforms.common_subexpression_elimination import cse as xdsl_cse
from xdsl.transforms.dead_code_elimination import region_dce

from plmr.dialects.loop import IteratorKind, NestOp, ReadOp, YieldOp
from plmr.values import dense_to_numpy

# ---------------------------------------------------------------------------------------
# Queries
# ---------------------------------------------------------------------------------------


def function_blocks(module: ModuleOp) -> list[Block]:
    """The body blocks of the module's functions."""
    return [
        op.body.block for op in module.ops if isinstance(op, func.FuncOp) and op.body.blocks
    ]


def top_nests(block: Block) -> list[NestOp]:
    return [op for op in block.ops if isinstance(op, NestOp)]


def external_values(op: Operation) -> set[SSAValue]:
    """The values `op` (with its regions) uses that are defined outside it."""
    inside: set[SSAValue] = set()
    used: list[SSAValue] = []
    for inner in op.walk():
        inside.update(inner.results)
        for region in inner.regions:
            for block in region.blocks:
                inside.update(block.args)
        used.extend(inner.operands)
    return {v for v in used if v not in inside}


def depends_on(block: Block, roots: Iterable[SSAValue]) -> set[SSAValue]:
    """The values of `block` (and the roots) that depend on any of `roots`."""
    tainted: set[SSAValue] = set(roots)
    for op in block.ops:
        if external_values(op) & tainted:
            tainted.update(op.results)
    return tainted


def read_uses(value: SSAValue) -> list[ReadOp]:
    """The `loop.read`s of `value`."""
    return [
        u.operation for u in value.uses if isinstance(u.operation, ReadOp) and u.index == 0
    ]


def only_read(value: SSAValue) -> bool:
    """Whether every use of `value` is a `loop.read` of it."""
    return all(isinstance(u.operation, ReadOp) and u.index == 0 for u in value.uses)


def position_of(values: Sequence[SSAValue], value: SSAValue) -> int:
    """The index of `value` among `values`."""
    return [v for v in values].index(value)


def position(op: Operation) -> int:
    block = op.parent_block()
    assert block is not None
    return block.get_operation_index(op)


def defined_before(value: SSAValue, op: Operation) -> bool:
    """Whether `value` is available right before `op` (same block)."""
    if isinstance(value, BlockArgument):
        return True
    assert isinstance(value, OpResult)
    owner = value.op
    if owner.parent_block() is not op.parent_block():
        return True
    return position(owner) < position(op)


def is_map(nest: NestOp) -> bool:
    return not nest.is_reduction


# ---------------------------------------------------------------------------------------
# Cloning and inlining
# ---------------------------------------------------------------------------------------


class _NoImplicitBuilder:
    """Suspends the implicit builder (cloning would insert every cloned op into it)."""

    def __enter__(self) -> None:
        self.saved = _current_builder.builder
        _current_builder.builder = None

    def __exit__(self, *exc: object) -> None:
        _current_builder.builder = self.saved


def clone_op(op: Operation, mapping: dict[SSAValue, SSAValue]) -> Operation:
    """Clones `op` with `mapping` and inserts it with the current implicit builder."""
    builder = _current_builder.builder
    assert builder is not None, "clone_op needs an implicit builder"
    with _NoImplicitBuilder():
        new = op.clone(mapping)
    builder.insert(new)
    return new


def clone_body(
    nest: NestOp, mapping: dict[SSAValue, SSAValue], skip: Sequence[Operation] = ()
) -> list[SSAValue]:
    """
    Clones the body of `nest` (without its yield) under the current implicit builder,
    with `mapping` for its block arguments; returns the (mapped) yielded values.
    """
    for op in nest.body.block.ops:
        if isinstance(op, YieldOp) or op in skip:
            continue
        clone_op(op, mapping)
    return [mapping.get(v, v) for v in nest.yield_op.values]


def inline_map_read(producer: NestOp, read: ReadOp) -> None:
    """Replaces a read of a map nest's result by the producer's body at the indices."""
    k = position_of(producer.res, read.source)
    mapping: dict[SSAValue, SSAValue] = dict(zip(producer.dims, read.indices, strict=True))
    with ImplicitBuilder(Builder(InsertPoint.before(read))):
        values = clone_body(producer, mapping)
    Rewriter.replace_op(read, (), [values[k]])


def inline_reduction_read(producer: NestOp, read: ReadOp) -> NestOp:
    """
    Replaces a read of a reduction nest's result by a nested nest over the producer's
    reduction dimensions, at the read's indices.
    """
    k = position_of(producer.res, read.source)
    par = producer.parallel_dims
    red = producer.reduction_dims
    extents = producer.extents
    types = [IndexType()] * len(red) + [a.type for a in producer.accumulators]
    block = Block(arg_types=types)
    mapping: dict[SSAValue, SSAValue] = {}
    for i, idx in zip(par, read.indices, strict=True):
        mapping[producer.dims[i]] = idx
    for i, arg in zip(red, block.args[: len(red)], strict=True):
        mapping[producer.dims[i]] = arg
    for acc, arg in zip(producer.accumulators, block.args[len(red) :], strict=True):
        mapping[acc] = arg
    with ImplicitBuilder(block):
        values = clone_body(producer, mapping)
        YieldOp(*values)
    nested = NestOp(
        [extents[i] for i in red],
        [IteratorKind.REDUCTION] * len(red),
        list(producer.inits),
        [a.type for a in producer.accumulators],
        block,
    )
    Builder(InsertPoint.before(read)).insert(nested)
    nested.res[k].name_hint = read.result.name_hint or producer.res[k].name_hint
    Rewriter.replace_op(read, (), [nested.res[k]])
    return nested


MAX_INLINED_READERS = 3
"""A map read by more nests than this is stored once instead of recomputed in each."""


def inline_maps(block: Block) -> bool:
    """
    Inlines every map nest of `block` into the nests that read it; True if any. A map
    whose result is stored anyway (a function result) is read, not recomputed: inlined
    into a reduction along its reduction (the keys of attention) it would be recomputed
    for every parallel block and tie a stationary operand to a moving one. So is a map
    read by more than `MAX_INLINED_READERS` nests: a norm or softmax reads its input in
    up to three (statistics, sum, normalisation), which fusion needs inlined; more
    readers mean a value shared by independent consumers, each of which would recompute
    it (a GEMV once per output column). Nor is a map with a transcendental read by a
    GEMM along a long output dimension (`REREAD_LIMIT`).
    """
    changed = False
    progress = True
    while progress:
        progress = False
        for nest in reversed(top_nests(block)):
            if not is_map(nest) or _stored(nest):
                continue
            reads = [r for res in nest.res for r in read_uses(res)]
            if not reads or len({_top(r, block) for r in reads}) > MAX_INLINED_READERS:
                continue
            if any(r.padding is not None for r in reads):
                continue  # the body would be computed outside the tensor, not padded
            if _transcendental(nest) and any(_rereads(r, block) for r in reads):
                continue  # recomputed for every output column of a GEMM: store it
            if _transcendental(nest) and _small_and_reread(nest, reads, block):
                continue  # recomputed along a head dimension, small: store it
            if _costly(nest) and any(_broadcast_in_map(r, block) for r in reads):
                continue  # a per-row factor recomputed for every element of a row
            if _gemv_vector(nest, reads, block):
                continue  # recomputed for every output column of a GEMV: store it
            if _one_row_operand(nest, reads, block):
                continue  # recomputed for every cached row a decode step reads: store it
            for read in reads:
                inline_map_read(nest, read)
            progress = changed = True
            if all(not res.uses for res in nest.res):
                Rewriter.erase_op(nest)
    return changed


REREAD_LIMIT = 512
"""
A map with a transcendental (`exp`, `sqrt`, ...) is not inlined into a reduction nest
that reads each of its elements again for every index of a parallel loop this long: a
GEMM's operand (SwiGLU's `silu(up)·gate` read by the down projection) would be
recomputed for every output column, and on the mesh by every PE its chunk passes. The
map stays a nest, computed once per element. Short loops (an attention head's dimension
reading the probabilities in P·V) keep the inlining fusion needs.
"""


SMALL_REREAD_LIMIT = 64
"""
A map with a transcendental, read by several nests or a vector, and read by a nest that
reads each of its elements again for every index of a parallel loop at least this long (a
head dimension) is stored when it is no larger than the largest other tensor that nest
reads: decode's probabilities
`exp(s − m)` (one query row), read by the softmax's sum and by P·V over the head
dimension, cost one `exp` per element instead of one per reader, and their store is small
next to the V cache; decode's normalised residual (a vector) is stored once instead of
recomputed by the projection for each index of the head dimension. Prefill's
probabilities (a row per query, larger than V) stay inlined: FlashAttention's fusion
needs them; so does its normalised residual (a row per token, read by one projection).
"""


def _small_and_reread(nest: NestOp, reads: Sequence[ReadOp], block: Block) -> bool:
    """Whether the map `nest` is stored by the `SMALL_REREAD_LIMIT` rule."""
    shared = len({_top(r, block) for r in reads}) > 1
    vector = all(sum(1 for e in _shape(r.type) if e > 1) <= 1 for r in nest.res)
    if not shared and not vector:
        return False
    size = max(_elements(r.type) for r in nest.res)
    for read in reads:
        if not _rereads(read, block, SMALL_REREAD_LIMIT):
            continue
        top = _top(read, block)
        others = [
            _elements(op.source.type)
            for op in top.walk()
            if isinstance(op, ReadOp) and op.source not in nest.res
        ]
        if others and size <= max(others):
            return True
    return False


def _broadcast_in_map(read: ReadOp, block: Block) -> bool:
    """
    Whether `read` sits in a map nest with a parallel loop of at least
    `SMALL_REREAD_LIMIT` iterations that its indices do not use: a per-row factor (an
    RMSNorm's inverse RMS applied after the matmul) read again for every element of a
    row.
    """
    top = _top(read, block)
    if not isinstance(top, NestOp) or IteratorKind.REDUCTION in top.kinds:
        return False
    return any(
        extent >= SMALL_REREAD_LIMIT and not any(_uses(i, dim) for i in read.indices)
        for dim, extent in zip(top.dims, top.extents, strict=True)
    )


def _costly(nest: NestOp) -> bool:
    """Whether the body of `nest` has an op dearer than a flop (a division, `math`)."""
    return any(
        op.name.startswith("math.") or isinstance(op, arith.DivfOp)
        for op in nest.body.walk()
    )


def _gemv_vector(nest: NestOp, reads: Sequence[ReadOp], block: Block) -> bool:
    """
    Whether the map `nest` computes a vector (arithmetic on floats, not a copy) that a
    reduction contracts along its reduction loop and reads again for every index of a
    parallel loop at least `SMALL_REREAD_LIMIT` long: the input of a matrix-vector
    product (an RMSNorm's `x · g` once its scale is applied after the product), computed
    once per element instead of once per output column.
    """
    if not all(sum(1 for e in _shape(r.type) if e > 1) <= 1 for r in nest.res):
        return False
    if not any(isinstance(op, _FLOAT_ARITH) for op in nest.body.walk()):
        return False
    size = max(_elements(r.type) for r in nest.res)
    for read in reads:
        top = _top(read, block)
        if not isinstance(top, NestOp) or not _rereads(read, block, SMALL_REREAD_LIMIT):
            continue
        red = [top.dims[i] for i in top.reduction_dims]
        if not any(_uses(i, d) for i in read.indices for d in red):
            continue
        others = [
            _elements(op.source.type)
            for op in top.walk()
            if isinstance(op, ReadOp) and op.source not in nest.res
        ]
        if others and size < max(others):
            return True
    return False


def _one_row_operand(nest: NestOp, reads: Sequence[ReadOp], block: Block) -> bool:
    """
    Whether the map `nest` combines two or more tensors by arithmetic into an operand
    that a reduction contracts and reads again for every index of the loops around the
    read that the read does not use (at least `SMALL_REREAD_LIMIT` indices together),
    and that is at most 1/`ROW_OPERAND_RATIO` of a tensor the reduction reads along
    those loops: a decode step's rotated query `q·cos + rotate_half(q)·sin`, read by the
    scores against every cached key. Inlined, that work does not depend on the cached
    row yet is done once per cached row; stored, once per element. The loops are counted
    together, so a cache split into chunks (split-K) still counts as one long loop.
    Prefill's rotated queries (a row per token, as large as the keys) stay inlined, as
    fusion needs.

    Cost rule: the map is stored only where it does more floating-point work per element
    than the innermost nest that reads it does per iteration (`_flops`), i.e. where inlining it would
    more than double that nest's work. Below that, the recomputation is the smaller part
    of the nest's work, and a nest of its own costs more than it saves: its launch and
    store, and the fusions that the new dependency blocks. A softmax's deferred
    normalisation `o / l` (one division) read by the output projection (a multiply-add)
    stays inlined, so the softmax's sum and P·V remain one nest for `mesh-fuse-softmax`;
    so does the rotated query of a step whose scores build each key row from the cache
    and the new row (`k·(1 − slot) + slot·k_new`, as much work as the rotation).
    """
    work = _flops(nest)
    if not any(isinstance(op, _FLOAT_ARITH) for op in nest.body.walk()):
        return False
    if len({r.source for r in nest.body.walk() if isinstance(r, ReadOp)}) < 2:
        return False
    size = max(_elements(r.type) for r in nest.res)
    for read in reads:
        top = _top(read, block)
        if not isinstance(top, NestOp) or work <= _flops(_inner(read), skip=nest):
            continue
        loops = _enclosing_loops(read, top)
        if not any(
            kind == IteratorKind.REDUCTION and any(_uses(i, dim) for i in read.indices)
            for dim, kind, _ in loops
        ):
            continue
        unused = [
            (dim, extent)
            for dim, _, extent in loops
            if not any(_uses(i, dim) for i in read.indices)
        ]
        if math.prod(e for _, e in unused) < SMALL_REREAD_LIMIT:
            continue
        along = [
            _elements(op.source.type)
            for op in top.walk()
            if isinstance(op, ReadOp)
            and op.source not in nest.res
            and any(_uses(i, d) for i in op.indices for d, _ in unused)
        ]
        if along and size * ROW_OPERAND_RATIO <= max(along):
            return True
    return False


def _inner(read: ReadOp) -> NestOp:
    """The innermost nest around `read`: the loop nest whose iterations it is read in."""
    current = read.parent_op()
    while not isinstance(current, NestOp):
        assert current is not None, "a read outside a nest"
        current = current.parent_op()
    return current


def _enclosing_loops(
    op: Operation, top: NestOp
) -> list[tuple[SSAValue, IteratorKind, int]]:
    """(index, kind, extent) of every loop of the nests from `top` down to `op`."""
    loops: list[tuple[SSAValue, IteratorKind, int]] = []
    current = op.parent_op()
    while current is not None:
        if isinstance(current, NestOp):
            loops.extend(zip(current.dims, current.kinds, current.extents, strict=True))
        if current is top:
            break
        current = current.parent_op()
    return loops


ROW_OPERAND_RATIO = 16
"""How much larger than a map the tensor read along its re-reading loop must be for
`_one_row_operand` to store the map (a cache of many rows against one query row)."""

_FLOAT_ARITH = (arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp)


def _flops(
    nest: NestOp, skip: NestOp | None = None, memo: dict[NestOp, int] | None = None
) -> int:
    """
    The floating-point operations of one iteration of `nest`'s body (arithmetic, maxima
    and minima, `math`; nested nests' bodies counted once), with those of every map nest
    but `skip` that only `nest` reads (and that is not a result) as if inlined, and
    theirs in turn: the body's work once fusion is done, whatever order it inlines the
    maps in. `memo` caches the counts of the maps already counted.
    """
    memo = {} if memo is None else memo
    count = 0
    for op in nest.body.walk():
        if isinstance(op, (*_FLOAT_ARITH, arith.MaximumfOp, arith.MinimumfOp)):
            count += 1
        elif op.name.startswith("math."):
            count += 1
        elif isinstance(op, ReadOp):
            producer = op.source.owner
            if (
                isinstance(producer, NestOp)
                and producer is not skip
                and is_map(producer)
                and not _stored(producer)
                and all(nest.is_ancestor(r) for res in producer.res for r in read_uses(res))
            ):
                if producer not in memo:
                    memo[producer] = _flops(producer, memo=memo)
                count += memo[producer]
    return count


def _shape(t: Attribute) -> tuple[int, ...]:
    return tuple(t.get_shape()) if isinstance(t, TensorType) else ()


def _elements(t: Attribute) -> int:
    return math.prod(_shape(t))


def _transcendental(nest: NestOp) -> bool:
    """Whether the body of `nest` uses a `math` op (exp, sqrt, tanh, ...)."""
    return any(op.name.startswith("math.") for op in nest.body.walk())


def _rereads(read: ReadOp, block: Block, limit: int = REREAD_LIMIT) -> bool:
    """
    Whether `read` sits in a reduction nest with a parallel loop of at least `limit`
    (`REREAD_LIMIT`) iterations that its indices do not use (each element read again
    for every index of that loop).
    """
    top = _top(read, block)
    if not isinstance(top, NestOp) or IteratorKind.REDUCTION not in top.kinds:
        return False
    for dim, kind, extent in zip(top.dims, top.kinds, top.extents, strict=True):
        if kind != IteratorKind.PARALLEL or extent < limit:
            continue
        if not any(_uses(i, dim) for i in read.indices):
            return True
    return False


def _uses(value: SSAValue, target: SSAValue) -> bool:
    """Whether the index `value` is computed from `target`."""
    stack = [value]
    seen: set[SSAValue] = set()
    while stack:
        v = stack.pop()
        if v is target:
            return True
        if v in seen:
            continue
        seen.add(v)
        if isinstance(v, OpResult):
            stack.extend(v.op.operands)
    return False


def _top(op: Operation, block: Block) -> Operation:
    while op.parent_block() is not block:
        parent = op.parent_op()
        assert parent is not None
        op = parent
    return op


def _stored(nest: NestOp) -> bool:
    """True if a result of `nest` is used other than by a read (a function result)."""
    return any(
        not isinstance(use.operation, ReadOp) for res in nest.res for use in res.uses
    )


def merge_sibling_maps(block: Block) -> bool:
    """
    Merges map nests of the same extents that do not read each other into one nest
    with the results of both (one `mesh.spmd` instead of two); True if any. The later
    nest joins the earlier one when everything it reads is defined before that one and
    no reduction nest lies between them (decode's rotated K and the V copied out of the
    projection's slice; not a later layer's map, which would move into an earlier layer).
    """
    changed = False
    progress = True
    while progress:
        progress = False
        # Runs of consecutive map nests (a reduction nest ends a run).
        runs: list[list[NestOp]] = [[]]
        for nest in top_nests(block):
            if is_map(nest):
                runs[-1].append(nest)
            elif runs[-1]:
                runs.append([])
        pairs = ((first, run[i + 1 :]) for run in runs for i, first in enumerate(run))
        for first, near in pairs:
            later = next((m for m in near if _joins(first, m)), None)
            if later is None:
                continue
            _merge_maps(first, later)
            progress = changed = True
            break
    return changed


def _joins(first: NestOp, later: NestOp) -> bool:
    if first.extents != later.extents or first.kinds != later.kinds:
        return False
    return all(
        defined_before(v, first) and not (isinstance(v, OpResult) and v.op is first)
        for v in external_values(later)
    )


def _merge_maps(first: NestOp, later: NestOp) -> None:
    n = len(first.extents)
    block = Block(arg_types=[IndexType()] * n)
    for new_arg, old_arg in zip(block.args, first.dims, strict=True):
        new_arg.name_hint = old_arg.name_hint
    with ImplicitBuilder(block):
        values = clone_body(first, dict(zip(first.dims, block.args, strict=True)))
        values += clone_body(later, dict(zip(later.dims, block.args, strict=True)))
        YieldOp(*values)
    merged = NestOp(
        first.extents, first.kinds, [], [*first.res.types, *later.res.types], block
    )
    Builder(InsertPoint.before(first)).insert(merged)
    for old, new in zip([*first.res, *later.res], merged.res, strict=True):
        new.name_hint = old.name_hint
        old.replace_all_uses_with(new)
    for nest in (first, later):
        Rewriter.erase_op(nest)


# ---------------------------------------------------------------------------------------
# Hoisting, common subexpressions, dead code
# ---------------------------------------------------------------------------------------


def hoist_invariants(nest: NestOp) -> bool:
    """
    Moves ops of nested nests that do not depend on the nested nest's own indices and
    accumulators out to the enclosing body (recursively); True if anything moved.
    """
    changed = False
    for op in list(nest.body.block.ops):
        if isinstance(op, NestOp):
            changed |= hoist_invariants(op)
            changed |= _hoist_from(op)
    return changed


def _hoist_from(nested: NestOp) -> bool:
    block = nested.body.block
    own: set[SSAValue] = set(block.args)
    moved = False
    for op in list(block.ops):
        if isinstance(op, YieldOp) or not op.has_trait(Pure):
            own.update(op.results)
            continue
        if external_values(op) & own:
            own.update(op.results)
            continue
        op.detach()
        Builder(InsertPoint.before(nested)).insert(op)
        moved = True
    return moved


def cse(block: Block) -> None:
    """
    Merges identical pure ops of `block` and of the bodies nested in it (xDSL's
    `common_subexpression_elimination`, which also erases the ops left without uses).
    """
    xdsl_cse(block)


def dce(block: Block) -> bool:
    """
    Erases the ops of `block` and of the bodies nested in it whose results nothing live
    reads and that have no other effect (xDSL's `region_dce` on the block's region);
    True if any.
    """
    region = block.parent
    if region is None:
        raise ValueError("dce needs a block inside a region (a function or a nest body)")
    return region_dce(region)


def index_constant(value: int) -> SSAValue:
    """An `index` constant (under the current implicit builder)."""
    return arith.ConstantOp(IntegerAttr(value, IndexType())).result


def fold_scalar_constant_reads(block: Block) -> None:
    """
    Replaces each `loop.read` of a rank-0 float tensor `arith.constant` of `block` (a
    norm's epsilon written as a graph constant) by the scalar it holds: a value, not a
    load.
    """
    for op in list(block.ops):
        if not isinstance(op, arith.ConstantOp):
            continue
        t, value = op.result.type, op.value
        if not isinstance(t, TensorType) or t.get_shape() != ():
            continue
        elt = cast(Attribute, t.element_type)
        if not isinstance(elt, AnyFloat) or not isinstance(value, DenseIntOrFPElementsAttr):
            continue
        scalar = float(dense_to_numpy(value).reshape(-1)[0])
        for read in read_uses(op.result):
            c = arith.ConstantOp(FloatAttr(scalar, elt))
            parent = read.parent_block()
            assert parent is not None
            parent.insert_op_before(c, read)
            Rewriter.replace_op(read, (), [c.result])
        if not op.result.uses:
            Rewriter.erase_op(op)


def hoist_constants(block: Block) -> None:
    """Moves the `arith.constant`s of `block` to its start (they then dominate all)."""
    constants = [op for op in block.ops if isinstance(op, arith.ConstantOp)]
    first = block.first_op
    for op in constants:
        if op is first:
            first = op.next_op
            continue
        op.detach()
        if first is None:
            block.add_op(op)
        else:
            block.insert_op_before(op, first)
