"""
neptune-fuse's inlining of maps: a map with a transcendental (SwiGLU's `silu(up)·gate`)
read by a GEMM that reads each element again for every index of a long output dimension
stays a nest (computed once per element); read along a short one, it is inlined. Both
keep the program's semantics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from plmr.passes.neptune.nests import REREAD_LIMIT, SMALL_REREAD_LIMIT


def swiglu(tokens: int, dim: int, ffn: int, out: int) -> str:
    x, f, o = (
        f"tensor<{tokens}x{dim}xf32>",
        f"tensor<{tokens}x{ffn}xf32>",
        f"tensor<{tokens}x{out}xf32>",
    )
    w, w2 = f"tensor<{dim}x{ffn}xf32>", f"tensor<{ffn}x{out}xf32>"
    return f"""
    func.func @main(%x: {x}, %w1: {w}, %w3: {w}, %w2: {w2}) -> {o} {{
      %up = graph.matmul %x, %w1 : ({x}, {w}) -> {f}
      %gate = graph.matmul %x, %w3 : ({x}, {w}) -> {f}
      %s = graph.silu %up : {f}
      %act = graph.mul %s, %gate : ({f}, {f}) -> {f}
      %down = graph.matmul %act, %w2 : ({f}, {w2}) -> {o}
      func.return %down : {o}
    }}"""


@pytest.mark.parametrize(("out", "stored"), [(REREAD_LIMIT, True), (16, False)])
def test_silu_is_stored_for_a_long_gemm_and_inlined_for_a_short_one(
    out: int, stored: bool, fuse: Callable[..., Any]
):
    fused = fuse(swiglu(4, 8, 16, out))
    maps = [n for n in fused.nests if all(k.data.value == "parallel" for k in n.iterators)]
    # up, gate, down; and the activation when it is stored.
    assert len(fused.nests) == (4 if stored else 3)
    assert (len(maps) == 1) == stored
    fused.assert_matches()


def attention(queries: int, keys: int, hd: int) -> str:
    q, k = f"tensor<{queries}x{hd}xf32>", f"tensor<{keys}x{hd}xf32>"
    s, one = f"tensor<{queries}x{keys}xf32>", f"tensor<{queries}x1xf32>"
    return f"""
    func.func @main(%q: {q}, %k: {k}, %v: {k}) -> {q} {{
      %s = graph.matmul %q, %k transpose_b : ({q}, {k}) -> {s}
      %m = graph.reduce max %s axes = [-1] keepdims : {s} -> {one}
      %d = graph.sub %s, %m : ({s}, {one}) -> {s}
      %p = graph.exp %d : {s}
      %l = graph.reduce sum %p axes = [-1] keepdims : {s} -> {one}
      %pv = graph.matmul %p, %v : ({s}, {k}) -> {q}
      %o = graph.div %pv, %l : ({q}, {one}) -> {q}
      func.return %o : {q}
    }}"""


@pytest.mark.parametrize(
    ("queries", "hd", "stored"),
    [(1, SMALL_REREAD_LIMIT, True), (1, 16, False), (4 * SMALL_REREAD_LIMIT, 64, False)],
)
def test_probabilities_are_stored_when_shared_and_small(
    queries: int, hd: int, stored: bool, fuse: Callable[..., Any]
):
    """
    Decode attention (one query row, a head dimension of at least `SMALL_REREAD_LIMIT`):
    `exp(s − m)` is stored once and read by the sum and P·V; with a short head dimension,
    or more query rows than V has elements per key (prefill), it is inlined. Same results.
    """
    fused = fuse(attention(queries, 32, hd), strategy="rolling")
    exp_maps = [
        n
        for n in fused.nests
        if all(k.data.value == "parallel" for k in n.iterators)
        and any(op.name == "math.exp" for op in n.body.walk())
    ]
    assert bool(exp_maps) == stored
    fused.assert_matches()
