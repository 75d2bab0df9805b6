"""
neptune-fuse on an RMSNorm whose scale follows the matmul (`graph-defer-norm-scale`):
`x · g` is stored when a GEMV reads it again along a long output loop and inlined along a
short one; the inverse RMS of a row is stored when a map reads it for every element of a
long row and inlined into a short one; a rank-0 constant read is a scalar. All keep the
program's semantics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from plmr.dialects.context import parse_module
from plmr.dialects.loop import NestOp, ReadOp
from plmr.dialects.printing import module_text
from plmr.passes.neptune.nests import SMALL_REREAD_LIMIT
from plmr.passes.norm_defer import defer_norm_scales


def norm_gemv(dim: int, out: int) -> str:
    """An RMSNorm of one row, then a GEMV to `out` columns, its scale moved past it."""
    x, g, w, y = (
        f"tensor<1x{dim}xf32>",
        f"tensor<{dim}xf32>",
        f"tensor<{dim}x{out}xf32>",
        f"tensor<1x{out}xf32>",
    )
    text = f"""
    func.func @main(%x: {x}, %g: {g}, %w: {w}) -> {y} {{
      %n = graph.rmsnorm %x, %g epsilon = 1.000000e-05 : ({x}, {g}) -> {x}
      %p = graph.matmul %n, %w : ({x}, {w}) -> {y}
      %s = graph.silu %p : {y}
      func.return %s : {y}
    }}"""
    module = parse_module(text)
    assert defer_norm_scales(module) == 1
    return module_text(module)


def stored(nests: list[NestOp], name: str) -> bool:
    return any(r.name_hint == name for n in nests for r in n.results)


def reads_of(nests: list[NestOp], name: str) -> list[ReadOp]:
    return [
        op
        for n in nests
        for op in n.walk()
        if isinstance(op, ReadOp) and op.source.name_hint == name
    ]


@pytest.mark.parametrize(
    ("out", "keep"), [(SMALL_REREAD_LIMIT, True), (SMALL_REREAD_LIMIT // 4, False)]
)
def test_scaled_input_and_factor_are_stored_for_long_rows(
    out: int, keep: bool, fuse: Callable[..., Any]
):
    fused = fuse(norm_gemv(32, out))
    nests: list[NestOp] = fused.nests
    assert stored(nests, "n_xg") == keep
    assert stored(nests, "n_rstd") == keep
    sqrts = [op for n in nests for op in n.walk() if op.name == "math.sqrt"]
    # Stored: one square root (the factor's nest); inlined: one per element of the row.
    assert len(sqrts) == 1
    if keep:
        assert reads_of(nests, "n_rstd")
        owner = sqrts[0].parent_op()
        assert isinstance(owner, NestOp)
        assert owner.extents == (1, 1)
    fused.assert_matches()


def test_epsilon_is_a_scalar_constant(fuse: Callable[..., Any]):
    fused = fuse(norm_gemv(32, SMALL_REREAD_LIMIT))
    nests: list[NestOp] = fused.nests
    # No nest loads the rank-0 epsilon tensor: it is an `arith.constant` scalar.
    rank0 = [
        op for n in nests for op in n.walk() if isinstance(op, ReadOp) and not op.indices
    ]
    assert rank0 == []
    eps = [
        op
        for n in nests
        for op in n.walk()
        if op.name == "arith.constant" and "1.000000e-05" in str(op)
    ]
    assert len(eps) == 1


def test_a_copy_is_not_stored_for_a_gemv(fuse: Callable[..., Any]):
    """A reshape of the vector (no arithmetic) stays inlined into the GEMV."""
    text = f"""
    func.func @main(%x: tensor<32xf32>, %w: tensor<32x{SMALL_REREAD_LIMIT}xf32>) -> tensor<1x{SMALL_REREAD_LIMIT}xf32> {{
      %r = graph.reshape %x : tensor<32xf32> -> tensor<1x32xf32>
      %p = graph.matmul %r, %w : (tensor<1x32xf32>, tensor<32x{SMALL_REREAD_LIMIT}xf32>) -> tensor<1x{SMALL_REREAD_LIMIT}xf32>
      func.return %p : tensor<1x{SMALL_REREAD_LIMIT}xf32>
    }}"""
    fused = fuse(text)
    assert len(fused.nests) == 1
    for g, w in zip(fused.results(), fused.want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
