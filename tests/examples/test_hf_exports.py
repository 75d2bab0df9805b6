"""
The Hugging Face exports (`examples/hf/`, tiny `transformers` models written by
`torch.onnx.export(..., dynamo=True)`) give torch's outputs: imported and run with plmr's
reference semantics, and compiled with `plmr compile` and run on the modelled wafer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx.numpy_helper import to_array

from plmr.frontend.onnx import import_onnx_file
from plmr.runtime.running import run_function, select_function
from plmr.target.interface import arg_names, result_names
from plmr.tools.cli import main as plmr_main

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"
MODELS = ("llama", "gpt2", "bert")
"""
The exports with their weights inline; `llama_external` is `llama` with a data file, which
plmr reads by reference.
"""
EXPORTS = (*MODELS, "llama_external")
GRIDS = {
    "2x2": ("--tile-sizes", "8,8"),
    "4x4": ("--tile-sizes", "8,8", "--no-substitute"),
}
"""
`plmr compile` options per grid: fixed blocks (searching them costs a minute a model and
does not change the results), and TASO's substitutions on one grid only.
"""

REFERENCE_RTOL = 1e-4
MESH_RTOL = 1e-3
"""Largest absolute difference allowed, relative to the output's largest magnitude."""


def test_the_exports_are_checked_in(hf: Any):
    for name in EXPORTS:
        onnx_file = HF / f"{name}.onnx"
        data = HF / f"{name}.onnx.data"
        assert (HF / f"{name}.npz").is_file(), name
        assert data.is_file() == (name == "llama_external"), name
        size = onnx_file.stat().st_size + (data.stat().st_size if data.exists() else 0)
        assert size <= 2 * 1024 * 1024, name
        model = onnx.load(str(onnx_file))
        onnx.checker.check_model(model)
        assert model.producer_name == "pytorch"
        assert [(o.domain, o.version) for o in model.opset_import] == [("", 18)]
    assert hf.names("llama") == (["input_ids"], ["logits"])
    assert hf.names("bert") == (
        ["input_ids", "attention_mask"],
        ["last_hidden_state", "pooler_output"],
    )


def test_the_external_variant_is_the_same_model():
    inline = onnx.load(str(HF / "llama.onnx")).graph
    external = onnx.load(str(HF / "llama_external.onnx")).graph
    assert [n.SerializeToString() for n in inline.node] == [
        n.SerializeToString() for n in external.node
    ]
    assert [t.name for t in inline.initializer] == [t.name for t in external.initializer]
    for a, b in zip(inline.initializer, external.initializer, strict=True):
        np.testing.assert_array_equal(to_array(a), to_array(b))
    stored = onnx.load(str(HF / "llama_external.onnx"), load_external_data=False)
    assert any(
        t.data_location == onnx.TensorProto.EXTERNAL for t in stored.graph.initializer
    )


@pytest.mark.parametrize("name", EXPORTS)
def test_import_gives_torch_outputs(name: str, hf: Any):
    inputs, want = hf.stored(name)
    module = import_onnx_file(str(HF / f"{name}.onnx"))
    fn = select_function(module, None)
    assert arg_names(fn) == list(inputs)
    assert result_names(fn) == list(want)
    results = run_function(module, fn, [inputs[k] for k in inputs])
    hf.assert_close(dict(zip(want, results, strict=True)), want, REFERENCE_RTOL)


COMPILED = [
    *((name, grid) for name in MODELS for grid in GRIDS),
    ("llama_external", "2x2"),
]
"""
The compiled cases: every model on both grids; `llama_external` (the same graph as
`llama`) on the grid with TASO's substitutions only: what it adds, weights kept in the
data file through the whole pipeline, does not depend on the grid.
"""


@pytest.mark.parametrize(("name", "grid"), COMPILED)
def test_compiled_export_gives_torch_outputs(
    name: str,
    grid: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    hf: Any,
):
    inputs, want = hf.stored(name)
    program = tmp_path / f"{name}_{grid}.mlir"
    code = plmr_main(
        [
            "compile",
            str(HF / f"{name}.onnx"),
            "--grid",
            grid,
            *GRIDS[grid],
            "-o",
            str(program),
        ]
    )
    assert code == 0, capsys.readouterr().err
    feeds, results = tmp_path / "inputs.npz", tmp_path / "results.npz"
    np.savez(feeds, **inputs)
    code = plmr_main(
        [
            "run",
            str(program),
            "--inputs",
            str(feeds),
            "--mode",
            "functional",
            "--output",
            str(results),
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    text = program.read_text()
    if name == "llama_external":
        # Its weights stay in the model's data file, named relative to the program.
        data = HF / "llama_external.onnx.data"
        assert f'file = "{os.path.relpath(data, tmp_path)}"' in text
        # Its 16 initializers above 1 KiB, in 10 weights: per layer, Q, K, V (and Q and
        # K rotated) are one reference, gate and up another (graph-merge-matmuls).
        assert text.count("dense_resource<") == 10
        assert text.count("parts = [") == 4
        assert text.count("rotate = 16") == 4
    assert "mesh.program @main" in text
    assert f"grid [{grid.replace('x', ', ')}]" in text
    assert "graph." not in text
    with np.load(results) as data:
        got = {k: np.asarray(data[k]) for k in data.files}
    hf.assert_close(got, want, MESH_RTOL)
