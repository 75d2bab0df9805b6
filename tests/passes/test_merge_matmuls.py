"""
`graph-merge-matmuls`: every FileCheck input keeps its semantics on random inputs; on the
Hugging Face decode exports Q, K and V merge into one matmul and gate and up into
another per layer, and the exports still give torch's logits and caches.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import make_context, parse_module
from plmr.dialects.graph_weights import anchor_weights, weight_ops
from plmr.frontend.onnx import import_onnx_file
from plmr.passes.graph_canonicalize import GraphCanonicalizePass
from plmr.passes.merge_matmuls import GraphMergeMatmulsPass
from plmr.passes.rotate_fold import GraphFoldRotateHalfPass

FILECHECK_INPUT = "graph-merge-matmuls.mlir"
HF = Path(__file__).resolve().parents[2] / "examples" / "hf"


def matmuls(module: ModuleOp) -> int:
    return Counter(op.name for op in module.walk())["graph.matmul"]


def test_the_filecheck_inputs_are_all_found(rewrite_check: Any):
    assert len(rewrite_check.chunks(FILECHECK_INPUT)) == 4


def test_filecheck_inputs_keep_their_semantics(
    filecheck_chunk: str, tmp_path: Path, rewrite_check: Any
):
    module = parse_module(filecheck_chunk)
    # The weights by reference of the inputs: a raw data file of 24 values.
    data = np.random.default_rng(0).standard_normal(24).astype("<f4")
    (tmp_path / "w.onnx.data").write_bytes(data.tobytes())
    anchor_weights(module, tmp_path)
    before = rewrite_check.semantics(module)
    GraphMergeMatmulsPass().apply(make_context(), module)
    module.verify()
    before.assert_kept(module)


@pytest.mark.parametrize("model", ["llama", "qwen2", "mistral"])
def test_decode_exports_keep_torch_outputs(model: str, rewrite_check: Any):
    module = import_onnx_file(str(HF / f"{model}_decode.onnx"))
    GraphCanonicalizePass().apply(make_context(), module)
    before = matmuls(module)
    GraphMergeMatmulsPass().apply(make_context(), module)
    module.verify()
    # Two layers: Q, K, V -> one (2 fewer) and gate, up -> one (1 fewer) in each.
    assert before - matmuls(module) == 2 * (2 + 1)
    rewrite_check.torch_outputs(module, f"{model}_decode")


def test_by_reference_export_merges_references_and_gives_torch_logits(
    rewrite_check: Any,
):
    module = import_onnx_file(str(HF / "llama_external.onnx"))
    constants = Counter(op.name for op in module.walk())["graph.constant"]
    GraphFoldRotateHalfPass().apply(make_context(), module)
    before = matmuls(module)
    GraphMergeMatmulsPass().apply(make_context(), module)
    module.verify()
    # Two layers: Q, K, V and rotated Q, K -> one (4 fewer), gate and up -> one.
    assert before - matmuls(module) == 2 * (4 + 1)
    merged = [r for _, r in weight_ops(module) if r.parts]
    assert [len(r.parts) for r in merged] == [5, 2, 5, 2]
    data = (HF / "llama_external.onnx.data").resolve()
    assert {Path(leaf.file) for r in merged for leaf in r.leaves()} == {data}
    # Nothing was read into the IR: no new constants.
    assert Counter(op.name for op in module.walk())["graph.constant"] == constants
    rewrite_check.torch_outputs(module, "llama_external", ["logits"])
