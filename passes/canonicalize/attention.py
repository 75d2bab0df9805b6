"""
Attention idioms of exported models: SDPA's NaN guard and grouped-query attention.

**NaN guard.** `torch.onnx` writes scaled dot-product attention as
`where(isnan(p), 0, p)` after the softmax `p` (imported as
`graph.where (graph.cmp ne p, p), c, p`), which guards rows whose scores are all `-inf`
(fully masked). `RemoveNanGuard` replaces the guard (also spelled
`where(not(isnan(p)), p, c)` or with `cmp eq p, p`) by `p` when `p` provably holds no
NaN. "Provably" here means: assuming that no arithmetic overflows (the assumption every
floating-point compiler makes when it reassociates) and that function arguments hold
finite values — except an argument added to scores before a softmax, which is taken
for a mask that may hold `-inf` — the forward analysis `finite_values` shows that every
element of `p` is finite. It accepts:

- function arguments (activations, weights), and integer or `i1` values;
- constants whose elements are all finite;
- the results of ops that map finite operands to finite results: `add`, `sub`, `mul`,
  `scale`, `matmul`, `neg`, `abs`, `relu`, `gelu`, `silu`, `sigmoid`, `tanh`, `exp`,
  `erf`, `floor`, `ceil`, `maximum`, `minimum`, `transpose`, `reshape`, `expand`,
  `slice`, `concat`, `split`, `gather`, `gather_elements`, `pad` (finite fill), `cast`,
  `where` (of finite branches), non-empty `reduce`s, `pow` by a non-negative integer,
  `div` by a constant without zeros, and `rmsnorm` / `layernorm` with a positive
  epsilon;
- a `softmax` whose input has, in every row along the softmax axis, at least one finite
  entry and nowhere a NaN or `+inf` (`rows_have_finite`): a finite input (no mask), or
  `s + m` with `s` finite and `m` a mask that is either computed from finite values
  (BERT's `where(mask, 0, lowest)`) or a constant whose every row has a finite entry
  (causal masks, `-inf` or the dtype's lowest value above the diagonal), possibly
  broadcast by `expand`, moved by `transpose` or scaled by a positive factor. Then the
  row maximum is finite, `exp(z - max)` is in `[0, 1]` with at least one 1, and the
  normalising sum is at least 1. A function argument (or one moved, cast or scaled)
  added to the scores is not assumed finite — it may be a mask with `-inf` rows — unless
  the other side of the sum is a constant mask.

Other `div`s, `sqrt`, `log`, other `pow`s and `reciprocal` (a zero or negative
operand), masks passed as arguments, and anything else leave the guard in place.

**Grouped-query attention.** HF's `repeat_kv` repeats each K/V head `g` times:
`reshape(expand(unsqueeze(k)))`, `[b, hkv, s, d] -> [b, hkv, 1, s, d] -> [b, hkv, g, s, d]
-> [b, hkv·g, s, d]`. `UnrepeatKv` rewrites a batched `graph.matmul` whose right operand
is such a repetition to the matmul of the query heads regrouped as `[b, hkv, g, m, k]`
against the un-repeated `[b, hkv, 1, s, d]` (broadcast over `g`), reshaped back: the
repeated K/V is never built. `SinkGroupedReshape` then moves that reshape below the
mask, the softmax and the product with V, so the whole attention is in the grouped
shape (as plmr's own GQA programs are) and `neptune-fuse` fuses it.

plmr itself never copies a repeated K/V: `convert-graph-to-loop` turns the reshape and
expand into index maps (`k[b, h // g, s, d]`). Measured on an 8-head attention with 2
K/V heads (s = d = 32), the grouped shape takes 92,342 cycles against 88,233 on a 2×2
grid but 46,898 against 22,834 on 4×4 (the partitioner spreads `[hkv, g] = [2, 4]`
over the grid less well than 8 heads), so `plmr compile` does not use this form: it
runs these patterns off and `graph-fold-repeat-kv` (`passes/repeat_kv_fold.py`) instead,
which puts a group's query rows in one matrix (`[b, hkv, g·m, k]`, no broadcast
dimension). These patterns run with the pass's `unrepeat-kv` option (on by default).
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects import func
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from plmr.dialects import graph
from plmr.passes.canonicalize.match import (
    Array,
    const_array,
    constant_op,
    elt_of,
    owner_of,
    shape_of,
)
from plmr.passes.transpose_elim import (
    UNARY_ELEMENTWISE,
    perm_of,
    rebuild_unary,
    swaps_last_two,
)

FINITE_PRESERVING: tuple[type[Operation], ...] = (
    graph.AddOp,
    graph.SubOp,
    graph.MulOp,
    graph.ScaleOp,
    graph.MatmulOp,
    graph.NegOp,
    graph.AbsOp,
    graph.ReluOp,
    graph.GeluOp,
    graph.SiluOp,
    graph.SigmoidOp,
    graph.TanhOp,
    graph.ExpOp,
    graph.ErfOp,
    graph.CosOp,
    graph.SinOp,
    graph.FloorOp,
    graph.CeilOp,
    graph.MaximumOp,
    graph.MinimumOp,
    graph.TransposeOp,
    graph.ReshapeOp,
    graph.ExpandOp,
    graph.SliceOp,
    graph.ConcatOp,
    graph.SplitOp,
    graph.GatherOp,
    graph.GatherElementsOp,
    graph.CastOp,
)
"""Ops whose results are finite when their operands are (barring overflow)."""

_MAX_DEPTH = 16


def _finite_constant(value: SSAValue) -> bool:
    array = const_array(value)
    return array is not None and (
        array.dtype.kind != "f" or bool(np.all(np.isfinite(array)))
    )


def _is_finite_op(op: Operation, finite: set[SSAValue]) -> bool:
    """Whether `op`'s results are finite, given the set of values known finite."""
    if isinstance(op, graph.ConstantOp):
        return _finite_constant(op.result)
    if isinstance(op, graph.WhereOp):
        return op.lhs in finite and op.rhs in finite
    if isinstance(op, graph.GatherOp | graph.GatherElementsOp):
        return op.data in finite
    if isinstance(op, graph.PadOp):
        return op.input in finite and bool(np.isfinite(op.value.value.data))
    if isinstance(op, graph.ReduceOp):
        return (
            op.input in finite and bool(shape_of(op.input)) and 0 not in shape_of(op.input)
        )
    if isinstance(op, graph.RmsNormOp | graph.LayerNormOp):
        return op.epsilon.value.data > 0 and all(v in finite for v in op.operands)
    if isinstance(op, graph.PowOp):
        e = op.exponent.value.data
        return op.input in finite and float(e).is_integer() and e >= 0
    if isinstance(op, graph.DivOp):
        divisor = const_array(op.rhs)
        return (
            op.lhs in finite
            and divisor is not None
            and bool(np.all(np.isfinite(divisor) & (divisor != 0)))
        )
    if isinstance(op, graph.SoftmaxOp):
        axis = op.axis.value.data % len(shape_of(op.input))
        return rows_have_finite(op.input, axis, finite)
    if isinstance(op, graph.CmpOp | graph.NotOp | graph.AndOp | graph.OrOp | graph.XorOp):
        return True
    if isinstance(op, FINITE_PRESERVING):
        return all(v in finite for v in op.operands)
    return False


def finite_values(block: Block, stop: Operation | None = None) -> set[SSAValue]:
    """
    The values of `block` (up to `stop`) whose elements are all finite, under the
    assumptions of the module docstring: one forward sweep.
    """
    finite: set[SSAValue] = set()
    parent = block.parent_op()
    if isinstance(parent, func.FuncOp):
        finite.update(block.args)
    for op in block.ops:
        if op is stop:
            break
        if op.results and _is_finite_op(op, finite):
            finite.update(op.results)
    return finite


def rows_have_finite(
    value: SSAValue, axis: int, finite: set[SSAValue], depth: int = 0
) -> bool:
    """
    Whether `value` holds no NaN and no `+inf`, and every row along `axis` has a finite
    entry (the condition under which its softmax along `axis` is NaN-free).
    """
    shape = shape_of(value)
    op = value.owner
    if isinstance(op, graph.AddOp):
        for s, m in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            if s not in finite or _from_argument(m):
                continue
            if _from_argument(s) and not isinstance(_moved_from(m), graph.ConstantOp):
                continue  # which side is the mask? the argument may be
            if _broadcast_rows_ok(m, shape, axis, finite, depth):
                return True
        return False
    if value in finite:
        return shape[axis] > 0
    if depth > _MAX_DEPTH:
        return False
    array = const_array(value)
    if array is not None:
        return _constant_rows_ok(array, axis)
    if isinstance(op, graph.ExpandOp):
        return _broadcast_rows_ok(op.input, shape, axis, finite, depth)
    if isinstance(op, graph.TransposeOp):
        return rows_have_finite(op.input, perm_of(op)[axis], finite, depth + 1)
    if isinstance(op, graph.ScaleOp) and op.factor.value.data > 0:
        return rows_have_finite(op.input, axis, finite, depth + 1)
    return False


_MOVES = (
    graph.ExpandOp,
    graph.ReshapeOp,
    graph.TransposeOp,
    graph.SliceOp,
    graph.CastOp,
    graph.ScaleOp,
    graph.NegOp,
)


def _moved_from(value: SSAValue) -> Operation | BlockArgument:
    """What `value` is, seen through moves, casts and scales: an op or an argument."""
    for _ in range(_MAX_DEPTH):
        if isinstance(value, BlockArgument):
            return value
        op = value.owner
        assert isinstance(op, Operation)
        if not isinstance(op, _MOVES):
            return op
        value = op.operands[0]
    if isinstance(value, BlockArgument):
        return value
    owner = value.owner
    assert isinstance(owner, Operation)
    return owner


def _from_argument(value: SSAValue) -> bool:
    """Whether `value` is a function argument, possibly moved, cast or scaled: a mask input."""
    return isinstance(_moved_from(value), BlockArgument)


def _constant_rows_ok(array: Array, axis: int) -> bool:
    if array.dtype.kind != "f":
        return True
    if bool(np.any(np.isnan(array))) or bool(np.any(array == np.inf)):
        return False
    return bool(np.all(np.any(np.isfinite(array), axis=axis)))


def _broadcast_rows_ok(
    m: SSAValue,
    shape: tuple[int, ...],
    axis: int,
    finite: set[SSAValue],
    depth: int,
) -> bool:
    """`rows_have_finite` of `m` broadcast to `shape`, along `axis` of `shape`."""
    if m in finite:
        return True
    array = const_array(m)
    if array is not None:
        return _constant_rows_ok(np.broadcast_to(array, shape), axis)
    m_axis = axis - (len(shape) - len(shape_of(m)))
    if m_axis < 0:
        return False
    return rows_have_finite(m, m_axis, finite, depth + 1)


def _guarded(op: graph.WhereOp) -> SSAValue | None:
    """`p` if `op` is `where(isnan(p), c, p)` or `where(not(isnan(p)), p, c)`."""
    cond = op.condition.owner
    negated = isinstance(cond, graph.NotOp)
    if isinstance(cond, graph.NotOp):
        cond = cond.input.owner
    if not isinstance(cond, graph.CmpOp) or cond.lhs != cond.rhs:
        return None
    predicate = cond.predicate.data
    if predicate == graph.CmpPredicate.EQ:
        negated = not negated
    elif predicate != graph.CmpPredicate.NE:
        return None
    p = cond.lhs
    kept = op.lhs if negated else op.rhs
    if kept != p or op.result.type != p.type:
        return None
    return p


class RemoveNanGuard(RewritePattern):
    """`where(isnan(p), c, p)` -> `p` when `p` provably holds no NaN (see above)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.WhereOp, rewriter: PatternRewriter, /):
        p = _guarded(op)
        if p is None or not graph.is_float_type(elt_of(p)):
            return
        block = op.parent_block()
        if block is None or p not in finite_values(block, stop=op):
            return
        rewriter.replace(op, [], [p])


def repeated_heads(value: SSAValue) -> tuple[SSAValue, int] | None:
    """
    `(u, j)` if `value` is `reshape(expand(u))` (or `reshape(concat(u, ..., u))`) where
    `u` has a unit dimension `j` that is repeated and then merged into dimension `j - 1`.
    """
    reshape = owner_of(value, graph.ReshapeOp)
    if reshape is None:
        return None
    rep = reshape.input.owner
    if isinstance(rep, graph.ExpandOp):
        u = rep.input
    elif (
        isinstance(rep, graph.ConcatOp)
        and len(rep.inputs) > 1
        and len(set(rep.inputs)) == 1
    ):
        u = rep.inputs[0]
    else:
        return None
    before, after = shape_of(u), shape_of(rep.results[0])
    if len(before) != len(after):
        return None
    diff = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    if len(diff) != 1 or before[diff[0]] != 1 or diff[0] == 0:
        return None
    j = diff[0]
    if isinstance(rep, graph.ConcatOp) and rep.axis.value.data % len(after) != j:
        return None
    merged = (*after[: j - 1], after[j - 1] * after[j], *after[j + 1 :])
    return (u, j) if shape_of(value) == merged else None


class UnrepeatKv(RewritePattern):
    """
    `matmul(a, repeat_kv(u))` -> `reshape(matmul(reshape(a, [.., hkv, g, ..]), u))`: the
    query heads are regrouped by K/V head and `u`'s unit dimension broadcasts over `g`.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.MatmulOp, rewriter: PatternRewriter, /):
        rep = repeated_heads(op.rhs)
        if rep is None:
            return
        u, j = rep
        a_shape, rhs_shape = shape_of(op.lhs), shape_of(op.rhs)
        if len(a_shape) != len(rhs_shape) or j - 1 >= len(rhs_shape) - 2:
            return  # the repeated dimension must be a batch dimension of both operands
        heads = rhs_shape[j - 1]
        if a_shape[j - 1] != heads:
            return
        hkv = shape_of(u)[j - 1]
        g = heads // hkv
        grouped = graph.ReshapeOp(op.lhs, (*a_shape[: j - 1], hkv, g, *a_shape[j:]))
        mm = graph.MatmulOp(
            grouped, u, op.transpose_a is not None, op.transpose_b is not None
        )
        out = graph.ReshapeOp(mm, shape_of(op.result))
        rewriter.replace(op, [grouped, mm, out])


def _swapped(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (*shape[:-2], shape[-1], shape[-2])


def _transposed_below_reshape(value: SSAValue) -> tuple[SSAValue, list[Operation]] | None:
    """
    `(x, ops)` if `value` is `transpose(x)` swapping the last two dimensions, under
    reshapes and expands (`ops`, outermost first) that keep the last two dimensions: then
    `value` is those reshapes and expands of `x` with their last two dimensions swapped.
    """
    chain: list[Operation] = []
    while True:
        op = value.owner
        if isinstance(op, graph.TransposeOp) and swaps_last_two(perm_of(op)) and chain:
            return op.input, chain
        if not isinstance(op, graph.ReshapeOp | graph.ExpandOp) or len(chain) > _MAX_DEPTH:
            return None
        src, dst = shape_of(op.input), shape_of(op.result)
        if len(src) < 2 or len(dst) < 2 or src[-2:] != dst[-2:]:
            return None
        chain.append(op)
        value = op.input


class TransposedOperandThroughReshape(RewritePattern):
    """
    `matmul(a, reshape(transpose(x)))` -> `matmul(a, reshape(x)) transpose_b` (likewise
    for `a`, and through several reshapes and expands) when the transpose swaps the last
    two dimensions and the reshapes and expands touch only batch dimensions: the `Kᵀ`
    of repeated heads disappears into the matmul's flags.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.MatmulOp, rewriter: PatternRewriter, /):
        ta, tb = op.transpose_a is not None, op.transpose_b is not None
        lhs, rhs = op.lhs, op.rhs
        new_ops: list[Operation] = []
        for side in (0, 1):
            found = _transposed_below_reshape(lhs if side == 0 else rhs)
            if found is None:
                continue
            value, chain = found
            for m in reversed(chain):
                shape = _swapped(shape_of(m.results[0]))
                if isinstance(m, graph.ExpandOp):
                    new: Operation = graph.ExpandOp(value, shape)
                else:
                    new = graph.ReshapeOp(value, shape)
                new_ops.append(new)
                value = new.results[0]
            if side == 0:
                lhs, ta = value, not ta
            else:
                rhs, tb = value, not tb
        if not new_ops:
            return
        rewriter.replace(op, [*new_ops, graph.MatmulOp(lhs, rhs, ta, tb)])


_ROWWISE = (graph.SoftmaxOp, graph.BinaryElementwiseOp, *UNARY_ELEMENTWISE)


def _from_matmul(value: SSAValue, depth: int = 0) -> bool:
    """Whether `value` is a matmul's result, possibly through row-wise ops."""
    op = value.owner
    if isinstance(op, graph.MatmulOp):
        return True
    if depth > _MAX_DEPTH or not isinstance(op, _ROWWISE):
        return False
    return any(_from_matmul(v, depth + 1) for v in op.operands)


def _kept_tail(src: tuple[int, ...], dst: tuple[int, ...]) -> int:
    """How many trailing dimensions a reshape from `src` to `dst` keeps."""
    t = 0
    while t < min(len(src), len(dst)) and src[-1 - t] == dst[-1 - t]:
        t += 1
    return t


def _merged_product(value: SSAValue) -> tuple[SSAValue, int] | None:
    """
    `(x, t)` if `value` is `reshape(x)` merging leading dimensions of a product `x` (a
    matmul, possibly through row-wise ops) and keeping its last `t >= 2` dimensions.
    """
    reshape = owner_of(value, graph.ReshapeOp)
    if reshape is None or not value.has_one_use():
        return None
    src, dst = shape_of(reshape.input), shape_of(value)
    t = _kept_tail(src, dst)
    if len(src) <= len(dst) or t < 2 or not _from_matmul(reshape.input):
        return None
    return reshape.input, t


class SinkGroupedReshape(RewritePattern):
    """
    `f(reshape(x))` -> `reshape(f(x))` for a row-wise `f` (softmax over a kept
    dimension, elementwise ops, a mask added) when the reshape merges the leading
    dimensions of a product — the query groups `[.., hkv, g, ..]` of `UnrepeatKv` back
    into heads — so that scores, mask, softmax and the product with V stay in the
    grouped shape, one attention that `neptune-fuse` fuses, and the reshapes cancel.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.GraphOp, rewriter: PatternRewriter, /):
        if not isinstance(op, _ROWWISE):
            return
        for i, v in enumerate(op.operands):
            found = _merged_product(v)
            if found is None:
                continue
            x, t = found
            rank_x, out = len(shape_of(x)), shape_of(op.results[0])
            if out != shape_of(v):
                return  # the other operand widens the result
            new_ops: list[Operation] = []
            if isinstance(op, graph.SoftmaxOp):
                axis = op.axis.value.data % len(out)
                if axis < len(out) - t:
                    return
                inner: Operation = graph.SoftmaxOp(x, axis - len(out) + rank_x)
            elif isinstance(op, graph.BinaryElementwiseOp):
                other = op.operands[1 - i]
                regrouped = _regroup(other, t, rank_x)
                if regrouped is None:
                    return
                new_ops.append(regrouped)
                a, b = (x, regrouped.results[0]) if i == 0 else (regrouped.results[0], x)
                inner = type(op)(a, b)
            else:
                inner = rebuild_unary(op, x)
            rewriter.replace(op, [*new_ops, inner, graph.ReshapeOp(inner, out)])
            return


def _regroup(other: SSAValue, t: int, rank: int) -> Operation | None:
    """`other` reshaped to rank `rank` if it varies only along the last `t` dimensions."""
    shape = shape_of(other)
    lead, tail = shape[: max(len(shape) - t, 0)], shape[max(len(shape) - t, 0) :]
    if any(d != 1 for d in lead):
        return None
    new = (1,) * (rank - len(tail)) + tuple(tail)
    array = const_array(other)
    if array is not None:
        return constant_op(array.reshape(new), elt_of(other))
    return graph.ReshapeOp(other, new)


ATTENTION_PATTERNS: tuple[type[RewritePattern], ...] = (
    RemoveNanGuard,
    TransposedOperandThroughReshape,
)

GROUPED_KV_PATTERNS: tuple[type[RewritePattern], ...] = (UnrepeatKv, SinkGroupedReshape)
"""Grouped-query attention in the grouped shape (the pass's `unrepeat-kv` option)."""

__all__ = [
    "ATTENTION_PATTERNS",
    "GROUPED_KV_PATTERNS",
    "finite_values",
    "rows_have_finite",
]
