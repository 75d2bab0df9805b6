"""
Local simplifications: no-op removal, reshape composition and constant folding.

- `graph.cast` to the same type, `graph.reshape` / `graph.expand` to the same shape, a
  `graph.slice` that keeps everything, `graph.pad` by nothing, `graph.scale` by 1,
  `graph.pow` by 1 and a one-input `graph.concat` are their input;
- `graph.where` with a constant condition that is all true (all false) is its `lhs`
  (`rhs`) when that already has the result's type;
- `reshape(reshape(x))` is one reshape, a `graph.transpose` that only moves unit
  dimensions (the others keep their order) is a reshape, and transposes move above
  expands and above reshapes of the dimensions they keep, so that the reshapes and
  transposes that split and merge attention heads compose;
- an op whose operands are all constants is evaluated with the reference semantics when
  that is cheap: its results hold at most `FOLD_LIMIT` elements or no more than its
  largest operand (folding never inflates a small constant into a large one, such as an
  `expand` of a scalar), and products (`matmul`, `conv2d`, `pool`) only of operands of
  at most `FOLD_LIMIT` elements.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from plmr.dialects import graph
from plmr.errors import PlmrError
from plmr.passes.canonicalize.match import (
    const_array,
    constant_op,
    elt_of,
    owner_of,
    shape_of,
)
from plmr.passes.transpose_elim import UNARY_ELEMENTWISE, perm_of, rebuild_unary
from plmr.runtime.reference import GRAPH_IMPLS
from plmr.values import tensor_dtype

FOLD_LIMIT = 1024
"""Results of at most this many elements are always folded."""

_NOT_LINEAR = (graph.MatmulOp, graph.Conv2dOp, graph.PoolOp)
"""Ops whose cost grows faster than their operands: folded only on small constants."""


def _noop_input(op: Operation) -> SSAValue | None:
    """The operand an op returns unchanged, if it is a no-op."""
    if isinstance(op, graph.CastOp | graph.ReshapeOp | graph.ExpandOp):
        return op.input if op.input.type == op.result.type else None
    if isinstance(op, graph.SliceOp | graph.PadOp):
        return op.input if op.input.type == op.result.type and _keeps_all(op) else None
    if isinstance(op, graph.ScaleOp):
        return op.input if op.factor.value.data == 1.0 else None
    if isinstance(op, graph.PowOp):
        return op.input if op.exponent.value.data == 1.0 else None
    if isinstance(op, graph.ConcatOp) and len(op.inputs) == 1:
        return op.inputs[0]
    if isinstance(op, graph.WhereOp):
        return _where_branch(op)
    return None


def _keeps_all(op: graph.SliceOp | graph.PadOp) -> bool:
    if isinstance(op, graph.PadOp):
        return not any(op.pads.get_values())
    shape = shape_of(op.input)
    starts, ends, steps = (
        op.starts.get_values(),
        op.ends.get_values(),
        op.steps.get_values(),
    )
    return all(
        (s, e, st) == (0, d, 1) or d <= 1
        for s, e, st, d in zip(starts, ends, steps, shape, strict=True)
    )


def _where_branch(op: graph.WhereOp) -> SSAValue | None:
    cond = const_array(op.condition)
    if cond is None or cond.size == 0:
        return None
    if bool(np.all(cond)):
        branch = op.lhs
    elif not bool(np.any(cond)):
        branch = op.rhs
    else:
        return None
    return branch if branch.type == op.result.type else None


class RemoveNoOps(RewritePattern):
    """Replaces a no-op (see the module docstring) by its input."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.GraphOp, rewriter: PatternRewriter, /):
        value = _noop_input(op)
        if value is not None:
            rewriter.replace(op, [], [value])


class ComposeReshapes(RewritePattern):
    """`reshape(reshape(x))` -> `reshape(x)`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.ReshapeOp, rewriter: PatternRewriter, /):
        inner = owner_of(op.input, graph.ReshapeOp)
        if inner is None:
            return
        rewriter.replace(op, graph.ReshapeOp(inner.input, shape_of(op.result)))


class UnitTransposeToReshape(RewritePattern):
    """A transpose that moves only unit dimensions -> a reshape."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.TransposeOp, rewriter: PatternRewriter, /):
        shape = shape_of(op.input)
        moved = [p for p in perm_of(op) if shape[p] != 1]
        if moved != sorted(moved):
            return
        rewriter.replace(op, graph.ReshapeOp(op.input, shape_of(op.result)))


class HoistTranspose(RewritePattern):
    """
    Moves a transpose above the op that made its input, when that op has no other user:
    `transpose(expand(u))` -> `expand(transpose(u))` (fewer elements move), and
    `transpose(reshape(x))` -> `reshape(transpose(x))` when the reshape only regroups
    leading dimensions that the transpose keeps in place (exporters flatten
    `[b, h, s, d]` to `[b·h, s, d]` to transpose `Kᵀ`); the transpose then meets the
    one that split the heads, or the repeated K/V, or the matmul.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.TransposeOp, rewriter: PatternRewriter, /):
        perm = perm_of(op)
        inner = op.input.owner
        if not op.input.has_one_use():
            return
        if isinstance(inner, graph.ExpandOp):
            u = inner.input
            if len(shape_of(u)) != len(perm):
                return
            t = graph.TransposeOp(u, perm)
            rewriter.replace(op, [t, graph.ExpandOp(t, shape_of(op.result))])
            return
        if not isinstance(inner, graph.ReshapeOp):
            return
        fixed = next((i for i, p in enumerate(perm) if p != i), len(perm))
        tail = len(perm) - fixed
        src = shape_of(inner.input)
        if (
            tail == 0
            or tail > len(src)
            or src[len(src) - tail :] != shape_of(inner.result)[fixed:]
        ):
            return
        lead = len(src) - tail
        new_perm = (*range(lead), *(lead + p - fixed for p in perm[fixed:]))
        t = graph.TransposeOp(inner.input, new_perm)
        rewriter.replace(op, [t, graph.ReshapeOp(t, shape_of(op.result))])


class HoistUnary(RewritePattern):
    """
    `f(m(x))` -> `m(f(x))` for a unary elementwise `f` (e.g. the `scale` exporters put
    on `Kᵀ`) and `m` a reshape or an expand with no other user: `f` runs on fewer
    elements (before an expand), and the reshapes and transposes that follow meet.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.GraphOp, rewriter: PatternRewriter, /):
        if not isinstance(op, UNARY_ELEMENTWISE):
            return
        m = op.operands[0].owner
        if not isinstance(m, graph.ExpandOp | graph.ReshapeOp):
            return
        if not m.result.has_one_use():
            return
        inner = rebuild_unary(op, m.input)
        if isinstance(m, graph.ExpandOp):
            outer = graph.ExpandOp(inner, shape_of(m.result))
        else:
            outer = graph.ReshapeOp(inner, shape_of(m.result))
        rewriter.replace(op, [inner, outer])


_FOLDABLE: tuple[type[Attribute], ...] = (
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
)


def _foldable_type(value: SSAValue) -> bool:
    """Whether a constant of this element type round-trips through numpy exactly."""
    elt = elt_of(value)
    if isinstance(elt, BFloat16Type) or not isinstance(elt, _FOLDABLE):
        return False
    if isinstance(elt, IntegerType):
        return elt.bitwidth in (1, 8, 16, 32, 64)
    return True


class FoldConstants(RewritePattern):
    """An op whose operands are all constants -> constants (when cheap, see above)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.GraphOp, rewriter: PatternRewriter, /):
        if isinstance(op, graph.ConstantOp) or not op.operands:
            return
        impl = GRAPH_IMPLS.get(type(op))
        if impl is None:
            return
        arrays = [const_array(v) for v in op.operands]
        if any(a is None for a in arrays):
            return
        largest = max(a.size for a in arrays if a is not None)
        limit = max(FOLD_LIMIT, largest)
        results = list(op.results)
        if any(math.prod(shape_of(r)) > limit or not _foldable_type(r) for r in results):
            return
        if isinstance(op, _NOT_LINEAR) and largest > FOLD_LIMIT:
            return  # a product of large constants is work for the wafer, not the compiler
        if not all(_foldable_type(v) for v in op.operands):
            return
        try:
            with np.errstate(all="ignore"):
                values = impl(op, [a for a in arrays if a is not None])
        except PlmrError:
            return  # e.g. an out-of-range gather: leave it for the interpreter to report
        constants = [
            constant_op(
                np.asarray(v).astype(tensor_dtype(r.type)).reshape(shape_of(r)), elt_of(r)
            )
            for v, r in zip(values, results, strict=True)
        ]
        rewriter.replace(op, constants, [c.result for c in constants])


SIMPLIFY_PATTERNS: tuple[type[RewritePattern], ...] = (
    RemoveNoOps,
    ComposeReshapes,
    UnitTransposeToReshape,
    HoistTranspose,
    HoistUnary,
    FoldConstants,
)
