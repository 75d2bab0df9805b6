"""
Host nests (`lowering/tile_to_mesh/host_nests.py`): a small table of integer inputs and
constants is computed on the host and streamed in; the program still computes what the
graph does, on several grids, and only the table (not the position) crosses the host
link. Nests that read an activation, a weight or the wafer's state stay on the wafer.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects import mesh, tile
from plmr.dialects.context import make_context, parse_module
from plmr.frontend.onnx import import_onnx_file
from plmr.models.llama_onnx import LlamaOnnxConfig, write_llama_onnx
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.mesh_machine import run_mesh
from plmr.runtime.reference import evaluate_function

TABLE = (
    Path(__file__).parents[1]
    / "filecheck"
    / "lowering"
    / "convert-tile-to-mesh-host-nests.mlir"
)


def _host_nests(module: ModuleOp) -> list[tile.ForOp]:
    program = next(op for op in module.walk() if isinstance(op, mesh.ProgramOp))
    return [op for op in program.body.block.ops if isinstance(op, tile.ForOp)]


@pytest.mark.parametrize("grid", [(2, 2), (1, 3), (2, 4)])
def test_a_position_table_on_the_host_computes_what_the_graph_does(grid: tuple[int, int]):
    text = TABLE.read_text()
    module = parse_module(text)
    compile_module(make_context(), module, CompileOptions(grid=grid, substitute=False))
    assert [op.results[0].name_hint for op in _host_nests(module)] == ["f"]
    rng = np.random.default_rng(sum(grid))
    for pos in (0, 7, 1000):
        args = [
            np.asarray([[pos]], np.int64),
            rng.standard_normal((1, 8)).astype(np.float32),
        ]
        (want,) = evaluate_function(parse_module(text), "main", args)
        (got,), report = run_mesh(module, args)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        # In: %x (32 B) and the table of 4 angles (16 B); the position stays on the host.
        assert report.host_in_bytes == 32 + 16


def test_a_table_of_an_activation_stays_on_the_wafer():
    """The same table computed from a float input (an activation) is the wafer's work."""
    text = (
        TABLE.read_text()
        .replace("%pos: tensor<1x1xi64>", "%pos: tensor<1x1xf32>")
        .replace(
            "%p = graph.cast %pos : tensor<1x1xi64> -> tensor<1x1xf32>",
            "%p = graph.neg %pos : tensor<1x1xf32>",
        )
    )
    module = parse_module(text)
    compile_module(make_context(), module, CompileOptions(grid=(2, 2), substitute=False))
    assert _host_nests(module) == []


def test_a_decode_exports_rope_tables_are_computed_on_the_host(
    tmp_path: Path, decode_step_config: LlamaOnnxConfig
):
    """
    The tables of a decode export with its position as an input, its caches on the
    wafer: the slot of the new row (a predicate over the cache) stays on the wafer.
    """
    config = decode_step_config
    write_llama_onnx(tmp_path / "step.onnx", config)
    module = import_onnx_file(str(tmp_path / "step.onnx"))
    compile_module(make_context(), module, CompileOptions(grid=(2, 2), substitute=False))
    hosted = [str(op.results[0].name_hint) for op in _host_nests(module)]
    assert hosted
    assert all(name.startswith(("freqs", "rope")) for name in hosted)
    for op in _host_nests(module):
        for r in op.results:
            assert "f32" in str(r.type)
