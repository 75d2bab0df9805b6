"""
`transpose-elim`: remove `graph.transpose` ops, after WaferLLM's "avoid transposes".

A transpose on a wafer moves every element across the mesh (corner to corner), so plmr
gets rid of as many as it can at the graph level:

- cancel `transpose(transpose(x))` and compose two transposes into one;
- absorb a transpose of the last two dimensions into `graph.matmul`'s `transpose_a` /
  `transpose_b`, and turn `transpose(matmul(a, b))` into `matmul(b, a)` with flipped flags;
- push transposes through elementwise ops (below unary ones, above them onto a matmul
  they then disappear into, and out of binary ones and concats whose operands are all
  transposed the same way or constant), where they meet and cancel or reach a matmul;
- fold transposes of constants (pre-transposed weights).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from plmr.dialects import graph
from plmr.dialects.narrow import expect
from plmr.values import constant_attr, dense_to_numpy

UNARY_ELEMENTWISE = (
    graph.ReluOp,
    graph.GeluOp,
    graph.SiluOp,
    graph.SigmoidOp,
    graph.TanhOp,
    graph.ExpOp,
    graph.ErfOp,
    graph.SqrtOp,
    graph.NegOp,
    graph.ScaleOp,
    graph.NotOp,
    graph.AbsOp,
    graph.LogOp,
    graph.CosOp,
    graph.SinOp,
    graph.FloorOp,
    graph.CeilOp,
    graph.ReciprocalOp,
    graph.PowOp,
    graph.CastOp,
)


def perm_of(op: graph.TransposeOp) -> tuple[int, ...]:
    return tuple(op.perm.get_values())


def swaps_last_two(perm: Sequence[int]) -> bool:
    """Whether `perm` swaps the last two dimensions and keeps the others in place."""
    n = len(perm)
    return n >= 2 and tuple(perm) == (*range(n - 2), n - 1, n - 2)


def inverse(perm: Sequence[int]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _transpose_of(value: SSAValue) -> graph.TransposeOp | None:
    owner = value.owner
    return owner if isinstance(owner, graph.TransposeOp) else None


def _single_use(op: Operation) -> bool:
    return len(op.results) == 1 and op.results[0].has_one_use()


def constant_transposed(value: SSAValue, perm: Sequence[int]) -> graph.ConstantOp | None:
    """A new constant holding `transpose(value, perm)` if `value` is a constant."""
    owner = value.owner
    if not isinstance(owner, graph.ConstantOp):
        return None
    array: np.ndarray[Any, Any] = np.transpose(dense_to_numpy(owner.value), perm)
    return graph.ConstantOp(constant_attr(array, graph.element_type(value)))


class ComposeTransposes(RewritePattern):
    """`transpose(transpose(x, p), q)` -> `transpose(x, p∘q)`, or `x` if that is the identity."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.TransposeOp, rewriter: PatternRewriter, /):
        perm = perm_of(op)
        if perm == tuple(range(len(perm))):
            rewriter.replace(op, [], [op.input])
            return
        inner = _transpose_of(op.input)
        if inner is None:
            return
        first = perm_of(inner)
        composed = tuple(first[p] for p in perm)
        if composed == tuple(range(len(composed))):
            rewriter.replace(op, [], [inner.input])
            return
        rewriter.replace(op, graph.TransposeOp(inner.input, composed))


class FoldConstantTranspose(RewritePattern):
    """`transpose(constant)` -> a pre-transposed constant."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.TransposeOp, rewriter: PatternRewriter, /):
        folded = constant_transposed(op.input, perm_of(op))
        if folded is None:
            return
        rewriter.replace(op, folded)


class AbsorbIntoMatmul(RewritePattern):
    """`matmul(transpose(a), b)` -> `matmul(a, b) transpose_a` (same for `b`)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.MatmulOp, rewriter: PatternRewriter, /):
        ta, tb = op.transpose_a is not None, op.transpose_b is not None
        lhs, rhs = op.lhs, op.rhs
        changed = False
        t = _transpose_of(lhs)
        if t is not None and swaps_last_two(perm_of(t)):
            lhs, ta, changed = t.input, not ta, True
        t = _transpose_of(rhs)
        if t is not None and swaps_last_two(perm_of(t)):
            rhs, tb, changed = t.input, not tb, True
        if not changed:
            return
        rewriter.replace(op, graph.MatmulOp(lhs, rhs, ta, tb))


class TransposeOfMatmul(RewritePattern):
    """`transpose(matmul(a, b))` -> `matmul(b, a)` with flipped flags: `(AB)ᵀ = BᵀAᵀ`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.TransposeOp, rewriter: PatternRewriter, /):
        mm = op.input.owner
        if not isinstance(mm, graph.MatmulOp) or not _single_use(mm):
            return
        if not swaps_last_two(perm_of(op)):
            return
        ta, tb = mm.transpose_a is not None, mm.transpose_b is not None
        rewriter.replace(op, graph.MatmulOp(mm.rhs, mm.lhs, not tb, not ta))


def rebuild_unary(op: Operation, value: SSAValue) -> Operation:
    """The same unary elementwise op applied to another value."""
    if isinstance(op, graph.ScaleOp):
        return graph.ScaleOp(value, op.factor)
    if isinstance(op, graph.GeluOp):
        return graph.GeluOp(value, op.tanh is not None)
    if isinstance(op, graph.PowOp):
        return graph.PowOp(value, op.exponent)
    if isinstance(op, graph.CastOp):
        return graph.CastOp(value, graph.element_type(op.result))
    unary = expect(op, graph.UnaryElementwiseOp, "an op moved past a transpose")
    return type(unary)(value)


class SinkThroughUnary(RewritePattern):
    """`f(transpose(x))` -> `transpose(f(x))` for elementwise `f`, moving it to its users."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.GraphOp, rewriter: PatternRewriter, /):
        if not isinstance(op, UNARY_ELEMENTWISE):
            return
        t = _transpose_of(op.operands[0])
        if t is None or not _single_use(t):
            return
        mm = t.input.owner
        if (
            isinstance(mm, graph.MatmulOp)
            and _single_use(mm)
            and swaps_last_two(perm_of(t))
        ):
            return  # the transpose disappears into the matmul instead
        inner = rebuild_unary(op, t.input)
        rewriter.replace(op, [inner, graph.TransposeOp(inner, perm_of(t))])


class HoistThroughUnaryIntoMatmul(RewritePattern):
    """
    `transpose(f(matmul(a, b)))` -> `f(transpose(matmul(a, b)))` for elementwise `f`, so
    that the transpose reaches the matmul and disappears into its flags.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.TransposeOp, rewriter: PatternRewriter, /):
        unary = op.input.owner
        if not isinstance(unary, UNARY_ELEMENTWISE) or not _single_use(unary):
            return
        mm = unary.operands[0].owner
        if not isinstance(mm, graph.MatmulOp) or not _single_use(mm):
            return
        if not swaps_last_two(perm_of(op)):
            return
        t = graph.TransposeOp(mm, perm_of(op))
        rewriter.replace(op, [t, rebuild_unary(unary, t.result)])


class HoistFromBinary(RewritePattern):
    """
    `add(transpose(a), transpose(b))` -> `transpose(add(a, b))` (also `sub`, `mul`,
    `div`), and `add(transpose(a), c)` -> `transpose(add(a, transpose⁻¹(c)))` for a
    constant `c` of the same shape.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: graph.BinaryElementwiseOp, rewriter: PatternRewriter, /
    ):
        if op.lhs.type != op.rhs.type:
            return
        tl, tr = _transpose_of(op.lhs), _transpose_of(op.rhs)
        tl = tl if tl is not None and _single_use(tl) else None
        tr = tr if tr is not None and _single_use(tr) else None
        new_ops: list[Operation] = []
        if tl is not None and tr is not None:
            if perm_of(tl) != perm_of(tr):
                return
            perm = perm_of(tl)
            lhs, rhs = tl.input, tr.input
        elif tl is not None or tr is not None:
            t = tl if tl is not None else tr
            assert t is not None
            perm = perm_of(t)
            other = op.rhs if tl is not None else op.lhs
            folded = constant_transposed(other, inverse(perm))
            if folded is None:
                return
            new_ops.append(folded)
            lhs, rhs = (
                (t.input, folded.result) if tl is not None else (folded.result, t.input)
            )
        else:
            return
        inner = type(op)(lhs, rhs)
        rewriter.replace(op, [*new_ops, inner, graph.TransposeOp(inner, perm)])


class HoistFromConcat(RewritePattern):
    """`concat(transpose(a, p), transpose(b, p))` -> `transpose(concat(a, b), p)`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.ConcatOp, rewriter: PatternRewriter, /):
        transposes = [_transpose_of(v) for v in op.inputs]
        if not transposes or any(t is None or not _single_use(t) for t in transposes):
            return
        perms = {perm_of(t) for t in transposes if t is not None}
        if len(perms) != 1:
            return
        (perm,) = perms
        rank = len(perm)
        axis = op.axis.value.data % rank
        inner = graph.ConcatOp([t.input for t in transposes if t is not None], perm[axis])
        rewriter.replace(op, [inner, graph.TransposeOp(inner, perm)])


TRANSPOSE_PATTERNS: tuple[type[RewritePattern], ...] = (
    ComposeTransposes,
    FoldConstantTranspose,
    AbsorbIntoMatmul,
    TransposeOfMatmul,
    SinkThroughUnary,
    HoistThroughUnaryIntoMatmul,
    HoistFromBinary,
    HoistFromConcat,
)


def eliminate_transposes(module: ModuleOp) -> None:
    """Runs every transpose-elimination pattern to a fixed point."""
    patterns = [p() for p in TRANSPOSE_PATTERNS]
    PatternRewriteWalker(GreedyRewritePatternApplier(patterns)).rewrite_module(module)


@dataclass(frozen=True)
class TransposeElimPass(ModulePass):
    """
    Cancels, composes, absorbs and folds `graph.transpose` ops.

    ```mlir
    // before
    %t = graph.transpose %w perm = [1, 0] : tensor<16x8xf32> -> tensor<8x16xf32>
    %y = graph.matmul %x, %t : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    // after
    %y = graph.matmul %x, %w transpose_b : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
    ```
    """

    name = "transpose-elim"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        eliminate_transposes(op)
