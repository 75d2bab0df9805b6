"""
The ten attention variants (`examples/attention`): each is up to date with its generator,
means what the numpy formula says, and after `convert-graph-to-loop`, `neptune-fuse` and
`convert-loop-to-tile` computes the same (1e-4 relative) with fewer loop nests.
"""

import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context

from plmr.dialects.context import load_module
from plmr.dialects.loop import NestOp
from plmr.dialects.printing import module_text
from plmr.frontend.onnx import import_onnx_file
from plmr.lowering.graph_to_loop import ConvertGraphToLoopPass
from plmr.lowering.loop_to_tile import ConvertLoopToTilePass
from plmr.passes.neptune.fuse import NeptuneFusePass
from plmr.runtime.reference import evaluate_function, run_tile_function
from plmr.runtime.running import random_inputs, select_function

HERE = Path(__file__).resolve().parents[2] / "examples" / "attention"
sys.path.insert(0, str(HERE))

from build_examples import VARIANTS, Variant, attention_mlir, reference  # noqa: E402


def count_nests(module: object) -> int:
    fn = select_function(module, None)  # pyright: ignore[reportArgumentType]
    return sum(isinstance(op, NestOp) for op in fn.body.block.ops)


def test_there_are_ten_variants():
    assert len(VARIANTS) == 10
    assert sum(v.queries == 1 for v in VARIANTS) == 4


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_variant(variant: Variant):
    path = HERE / f"{variant.name}.mlir"
    assert path.read_text() == attention_mlir(variant), "run build_examples.py"
    module = load_module(path)
    args = random_inputs(select_function(module, None), 0)
    (graph_out,) = evaluate_function(module, "main", args)
    np.testing.assert_allclose(graph_out, reference(variant, *args), rtol=1e-4, atol=1e-5)
    ConvertGraphToLoopPass().apply(Context(), module)
    unfused = count_nests(module)
    NeptuneFusePass(remarks=False).apply(Context(), module)
    fused = count_nests(module)
    assert fused < unfused
    (loop_out,) = evaluate_function(module, "main", args)
    ConvertLoopToTilePass(tile_sizes=(16, 16)).apply(Context(), module)
    module.verify()
    assert count_nests(module) == 0
    (tile_out,), _ = run_tile_function(module, "main", args)
    scale = float(np.abs(graph_out).max())
    for out in (loop_out, tile_out):
        np.testing.assert_allclose(out, graph_out, rtol=1e-4, atol=1e-4 * scale)


def test_onnx_variant_is_up_to_date():
    imported = import_onnx_file(str(HERE / "attention_div.onnx"))
    assert module_text(imported) == (HERE / "attention_div.mlir").read_text()
