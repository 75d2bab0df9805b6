"""
`graph-fold-repeat-kv`: grouped-query attention against the K/V heads as they are, GQA's
`repeat_kv` becoming the index map `h // g` of a regrouped batched matmul.

Exports write `repeat_kv(u)` (`u` the `[b, hkv, s, d]` keys or values) as
`Reshape(Expand(Unsqueeze(u)))`: `[b, hkv, 1, s, d] -> [b, hkv, g, s, d] -> [b, hkv·g,
s, d]` (`graph-canonicalize` keeps the unsqueeze as a reshape; a `Concat` of `g` copies
along the unit dimension is recognised too), and then a batched matmul of the `H = hkv·g`
query heads `a` `[b, H, m, k]` against it: the scores `Q·Kᵀ` (Kᵀ as the matmul's
`transpose_b`) and the output `P·V`. Query head `h` reads K/V head `h // g`, and the `g`
query heads of one K/V head are consecutive, so the `[g, m]` rows of a group are the rows
of one matrix:

    matmul(a, repeat_kv(u)) = reshape(matmul(reshape(a, [b, hkv, g·m, k]), u), [b, H, m, n])

The regrouped matmul reads each K/V head once for its whole group, with no broadcast
dimension (the decode step's `[b, H, 1, k]` query rows become `[b, hkv, g, k]`); both
reshapes keep the element order, so they are index maps at the loop level, and the
result is exact (the same products summed in the same order). The repetition is erased
when nothing else reads it.

The reshape of the scores back to heads then moves below the row-wise ops that read them
(the mask, a last-axis softmax, the NaN guard), so P·V reads the grouped probabilities
directly and `neptune-fuse` fuses the attention as before. Their other operands are seen
in groups: unchanged when they broadcast over heads and rows, reshaped when they are per
head and row, repeated over a group's heads (reshape, expand, reshape: an index map)
when they are the same for every head (a prefill's mask over positions). If one cannot
be (per head, broadcast over rows), the scores stay in heads there.

With `max-rows N` (N > 0) only queries of at most N rows per head are regrouped:
`plmr compile` regroups decode steps (one row per head, `max-rows 1`), where a group's
rows were a broadcast of K/V otherwise; a prefill's grouped scores nest blocked worse
(on `llama_prefill.onnx` at 2x2, 167,219 cycles against 144,174 as exported).

The matmul is left alone when the heads are not the dimension just before its rows
(`a`'s rank differs from the repetition's, or `a` is transposed: its rows would not be
consecutive), when a query operand broadcasts over the heads, or when the expand repeats
anything but the heads (`H == hkv` has nothing to repeat).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint, Rewriter

from plmr.dialects import graph
from plmr.errors import PassOptionError
from plmr.passes.canonicalize.attention import repeated_heads
from plmr.passes.canonicalize.match import owner_of, shape_of
from plmr.passes.dead_ops import erase_dead
from plmr.passes.timing import count
from plmr.passes.transpose_elim import UNARY_ELEMENTWISE

_ROWWISE = (graph.BinaryElementwiseOp, graph.CmpOp, graph.WhereOp, *UNARY_ELEMENTWISE)


def _reshaped(value: SSAValue, shape: tuple[int, ...]) -> tuple[SSAValue, list[Operation]]:
    """`value` seen with `shape`: itself, the input of the reshape it is, or a new reshape."""
    if shape_of(value) == shape:
        return value, []
    source = owner_of(value, graph.ReshapeOp)
    if source is not None and shape_of(source.input) == shape:
        return source.input, []
    if source is not None:
        value = source.input
    op = graph.ReshapeOp(value, shape)
    return op.result, [op]


def fold_matmul(
    op: graph.MatmulOp, rewriter: PatternRewriter, max_rows: int = 0
) -> graph.ReshapeOp | None:
    """
    Regroups `op` if its right operand is `repeat_kv(u)` and its query heads have at most
    `max_rows` rows (0: any); returns the reshape of the grouped product back to heads,
    or None when it leaves `op` alone.
    """
    found = repeated_heads(op.rhs)
    if found is None or op.transpose_a is not None:
        return None
    u, j = found
    a_shape, rhs_shape = shape_of(op.lhs), shape_of(op.rhs)
    rank = len(rhs_shape)
    if len(a_shape) != rank or j - 1 != rank - 3:
        return None  # the repeated dimension must be the heads, just before the rows
    heads, hkv = rhs_shape[j - 1], shape_of(u)[j - 1]
    if a_shape[j - 1] != heads or hkv == heads:
        return None
    g = heads // hkv
    lead, (m, k) = a_shape[: j - 1], a_shape[-2:]
    if max_rows and m > max_rows:
        return None
    kv_shape = (*lead, hkv, *rhs_shape[-2:])
    if rhs_shape[: j - 1] != lead:
        return None  # the other batch dimensions broadcast
    queries, made = _reshaped(op.lhs, (*lead, hkv, g * m, k))
    kv, more = _reshaped(u, kv_shape)
    matmul = graph.MatmulOp(queries, kv, False, op.transpose_b is not None)
    back = graph.ReshapeOp(matmul, shape_of(op.result))
    matmul.result.name_hint = f"{op.result.name_hint or 'mm'}_grouped"
    back.result.name_hint = op.result.name_hint
    rewriter.insert([*made, *more, matmul, back], InsertPoint.before(op))
    rewriter.replace_all_uses_with(op.result, back.result)
    erase_dead(op, rewriter)
    return back


def _row_wise(op: Operation, rank: int) -> bool:
    """Whether `op` maps each row (last axis) of its operands to the same row of its result."""
    if isinstance(op, graph.SoftmaxOp):
        return op.axis.value.data % rank == rank - 1
    return isinstance(op, _ROWWISE)


def _regrouped(
    value: SSAValue, heads: tuple[int, int, int], rank: int
) -> tuple[SSAValue, list[Operation]] | None:
    """
    `value`, an operand broadcast against `[.., H, m, n]`, seen against the grouped
    `[.., hkv, g·m, n]` (`heads` is `(H, hkv, m)`); None if it cannot be.
    """
    h, hkv, m = heads
    shape = shape_of(value)
    if len(shape) < 2:
        return value, []  # the same for every head and row
    full = (1,) * (rank - len(shape)) + shape
    lead, (hd, md, n) = full[:-3], full[-3:]
    if hd == 1 and md == 1:
        return value, []
    if hd == h and md == m:
        return _reshaped(value, (*lead, hkv, h // hkv * m, n))
    if hd != 1 or md != m:
        return None
    # The same rows for every head (a mask over positions): repeated over a group's
    # heads, an index map like the repetition it replaces.
    unit = graph.ReshapeOp(value, (*lead, 1, 1, m, n))
    spread = graph.ExpandOp(unit, (*lead, 1, h // hkv, m, n))
    rows = graph.ReshapeOp(spread, (*lead, 1, h // hkv * m, n))
    return rows.result, [unit, spread, rows]


def _region(back: graph.ReshapeOp) -> list[Operation]:
    """The row-wise ops that read `back` (the heads' view of a grouped product), in order."""
    rank = len(shape_of(back.result))
    members: set[Operation] = set()
    pending: list[SSAValue] = [back.result]
    while pending:
        value = pending.pop()
        for use in value.uses:
            user = use.operation
            if user in members or not _row_wise(user, rank):
                continue
            if shape_of(user.results[0]) != shape_of(back.result):
                continue
            members.add(user)
            pending.append(user.results[0])
    block = back.parent_block()
    assert block is not None
    return [op for op in block.ops if op in members]


def sink_regrouping(back: graph.ReshapeOp) -> int:
    """
    Moves `back` (grouped `[.., hkv, g·m, n]` to heads `[.., H, m, n]`) below the row-wise
    ops that read it (the mask, the softmax, the NaN guard), so that the scores stay in
    the grouped shape up to P·V; returns how many ops moved (0 if any operand of them
    cannot be regrouped).
    """
    region = _region(back)
    if not region:
        return 0
    grouped, heads_shape = back.input, shape_of(back.result)
    rank = len(heads_shape)
    h, m = heads_shape[-3], heads_shape[-2]
    hkv = shape_of(grouped)[-3]
    mapping: dict[SSAValue, SSAValue] = {back.result: grouped}
    made: list[tuple[Operation, list[Operation]]] = []
    for op in region:
        operands: list[SSAValue] = []
        extra: list[Operation] = []
        for v in op.operands:
            if v in mapping:
                operands.append(mapping[v])
                continue
            found = _regrouped(v, (h, hkv, m), rank)
            if found is None:
                for _, ops in made:
                    for o in reversed(ops):
                        o.erase()
                return 0
            operands.append(found[0])
            extra += found[1]
        result_type = TensorType(graph.element_type(op.results[0]), shape_of(grouped))
        new = type(op).create(
            operands=operands,
            result_types=[result_type],
            properties=dict(op.properties),
            attributes=dict(op.attributes),
        )
        new.results[0].name_hint = op.results[0].name_hint
        mapping[op.results[0]] = new.results[0]
        made.append((op, [*extra, new]))
    for op, ops in made:
        Rewriter.insert_op(ops, InsertPoint.before(op))
    members = set(region)
    for op in reversed(region):
        old, new = op.results[0], mapping[op.results[0]]
        _reshape_users_read(old, new)
        outside = [u for u in old.uses if u.operation not in members]
        if outside:
            view = graph.ReshapeOp(new, heads_shape)
            view.result.name_hint = old.name_hint
            owner = new.owner
            assert isinstance(owner, Operation)
            Rewriter.insert_op(view, InsertPoint.after(owner))
            for use in outside:
                use.operation.operands[use.index] = view.result
    for op in reversed(region):
        erase_dead(op)
    return len(region)


def _reshape_users_read(value: SSAValue, source: SSAValue) -> None:
    """
    Reshapes of `value`, itself a reshape of `source`, read `source` instead (a reshape
    depends only on the element order); those that give `source`'s shape go.
    """
    for use in list(value.uses):
        user = use.operation
        if not isinstance(user, graph.ReshapeOp):
            continue
        if shape_of(user.result) == shape_of(source):
            Rewriter.replace_op(user, (), [source])
        else:
            user.operands[use.index] = source


@dataclass
class FoldRepeatKv(RewritePattern):
    """Regroups a matmul against a `repeat_kv` (see `fold_matmul`)."""

    max_rows: int
    backs: list[graph.ReshapeOp] = field(default_factory=list[graph.ReshapeOp])
    """The reshapes back to heads of the matmuls this pattern regrouped, in order."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.MatmulOp, rewriter: PatternRewriter) -> None:
        back = fold_matmul(op, rewriter, self.max_rows)
        if back is not None:
            self.backs.append(back)


def fold_module(module: ModuleOp, max_rows: int = 0) -> int:
    """
    Regroups every matmul against a `repeat_kv` in `module` (of at most `max_rows` query
    rows per head; 0: any), then keeps the scores grouped through the row-wise ops up to
    P·V; returns how many matmuls it regrouped. The regrouping is a pattern walked once;
    sinking it is not op by op (a whole chain of row-wise ops is rebuilt grouped, or left
    as it is), so it follows over the regrouped matmuls.
    """
    pattern = FoldRepeatKv(max_rows)
    PatternRewriteWalker(pattern, apply_recursively=False).rewrite_module(module)
    backs = pattern.backs
    for back in backs:
        if back.parent is not None:
            sink_regrouping(back)
    for back in backs:
        if back.parent is not None:
            _reshape_users_read(back.result, back.input)
            erase_dead(back)
    return len(backs)


@dataclass(frozen=True)
class GraphFoldRepeatKvPass(ModulePass):
    """
    Multiplies grouped query heads by the un-repeated K/V heads instead of repeating them.

    ```mlir
    // before: 4 query heads, 2 K/V heads
    %ku = graph.reshape %k : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
    %ke = graph.expand %ku : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
    %kr = graph.reshape %ke : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
    %s = graph.matmul %q, %kr transpose_b : (tensor<1x4x1x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x1x8xf32>
    // after
    %qg = graph.reshape %q : tensor<1x4x1x16xf32> -> tensor<1x2x2x16xf32>
    %sg = graph.matmul %qg, %k transpose_b : (tensor<1x2x2x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x2x8xf32>
    %s = graph.reshape %sg : tensor<1x2x2x8xf32> -> tensor<1x4x1x8xf32>
    ```
    """

    name = "graph-fold-repeat-kv"

    max_rows: int = 0
    """Regroup only queries of at most this many rows per head (0: any)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.max_rows < 0:
            raise PassOptionError(
                f"graph-fold-repeat-kv: max-rows must be 0 (any) or more, got {self.max_rows}"
            )
        count("graph-fold-repeat-kv: matmuls regrouped", fold_module(op, self.max_rows))
