"""
`graph-fold-rotate-half`: every FileCheck input keeps its semantics on random inputs; on
the Hugging Face exports every `rotate_half` folds into the weights (a reference for
weights by reference) and the exports still give torch's outputs.
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
from plmr.dialects.graph_weights import anchor_weights, weight_ref
from plmr.frontend.onnx import import_onnx_file
from plmr.passes.graph_canonicalize import GraphCanonicalizePass
from plmr.passes.rotate_fold import GraphFoldRotateHalfPass, fold_module
from plmr.runtime.weights import rotate_half

FILECHECK_INPUT = "graph-fold-rotate-half.mlir"
HF = Path(__file__).resolve().parents[2] / "examples" / "hf"


def ops(module: ModuleOp) -> Counter[str]:
    return Counter(op.name for op in module.walk())


def test_the_filecheck_inputs_are_all_found(rewrite_check: Any):
    assert len(rewrite_check.chunks(FILECHECK_INPUT)) == 5


def test_rotate_half_is_the_signed_permutation():
    w = np.arange(24, dtype=np.float32).reshape(2, 12)
    # R for one block of 4: column j of W·R is -W[:, j + 2] (j < 2), W[:, j - 2] after.
    r = np.zeros((4, 4), np.float32)
    r[2, 0], r[3, 1], r[0, 2], r[1, 3] = -1, -1, 1, 1
    want = np.concatenate([w[:, i : i + 4] @ r for i in range(0, 12, 4)], axis=1)
    np.testing.assert_array_equal(rotate_half(w, 4), want)


def test_filecheck_inputs_keep_their_semantics(
    filecheck_chunk: str, tmp_path: Path, rewrite_check: Any
):
    module = parse_module(filecheck_chunk)
    # The weight by reference of the inputs: 16 values at byte 64 of a raw data file.
    rng = np.random.default_rng(0)
    data = np.concatenate([np.zeros(16), rng.standard_normal(16)]).astype("<f4")
    (tmp_path / "q.onnx.data").write_bytes(data.tobytes())
    anchor_weights(module, tmp_path)
    before = rewrite_check.semantics(module)
    before_ops = ops(module)
    GraphFoldRotateHalfPass().apply(make_context(), module)
    module.verify()
    changed = ops(module) != before_ops
    assert changed == ("not_rotations" not in filecheck_chunk)
    before.assert_kept(module)


def test_by_reference_export_folds_into_references_and_gives_torch_logits(
    rewrite_check: Any,
):
    module = import_onnx_file(str(HF / "llama_external.onnx"))
    before = ops(module)
    # Two layers, Q and K rotated in each.
    assert fold_module(module) == 4
    module.verify()
    after = ops(module)
    assert after["graph.neg"] == before["graph.neg"] - 4 == 0
    assert after["graph.matmul"] == before["graph.matmul"] + 4
    rotated = [r for _, r in ((o, weight_ref(o)) for o in module.walk()) if r and r.rotate]
    assert len(rotated) == 4
    assert all(
        r.rotate == 16 and r.file.endswith("llama_external.onnx.data") for r in rotated
    )
    assert not any(
        isinstance(o, graph.ConstantOp) and o.result.type == r.type
        for o in module.walk()
        for r in rotated
    )
    rewrite_check.torch_outputs(module, "llama_external", ["logits"])


@pytest.mark.parametrize("model", ["llama", "qwen2", "mistral"])
def test_decode_exports_keep_torch_outputs(model: str, rewrite_check: Any):
    module = import_onnx_file(str(HF / f"{model}_decode.onnx"))
    GraphCanonicalizePass().apply(make_context(), module)
    assert fold_module(module) == 4
    module.verify()
    assert ops(module)["graph.neg"] == 0
    rewrite_check.torch_outputs(module, f"{model}_decode")


@pytest.mark.parametrize(("max_rows", "folded"), [(0, 2), (1, 1), (2, 1), (3, 2)])
def test_max_rows_folds_only_short_projections_and_keeps_semantics(
    max_rows: int, folded: int, rewrite_check: Any
):
    path = Path(__file__).resolve().parents[1] / "filecheck" / "passes"
    module = parse_module((path / "graph-fold-rotate-half-max-rows.mlir").read_text())
    before = rewrite_check.semantics(module)
    negs = ops(module)["graph.neg"]
    assert fold_module(module, max_rows) == folded
    module.verify()
    assert ops(module)["graph.neg"] == negs - folded
    before.assert_kept(module)
