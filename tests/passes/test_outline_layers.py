"""
`graph-outline-layers`: the repeated layers of decoder exports outlined into one body
called once per layer, checked against the reference semantics before and after, and
the functions it must leave alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import make_context, parse_module
from plmr.errors import PassOptionError, PlmrError
from plmr.frontend.onnx import import_onnx_file
from plmr.models.llama_onnx import LlamaOnnxConfig
from plmr.passes.outline_layers import BODY_ATTR, LAYER_ATTR, GraphOutlineLayersPass
from plmr.runtime.running import random_inputs, run_function, select_function
from plmr.target.interface import arg_names, result_names

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"


def width16(layers: int, seed: int = 0) -> LlamaOnnxConfig:
    """A LLaMA decoder of `layers` layers, width 16."""
    return LlamaOnnxConfig(
        hidden=16, heads=2, kv_heads=1, ffn=32, vocab=32, seq=4, layers=layers, seed=seed
    )


def calls(module: ModuleOp) -> list[func.CallOp]:
    return [op for op in module.walk() if isinstance(op, func.CallOp)]


def bodies(module: ModuleOp) -> list[func.FuncOp]:
    return [
        op
        for op in module.ops
        if isinstance(op, func.FuncOp) and BODY_ATTR in op.attributes
    ]


@pytest.mark.parametrize("layers", [2, 3, 4])
def test_outlined_export_computes_what_the_export_computes(
    tmp_path: Path, layers: int, llama_export: Any
):
    module = llama_export(tmp_path, width16(layers, seed=layers))
    fn = select_function(module, None)
    for seed in range(3):
        inputs = random_inputs(fn, seed)
        want = run_function(module, fn, inputs)
        if seed == 0:
            GraphOutlineLayersPass().apply(make_context(), module)
            fn = select_function(module, None)
        got = run_function(module, fn, inputs)
        np.testing.assert_array_equal(got[0], want[0])
    assert [int(c.attributes[LAYER_ATTR].value.data) for c in calls(module)] == list(
        range(layers)
    )
    (body,) = bodies(module)
    # Each call passes its own layer's 7 projections (by reference, or inline where
    # they are small); the norms' scales, equal in every layer, are in the body.
    leaves = [
        [o.owner for o in c.arguments if o.owner.name in ("graph.weight", "graph.constant")]
        for c in calls(module)
    ]
    assert all(len(w) == 7 for w in leaves)
    assert len({id(op) for w in leaves for op in w}) == 7 * layers
    for i, w in enumerate(leaves):
        names = [str(op.properties["name"]) for op in w if op.name == "graph.weight"]
        assert names
        assert all(f"layers.{i}." in n for n in names)
    assert not any(op.name == "graph.weight" for op in body.walk())


def test_depth_does_not_grow_the_body(tmp_path: Path, llama_export: Any):
    texts: list[str] = []
    for layers in (2, 4):
        module = llama_export(tmp_path, width16(layers))
        GraphOutlineLayersPass().apply(make_context(), module)
        (body,) = bodies(module)
        assert int(body.attributes.pop(BODY_ATTR).value.data) == layers
        texts.append(str(body))
    assert texts[0] == texts[1]


@pytest.mark.parametrize("name", ["llama_prefill", "qwen2_decode", "mistral_decode"])
def test_hf_export_outlined_gives_torch_outputs(name: str):
    """
    The exports of examples/hf (2 layers; the RoPE tables and the mask are computed
    inside the first layer and reused by the second) outline into one body."""
    module = import_onnx_file(str(HF / f"{name}.onnx"))
    GraphOutlineLayersPass().apply(make_context(), module)
    assert len(calls(module)) == 2
    assert len(bodies(module)) == 1
    fn = select_function(module, None)
    with np.load(HF / f"{name}.npz") as data:
        inputs = [data[n] for n in arg_names(fn)]
        want = {n: data[n] for n in result_names(fn)}
    results = run_function(module, fn, inputs)
    for (n, ref), got in zip(want.items(), results, strict=True):
        assert float(np.abs(got - ref).max()) <= 1e-4 * float(np.abs(ref).max()), n


LAYERS = """
func.func @main(%x: tensor<4x8xf32>WEIGHT_ARGS) -> tensor<4x8xf32> {
  %e = graph.relu %x : tensor<4x8xf32>
  WEIGHT0
  %p0 = graph.matmul %e, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a0 = graph.silu %p0 : tensor<4x8xf32>
  %r0 = graph.add %e, %a0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  WEIGHT1
  %p1 = graph.matmul %r0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a1 = graph.OP %p1 : tensor<4x8xf32>
  %r1 = graph.add %r0, %a1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r1 : tensor<4x8xf32>
}
"""


def layers_text(op: str, weights_as_arguments: bool) -> str:
    """Two layers (the second's activation `op`), weights constants or arguments."""
    if weights_as_arguments:
        args, w0, w1 = ", %w0: tensor<8x8xf32>, %w1: tensor<8x8xf32>", "", ""
    else:
        args = ""
        w0, w1 = (
            f"%w{i} = graph.constant dense<{v}> : tensor<8x8xf32>"
            for i, v in enumerate((0.5, 2.0))
        )
    return (
        LAYERS.replace("WEIGHT_ARGS", args)
        .replace("WEIGHT0", w0)
        .replace("WEIGHT1", w1)
        .replace("OP", op)
    )


def test_layers_that_differ_in_structure_are_not_merged():
    same = parse_module(layers_text("silu", weights_as_arguments=False))
    GraphOutlineLayersPass(min_ops=3).apply(make_context(), same)
    assert len(calls(same)) == 2
    module = parse_module(layers_text("gelu", weights_as_arguments=False))
    before = str(module)
    GraphOutlineLayersPass(min_ops=3).apply(make_context(), module)
    assert str(module) == before


def test_layers_with_weights_as_arguments_are_not_layers():
    """
    The same ops on weights the caller passes are not a layer's weights: no weight of
    the function differs between the copies, so nothing is outlined."""
    module = parse_module(layers_text("silu", weights_as_arguments=True))
    before = str(module)
    GraphOutlineLayersPass(min_ops=3).apply(make_context(), module)
    assert str(module) == before


def test_forcing_a_count_the_model_does_not_hold_is_one_error(
    tmp_path: Path, llama_export: Any
):
    module = llama_export(tmp_path, width16(2))
    with pytest.raises(PlmrError, match=r"layers=3 was asked, but the function holds no 3"):
        GraphOutlineLayersPass(layers=3).apply(make_context(), module)
    with pytest.raises(PassOptionError, match="layers must be 0"):
        GraphOutlineLayersPass(layers=1).apply(make_context(), module)
    with pytest.raises(PassOptionError, match="min-ops must be >= 1"):
        GraphOutlineLayersPass(min_ops=0).apply(make_context(), module)
    GraphOutlineLayersPass(layers=2).apply(make_context(), module)
    assert len(calls(module)) == 2
