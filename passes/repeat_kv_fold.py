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

The matmul is left alone when the heads are not the dimension just before its rows
(`a`'s rank differs from the repetition's, or `a` is transposed: its rows would not be
consecutive), when a query operand broadcasts over the heads, or when the expand repeats
anything but the heads (`H == hkv` has nothing to repeat).
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from plmr.dialects import graph
from plmr.passes.canonicalize.attention import repeated_heads
from plmr.passes.canonicalize.match import owner_of, shape_of
from plmr.passes.rotate_fold import erase_dead
from plmr.passes.timing import count


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


def fold_matmul(op: graph.MatmulOp) -> bool:
    """Regroups `op` if its right operand is `repeat_kv(u)`; returns whether it did."""
    found = repeated_heads(op.rhs)
    if found is None or op.transpose_a is not None:
        return False
    u, j = found
    a_shape, rhs_shape = shape_of(op.lhs), shape_of(op.rhs)
    rank = len(rhs_shape)
    if len(a_shape) != rank or j - 1 != rank - 3:
        return False  # the repeated dimension must be the heads, just before the rows
    heads, hkv = rhs_shape[j - 1], shape_of(u)[j - 1]
    if a_shape[j - 1] != heads or hkv == heads:
        return False
    g = heads // hkv
    lead, (m, k) = a_shape[: j - 1], a_shape[-2:]
    kv_shape = (*lead, hkv, *rhs_shape[-2:])
    if rhs_shape[: j - 1] != lead:
        return False  # the other batch dimensions broadcast
    queries, made = _reshaped(op.lhs, (*lead, hkv, g * m, k))
    kv, more = _reshaped(u, kv_shape)
    matmul = graph.MatmulOp(queries, kv, False, op.transpose_b is not None)
    back = graph.ReshapeOp(matmul, shape_of(op.result))
    matmul.result.name_hint = f"{op.result.name_hint or 'mm'}_grouped"
    back.result.name_hint = op.result.name_hint
    Rewriter.insert_op([*made, *more, matmul, back], InsertPoint.before(op))
    op.result.replace_all_uses_with(back.result)
    erase_dead(op)
    return True


def fold_module(module: ModuleOp) -> int:
    """Regroups every matmul against a `repeat_kv` in `module`; returns how many."""
    matmuls = [op for op in module.walk() if isinstance(op, graph.MatmulOp)]
    return sum(fold_matmul(op) for op in matmuls)


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

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        count("graph-fold-repeat-kv: matmuls regrouped", fold_module(op))
