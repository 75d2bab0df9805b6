"""
RoPE's `rotate_half`, recognised as a product with a constant signed permutation.

HF's `rotate_half(x) = cat((-x[..., d/2:], x[..., :d/2]), -1)` is exported as two
`Slice`s, a `Neg` and a `Concat` of computed values, which plmr's mesh lowering cannot
build (it has no concatenation of computed values). `RotateHalfAsMatmul` rewrites any
concatenation along the last axis of (possibly negated) slices of one tensor `x` into
`graph.matmul x, R` with `R` the constant `[d_in, d_out]` matrix holding one `±1` per
column (`R[i, j] = ±1` when output position `j` is input position `i`).

Why a matmul: it is the form every level of plmr already handles well — the product
with a constant weight is the operation the mesh lowering is built for, and `x` needs no
re-layout. It is exact for finite `x`: each output is `±x_i` plus products `0 · x_k = ±0`,
and adding zeros changes no value. It costs `d` multiply-adds per element, so it is only
used up to `ROTATE_LIMIT` columns (RoPE rotates one head, `d` = 64 or 128). When the
pieces are `x`'s own dimensions in order and unsigned, the concatenation is `x` itself.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from plmr.dialects import graph
from plmr.passes.canonicalize.match import constant_op, elt_of, owner_of, shape_of

ROTATE_LIMIT = 1024
"""The largest `d_in` or `d_out` turned into a matmul (`R` holds `d_in · d_out` values)."""


def _negated(value: SSAValue) -> tuple[SSAValue, float]:
    """`(v, -1)` if `value` is `-v` (`neg` or `scale by -1`), else `(value, 1)`."""
    neg = owner_of(value, graph.NegOp)
    if neg is not None:
        return neg.input, -1.0
    scale = owner_of(value, graph.ScaleOp)
    if scale is not None and scale.factor.value.data == -1.0:
        return scale.input, -1.0
    return value, 1.0


def _last_axis_piece(value: SSAValue) -> tuple[SSAValue, list[int]] | None:
    """`(x, indices)` if `value` is `x[..., indices]` by a `slice` or a `split` of `x`."""
    sl = owner_of(value, graph.SliceOp)
    if sl is not None:
        shape = shape_of(sl.input)
        starts, ends, steps = (
            sl.starts.get_values(),
            sl.ends.get_values(),
            sl.steps.get_values(),
        )
        for s, e, st, d in zip(starts[:-1], ends[:-1], steps[:-1], shape[:-1], strict=True):
            if (s, e, st) != (0, d, 1) and d != 1:
                return None
        end = ends[-1] if ends[-1] >= 0 else None
        return sl.input, list(range(shape[-1]))[starts[-1] : end : steps[-1]]
    split = owner_of(value, graph.SplitOp)
    if split is not None:
        rank = len(shape_of(split.input))
        if split.axis.value.data % rank != rank - 1:
            return None
        sizes = split.sizes.get_values()
        k = next(i for i, r in enumerate(split.outputs) if r == value)
        start = sum(sizes[:k])
        return split.input, list(range(start, start + sizes[k]))
    return None


class RotateHalfAsMatmul(RewritePattern):
    """`concat(-x[..., d/2:], x[..., :d/2])` -> `matmul(x, R)` (see above)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.ConcatOp, rewriter: PatternRewriter, /):
        out = shape_of(op.result)
        if len(op.inputs) < 2 or not out or op.axis.value.data % len(out) != len(out) - 1:
            return
        if not graph.is_float_type(elt_of(op.result)):
            return
        pieces: list[tuple[SSAValue | None, list[int], float]] = []
        source: SSAValue | None = None
        for v in op.inputs:
            base, sign = _negated(v)
            piece = _last_axis_piece(base)
            if piece is None:
                pieces.append((base, [], sign))
                continue
            if source is not None and piece[0] != source:
                return
            source = piece[0]
            pieces.append((None, piece[1], sign))
        if source is None:
            return
        x_shape = shape_of(source)
        if x_shape[:-1] != out[:-1] or max(x_shape[-1], out[-1]) > ROTATE_LIMIT:
            return
        rows = np.zeros((x_shape[-1], out[-1]))
        col = 0
        for whole, indices, sign in pieces:
            if whole is not None:  # a piece that is all of `x`
                if whole != source:
                    return
                indices = list(range(x_shape[-1]))
            for i in indices:
                rows[i, col] = sign
                col += 1
        if rows.shape[0] == rows.shape[1] and bool(np.all(rows == np.eye(rows.shape[0]))):
            rewriter.replace(op, [], [source])
            return
        r = constant_op(rows, elt_of(source))
        if len(x_shape) == 1:
            # A vector: the product of the row [1, d_in] by R, flattened again.
            row = graph.ReshapeOp(source, [1, x_shape[0]])
            product = graph.MatmulOp(row, r)
            flat = graph.ReshapeOp(product, [out[-1]])
            rewriter.replace(op, [r, row, product, flat])
            return
        rewriter.replace(op, [r, graph.MatmulOp(source, r)])


ROPE_PATTERNS = (RotateHalfAsMatmul,)
