"""
neptune-fuse on decode's scores against a cache of many rows: the rotated query
`q·cos + r·sin` (RoPE at a run-time position) does not depend on the cached row, so it
is stored once by a map nest of its own instead of recomputed for every cached row the
scores read; against a short cache, or with a query row per cached row (prefill), it
stays inlined. Every variant keeps the program's semantics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from plmr.dialects.loop import NestOp, ReadOp
from plmr.passes.neptune.nests import ROW_OPERAND_RATIO, SMALL_REREAD_LIMIT


def rope_scores(groups: int, queries: int, hd: int, rows: int) -> str:
    """Grouped scores `(q·cos + r·sin)·Kᵀ` of 2 KV heads over a cache of `rows` keys."""
    q = f"tensor<2x{groups * queries}x{hd}xf32>"
    t = f"tensor<{queries}x{hd}xf32>"
    k = f"tensor<2x{hd}x{rows}xf32>"
    s = f"tensor<2x{groups * queries}x{rows}xf32>"
    return f"""
    func.func @main(%q: {q}, %r: {q}, %cos: {t}, %sin: {t}, %kt: {k}) -> {s} {{
      %a = graph.mul %q, %cos : ({q}, {t}) -> {q}
      %b = graph.mul %r, %sin : ({q}, {t}) -> {q}
      %roped = graph.add %a, %b : ({q}, {q}) -> {q}
      %s = graph.matmul %roped, %kt : ({q}, {k}) -> {s}
      func.return %s : {s}
    }}"""


def rotations_in(nest: NestOp) -> int:
    """How many reads of `cos` the nest's body holds (one per inlined rotation)."""
    return sum(
        1 for op in nest.walk() if isinstance(op, ReadOp) and op.source.name_hint == "cos"
    )


@pytest.mark.parametrize(
    ("groups", "queries", "rows", "stored"),
    [
        (4, 1, 2 * SMALL_REREAD_LIMIT, True),  # decode: one query row, a long cache
        (2, 1, 4 * SMALL_REREAD_LIMIT, True),
        (4, 1, SMALL_REREAD_LIMIT // 2, False),  # a short cache: inlined
        (1, 2 * SMALL_REREAD_LIMIT, 2 * SMALL_REREAD_LIMIT, False),  # prefill
    ],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_rotated_query_is_stored_against_a_long_cache(
    groups: int, queries: int, rows: int, stored: bool, seed: int, fuse: Callable[..., Any]
):
    hd = 16
    fused = fuse(rope_scores(groups, queries, hd, rows), seed=seed)
    nests: list[NestOp] = fused.nests
    scores = [n for n in nests if n.is_reduction]
    assert len(scores) == 1
    if stored:
        assert 2 * groups * queries * hd * ROW_OPERAND_RATIO <= 2 * hd * rows
        maps = [n for n in nests if not n.is_reduction]
        assert [rotations_in(n) for n in maps] == [1]
        assert rotations_in(scores[0]) == 0
    else:
        assert len(nests) == 1
        assert rotations_in(scores[0]) == 1
    fused.assert_matches()


def normalised_projection(heads: int, hd: int, width: int) -> str:
    """A softmax's deferred normalisation `o / l` read by the output projection."""
    o, lsum = f"tensor<{heads}x1x{hd}xf32>", f"tensor<{heads}x1x1xf32>"
    w, y = f"tensor<{heads}x{hd}x{width}xf32>", f"tensor<{heads}x1x{width}xf32>"
    return f"""
    func.func @main(%o: {o}, %l: {lsum}, %wo: {w}) -> {y} {{
      %n = graph.div %o, %l : ({o}, {lsum}) -> {o}
      %y = graph.matmul %n, %wo : ({o}, {w}) -> {y}
      func.return %y : {y}
    }}"""


def slot_scores(groups: int, hd: int, rows: int) -> str:
    """Rotated scores against key rows built from the cache and the new row (a slot)."""
    q, t = f"tensor<2x{groups}x{hd}xf32>", f"tensor<1x{hd}xf32>"
    k, m = f"tensor<2x{hd}x{rows}xf32>", f"tensor<1x1x{rows}xf32>"
    new, s = f"tensor<2x{hd}x1xf32>", f"tensor<2x{groups}x{rows}xf32>"
    return f"""
    func.func @main(%q: {q}, %r: {q}, %cos: {t}, %sin: {t}, %kt: {k}, %keep: {m},
                    %knew: {new}, %slot: {m}) -> {s} {{
      %a = graph.mul %q, %cos : ({q}, {t}) -> {q}
      %b = graph.mul %r, %sin : ({q}, {t}) -> {q}
      %roped = graph.add %a, %b : ({q}, {q}) -> {q}
      %old = graph.mul %kt, %keep : ({k}, {m}) -> {k}
      %new = graph.mul %knew, %slot : ({new}, {m}) -> {k}
      %rows = graph.add %old, %new : ({k}, {k}) -> {k}
      %s = graph.matmul %roped, %rows : ({q}, {k}) -> {s}
      func.return %s : {s}
    }}"""


@pytest.mark.parametrize(
    "text",
    [
        # One division per element against a multiply-add per iteration.
        normalised_projection(2, 32, 32 * ROW_OPERAND_RATIO),
        # A rotation (three flops) against the scores' five once the key row is built.
        slot_scores(4, 16, 2 * SMALL_REREAD_LIMIT),
    ],
    ids=["normalisation", "slot"],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_a_map_cheaper_than_its_reader_stays_inlined(
    text: str, seed: int, fuse: Callable[..., Any]
):
    # Long enough and small enough to be stored, but the reading nest's own work per
    # iteration is at least the map's: recomputed, it at most doubles that work.
    fused = fuse(text, seed=seed)
    nests: list[NestOp] = fused.nests
    assert len(nests) == 1
    assert nests[0].is_reduction
    fused.assert_matches()
