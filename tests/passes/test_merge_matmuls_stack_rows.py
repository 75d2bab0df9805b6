"""
`graph-merge-matmuls{stack-rows}`: a prefill's gate and up stack as two heads
(`[1, 2, L, N]`), as `plmr compile` merges them on grids of more than 64 PEs, where a
prefill's projections also fold by heads (`graph-fold-heads{rows}`) before they merge;
the program keeps its semantics (the FileCheck input on random inputs, a LLaMA prefill
export against torch's outputs).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from plmr.dialects import graph
from plmr.dialects.context import make_context, parse_module
from plmr.frontend.onnx import import_onnx_file
from plmr.lowering.rotation import rotation_width
from plmr.passes.merge_matmuls import GraphMergeMatmulsPass
from plmr.passes.pipeline import CompileOptions, weight_passes

FILECHECK_INPUT = "graph-merge-matmuls-stack-rows.mlir"
HF = Path(__file__).resolve().parents[2] / "examples" / "hf"


def _ops(module: ModuleOp, name: str) -> int:
    return Counter(op.name for op in module.walk())[name]


def test_filecheck_input_keeps_its_semantics(filecheck_chunk: str, rewrite_check: Any):
    module = parse_module(filecheck_chunk)
    before = rewrite_check.semantics(module)
    GraphMergeMatmulsPass(min_rows=2, stack_rows=True).apply(make_context(), module)
    module.verify()
    before.assert_kept(module)
    assert _ops(module, "graph.matmul") == 1
    assert _ops(module, "graph.split") == 1


def test_large_grids_fold_a_prefills_heads_and_stack_its_gate_and_up(rewrite_check: Any):
    """
    The LLaMA prefill export (2 layers) under `plmr compile`'s rewrites for 20x20: Q, K
    and V by heads (3 products a layer; a prefill's rotations are not folded into
    projections on large grids, they stay products by the 16x16 rotation, an index map
    below), gate and up one stacked product, the output projection by heads and the
    down projection; torch's outputs kept.
    """
    module = import_onnx_file(str(HF / "llama_prefill.onnx"))
    for p in weight_passes(CompileOptions(grid=(20, 20))):
        p.apply(make_context(), module)
    module.verify()
    shapes = [
        (op.results[0].name_hint, graph.static_shape(op.results[0], "product"))
        for op in module.walk()
        if isinstance(op, graph.MatmulOp)
    ]
    # Per layer: Q of 4 heads, K and V of 2, by heads (8 rows of 16); Q and K rotated
    # by products with R; gate and up one stacked product of two heads.
    by_heads = [s for _, s in shapes if len(s) == 3 and s[1:] == (8, 16)]
    assert sorted(s[0] for s in by_heads) == [2] * 4 + [4] * 2
    rotations = [
        op
        for op in module.walk()
        if isinstance(op, graph.MatmulOp) and rotation_width(op) == 16
    ]
    assert len(rotations) == 4
    stacked = [s for name, s in shapes if name == "heads_proj"]
    assert stacked == [(1, 2, 8, 128)] * 2
    rewrite_check.torch_outputs(module, "llama_prefill")
