"""
RoPE's rotation `x·R` (`lowering/rotation.py`): lowered as an index map, it keeps the
product's values exactly at the loop, tile and mesh levels, on random inputs (the
FileCheck inputs and rotations of larger heads); the mesh runs it as no reduction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import func

from plmr.dialects import graph, loop
from plmr.dialects.context import make_context, parse_module
from plmr.lowering.graph_to_loop import ConvertGraphToLoopPass
from plmr.lowering.loop_to_tile import ConvertLoopToTilePass
from plmr.lowering.rotation import rotation_width
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import run_entry, select_entry
from plmr.runtime.weights import rotate_half

FILECHECK = (
    Path(__file__).resolve().parents[1]
    / "filecheck"
    / "lowering"
    / "convert-graph-to-loop-rotation.mlir"
)


def _program(shape: tuple[int, ...], h: int, inverse: bool = False) -> str:
    """`x·R` (or `x·Rᵀ`, the inverse rotation) over `shape` (last axis `h`)."""
    r = rotate_half(np.eye(h, dtype=np.float32), h)
    if inverse:
        r = r.T
    rows = ", ".join("[" + ", ".join(f"{v:.1f}" for v in row) + "]" for row in r)
    t = "tensor<" + "x".join(map(str, shape)) + "xf32>"
    return (
        f"func.func @main(%x: {t}) -> {t} {{\n"
        f"  %r = graph.constant dense<[{rows}]> : tensor<{h}x{h}xf32>\n"
        f"  %y = graph.matmul %x, %r : ({t}, tensor<{h}x{h}xf32>) -> {t}\n"
        f"  func.return %y : {t}\n}}\n"
    )


def _chunks() -> list[str]:
    return [c for c in FILECHECK.read_text().split("// -----") if "func.func" in c]


def _args(module: Any, seed: int) -> list[np.ndarray[Any, Any]]:
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    rng = np.random.default_rng(seed)
    return [
        rng.standard_normal(tuple(graph.static_shape(a, "x"))).astype(np.float32)
        for a in fn.body.block.args
    ]


CASES = [
    *(pytest.param(c, id=f"filecheck{i}") for i, c in enumerate(_chunks())),
    pytest.param(_program((5, 8), 8), id="5x8"),
    pytest.param(_program((2, 3, 6, 16), 16), id="heads-16"),
    pytest.param(_program((7, 16), 16, inverse=True), id="inverse"),
]


@pytest.mark.parametrize("text", CASES)
def test_every_level_keeps_the_product(text: str):
    module = parse_module(text)
    fn_name = next(op for op in module.ops if isinstance(op, func.FuncOp)).sym_name.data
    args = _args(module, 3)
    (want,) = evaluate_function(module, fn_name, args)
    # Exact: one ±x_i per output, the other terms exact zeros.
    ConvertGraphToLoopPass().apply(Context(), module)
    module.verify()
    (at_loop,) = evaluate_function(module, fn_name, args)
    np.testing.assert_array_equal(at_loop, want)
    ConvertLoopToTilePass(fit=True).apply(Context(), module)
    module.verify()
    (at_tile,) = evaluate_function(module, fn_name, args)
    np.testing.assert_array_equal(at_tile, want)


@pytest.mark.parametrize("grid", [(2, 2), (2, 4)], ids=["2x2", "2x4"])
def test_the_mesh_runs_the_rotation_as_a_map(grid: tuple[int, int]):
    text = _program((8, 16), 16)
    module = parse_module(text)
    args = _args(module, 5)
    (want,) = evaluate_function(module, "main", args)
    loops = parse_module(text)
    ConvertGraphToLoopPass().apply(Context(), loops)
    nests = [op for op in loops.walk() if isinstance(op, loop.NestOp)]
    assert len(nests) == 1
    assert not nests[0].is_reduction
    compile_module(make_context(), module, CompileOptions(grid=grid, substitute=False))
    (got,), report = run_entry(module, select_entry(module, None), args)
    assert report is not None
    np.testing.assert_array_equal(got, want)


def test_only_rotate_halfs_matrix_is_a_rotation():
    def width(text: str) -> int:
        module = parse_module(text)
        (mm,) = [op for op in module.walk() if isinstance(op, graph.MatmulOp)]
        return rotation_width(mm)

    assert width(_program((3, 4), 4)) == 4
    assert width(_program((3, 128), 128)) == 128
    assert width(_program((3, 4), 4, inverse=True)) == 0
