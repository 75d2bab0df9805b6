"""
`graph-defer-norm-scale`: every FileCheck input keeps its semantics on random inputs;
the decode program's layer norms (attention, FFN) move their scale, the LM head's stays;
the Hugging Face LLaMA export still gives torch's logits; `plmr compile` with and without
the pass gives the same decode step on the mesh.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import make_context, parse_module
from plmr.frontend.onnx import import_onnx_file
from plmr.passes.graph_canonicalize import GraphCanonicalizePass
from plmr.passes.norm_defer import GraphDeferNormScalePass, defer_norm_scales
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import random_inputs, select_function

FILECHECK_INPUT = "graph-defer-norm-scale.mlir"
HF = Path(__file__).resolve().parents[2] / "examples" / "hf"


def op_counts(module: ModuleOp) -> Counter[str]:
    return Counter(op.name for op in module.walk() if op.name.startswith("graph."))


def test_the_filecheck_inputs_are_all_found(rewrite_check: Any):
    assert len(rewrite_check.chunks(FILECHECK_INPUT)) == 6


def test_filecheck_inputs_keep_their_semantics(filecheck_chunk: str, rewrite_check: Any):
    module = parse_module(filecheck_chunk)
    before = rewrite_check.semantics(module)
    GraphDeferNormScalePass(max_rows=8).apply(make_context(), module)
    module.verify()
    # float32: the scale applied after the sum instead of to each term.
    before.assert_kept(module)


def test_rows_of_different_scale_keep_their_own_factor():
    """Rows whose RMS differ by 10⁴ each get theirs (the factor is per row, not global)."""
    text = """
    func.func @main(%x: tensor<3x8xf32>, %g: tensor<8xf32>, %w: tensor<8x5xf32>) -> tensor<3x5xf32> {
      %n = graph.rmsnorm %x, %g epsilon = 1.000000e-05 : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
      %y = graph.matmul %n, %w : (tensor<3x8xf32>, tensor<8x5xf32>) -> tensor<3x5xf32>
      %t = graph.tanh %y : tensor<3x5xf32>
      func.return %t : tensor<3x5xf32>
    }"""
    module = parse_module(text)
    rng = np.random.default_rng(0)
    scales = np.asarray([[1e-2], [1.0], [1e2]], np.float32)
    x = rng.standard_normal((3, 8)).astype(np.float32) * scales
    args = [x, *(rng.standard_normal(s).astype(np.float32) for s in ((8,), (8, 5)))]
    want = evaluate_function(module, "main", args)[0]
    assert defer_norm_scales(module) == 0
    assert defer_norm_scales(module, max_rows=3) == 1
    got = evaluate_function(module, "main", args)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_decode_program_moves_the_layer_norms():
    from plmr.models.generate import ProgramBuilder
    from plmr.models.llama_config import LlamaConfig

    config = LlamaConfig(
        "t", dim=32, n_layers=1, n_heads=4, n_kv_heads=2, ffn_dim=64, vocab=16, max_seq=8
    )
    text = ProgramBuilder(config, None, one_projection=True).decode(head=True)
    module = parse_module(text)
    fn = select_function(module, None)
    args = random_inputs(fn, 0)
    want = evaluate_function(module, fn.sym_name.data, args)
    # QKV and up+gate; the LM head's logits are returned as they are (nothing to fold
    # the multiply into): its norm stays.
    assert defer_norm_scales(module) == 2
    module.verify()
    assert op_counts(module)["graph.rmsnorm"] == 1
    got = evaluate_function(module, fn.sym_name.data, args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * float(np.abs(w).max()))


def test_llama_export_keeps_torch_logits(rewrite_check: Any):
    module = import_onnx_file(str(HF / "llama.onnx"))
    GraphCanonicalizePass().apply(make_context(), module)
    norms = op_counts(module)["graph.rmsnorm"]
    # A prompt of several tokens: by default (one row) no norm moves its scale.
    assert defer_norm_scales(module) == 0
    # Two layers: the attention norm read by Q, K and V, the FFN norm by gate and up
    # (the final norm's LM head gives the logits: it stays).
    assert defer_norm_scales(module, max_rows=64) == 2 * (3 + 2)
    module.verify()
    assert norms == 5
    assert op_counts(module)["graph.rmsnorm"] == 1
    rewrite_check.torch_outputs(module, "llama", ["logits"], rtol=1e-3)


@pytest.mark.parametrize(
    "grid",
    # The rewrite is a graph's: one grid by default, an uneven one with `-m slow`.
    [(2, 2), pytest.param((3, 3), marks=pytest.mark.slow)],
    ids=["2x2", "3x3"],
)
def test_compiled_decode_is_the_same_with_and_without_the_pass(grid: tuple[int, int]):
    from plmr.models.generate import ProgramBuilder
    from plmr.models.llama_config import LlamaConfig
    from plmr.passes.pipeline import CompileOptions, compile_module
    from plmr.runtime.mesh_machine import run_mesh

    config = LlamaConfig(
        "t", dim=32, n_layers=1, n_heads=4, n_kv_heads=2, ffn_dim=64, vocab=16, max_seq=8
    )
    text = ProgramBuilder(config, None, one_projection=True).decode(head=True)
    fn = select_function(parse_module(text), None)
    args = random_inputs(fn, 1)
    want = evaluate_function(parse_module(text), fn.sym_name.data, args)
    outs: list[list[np.ndarray]] = []
    for on in (True, False):
        opts = CompileOptions(
            grid=grid,
            substitute=False,
            tile_sizes=(4, 4),
            fit_tiles=True,
            defer_norm_scale=on,
        )
        module = compile_module(make_context(), parse_module(text), opts)
        got, _ = run_mesh(module, args, mode="functional")
        outs.append(list(got))
    for g, w in zip(outs[0], want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * float(np.abs(w).max()))
    for g, w in zip(outs[0], outs[1], strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * float(np.abs(w).max()))
