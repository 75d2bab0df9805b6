"""
`graph-fold-rotate-half`: every FileCheck input keeps its semantics on random inputs; on
the Hugging Face exports every `rotate_half` folds into the weights (a reference for
weights by reference) and the exports still give torch's outputs.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects import graph
from plmr.dialects.context import make_context, parse_module
from plmr.dialects.graph_weights import anchor_weights, weight_ref
from plmr.frontend.onnx import import_onnx_file
from plmr.passes.graph_canonicalize import GraphCanonicalizePass
from plmr.passes.rotate_fold import GraphFoldRotateHalfPass, fold_module
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import functions, random_inputs, select_function
from plmr.runtime.weights import rotate_half

ROOT = Path(__file__).resolve().parents[2]
FILECHECK = ROOT / "tests" / "filecheck" / "passes" / "graph-fold-rotate-half.mlir"
HF = ROOT / "examples" / "hf"


def chunks() -> list[object]:
    texts = FILECHECK.read_text().split("// -----")
    return [pytest.param(t, id=f"chunk{i}") for i, t in enumerate(texts)]


def ops(module: ModuleOp) -> Counter[str]:
    return Counter(op.name for op in module.walk())


def test_the_filecheck_inputs_are_all_found():
    assert len(chunks()) == 5


def test_rotate_half_is_the_signed_permutation():
    w = np.arange(24, dtype=np.float32).reshape(2, 12)
    # R for one block of 4: column j of W·R is -W[:, j + 2] (j < 2), W[:, j - 2] after.
    r = np.zeros((4, 4), np.float32)
    r[2, 0], r[3, 1], r[0, 2], r[1, 3] = -1, -1, 1, 1
    want = np.concatenate([w[:, i : i + 4] @ r for i in range(0, 12, 4)], axis=1)
    np.testing.assert_array_equal(rotate_half(w, 4), want)


@pytest.mark.parametrize("text", chunks())
def test_filecheck_inputs_keep_their_semantics(text: str, tmp_path: Path):
    module = parse_module(text)
    # The weight by reference of the inputs: 16 values at byte 64 of a raw data file.
    rng = np.random.default_rng(0)
    data = np.concatenate([np.zeros(16), rng.standard_normal(16)]).astype("<f4")
    (tmp_path / "q.onnx.data").write_bytes(data.tobytes())
    anchor_weights(module, tmp_path)
    names = [fn.sym_name.data for fn in functions(module)]
    args = {n: random_inputs(select_function(module, n), i) for i, n in enumerate(names)}
    before = {n: evaluate_function(module, n, args[n]) for n in names}
    before_ops = ops(module)
    GraphFoldRotateHalfPass().apply(make_context(), module)
    module.verify()
    changed = ops(module) != before_ops
    assert changed == ("not_rotations" not in text)
    for n in names:
        after = evaluate_function(module, n, args[n])
        for a, b in zip(before[n], after, strict=True):
            assert a.shape == b.shape
            assert a.dtype == b.dtype
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5 * float(np.abs(a).max()))


def check_outputs(module: ModuleOp, npz: Path, outputs: list[str]) -> None:
    fn = select_function(module, None)
    names = [a.name_hint for a in fn.body.block.args]
    with np.load(npz) as data:
        args = [np.asarray(data[n]) for n in names]
        want = [np.asarray(data[k]) for k in outputs]
    got = evaluate_function(module, fn.sym_name.data, args)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        assert float(np.max(np.abs(g - w))) <= 1e-4 * max(1.0, float(np.max(np.abs(w))))


def test_by_reference_export_folds_into_references_and_gives_torch_logits():
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
    check_outputs(module, HF / "llama_external.npz", ["logits"])


@pytest.mark.parametrize("model", ["llama", "qwen2", "mistral"])
def test_decode_exports_keep_torch_outputs(model: str):
    module = import_onnx_file(str(HF / f"{model}_decode.onnx"))
    GraphCanonicalizePass().apply(make_context(), module)
    assert fold_module(module) == 4
    module.verify()
    assert ops(module)["graph.neg"] == 0
    with np.load(HF / f"{model}_decode.npz") as data:
        outputs = [k for k in data if k == "logits" or k.startswith("present")]
    check_outputs(module, HF / f"{model}_decode.npz", outputs)
