"""
`graph-defer-norm-scale`: apply an RMSNorm's per-row scale after the matmul that reads it.

The inverse RMS of a row is one scalar, so it commutes with the contraction over the
normalised dimension:

    rmsnorm(x, g) @ W  =  ((x · g) @ W) · (1 / sqrt(mean(x²) + eps))      (row by row)

After the rewrite the mean square and the matmul read `x` independently: on a wafer the
mean square's allreduce and the matrix-vector product's allreduce are siblings along the
same axis (`mesh-pack-allreduces` sends both in one message), and the scale lands on the
matmul's few outputs, where the loop fusion folds the multiply into their consumer's map
(the inverse RMS, one value per row, is computed once, at the end of the mean square's
nest). `x · g` is written before the mean square, so that the matmul directly follows
its sibling.

A matmul is rewritten when its left operand is a `graph.rmsnorm`, possibly seen through
`graph.reshape`s whose result still has the normalised elements as its last dimension
(they regroup rows or add unit dimensions), and the matmul contracts that dimension (no
`transpose_a`), its result goes on to another op than the function's return (a consumer
to fold the multiply into), and the norm has at most `max-rows` rows (default
`MAX_ROWS`: one). The norm's other users keep it; a norm left without users goes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from plmr.dialects import graph
from plmr.errors import PassOptionError
from plmr.passes.canonicalize.match import constant_op, elt_of, shape_of
from plmr.passes.dead_ops import erase_dead

MAX_ROWS = 1
"""
The norms rewritten by default: of one row (decode's token), whose matmul is a
matrix-vector product the mesh reduces with an allreduce that the mean square's can
share. A norm of many rows (prefill) feeds a matrix product with no such allreduce, and
its scale would multiply the product's outputs (`3·dim` for Q, K and V, `2·ffn` for the
FFN) instead of the norm's `dim` inputs.
"""


def _reading_matmuls(norm: graph.RmsNormOp) -> list[graph.MatmulOp]:
    """The matmuls whose left operand is `norm`'s result through reshapes only."""
    found: list[graph.MatmulOp] = []
    pending: list[SSAValue] = [norm.result]
    while pending:
        value = pending.pop()
        for use in value.uses:
            user = use.operation
            if isinstance(user, graph.ReshapeOp):
                pending.append(user.result)
            elif isinstance(user, graph.MatmulOp) and use.index == 0:
                found.append(user)
    return found


def _only_returned(value: SSAValue) -> bool:
    """Whether `value` reaches nothing but the function's results (through reshapes)."""
    for use in value.uses:
        user = use.operation
        if isinstance(user, graph.ReshapeOp):
            if not _only_returned(user.result):
                return False
        elif not isinstance(user, func.ReturnOp):
            return False
    return True


def _deferrable(matmul: graph.MatmulOp, norm: graph.RmsNormOp) -> bool:
    """
    Whether `matmul` contracts exactly the elements `norm` normalises, row by row, and
    has a consumer to take the scale.
    """
    if matmul.transpose_a is not None:
        return False
    # Returned as is (the logits): no consumer to fold the multiply into; on the mesh
    # it would follow the GEMV's reduction in its nest, which then allreduces each
    # block instead of its whole share once.
    if _only_returned(matmul.result):
        return False
    shape = shape_of(norm.result)
    axis = graph.normalize_axis(norm.axis.value.data, len(shape))
    lhs, rhs = shape_of(matmul.lhs), shape_of(matmul.rhs)
    # A vector operand drops a dimension of the product: the scale has no row to go to.
    if len(lhs) < 2 or len(rhs) < 2:
        return False
    return lhs[-1] == int(np.prod(shape[axis:]))


@dataclass
class _Scale:
    """What the matmuls of one norm share: `x · g` and the inverse RMS of each row."""

    scaled_input: SSAValue
    rstd: SSAValue


def _build_scale(norm: graph.RmsNormOp) -> tuple[list[Operation], _Scale]:
    x = norm.input
    shape = shape_of(x)
    axis = graph.normalize_axis(norm.axis.value.data, len(shape))
    base = norm.result.name_hint or "norm"
    square = graph.MulOp(x, x)
    mean = graph.ReduceOp(
        graph.ReduceKind.MEAN, square, list(range(axis, len(shape))), keepdims=True
    )
    eps = constant_op(np.array(norm.epsilon.value.data), elt_of(x))
    shifted = graph.AddOp(mean, eps)
    rms = graph.SqrtOp(shifted)
    rstd = graph.ReciprocalOp(rms)
    scaled = graph.MulOp(x, norm.weight)
    mean.result.name_hint = f"{base}_ms"
    rstd.result.name_hint = f"{base}_rstd"
    scaled.result.name_hint = f"{base}_xg"
    # `x · g` first: the matmul then directly follows the mean square, its sibling.
    ops: list[Operation] = [scaled, square, mean, eps, shifted, rms, rstd]
    return ops, _Scale(scaled.result, rstd.result)


def _reshaped(value: SSAValue, shape: tuple[int, ...]) -> tuple[list[Operation], SSAValue]:
    if shape_of(value) == shape:
        return [], value
    r = graph.ReshapeOp(value, shape)
    return [r], r.result


def _defer(matmul: graph.MatmulOp, scale: _Scale) -> list[Operation]:
    """`matmul` on `x · g`, times the inverse RMS of each of its rows."""
    lhs_shape = shape_of(matmul.lhs)
    lhs_ops, lhs = _reshaped(scale.scaled_input, lhs_shape)
    product = graph.MatmulOp(lhs, matmul.rhs, transpose_b=matmul.transpose_b is not None)
    rstd_ops, rstd = _reshaped(scale.rstd, (*lhs_shape[:-1], 1))
    out = graph.MulOp(product, rstd)
    name = matmul.result.name_hint
    if name:
        product.result.name_hint = name
        out.result.name_hint = f"{name}_scaled"
    return [*lhs_ops, product, *rstd_ops, out]


def _rows(norm: graph.RmsNormOp) -> int:
    shape = shape_of(norm.input)
    return math.prod(shape[: graph.normalize_axis(norm.axis.value.data, len(shape))])


@dataclass
class DeferNormScale(RewritePattern):
    """Rewrites the matmuls that read a `graph.rmsnorm` of at most `max_rows` rows."""

    max_rows: int
    deferred: int = 0
    """How many matmuls this pattern rewrote."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, norm: graph.RmsNormOp, rewriter: PatternRewriter) -> None:
        if _rows(norm) > self.max_rows:
            return
        matmuls = [m for m in _reading_matmuls(norm) if _deferrable(m, norm)]
        if not matmuls:
            return
        ops, scale = _build_scale(norm)
        rewriter.insert(ops, InsertPoint.after(norm))
        for matmul in matmuls:
            new = _defer(matmul, scale)
            rewriter.insert(new, InsertPoint.before(matmul))
            rewriter.replace_all_uses_with(matmul.result, new[-1].results[0])
            erase_dead(matmul, rewriter)
            self.deferred += 1


def defer_norm_scales(module: ModuleOp, max_rows: int = MAX_ROWS) -> int:
    """
    Rewrites every matmul of a `graph.rmsnorm` of at most `max_rows` rows (see the
    module), in one walk; returns how many.
    """
    pattern = DeferNormScale(max_rows)
    PatternRewriteWalker(pattern, apply_recursively=False).rewrite_module(module)
    return pattern.deferred


@dataclass(frozen=True)
class GraphDeferNormScalePass(ModulePass):
    """
    Moves each RMSNorm's scale by the inverse RMS past the matmuls that read the norm.

    ```mlir
    // before
    %n = graph.rmsnorm %x, %g epsilon = 1.000000e-05 : (tensor<1x64xf32>, tensor<64xf32>) -> tensor<1x64xf32>
    %y = graph.matmul %n, %w : (tensor<1x64xf32>, tensor<64x32xf32>) -> tensor<1x32xf32>
    // after
    %n_xg = graph.mul %x, %g : (tensor<1x64xf32>, tensor<64xf32>) -> tensor<1x64xf32>
    %sq = graph.mul %x, %x : (tensor<1x64xf32>, tensor<1x64xf32>) -> tensor<1x64xf32>
    %n_ms = graph.reduce mean %sq axes = [1] keepdims : tensor<1x64xf32> -> tensor<1x1xf32>
    %eps = graph.constant dense<1.000000e-05> : tensor<f32>
    %v = graph.add %n_ms, %eps : (tensor<1x1xf32>, tensor<f32>) -> tensor<1x1xf32>
    %rms = graph.sqrt %v : tensor<1x1xf32>
    %n_rstd = graph.reciprocal %rms : tensor<1x1xf32>
    %y = graph.matmul %n_xg, %w : (tensor<1x64xf32>, tensor<64x32xf32>) -> tensor<1x32xf32>
    %y_scaled = graph.mul %y, %n_rstd : (tensor<1x32xf32>, tensor<1x1xf32>) -> tensor<1x32xf32>
    ```
    """

    name = "graph-defer-norm-scale"

    max_rows: int = MAX_ROWS
    """Rewrite the norms of at most this many rows (`MAX_ROWS`)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.max_rows < 1:
            raise PassOptionError(
                f"graph-defer-norm-scale: max-rows must be at least 1, got {self.max_rows}"
            )
        defer_norm_scales(op, self.max_rows)


__all__ = ["GraphDeferNormScalePass", "defer_norm_scales"]
