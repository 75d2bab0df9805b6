"""
Gathers by constant indices that only take a range: a `graph.slice` and a `graph.reshape`.

A `graph.gather` along `axis` whose indices are a constant (after counting negative
indices from the end) holding an arithmetic progression `s, s+k, .., s+(n-1)k` with
`k != 0` — a scalar index, the identity `0..V-1` (BERT's attention mask, imported from a
GatherND), a contiguous or strided range, reversed or not — reads

    data[.., s : s+n·k : k, ..]

reshaped to the gather's result shape (the indices' dimensions replace the gathered
one). The slice is left out when it keeps the whole axis in order. Such a gather has no
data-dependent read, so it blocks at the tile level like any copy; other constant
indices stay a gather. Indices out of range are left for the reference interpreter to
report.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from plmr.dialects import graph
from plmr.passes.canonicalize.match import const_array, shape_of


def _progression(
    flat: np.ndarray[tuple[int], np.dtype[np.int64]],
) -> tuple[int, int] | None:
    """`(start, step)` of an arithmetic progression with a nonzero step, else None."""
    start = int(flat[0])
    if flat.size == 1:
        return start, 1
    step = int(flat[1] - flat[0])
    if step == 0 or not np.array_equal(np.diff(flat), np.full(flat.size - 1, step)):
        return None
    return start, step


class GatherRangeToSlice(RewritePattern):
    """`gather(x, constant range)` -> `reshape(slice(x))`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.GatherOp, rewriter: PatternRewriter) -> None:
        indices = const_array(op.indices)
        if indices is None or indices.size == 0:
            return
        dshape = shape_of(op.data)
        ax = graph.normalize_axis(op.axis.value.data, len(dshape))
        size = dshape[ax]
        flat = indices.astype(np.int64).reshape(-1)
        flat = np.where(flat < 0, flat + size, flat)
        if flat.min() < 0 or flat.max() >= size:
            return
        found = _progression(flat)
        if found is None:
            return
        start, step = found
        new: list[Operation] = []
        value = op.data
        if not (start == 0 and step == 1 and flat.size == size):
            rank = len(dshape)
            starts = [start if a == ax else 0 for a in range(rank)]
            end = start + flat.size * step  # clamped: the same elements, a valid slice
            end = min(end, dshape[ax]) if step > 0 else max(end, -1)
            ends = [end if a == ax else d for a, d in enumerate(dshape)]
            steps = [step if a == ax else 1 for a in range(rank)]
            sliced = graph.SliceOp(value, starts, ends, steps)
            new.append(sliced)
            value = sliced.result
        if shape_of(value) != shape_of(op.result):
            reshaped = graph.ReshapeOp(value, shape_of(op.result))
            new.append(reshaped)
            value = reshaped.result
        rewriter.replace(op, new, [value])


GATHER_PATTERNS: tuple[type[RewritePattern], ...] = (GatherRangeToSlice,)
