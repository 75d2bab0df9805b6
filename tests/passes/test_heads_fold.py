"""
`graph-fold-heads`: every FileCheck input keeps its semantics on random inputs (weights
by reference read from a file through their `heads`/`rows` views); on the Hugging Face
decode exports the projections fold and the exports still give torch's outputs, at the
graph level; a decode export by reference compiles through the weights' views.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp, TensorType, f32

from plmr.dialects import graph
from plmr.dialects.context import make_context, parse_module
from plmr.dialects.graph_weights import WeightRef, anchor_weights, weight_ops
from plmr.frontend.onnx import import_onnx_file
from plmr.models.llama_onnx import LlamaOnnxConfig
from plmr.passes.graph_canonicalize import GraphCanonicalizePass
from plmr.passes.heads_fold import GraphFoldHeadsPass, fold_module
from plmr.passes.norm_defer import GraphDeferNormScalePass
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.passes.repeat_kv_fold import GraphFoldRepeatKvPass
from plmr.passes.rotate_fold import GraphFoldRotateHalfPass
from plmr.passes.transpose_elim import TransposeElimPass
from plmr.runtime.mesh_machine import run_mesh
from plmr.runtime.running import run_function, select_function
from plmr.runtime.weights import load_weight, rotate_half

FILECHECK_INPUT = "graph-fold-heads.mlir"
HF = Path(__file__).resolve().parents[2] / "examples" / "hf"


def ops(module: ModuleOp) -> Counter[str]:
    return Counter(op.name for op in module.walk())


def test_the_filecheck_inputs_are_all_found(rewrite_check: Any):
    assert len(rewrite_check.chunks(FILECHECK_INPUT)) == 6


def test_views_of_a_weight_are_its_heads_and_rows(tmp_path: Path):
    """`heads` after `rotate` and `rows` give numpy's rearrangement, bit for bit."""
    w = np.random.default_rng(0).standard_normal((6, 24)).astype("<f4")
    (tmp_path / "w.data").write_bytes(w.tobytes())
    file = str(tmp_path / "w.data")

    def ref(shape: list[int], **view: Any) -> WeightRef:
        return WeightRef("w", file, 0, TensorType(f32, shape), **view)

    heads = load_weight(ref([2, 3, 6, 4], rotate=4, heads=(2, 3)))
    rotated = rotate_half(w, 4)
    for a in range(2):
        for b in range(3):
            col = (a * 3 + b) * 4
            np.testing.assert_array_equal(heads[a, b], rotated[:, col : col + 4])
    rows = load_weight(ref([2, 3, 24], rows=(2, 3)))
    np.testing.assert_array_equal(rows[1, 2], w[5])


def test_filecheck_inputs_keep_their_semantics(
    filecheck_chunk: str, tmp_path: Path, rewrite_check: Any
):
    module = parse_module(filecheck_chunk)
    # The weights by reference of the inputs: 64 values at byte 64 of a raw data file.
    rng = np.random.default_rng(0)
    data = np.concatenate([np.zeros(16), rng.standard_normal(64)]).astype("<f4")
    (tmp_path / "q.onnx.data").write_bytes(data.tobytes())
    anchor_weights(module, tmp_path)
    before = rewrite_check.semantics(module)
    text = str(module)
    GraphFoldHeadsPass(rows=True).apply(make_context(), module)
    module.verify()
    changed = str(module) != text
    assert changed == ("not_heads" not in filecheck_chunk)
    before.assert_kept(module)


def _decode_graph(model: str) -> ModuleOp:
    """The decode export after the graph passes that run before graph-fold-heads."""
    module = import_onnx_file(str(HF / f"{model}_decode.onnx"))
    ctx = make_context()
    passes = [
        GraphCanonicalizePass(unrepeat_kv=False),
        GraphFoldRotateHalfPass(),
        GraphFoldRepeatKvPass(max_rows=1),
        TransposeElimPass(),
        GraphDeferNormScalePass(max_rows=1),
    ]
    for p in passes:
        p.apply(ctx, module)
    return module


@pytest.mark.parametrize(
    ("model", "folded"),
    [
        # Per layer: Q with its rotation (one grouping reshape), K, its rotation, V, the
        # output projection.
        ("llama", 10),
        ("mistral", 10),
        # Qwen2's Q, K and V have biases (one per column, not per head): only the output
        # projections fold.
        ("qwen2", 2),
    ],
)
def test_decode_exports_fold_and_keep_torch_outputs(
    model: str, folded: int, rewrite_check: Any
):
    module = _decode_graph(model)
    matmuls = ops(module)["graph.matmul"]
    assert fold_module(module) == folded
    module.verify()
    # Each layer's output projection is a sum by head, not a matmul.
    assert ops(module)["graph.matmul"] == matmuls - 2
    rewrite_check.torch_outputs(module, f"{model}_decode")


def test_a_decode_export_by_reference_folds_into_views_and_compiles(
    tmp_path: Path, llama_export: Any, decode_step_config: LlamaOnnxConfig
):
    """
    Weights by reference: the folded weights are `heads`/`rows` views of the file (no
    weight is read at compile time), and the compiled step (2x4) reads them through the
    views to the graph's results.
    """
    config = decode_step_config
    module = llama_export(tmp_path, config)
    graph_module = module.clone()
    opts = CompileOptions(grid=(2, 4), substitute=False, tile_sizes=(4, 4), fit_tiles=True)
    compiled = compile_module(make_context(), module, opts)
    views = [
        leaf.heads or leaf.rows
        for _, ref in weight_ops(compiled)
        for leaf in ref.leaves()
        if leaf.heads or leaf.rows
    ]
    # Q (grouped [2, 2]) and its rotation, K, its rotation and V (as [2, 1], merged with
    # Q's by graph-merge-matmuls), the output projection by rows; the FFN's gate and up
    # stacked as [1, 1] each.
    assert sorted(views) == [
        (1, 1),
        (1, 1),
        (2, 1),
        (2, 1),
        (2, 1),
        (2, 2),
        (2, 2),
        (2, 2, 8),
    ]
    assert not any(isinstance(op, graph.ConstantOp) for op in compiled.walk())
    fn = select_function(graph_module, None)
    rng = np.random.default_rng(0)
    args: list[Any] = []
    for arg in fn.args:
        t = arg.type
        assert isinstance(t, TensorType)
        shape = tuple(t.get_shape())
        if "position" in str(arg.name_hint):
            args.append(np.full(shape, config.past, np.int64))
        elif "mask" in str(arg.name_hint):
            args.append(np.ones(shape, np.int64))
        elif "input_ids" in str(arg.name_hint):
            args.append(np.full(shape, 3, np.int64))
        else:
            args.append(rng.standard_normal(shape).astype(np.float32))
    want = run_function(graph_module, fn, args)
    got, _ = run_mesh(compiled, args, mode="functional")
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3)
