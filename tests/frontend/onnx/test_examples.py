"""
The example models of `examples/onnx`: each imports, agrees with ONNX's reference
evaluator, round-trips through printing and parsing, matches its checked-in `.mlir`, and
uses the ops its description promises.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator
from xdsl.dialects import func
from xdsl.dialects.builtin import StringAttr

from plmr.dialects.context import parse_module
from plmr.frontend.onnx import import_onnx_file
from plmr.runtime.reference import evaluate_function

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "onnx"
EXAMPLE_MODELS = ["mlp", "attention", "conv_block", "transformer_block", "rnn_cell"]


def _example_feeds(model: onnx.ModelProto) -> dict[str, Any]:
    rng = np.random.default_rng(42)
    return {
        vi.name: rng.standard_normal(
            [d.dim_value for d in vi.type.tensor_type.shape.dim]
        ).astype(np.float32)
        for vi in model.graph.input
    }


@pytest.mark.parametrize("name", EXAMPLE_MODELS)
def test_example_model_matches_onnx(name: str):
    path = EXAMPLES / f"{name}.onnx"
    assert path.stat().st_size < 200_000
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    feeds = _example_feeds(model)
    module = import_onnx_file(str(path))
    got = evaluate_function(module, "main", list(feeds.values()))
    want = ReferenceEvaluator(model).run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    assert fn.arg_attrs is not None
    assert [d.data["plmr.name"] for d in fn.arg_attrs.data] == [
        StringAttr(vi.name) for vi in model.graph.input
    ]


@pytest.mark.parametrize("name", EXAMPLE_MODELS)
def test_example_round_trips_through_print_and_parse(name: str):
    module = import_onnx_file(str(EXAMPLES / f"{name}.onnx"))
    text = str(module)
    assert str(parse_module(text)) == text


@pytest.mark.parametrize("name", EXAMPLE_MODELS)
def test_example_mlir_is_up_to_date(name: str):
    module = import_onnx_file(str(EXAMPLES / f"{name}.onnx"))
    assert (EXAMPLES / f"{name}.mlir").read_text() == str(module) + "\n"


def test_example_ops(kit: Any):
    """The examples exercise what their descriptions promise."""
    expected = {
        "mlp": {"graph.matmul", "graph.add", "graph.relu"},
        "attention": {"graph.scale", "graph.softmax", "graph.transpose", "graph.reshape"},
        "conv_block": {"graph.conv2d", "graph.pool", "graph.reshape", "graph.relu"},
        "transformer_block": {
            "graph.layernorm",
            "graph.erf",
            "graph.gelu",
            "graph.softmax",
        },
        "rnn_cell": {"graph.sigmoid", "graph.tanh", "graph.sub", "graph.matmul"},
    }
    assert set(expected) == set(EXAMPLE_MODELS)
    for name, ops in expected.items():
        module = import_onnx_file(str(EXAMPLES / f"{name}.onnx"))
        assert ops <= set(kit.ops(module)), name


def test_every_example_is_listed():
    assert sorted(p.stem for p in EXAMPLES.glob("*.onnx")) == sorted(EXAMPLE_MODELS)
