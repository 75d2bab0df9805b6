"""
`graph-merge-matmuls`: every FileCheck input keeps its semantics on random inputs; on the
Hugging Face decode exports Q, K and V merge into one matmul and gate and up into
another per layer, and the exports still give torch's logits and caches.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import make_context, parse_module
from plmr.dialects.graph_weights import anchor_weights, weight_ops
from plmr.frontend.onnx import import_onnx_file
from plmr.passes.graph_canonicalize import GraphCanonicalizePass
from plmr.passes.merge_matmuls import GraphMergeMatmulsPass
from plmr.passes.rotate_fold import GraphFoldRotateHalfPass
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import functions, random_inputs, select_function

ROOT = Path(__file__).resolve().parents[2]
FILECHECK = ROOT / "tests" / "filecheck" / "passes" / "graph-merge-matmuls.mlir"
HF = ROOT / "examples" / "hf"


def chunks() -> list[object]:
    texts = FILECHECK.read_text().split("// -----")
    return [pytest.param(t, id=f"chunk{i}") for i, t in enumerate(texts)]


def matmuls(module: ModuleOp) -> int:
    return Counter(op.name for op in module.walk())["graph.matmul"]


def test_the_filecheck_inputs_are_all_found():
    assert len(chunks()) == 4


@pytest.mark.parametrize("text", chunks())
def test_filecheck_inputs_keep_their_semantics(text: str, tmp_path: Path):
    module = parse_module(text)
    # The weights by reference of the inputs: a raw data file of 24 values.
    data = np.random.default_rng(0).standard_normal(24).astype("<f4")
    (tmp_path / "w.onnx.data").write_bytes(data.tobytes())
    anchor_weights(module, tmp_path)
    names = [fn.sym_name.data for fn in functions(module)]
    args = {n: random_inputs(select_function(module, n), i) for i, n in enumerate(names)}
    before = {n: evaluate_function(module, n, args[n]) for n in names}
    GraphMergeMatmulsPass().apply(make_context(), module)
    module.verify()
    for n in names:
        after = evaluate_function(module, n, args[n])
        for a, b in zip(before[n], after, strict=True):
            assert a.shape == b.shape
            assert a.dtype == b.dtype
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5 * float(np.abs(a).max()))


@pytest.mark.parametrize("model", ["llama", "qwen2", "mistral"])
def test_decode_exports_keep_torch_outputs(model: str):
    module = import_onnx_file(str(HF / f"{model}_decode.onnx"))
    GraphCanonicalizePass().apply(make_context(), module)
    before = matmuls(module)
    GraphMergeMatmulsPass().apply(make_context(), module)
    module.verify()
    # Two layers: Q, K, V -> one (2 fewer) and gate, up -> one (1 fewer) in each.
    assert before - matmuls(module) == 2 * (2 + 1)
    fn = select_function(module, None)
    names = [a.name_hint for a in fn.body.block.args]
    with np.load(HF / f"{model}_decode.npz") as data:
        args = [np.asarray(data[n]) for n in names]
        want = [
            np.asarray(data[k]) for k in data if k == "logits" or k.startswith("present")
        ]
    got = evaluate_function(module, fn.sym_name.data, args)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        assert float(np.max(np.abs(g - w))) <= 1e-4 * max(1.0, float(np.max(np.abs(w))))


def test_by_reference_export_merges_references_and_gives_torch_logits():
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
    fn = select_function(module, None)
    with np.load(HF / "llama_external.npz") as npz:
        args, want = [np.asarray(npz["input_ids"])], np.asarray(npz["logits"])
    (got,) = evaluate_function(module, fn.sym_name.data, args)
    assert float(np.max(np.abs(got - want))) <= 1e-4 * max(1.0, float(np.max(np.abs(want))))
