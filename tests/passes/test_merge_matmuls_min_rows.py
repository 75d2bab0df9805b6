"""
`graph-merge-matmuls{min-rows}`: the FileCheck inputs keep their semantics on random
inputs; `plmr compile`'s graph rewrites leave a decode export's one-row projections apart
and merge a prefill export's, and both still give torch's outputs.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import make_context, parse_module
from plmr.errors import PlmrError
from plmr.frontend.onnx import import_onnx_file
from plmr.passes.merge_matmuls import GraphMergeMatmulsPass
from plmr.passes.pipeline import CompileOptions, weight_passes

FILECHECK_INPUT = "graph-merge-matmuls-min-rows.mlir"
HF = Path(__file__).resolve().parents[2] / "examples" / "hf"


def ops(module: ModuleOp, name: str) -> int:
    return Counter(op.name for op in module.walk())[name]


def test_the_filecheck_inputs_are_all_found(rewrite_check: Any):
    assert len(rewrite_check.chunks(FILECHECK_INPUT)) == 2


def test_filecheck_inputs_keep_their_semantics(filecheck_chunk: str, rewrite_check: Any):
    module = parse_module(filecheck_chunk)
    before = rewrite_check.semantics(module)
    matmuls = ops(module, "graph.matmul")
    GraphMergeMatmulsPass(min_rows=2).apply(make_context(), module)
    module.verify()
    before.assert_kept(module)
    # The three-row products merged, the one-row ones did not.
    one_row = "@one_row" in filecheck_chunk
    assert ops(module, "graph.matmul") == (matmuls if one_row else 1)


@pytest.mark.parametrize(
    ("export", "merged_away"),
    [
        ("llama_decode", 0),
        ("qwen2_decode", 0),
        # Two layers: Q, K, V and the rotated Q, K (graph-fold-rotate-half) -> one
        # (4 fewer) and gate, up -> one (1 fewer) in each.
        ("llama_prefill", 2 * (4 + 1)),
    ],
)
def test_compile_rewrites_merge_only_products_of_several_rows(
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


def test_a_negative_min_rows_is_one_clear_error():
    module = parse_module("builtin.module {}")
    with pytest.raises(PlmrError, match="min-rows=-1 is negative"):
        GraphMergeMatmulsPass(min_rows=-1).apply(make_context(), module)
