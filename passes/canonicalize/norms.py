"""
RMSNorm and LayerNorm spelled out op by op, recognised as `graph.rmsnorm` /
`graph.layernorm` (one reduction instead of two or three, and the norm lowering's fused
loops).

An exporter writes `LlamaRMSNorm` as `x · (1 / sqrt(mean(x·x) + eps))` (the square as
`Pow(x, 2)` or `x·x`, the inverse square root as `Reciprocal(Sqrt(·))`, `1 / Sqrt(·)`,
`Pow(·, -0.5)` or a division `x / Sqrt(·)`), followed by the weight multiply; a LayerNorm
as `(x - mean(x)) / sqrt(mean((x - mean(x))²) + eps)`, then scale and bias. The
patterns first produce a norm with a unit weight (and no bias), then fold the following
`mul` by a weight (and `add` of a bias) into it.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from plmr.dialects import graph
from plmr.passes.canonicalize.match import (
    commuted,
    const_array,
    constant_op,
    elt_of,
    owner_of,
    scalar_const,
    shape_of,
    trailing_axes,
)


def _sqrt_arg(value: SSAValue) -> SSAValue | None:
    """`v` if `value` is `sqrt(v)` (or `pow(v, 0.5)`)."""
    sqrt = owner_of(value, graph.SqrtOp)
    if sqrt is not None:
        return sqrt.input
    return _pow_arg(value, 0.5)


def _pow_arg(value: SSAValue, exponent: float) -> SSAValue | None:
    """`v` if `value` is `pow(v, exponent)`."""
    pow_op = owner_of(value, graph.PowOp)
    if pow_op is None or float(pow_op.exponent.value.data) != exponent:
        return None
    return pow_op.input


def _rsqrt_arg(value: SSAValue) -> SSAValue | None:
    """`v` if `value` is `1 / sqrt(v)`: `reciprocal(sqrt(v))`, `div(1, sqrt(v))`, `pow(v, -0.5)`."""
    recip = owner_of(value, graph.ReciprocalOp)
    if recip is not None:
        return _sqrt_arg(recip.input)
    div = owner_of(value, graph.DivOp)
    if div is not None and scalar_const(div.lhs) == 1.0:
        if shape_of(div.result) != shape_of(div.rhs):
            return None
        return _sqrt_arg(div.rhs)
    return _pow_arg(value, -0.5)


def _square_arg(value: SSAValue) -> SSAValue | None:
    """`x` if `value` is `x·x` or `pow(x, 2)`."""
    mul = owner_of(value, graph.MulOp)
    if mul is not None:
        return mul.lhs if mul.lhs == mul.rhs else None
    return _pow_arg(value, 2.0)


def _mean_arg(value: SSAValue) -> tuple[SSAValue, int] | None:
    """`(v, axis)` if `value` is `mean(v)` over its dimensions from `axis` on, kept."""
    reduce = owner_of(value, graph.ReduceOp)
    if reduce is None or reduce.kind.data != graph.ReduceKind.MEAN:
        return None
    if reduce.keepdims is None:
        return None
    axis = trailing_axes(reduce.normalized_axes(), len(shape_of(reduce.input)))
    return None if axis is None else (reduce.input, axis)


def _plus_eps(value: SSAValue) -> tuple[SSAValue, float] | None:
    """`(v, eps)` if `value` is `v + eps` with `eps` a non-negative scalar constant."""
    add = owner_of(value, graph.AddOp)
    if add is None:
        return None
    for v, c in commuted(add):
        eps = scalar_const(c)
        if eps is not None and eps >= 0.0 and shape_of(add.result) == shape_of(v):
            return v, eps
    return None


def _normalized(root: Operation) -> tuple[SSAValue, SSAValue] | None:
    """`(x, v)` if `root` is `x / sqrt(v)` or `x · rsqrt(v)` with the result shaped as `x`."""
    if isinstance(root, graph.DivOp):
        v = _sqrt_arg(root.rhs)
        pair = None if v is None else (root.lhs, v)
    elif isinstance(root, graph.MulOp):
        pair = None
        for x, inv in commuted(root):
            v = _rsqrt_arg(inv)
            if v is not None:
                pair = (x, v)
                break
    else:
        return None
    if pair is None or shape_of(root.results[0]) != shape_of(pair[0]):
        return None
    return pair


def _scaled_by_rsqrt(op: Operation) -> tuple[SSAValue, SSAValue, float] | None:
    """`(x, m, eps)` if the float op `op` is `x / sqrt(m + eps)` or `x · rsqrt(m + eps)`."""
    if not graph.is_float_type(elt_of(op.results[0])):
        return None
    pair = _normalized(op)
    if pair is None:
        return None
    shifted = _plus_eps(pair[1])
    if shifted is None:
        return None
    return pair[0], shifted[0], shifted[1]


def _unit_weight(x: SSAValue, axis: int) -> graph.ConstantOp:
    shape = shape_of(x)[axis:]
    return constant_op(np.ones(shape), elt_of(x))


class RecognizeRmsNorm(RewritePattern):
    """`x · rsqrt(mean(x·x) + eps)` (or `x / sqrt(...)`) -> `graph.rmsnorm x, 1 epsilon = eps`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: graph.BinaryElementwiseOp, rewriter: PatternRewriter, /
    ):
        found = _scaled_by_rsqrt(op)
        if found is None:
            return
        x, ms, eps = found
        mean = _mean_arg(ms)
        if mean is None or _square_arg(mean[0]) != x:
            return
        axis = mean[1]
        weight = _unit_weight(x, axis)
        norm = graph.RmsNormOp(x, weight, axis=axis - len(shape_of(x)), epsilon=eps)
        rewriter.replace(op, [weight, norm])


def _centered(value: SSAValue) -> tuple[SSAValue, int] | None:
    """`(x, axis)` if `value` is `x - mean(x)` (mean over the dimensions from `axis` on)."""
    sub = owner_of(value, graph.SubOp)
    if sub is None:
        return None
    mean = _mean_arg(sub.rhs)
    if mean is None or mean[0] != sub.lhs or shape_of(sub.result) != shape_of(sub.lhs):
        return None
    return sub.lhs, mean[1]


class RecognizeLayerNorm(RewritePattern):
    """
    `c / sqrt(mean(c·c) + eps)` with `c = x - mean(x)` (or `c · rsqrt(...)`) ->
    `graph.layernorm x, 1 epsilon = eps`. The two centerings may be separate ops.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: graph.BinaryElementwiseOp, rewriter: PatternRewriter, /
    ):
        found = _scaled_by_rsqrt(op)
        if found is None:
            return
        c, var, eps = found
        centered = _centered(c)
        if centered is None:
            return
        x, axis = centered
        mean = _mean_arg(var)
        if mean is None or mean[1] != axis:
            return
        c2 = _square_arg(mean[0])
        if c2 is None or (c2 != c and _centered(c2) != centered):
            return
        weight = _unit_weight(x, axis)
        norm = graph.LayerNormOp(x, weight, axis=axis - len(shape_of(x)), epsilon=eps)
        rewriter.replace(op, [weight, norm])


def _param_for(
    value: SSAValue, norm: tuple[int, ...]
) -> tuple[list[Operation], SSAValue] | None:
    """
    `value` as a norm parameter of the normalised shape `norm` (its leading unit dimensions
    dropped by a reshape), if it broadcasts to `norm` without widening it.
    """
    shape = shape_of(value)
    while len(shape) > len(norm) and shape[0] == 1:
        shape = shape[1:]
    if len(shape) > len(norm) or any(
        d not in (1, n) for d, n in zip(shape, norm[len(norm) - len(shape) :], strict=True)
    ):
        return None
    if shape == shape_of(value):
        return [], value
    array = const_array(value)
    if array is not None:
        c = constant_op(array.reshape(shape), elt_of(value))
        return [c], c.result
    r = graph.ReshapeOp(value, shape)
    return [r], r.result


def _is_ones(value: SSAValue) -> bool:
    return scalar_const(value) == 1.0


class FoldNormWeight(RewritePattern):
    """
    `norm(x, 1) · w` -> `norm(x, w)` for `graph.rmsnorm` and a bias-free `graph.layernorm`
    whose only user is the multiply and `w` fits the normalised shape.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.MulOp, rewriter: PatternRewriter, /):
        for n, w in commuted(op):
            norm = n.owner
            if not isinstance(norm, graph.RmsNormOp | graph.LayerNormOp):
                continue
            if isinstance(norm, graph.LayerNormOp):
                if norm.bias is not None or not _is_ones(norm.scale):
                    continue
            elif not _is_ones(norm.weight):
                continue
            if not n.has_one_use() or op.result.type != n.type:
                continue
            shape = shape_of(n)
            axis = norm.axis.value.data % len(shape)
            param = _param_for(w, shape[axis:])
            if param is None:
                continue
            new_ops, weight = param
            x, eps = norm.input, norm.epsilon.value.data
            if isinstance(norm, graph.RmsNormOp):
                new = graph.RmsNormOp(x, weight, axis=axis - len(shape), epsilon=eps)
            else:
                new = graph.LayerNormOp(x, weight, axis=axis - len(shape), epsilon=eps)
            rewriter.replace(op, [*new_ops, new])
            return


class FoldNormBias(RewritePattern):
    """`layernorm(x, g) + b` -> `layernorm(x, g, b)` when the add is its only user."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.AddOp, rewriter: PatternRewriter, /):
        for n, b in commuted(op):
            norm = owner_of(n, graph.LayerNormOp)
            if norm is None or norm.bias is not None:
                continue
            if not n.has_one_use() or op.result.type != n.type:
                continue
            shape = shape_of(n)
            axis = norm.axis.value.data % len(shape)
            param = _param_for(b, shape[axis:])
            if param is None:
                continue
            new_ops, bias = param
            new = graph.LayerNormOp(
                norm.input,
                norm.scale,
                bias,
                axis=axis - len(shape),
                epsilon=norm.epsilon.value.data,
            )
            rewriter.replace(op, [*new_ops, new])
            return


NORM_PATTERNS: tuple[type[RewritePattern], ...] = (
    RecognizeRmsNorm,
    RecognizeLayerNorm,
    FoldNormWeight,
    FoldNormBias,
)
