"""
`graph-fold-repeat-kv`: every FileCheck input keeps its semantics on random inputs; on
the Hugging Face exports every repeated K/V goes, each layer's scores and P·V read the
K/V heads as they are, and the exports still give torch's outputs.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects import graph
from plmr.dialects.context import make_context, parse_module
from plmr.frontend.onnx import import_onnx_file
from plmr.passes.graph_canonicalize import GraphCanonicalizePass
from plmr.passes.repeat_kv_fold import GraphFoldRepeatKvPass, fold_module

from .conftest import HF, filecheck_chunks

FILECHECK_INPUT = "graph-fold-repeat-kv.mlir"


def ops(module: ModuleOp) -> Counter[str]:
    return Counter(op.name for op in module.walk())


def test_the_filecheck_inputs_are_all_found():
    assert len(filecheck_chunks(FILECHECK_INPUT)) == 5


def test_filecheck_inputs_keep_their_semantics(filecheck_chunk: str, rewrite_check: Any):
    module = parse_module(filecheck_chunk)
    before = ops(module)
    semantics = rewrite_check.semantics(module)
    GraphFoldRepeatKvPass().apply(make_context(), module)
    module.verify()
    semantics.assert_kept(module)
    changed = ops(module) != before
    assert changed == ("not_repeat_kv" not in filecheck_chunk)


@pytest.mark.parametrize(
    "export", ["llama_decode", "qwen2_decode", "mistral_decode", "llama_prefill"]
)
def test_exports_read_the_kv_heads_as_they_are(export: str, rewrite_check: Any):
    module = import_onnx_file(str(HF / f"{export}.onnx"))
    GraphCanonicalizePass(unrepeat_kv=False).apply(make_context(), module)
    assert ops(module)["graph.expand"] == 4
    # Two layers: the scores and P·V of each.
    assert fold_module(module) == 4
    module.verify()
    # No K/V is repeated; the prefill's mask over positions is, over a group's heads.
    expands = [op for op in module.walk() if isinstance(op, graph.ExpandOp)]
    assert len(expands) == (2 if export.endswith("prefill") else 0)
    for op in expands:
        assert graph.static_shape(op.result, "result") == (1, 1, 2, 8, 8)
    grouped = [
        op
        for op in module.walk()
        if isinstance(op, graph.MatmulOp)
        and op.result.name_hint
        and op.result.name_hint.endswith("_grouped")
    ]
    assert len(grouped) == 4
    for op in grouped:
        # [1, 2 K/V heads, 2 query heads x rows, ...] against [1, 2 K/V heads, S, 16].
        assert graph.static_shape(op.rhs, "rhs")[:2] == (1, 2)
        assert graph.static_shape(op.lhs, "lhs")[:2] == (1, 2)
    rewrite_check.torch_outputs(module, export)


def test_one_row_per_head_leaves_the_prefill_alone():
    # plmr compile regroups decode steps only (`max-rows=1`).
    module = import_onnx_file(str(HF / "llama_prefill.onnx"))
    GraphCanonicalizePass(unrepeat_kv=False).apply(make_context(), module)
    assert fold_module(module, max_rows=1) == 0
    assert ops(module)["graph.expand"] == 4
