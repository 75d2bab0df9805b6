"""
`graph-merge-matmuls`: matmuls that read the same input through constant weights become
one matmul with the weights concatenated, its result split back (Q, K and V projections).

Two or more `graph.matmul` ops merge when they share their left operand and transpose
flags, their right operands are rank-2 constants of one element type and the same
contraction size: all `graph.constant`s, or all weights by reference (`graph.weight`).
The merged program reads the input once and runs one matmul nest in place of several; a
`graph.split` along the output dimension gives each former result back to its users.
Inline constants are concatenated at compile time. Weights by reference stay
references: the merged weight is `graph.weight concat AXIS (...)` of their references,
which nothing reads at compile time; the runtime reads and concatenates the parts when it
places the weight on the wafer, as it places any weight.

With `min-rows N` (N > 0) only products of at least N rows merge (the rows: the
result's elements over its last dimension). `plmr compile` leaves a decode step's flat
one-row products (GEMVs) apart (`min-rows 2`): on the mesh each GEMV's allreduce is
packed with the others' into one collective anyway (`mesh-pack-allreduces`), while the
merged product's split makes each part's reader gather a slice of a vector spread over
the other axis, which at LLaMA3-8B width needs more SRAM than a PE has.

One-row projections by heads (`graph-fold-heads`: a row `[1, ..., 1, K]` times weights
`[A, ..., K, D]`) merge whatever `min-rows`, when they read the same row and share the
first head dimension `A` (the KV heads) and `D`: each weight is viewed as `[A, G, K, D]`
(`G` the product of its other head dimensions, 1 for K and V) and the weights are
concatenated along `G`, as `models/llama_heads.py` writes a layer's Q, rotated Q, K,
rotated K and V: one product `[A, ΣG, 1, D]` whose split along `G` leaves each KV head's
queries, keys and values on the PEs of that head, so no reader gathers a part. A flat
one-row projection (`K x N`) is one head of `N` (`A = G = 1`): the FFN's gate and up
projections are stacked, `[1, 2, 1, N]`, each column of both on the same PEs, as
`models/llama_heads.py`'s `w13`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from plmr.dialects import graph
from plmr.dialects.graph_weights import concat_refs, weight_ref
from plmr.dialects.narrow import expect
from plmr.errors import PlmrError
from plmr.passes.timing import count
from plmr.values import constant_attr, dense_to_numpy

GroupKey = tuple[SSAValue, bool, bool, int, Any, bool]


def rows(op: graph.MatmulOp) -> int:
    """The rows of `op`'s product: its result's elements over the last dimension."""
    shape = graph.static_shape(op.result, "result")
    return math.prod(shape[:-1])


def _group_key(op: graph.MatmulOp, min_rows: int = 0) -> GroupKey | None:
    """What a matmul must share with another to merge; None when it cannot merge."""
    if min_rows and rows(op) < min_rows:
        return None
    weight = op.rhs.owner
    if not isinstance(weight, graph.ConstantOp | graph.WeightOp):
        return None
    shape = graph.static_shape(op.rhs, "rhs")
    if len(shape) != 2:
        return None
    flip_a, flip_b = op.transpose_a is not None, op.transpose_b is not None
    contraction = shape[1] if flip_b else shape[0]
    by_reference = isinstance(weight, graph.WeightOp)
    return (op.lhs, flip_a, flip_b, contraction, graph.element_type(op.rhs), by_reference)


def _merge(group: list[graph.MatmulOp]) -> None:
    first = group[0]
    flip_a, flip_b = first.transpose_a is not None, first.transpose_b is not None
    axis = 0 if flip_b else 1
    sizes = [graph.static_shape(op.rhs, "rhs")[axis] for op in group]
    const = _merged_weight(group, axis)
    matmul = graph.MatmulOp(first.lhs, const, flip_a, flip_b)
    out_rank = len(graph.static_shape(first.result, "result"))
    split = graph.SplitOp(matmul, out_rank - 1, sizes)
    Rewriter.insert_op([const, matmul, split], InsertPoint.before(first))
    for op, res in zip(group, split.results, strict=True):
        res.name_hint = op.result.name_hint
        owner = op.rhs.owner
        Rewriter.replace_op(op, (), [res])
        if isinstance(owner, graph.ConstantOp | graph.WeightOp) and not owner.result.uses:
            Rewriter.erase_op(owner)


def _merged_weight(group: list[graph.MatmulOp], axis: int) -> graph.GraphOp:
    """The right operands of `group` concatenated: a constant, or a reference."""
    owners = [op.rhs.owner for op in group]
    refs = [weight_ref(o) for o in owners if isinstance(o, graph.WeightOp)]
    if refs:
        return graph.WeightOp.of(concat_refs([r for r in refs if r is not None], axis))
    weights: list[np.ndarray[Any, Any]] = []
    for owner in owners:
        constant = expect(owner, graph.ConstantOp, "the right operand of a merged matmul")
        weights.append(dense_to_numpy(constant.value))
    merged = np.concatenate(weights, axis=axis)
    return graph.ConstantOp(constant_attr(merged, graph.element_type(group[0].rhs)))


HeadsKey = tuple[SSAValue, int, int, int, Any, bool]


def _heads_key(op: graph.MatmulOp, stack_rows: bool = False) -> HeadsKey | None:
    """
    What a one-row projection by heads must share with another to merge (with
    `stack_rows`, flat projections of several rows too).
    """
    if op.transpose_a is not None or op.transpose_b is not None:
        return None
    weight = op.rhs.owner
    if not isinstance(weight, graph.ConstantOp | graph.WeightOp):
        return None
    lhs, rhs = graph.static_shape(op.lhs, "lhs"), graph.static_shape(op.rhs, "rhs")
    if len(rhs) < 2 or (math.prod(lhs[:-1]) != 1 and not (stack_rows and len(rhs) == 2)):
        # Several rows stack only as flat projections (gate and up of a prefill).
        return None
    if len(rhs) > 2 and len(lhs) != len(rhs):
        return None
    by_reference = isinstance(weight, graph.WeightOp)
    if by_reference:
        ref = weight_ref(weight)
        if ref is None or len(ref.heads) != len(rhs) - 2 or ref.rows:
            return None
    # A flat projection (`K x N`) is one head of `N` (gate and up, stacked), unless its
    # result is split into heads, which `graph-fold-heads` makes per-head weights of.
    if len(rhs) == 2 and _viewed_as_heads(op.result):
        return None
    lead = rhs[0] if len(rhs) > 2 else 1
    row = _row(op)
    return (row, rhs[-2], rhs[-1], lead, graph.element_type(op.rhs), by_reference)


def _rows_of(op: graph.MatmulOp) -> int:
    """The rows a projection reads: one for a decode step's, a prompt's for a prefill."""
    return math.prod(graph.static_shape(op.lhs, "lhs")[:-1])


def _viewed_as_heads(value: SSAValue) -> bool:
    """
    Whether `value` (`[.., N]`) reaches, through single uses of elementwise ops and
    transposes, a reshape that splits its last dimension into two or more.
    """
    n = graph.static_shape(value, "value")[-1]
    while value.has_one_use():
        user = next(iter(value.uses)).operation
        if isinstance(user, graph.ReshapeOp):
            out = graph.static_shape(user.result, "result")
            return out[-1] != n and n % out[-1] == 0 and out[-1] > 1
        if not isinstance(user, graph.GraphOp) or len(user.results) != 1:
            return False
        if not isinstance(
            user,
            graph.UnaryElementwiseOp
            | graph.BinaryElementwiseOp
            | graph.ScaleOp
            | graph.TransposeOp,
        ):
            return False
        value = user.results[0]
        if graph.static_shape(value, "value")[-1] != n:
            return False
    return False


def _row(op: graph.MatmulOp) -> SSAValue:
    """The row a projection by heads reads, before the reshape that gives it their rank."""
    owner = op.lhs.owner
    return owner.input if isinstance(owner, graph.ReshapeOp) else op.lhs


def _grouped_weight(op: graph.MatmulOp) -> tuple[graph.GraphOp, int]:
    """The weight of `op` viewed as `[A, G, K, D]`, and `G`."""
    shape = list(graph.static_shape(op.rhs, "rhs"))
    a = shape[0] if len(shape) > 2 else 1
    k, d = shape[-2], shape[-1]
    g = math.prod(shape[1:-2])
    weight = op.rhs.owner
    if isinstance(weight, graph.WeightOp):
        ref = weight_ref(weight)
        assert ref is not None
        t = TensorType(ref.type.element_type, [a, g, k, d])
        return graph.WeightOp.of(replace(ref, type=t, heads=(a, g))), g
    constant = expect(weight, graph.ConstantOp, "the weight of a projection by heads")
    values = dense_to_numpy(constant.value).reshape(a, g, k, d)
    return graph.ConstantOp(constant_attr(values, graph.element_type(op.rhs))), g


def _merge_heads(group: list[graph.MatmulOp]) -> None:
    first = group[0]
    k = graph.static_shape(first.rhs, "rhs")[-2]
    row = graph.ReshapeOp(_row(first), [1, 1, _rows_of(first), k])
    grouped = [_grouped_weight(op) for op in group]
    refs = [weight_ref(w) for w, _ in grouped if isinstance(w, graph.WeightOp)]
    if refs:
        weight: graph.GraphOp = graph.WeightOp.of(
            concat_refs([r for r in refs if r is not None], 1)
        )
    else:
        arrays = [
            dense_to_numpy(expect(w, graph.ConstantOp, "a weight").value)
            for w, _ in grouped
        ]
        weight = graph.ConstantOp(
            constant_attr(np.concatenate(arrays, axis=1), graph.element_type(first.rhs))
        )
    matmul = graph.MatmulOp(row, weight)
    matmul.result.name_hint = "heads_proj"
    split = graph.SplitOp(matmul, 1, [g for _, g in grouped])
    made: list[Operation] = [row, weight, matmul, split]
    results: list[SSAValue] = []
    for op, part in zip(group, split.results, strict=True):
        shape = graph.static_shape(op.result, "result")
        if graph.static_shape(part, "part") == shape:
            part.name_hint = op.result.name_hint
            results.append(part)
            continue
        back = graph.ReshapeOp(part, shape)
        back.result.name_hint = op.result.name_hint
        made.append(back)
        results.append(back.result)
    Rewriter.insert_op(made, InsertPoint.before(first))
    for op, res in zip(group, results, strict=True):
        owners = (op.lhs.owner, op.rhs.owner)
        Rewriter.replace_op(op, (), [res])
        for owner in owners:
            if (
                isinstance(owner, graph.ReshapeOp | graph.ConstantOp | graph.WeightOp)
                and not owner.results[0].uses
            ):
                Rewriter.erase_op(owner)


def merge_heads_block(block: Block, stack_rows: bool = False) -> int:
    """
    Merges the one-row projections by heads of `block` (with `stack_rows`, stacks flat
    projections of several rows that an elementwise op combines); returns how many went
    away.
    """
    return _merge_groups(
        block, lambda op: _heads_key(op, stack_rows), _merge_heads, _combined_flat
    )


def _combined_flat(group: list[graph.MatmulOp]) -> list[graph.MatmulOp]:
    """
    The members of a group of flat projections (rank-2 weights) whose results one
    elementwise op combines with another member's, each through unary elementwise ops
    (gate's `silu` times up): stacked, their columns meet on the same PEs. Flat
    projections read apart (one per head of a per-head program) stay apart. Groups of
    projections by heads are kept whole.
    """
    if len(graph.static_shape(group[0].rhs, "rhs")) != 2:
        return group
    source: dict[SSAValue, graph.MatmulOp] = {op.result: op for op in group}
    paired: set[graph.MatmulOp] = set()
    for op in group:
        for user in _elementwise_users(op.result):
            if not isinstance(user, graph.BinaryElementwiseOp):
                continue
            roots = {_elementwise_root(v) for v in user.operands}
            members = [source[r] for r in roots if r in source]
            if len(members) == 2:
                paired.update(members)
    return [op for op in group if op in paired]


_UNARY_CHAIN = (graph.UnaryElementwiseOp, graph.ScaleOp)


def _elementwise_users(value: SSAValue) -> list[Operation]:
    """
    The ops that read `value`, past unary elementwise ops and products by a per-row
    scalar with one use (`_elementwise_root` walks them back).
    """
    while value.has_one_use():
        user = next(iter(value.uses)).operation
        if not isinstance(user, _UNARY_CHAIN) and not _by_scalar(user):
            return [user]
        value = user.results[0]
    return [u.operation for u in value.uses]


def _by_scalar(op: Operation) -> bool:
    """Whether `op` multiplies a value by a one-element operand (a per-row scale)."""
    return isinstance(op, graph.MulOp) and any(
        math.prod(graph.static_shape(v, "operand")) == 1 for v in op.operands
    )


def _elementwise_root(value: SSAValue) -> SSAValue:
    """
    `value` before the unary elementwise ops (and the binary ops by a per-row
    scalar: a deferred norm scale) that lead to it."""
    owner = value.owner
    while True:
        if isinstance(owner, _UNARY_CHAIN):
            value = owner.operands[0]
        elif isinstance(owner, Operation) and _by_scalar(owner):
            value = next(
                v for v in owner.operands if math.prod(graph.static_shape(v, "v")) > 1
            )
        else:
            return value
        owner = value.owner


def _merge_groups(
    block: Block,
    key_of: Callable[[graph.MatmulOp], Hashable | None],
    merge: Callable[[list[graph.MatmulOp]], None],
    keep: Callable[[list[graph.MatmulOp]], list[graph.MatmulOp]] = lambda g: g,
) -> int:
    """
    Merges each group of two or more matmuls of `block` with one key (those of it that
    `keep` keeps); returns how many went away.
    """
    groups: dict[Hashable, list[graph.MatmulOp]] = {}
    for op in block.ops:
        if isinstance(op, graph.MatmulOp) and (key := key_of(op)) is not None:
            groups.setdefault(key, []).append(op)
    removed = 0
    for whole in groups.values():
        group = keep(whole)
        if len(group) < 2:
            continue
        merge(group)
        removed += len(group) - 1
    return removed


def merge_block(block: Block, min_rows: int = 0, stack_rows: bool = False) -> int:
    """
    Merges the matmul groups of `block` (of products of at least `min_rows` rows, 0:
    any) and its one-row projections by heads; returns how many matmuls were removed.
    With `stack_rows`, flat projections of several rows that an elementwise op combines
    (a prefill's gate and up) stack as heads, `[1, 2, L, N]`, before the rest merge.
    """
    if stack_rows:
        heads = merge_heads_block(block, stack_rows=True)
        return heads + _merge_groups(block, lambda op: _group_key(op, min_rows), _merge)
    flat = _merge_groups(block, lambda op: _group_key(op, min_rows), _merge)
    return flat + merge_heads_block(block)


@dataclass(frozen=True)
class GraphMergeMatmulsPass(ModulePass):
    """
    Merges matmuls that share their input and read constant weights into one; with
    `min-rows N`, only products of at least N rows; with `stack-rows`, a prefill's gate
    and up stack as two heads (`[1, 2, L, N]`, each column of both on the same PEs)
    instead of concatenating their columns.

    ```mlir
    // before
    %q = graph.matmul %x, %wq : (tensor<1x8xf32>, tensor<8x8xf32>) -> tensor<1x8xf32>
    %k = graph.matmul %x, %wk : (tensor<1x8xf32>, tensor<8x4xf32>) -> tensor<1x4xf32>
    // after
    %w = graph.constant dense<...> : tensor<8x12xf32>
    %qk = graph.matmul %x, %w : (tensor<1x8xf32>, tensor<8x12xf32>) -> tensor<1x12xf32>
    %q, %k = graph.split %qk axis = 1 sizes = [8, 4] : tensor<1x12xf32> -> (tensor<1x8xf32>, tensor<1x4xf32>)
    ```
    """

    name = "graph-merge-matmuls"

    min_rows: int = 0
    stack_rows: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.min_rows < 0:
            raise PlmrError(
                f"graph-merge-matmuls: min-rows={self.min_rows} is negative; give the "
                "fewest rows a product must have to merge (0: any)"
            )
        blocks = [b for o in op.walk() for r in o.regions for b in r.blocks]
        removed = sum(
            merge_block(block, self.min_rows, self.stack_rows) for block in blocks
        )
        count("graph-merge-matmuls: matmuls merged away", removed)
