"""
`graph-merge-matmuls{min-rows}`: the FileCheck inputs keep their semantics on random
inputs; `plmr compile`'s graph rewrites leave a decode export's flat one-row projections
apart and merge a prefill export's, and both still give torch's outputs; one-row
projections by heads merge per KV head.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects import graph
from plmr.dialects.context import make_context, parse_module
from plmr.dialects.graph_weights import anchor_weights
from plmr.errors import PlmrError
from plmr.frontend.onnx import import_onnx_file
from plmr.passes.merge_matmuls import GraphMergeMatmulsPass
from plmr.passes.pipeline import CompileOptions, graph_passes, weight_passes

FILECHECK_INPUT = "graph-merge-matmuls-min-rows.mlir"
HF = Path(__file__).resolve().parents[2] / "examples" / "hf"


def ops(module: ModuleOp, name: str) -> int:
    return Counter(op.name for op in module.walk())[name]


def test_the_filecheck_inputs_are_all_found(rewrite_check: Any):
    assert len(rewrite_check.chunks(FILECHECK_INPUT)) == 4


def test_filecheck_inputs_keep_their_semantics(
    filecheck_chunk: str, rewrite_check: Any, tmp_path: Path
):
    module = parse_module(filecheck_chunk)
    # The weights by reference of @heads: 32 values from byte 0 of a raw data file.
    data = np.random.default_rng(0).standard_normal(32).astype("<f4")
    (tmp_path / "w.data").write_bytes(data.tobytes())
    anchor_weights(module, tmp_path)
    before = rewrite_check.semantics(module)
    matmuls = ops(module, "graph.matmul")
    GraphMergeMatmulsPass(min_rows=2).apply(make_context(), module)
    module.verify()
    before.assert_kept(module)
    # The three-row products merged, the one-row flat ones did not; of the projections by
    # heads, Q and K (2 KV heads) merged, the one of 3 heads did not; gate and up stacked,
    # the projection split into heads after and the one read apart did not.
    expected = {"@one_row": matmuls, "@heads": 2, "@rows": 1, "@gate_up": 3}
    assert ops(module, "graph.matmul") == next(
        n for name, n in expected.items() if name in filecheck_chunk
    )


@pytest.mark.parametrize(
    ("export", "merged_away"),
    [
        # Two layers: gate and up stacked ([1, 2, 1, N]) in each; Q, K and V are split
        # into heads after, so they stay flat here (graph-fold-heads takes them later).
        ("llama_decode", 2),
        ("qwen2_decode", 2),
        # Two layers: Q, K, V and the rotated Q, K (graph-fold-rotate-half) -> one
        # (4 fewer) and gate, up -> one (1 fewer) in each.
        ("llama_prefill", 2 * (4 + 1)),
    ],
)
def test_compile_rewrites_merge_products_of_several_rows_and_stack_gate_and_up(
    export: str, merged_away: int, rewrite_check: Any
):
    module = import_onnx_file(str(HF / f"{export}.onnx"))
    passes = weight_passes(CompileOptions())
    before = None
    for p in passes:
        if p.name == "graph-merge-matmuls":
            before = ops(module, "graph.matmul")
        p.apply(make_context(), module)
    module.verify()
    assert before is not None, "plmr compile's rewrites no longer merge matmuls"
    assert before - ops(module, "graph.matmul") == merged_away
    rewrite_check.torch_outputs(module, export)


@pytest.mark.parametrize("export", ["llama_decode", "mistral_decode"])
def test_a_decode_exports_projections_by_heads_merge_into_one_per_layer(
    export: str, rewrite_check: Any
):
    """
    After graph-fold-heads, Q, rotated Q, K, rotated K and V of a layer are one product
    `[Hkv, 2G + 3, 1, D]`, as models/llama_heads.py writes it, and torch's outputs stay.
    """
    module = import_onnx_file(str(HF / f"{export}.onnx"))
    passes = graph_passes(CompileOptions(substitute=False))
    for p in passes:
        if p.name == "convert-graph-to-loop":
            break
        p.apply(make_context(), module)
    module.verify()
    merged = [
        op
        for op in module.walk()
        if isinstance(op, graph.MatmulOp)
        and graph.static_shape(op.result, "result") == (2, 2 * 2 + 3, 1, 16)
    ]
    assert len(merged) == 2  # one per layer: 2 KV heads, 2 queries each, head dim 16
    rewrite_check.torch_outputs(module, export)


def test_a_negative_min_rows_is_one_clear_error():
    module = parse_module("builtin.module {}")
    with pytest.raises(PlmrError, match="min-rows=-1 is negative"):
        GraphMergeMatmulsPass(min_rows=-1).apply(make_context(), module)
