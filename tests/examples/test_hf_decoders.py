"""
The decoder exports with a KV cache (`examples/hf/<family>_prefill.onnx` and
`<family>_decode.onnx`, tiny LLaMA, Qwen2 and Mistral models written by
`torch.onnx.export(..., dynamo=True)` with the position an input): imported and run with
plmr's reference semantics against torch's stored outputs, and compiled for grids of
2x2, 3x3 and 2x4 PEs and run on the modelled wafer: by default each export on one grid,
each grid with a prefill and a decode step of two families; every export on every grid
with `pytest -m slow`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import make_context
from plmr.frontend.onnx import import_onnx_file
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.mesh_machine import run_mesh
from plmr.runtime.running import run_function, select_function
from plmr.target.interface import arg_names, result_names

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"
FAMILIES = ("llama", "qwen2", "mistral")
EXPORTS = tuple(f"{f}_{kind}" for f in FAMILIES for kind in ("prefill", "decode"))
LAYERS, KV_HEADS, HEAD_DIM, VOCAB = 2, 2, 16, 128
PROMPT, CONTEXT, GENERATED = 8, 72, 64
CACHE = [f"{n}.{kv}" for n in range(LAYERS) for kv in ("key", "value")]

REFERENCE_RTOL = 1e-4
MESH_RTOL = 1e-3
"""Largest absolute difference allowed, relative to the output's largest magnitude."""

GRIDS = [(2, 2), (3, 3), (2, 4)]


@pytest.mark.parametrize("family", FAMILIES)
def test_the_exports_are_checked_in(family: str, hf: Any):
    prefill, decode = f"{family}_prefill", f"{family}_decode"
    for name in (prefill, decode):
        path = HF / f"{name}.onnx"
        assert path.stat().st_size <= 1024 * 1024, name
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
        assert model.producer_name == "pytorch"
        assert [(o.domain, o.version) for o in model.opset_import] == [("", 18)]
        ops = {n.op_type for n in model.graph.node}
        # The position is an input: RoPE's tables are computed at run time.
        assert {"Cos", "Sin"} <= ops, name
    assert hf.names(prefill) == (
        ["input_ids", "position_ids", "attention_mask"],
        ["logits", *(f"present.{c}" for c in CACHE)],
    )
    assert hf.names(decode) == (
        [
            "input_ids",
            "position_ids",
            "attention_mask",
            *(f"past_key_values.{c}" for c in CACHE),
        ],
        ["logits", *(f"present.{c}" for c in CACHE)],
    )


@pytest.mark.parametrize("family", FAMILIES)
def test_the_stored_step_follows_the_prefill_and_the_greedy_tokens(family: str, hf: Any):
    """The decode step's inputs are the prefill's cache and torch's first greedy token."""
    p_in, p_out = hf.stored(f"{family}_prefill")
    d_in, d_out = hf.stored(f"{family}_decode")
    with np.load(HF / f"{family}_greedy.npz") as data:
        prompt, tokens = np.asarray(data["input_ids"]), np.asarray(data["tokens"])
    assert prompt.shape == (1, PROMPT)
    assert tokens.shape == (GENERATED,)
    np.testing.assert_array_equal(p_in["input_ids"], prompt)
    assert int(np.argmax(p_out["logits"][0, -1])) == tokens[0]
    assert d_in["input_ids"].tolist() == [[tokens[0]]]
    assert d_in["position_ids"].tolist() == [[PROMPT]]
    mask = d_in["attention_mask"][0]
    assert mask.tolist() == [0] * (CONTEXT - PROMPT - 1) + [1] * (PROMPT + 1)
    for c in CACHE:
        past = d_in[f"past_key_values.{c}"]
        assert past.shape == (1, KV_HEADS, CONTEXT - 1, HEAD_DIM)
        np.testing.assert_array_equal(
            past[:, :, CONTEXT - 1 - PROMPT :], p_out[f"present.{c}"]
        )
        assert not past[:, :, : CONTEXT - 1 - PROMPT].any()
        present = d_out[f"present.{c}"]
        assert present.shape == (1, KV_HEADS, CONTEXT, HEAD_DIM)
        np.testing.assert_array_equal(present[:, :, :-1], past)
    assert d_out["logits"].shape == (1, 1, VOCAB)
    assert int(np.argmax(d_out["logits"][0, -1])) == tokens[1]


@pytest.mark.parametrize("name", EXPORTS)
def test_import_gives_torch_outputs(name: str, hf: Any):
    inputs, want = hf.stored(name)
    module = import_onnx_file(str(HF / f"{name}.onnx"))
    fn = select_function(module, None)
    assert arg_names(fn) == list(inputs)
    assert result_names(fn) == list(want)
    assert any(op.name == "graph.cos" for op in fn.walk())
    results = run_function(module, fn, [inputs[k] for k in inputs])
    got = dict(zip(want, results, strict=True))
    hf.assert_close(got, want, REFERENCE_RTOL)
    if name.endswith("_decode"):
        family = name.removesuffix("_decode")
        with np.load(HF / f"{family}_greedy.npz") as data:
            assert int(np.argmax(got["logits"][0, -1])) == int(data["tokens"][1])


def compiled(name: str, grid: tuple[int, int]) -> ModuleOp:
    opts = CompileOptions(grid=grid, substitute=False, tile_sizes=(8, 8), fit_tiles=True)
    return compile_module(make_context(), import_onnx_file(str(HF / f"{name}.onnx")), opts)


def compiled_cases() -> list[object]:
    """Every export on every grid; family f's kind k on grid (f + k) mod 3 by default."""
    cases: list[object] = []
    for f, family in enumerate(FAMILIES):
        for k, kind in enumerate(("prefill", "decode")):
            for g, grid in enumerate(GRIDS):
                marks = () if g == (f + k) % len(GRIDS) else pytest.mark.slow
                name = f"{family}_{kind}"
                cases.append(pytest.param(name, grid, marks=marks, id=f"{name}-{grid}"))
    return cases


@pytest.mark.parametrize(("name", "grid"), compiled_cases())
def test_compiled_export_gives_torch_outputs(name: str, grid: tuple[int, int], hf: Any):
    inputs, want = hf.stored(name)
    module = compiled(name, grid)
    text = str(module)
    assert "mesh.program @main" in text
    assert "loop.nest" not in text
    assert "graph." not in text
    outs, _ = run_mesh(module, list(inputs.values()), mode="functional")
    hf.assert_close(dict(zip(want, outs, strict=True)), want, MESH_RTOL)
