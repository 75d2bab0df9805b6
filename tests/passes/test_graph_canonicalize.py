"""
`graph-canonicalize`: every FileCheck input keeps its semantics on random inputs, the
NaN guard is kept exactly when it matters, and the patterns fire on the Hugging Face
exports (which still give torch's outputs).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects import graph
from plmr.dialects.context import make_context, parse_module
from plmr.frontend.onnx import import_onnx_file
from plmr.passes.canonicalize.attention import finite_values, rows_have_finite
from plmr.passes.graph_canonicalize import GraphCanonicalizePass
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import functions, random_inputs, select_function

ROOT = Path(__file__).resolve().parents[2]
FILECHECK = ROOT / "tests" / "filecheck" / "passes"
HF = ROOT / "examples" / "hf"


def canonicalize(module: ModuleOp) -> ModuleOp:
    GraphCanonicalizePass().apply(make_context(), module)
    module.verify()
    return module


def op_counts(module: ModuleOp) -> Counter[str]:
    return Counter(op.name for op in module.walk() if op.name.startswith("graph."))


def chunks() -> list[object]:
    out: list[object] = []
    for path in sorted(FILECHECK.glob("graph_canonicalize*.mlir")):
        for i, text in enumerate(path.read_text().split("// -----")):
            out.append(pytest.param(text, id=f"{path.stem}-{i}"))
    return out


def assert_same(before: list[np.ndarray], after: list[np.ndarray]) -> None:
    assert len(before) == len(after)
    for a, b in zip(before, after, strict=True):
        assert a.shape == b.shape
        assert a.dtype == b.dtype
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)


def test_the_filecheck_inputs_are_all_found():
    # Four files, each with a positive and a negative case of its patterns.
    assert len(chunks()) >= 25


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("text", chunks())
def test_filecheck_inputs_keep_their_semantics(text: str):
    module = parse_module(text)
    names = [fn.sym_name.data for fn in functions(module)]
    args = {
        n: random_inputs(select_function(module, n), seed) for seed, n in enumerate(names)
    }
    before = {n: evaluate_function(module, n, args[n]) for n in names}
    canonicalize(module)
    for n in names:
        assert_same(before[n], evaluate_function(module, n, args[n]))


GUARD = """
func.func @main(%s: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  %mask = graph.constant dense<"MASK"> : tensor<4x4xf32>
  %z = graph.add %s, %mask : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
  %p = graph.softmax %z : tensor<2x4x4xf32>
  %nan = graph.cmp ne %p, %p : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xi1>
  %zero = graph.constant dense<0.0> : tensor<f32>
  %r = graph.where %nan, %zero, %p : (tensor<2x4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  func.return %r : tensor<2x4x4xf32>
}
"""


def guard_module(mask: np.ndarray) -> ModuleOp:
    hex_mask = "0x" + mask.astype("<f4").tobytes().hex().upper()
    return parse_module(GUARD.replace("MASK", hex_mask))


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("masked_row", [None, 0, 3])
def test_nan_guard_goes_exactly_when_no_row_is_fully_masked(masked_row: int | None):
    mask = np.triu(np.full((4, 4), -np.inf, np.float32), 1)
    if masked_row is not None:
        mask[masked_row] = -np.inf
    module = guard_module(mask)
    args = random_inputs(select_function(module, None), 0)
    before = evaluate_function(module, "main", args)[0]
    canonicalize(module)
    after = evaluate_function(module, "main", args)[0]
    guarded = op_counts(module)["graph.where"] == 1
    assert guarded == (masked_row is not None)
    # The guard was needed exactly where it stayed: without it the row would be NaN.
    assert not np.isnan(before).any()
    assert not np.isnan(after).any()
    np.testing.assert_allclose(after, before, rtol=1e-6)


def test_rows_have_finite_follows_broadcasts_and_transposes():
    text = """
    func.func @main(%s: tensor<2x4x4xf32>, %m: tensor<4x4xf32>) -> (tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) {
      %c = graph.constant dense<[[0.0, -3.0e+38, -3.0e+38, -3.0e+38], [0.0, 0.0, -3.0e+38, -3.0e+38], [0.0, 0.0, 0.0, -3.0e+38], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
      %e = graph.expand %c : tensor<4x4xf32> -> tensor<2x4x4xf32>
      %a = graph.add %s, %e : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
      %t = graph.transpose %a perm = [0, 2, 1] : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
      %b = graph.add %s, %m : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
      func.return %a, %t, %b : tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>
    }
    """
    module = parse_module(text)
    fn = select_function(module, None)
    block = fn.body.block
    finite = finite_values(block)
    values = {r.name_hint: r for op in block.ops for r in op.results}
    assert values["a"] in finite  # the lowest f32 is finite: no -inf anywhere
    assert rows_have_finite(values["a"], 2, finite)
    assert rows_have_finite(values["t"], 2, finite)
    # A mask that is an argument may hold -inf rows.
    assert not rows_have_finite(values["b"], 2, finite)


def hf_module(name: str) -> ModuleOp:
    return import_onnx_file(str(HF / f"{name}.onnx"))


def stored(
    name: str,
    inputs: tuple[str, ...] = ("input_ids",),
    outputs: tuple[str, ...] = ("logits",),
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    with np.load(HF / f"{name}.npz") as data:
        return [np.asarray(data[k]) for k in inputs], [np.asarray(data[k]) for k in outputs]


def assert_torch_outputs(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        scale = float(np.max(np.abs(w)))
        assert float(np.max(np.abs(g - w))) <= 1e-4 * scale


def test_llama_export_is_recognised():
    module = hf_module("llama")
    inputs, (logits,) = stored("llama")
    before = op_counts(module)
    canonicalize(module)
    after = op_counts(module)
    # Two layers: RMSNorm before attention and MLP in each, and the final one.
    assert before["graph.reduce"] == 5
    assert after["graph.rmsnorm"] == 5
    for gone in ("graph.reduce", "graph.sqrt", "graph.reciprocal"):
        assert after[gone] == 0, gone
    # rotate_half of q and k in both layers became matmuls with a signed permutation.
    assert before["graph.concat"] == 4
    assert after["graph.concat"] == 0
    assert after["graph.slice"] == 0
    assert after["graph.neg"] == 0
    # The K/V repetition for GQA (2 K/V heads, 4 query heads) is gone.
    assert before["graph.expand"] == 4
    assert after["graph.expand"] == 0
    # The NaN guards (causal mask with the lowest float) are gone.
    assert before["graph.where"] == 2
    assert after["graph.where"] == after["graph.cmp"] == 0
    # SiLU in both MLPs.
    assert after["graph.silu"] == 2
    assert after["graph.sigmoid"] == 0
    assert sum(after.values()) < sum(before.values()) - 40
    assert_torch_outputs(evaluate_function(module, "main", inputs), [logits])


def test_llama_export_grouped_attention_broadcasts_kv():
    module = canonicalize(hf_module("llama"))
    grouped = [
        op
        for op in module.walk()
        if isinstance(op, graph.MatmulOp) and len(graph.static_shape(op.lhs, "lhs")) == 5
    ]
    # Scores and outputs of both layers: queries [1, 2, 2, 8, d] against K/V [1, 2, 1, 8, d].
    assert len(grouped) == 4
    for op in grouped:
        assert graph.static_shape(op.lhs, "lhs")[:3] == (1, 2, 2)
        assert graph.static_shape(op.rhs, "rhs")[:3] == (1, 2, 1)
    scores = [op for op in grouped if op.transpose_b is not None]
    assert len(scores) == 2


def test_llama_export_keeps_its_kv_repetition_for_plmr_compile():
    module = hf_module("llama")
    inputs, (logits,) = stored("llama")
    GraphCanonicalizePass(unrepeat_kv=False).apply(make_context(), module)
    module.verify()
    after = op_counts(module)
    assert after["graph.expand"] == 4
    assert after["graph.rmsnorm"] == 5
    assert after["graph.concat"] == after["graph.where"] == 0
    shapes = [
        graph.static_shape(op.result, "result")
        for op in module.walk()
        if isinstance(op, graph.MatmulOp)
    ]
    assert all(len(s) <= 4 for s in shapes)
    assert_torch_outputs(evaluate_function(module, "main", inputs), [logits])


def test_gpt2_export_loses_its_nan_guards_and_keeps_torch_outputs():
    module = hf_module("gpt2")
    inputs, (logits,) = stored("gpt2")
    before = op_counts(module)
    canonicalize(module)
    after = op_counts(module)
    assert before["graph.where"] == 2
    assert after["graph.where"] == 0
    assert after["graph.layernorm"] == 5
    # NewGELU (tanh) in both MLPs.
    assert after["graph.gelu"] == 2
    assert after["graph.tanh"] == 0
    assert sum(after.values()) < sum(before.values())
    assert_torch_outputs(evaluate_function(module, "main", inputs), [logits])


def test_bert_export_keeps_its_mask_and_loses_its_guards():
    module = hf_module("bert")
    inputs, outputs = stored(
        "bert",
        ("input_ids", "attention_mask"),
        ("last_hidden_state", "pooler_output"),
    )
    before = op_counts(module)
    canonicalize(module)
    after = op_counts(module)
    # The padding mask is computed from the attention_mask input: `where(keep, 0,
    # lowest)` holds finite values, so the softmax rows cannot be NaN.
    assert before["graph.where"] == 3
    assert after["graph.where"] == 1
    assert after["graph.gelu"] == 2
    assert after["graph.erf"] == 0
    assert_torch_outputs(evaluate_function(module, "main", inputs), outputs)


def test_plmr_compile_canonicalizes_first(monkeypatch: pytest.MonkeyPatch):
    from plmr.passes.pipeline import CompileOptions, to_loop_level
    from plmr.passes.transpose_elim import TransposeElimPass

    calls: list[str] = []
    canon, elim = GraphCanonicalizePass.apply, TransposeElimPass.apply

    def spy_canon(self: GraphCanonicalizePass, ctx: object, module: ModuleOp) -> None:
        calls.append("graph-canonicalize")
        canon(self, make_context(), module)

    def spy_elim(self: TransposeElimPass, ctx: object, module: ModuleOp) -> None:
        calls.append("transpose-elim")
        elim(self, make_context(), module)

    monkeypatch.setattr(GraphCanonicalizePass, "apply", spy_canon)
    monkeypatch.setattr(TransposeElimPass, "apply", spy_elim)
    module = parse_module(
        (FILECHECK / "graph_canonicalize_norms.mlir").read_text().split("// -----")[0]
    )
    to_loop_level(make_context(), module, CompileOptions(substitute=False))
    assert calls == ["graph-canonicalize", "transpose-elim"]
    assert not any(op.name.startswith("graph.") for op in module.walk())
