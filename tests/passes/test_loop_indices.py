"""loop-simplify-indices: same results before and after, and the reshapes' div / rem gone."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import parse_module
from plmr.lowering.graph_to_loop import ConvertGraphToLoopPass
from plmr.passes.loop_indices import LoopSimplifyIndicesPass
from plmr.passes.neptune.fuse import NeptuneFusePass
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import random_inputs, select_function


def _heads_program(n: int, heads: int, hd: int, perm: tuple[int, ...]) -> str:
    """Split `[n, heads·hd]` into heads, permute, merge, split again, contract."""
    t = f"tensor<{n}x{heads * hd}xf32>"
    split = [n, heads, hd]
    moved = [split[p] for p in perm]
    s3 = "tensor<" + "x".join(map(str, split)) + "xf32>"
    m3 = "tensor<" + "x".join(map(str, moved)) + "xf32>"
    flat = f"tensor<{moved[0]}x{moved[1] * moved[2]}xf32>"
    w = f"tensor<{moved[0]}x3x{moved[2]}xf32>"
    out = f"tensor<{moved[0]}x{moved[1]}x3xf32>"
    p = ", ".join(map(str, perm))
    return f"""
func.func @main(%x: {t}, %w: {w}) -> {out} {{
  %r = graph.reshape %x : {t} -> {s3}
  %t = graph.transpose %r perm = [{p}] : {s3} -> {m3}
  %m = graph.reshape %t : {m3} -> {flat}
  %v = graph.reshape %m : {flat} -> {m3}
  %s = graph.matmul %v, %w transpose_b : ({m3}, {w}) -> {out}
  func.return %s : {out}
}}
"""


def _fused(text: str) -> ModuleOp:
    module = parse_module(text)
    ConvertGraphToLoopPass().apply(Context(), module)
    NeptuneFusePass(remarks=False).apply(Context(), module)
    return module


def _index_divisions(module: ModuleOp) -> int:
    return sum(isinstance(op, arith.DivUIOp | arith.RemUIOp) for op in module.walk())


@pytest.mark.parametrize(
    ("n", "heads", "hd", "perm"),
    [
        (2, 2, 4, (1, 0, 2)),
        (3, 4, 2, (1, 0, 2)),
        (4, 2, 3, (0, 1, 2)),
        (2, 3, 4, (1, 2, 0)),
    ],
)
def test_simplified_programs_compute_the_same(
    n: int, heads: int, hd: int, perm: tuple[int, ...]
):
    module = _fused(_heads_program(n, heads, hd, perm))
    fn = select_function(module, "main")
    for seed in range(3):
        args = random_inputs(fn, seed)
        want = evaluate_function(module, "main", args)
        trial = module.clone()
        LoopSimplifyIndicesPass().apply(Context(), trial)
        trial.verify()
        if perm != (0, 1, 2):
            # The merge after the transpose re-divides what the split multiplied.
            assert _index_divisions(trial) < _index_divisions(module)
        got = evaluate_function(trial, "main", args)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
