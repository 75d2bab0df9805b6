"""
Differential tests of the gather lowerings (`plmr.lowering.gather`): the graph reference
semantics against the loop runtime after `convert-graph-to-loop` and against the mesh
runtime (functional mode) after `plmr compile` for 2x2 and 3x3 grids, on random indices
that include negative ones. A gather by run-time indices is a one-hot select-and-sum
over the gathered axis, which blocks at the tile level and maps to the mesh.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import func

from plmr.dialects import loop, tile
from plmr.dialects.context import make_context, parse_module
from plmr.lowering.graph_to_loop import ConvertGraphToLoopPass
from plmr.lowering.loop_to_tile import ConvertLoopToTilePass
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import run_entry, select_entry


def embedding(vocab: int, dim: int, ids: tuple[int, ...], idt: str = "i64") -> str:
    """A token embedding: a table argument gathered by run-time ids along axis 0."""
    table = f"tensor<{vocab}x{dim}xf32>"
    it = f"tensor<{'x'.join(map(str, ids))}x{idt}>"
    out = f"tensor<{'x'.join(map(str, (*ids, dim)))}xf32>"
    return (
        f"func.func @main(%w: {table}, %ids: {it}) -> {out} {{\n"
        f"  %y = graph.gather %w, %ids : ({table}, {it}) -> {out}\n"
        f"  func.return %y : {out}\n}}\n"
    )


PROGRAMS: dict[str, str] = {
    "embedding_16x8": embedding(16, 8, (1, 8)),
    "embedding_128x64": embedding(128, 64, (1, 8)),
    "embedding_13x6_odd": embedding(13, 6, (3, 5)),
    "embedding_40x24_i32": embedding(40, 24, (2, 6), "i32"),
    "embedding_vector_ids": embedding(24, 8, (6,)),
    "gather_axis1": (
        "func.func @main(%x: tensor<4x10x6xf32>, %i: tensor<3xi64>) -> tensor<4x3x6xf32> {\n"
        "  %y = graph.gather %x, %i axis = 1 : (tensor<4x10x6xf32>, tensor<3xi64>) -> tensor<4x3x6xf32>\n"
        "  func.return %y : tensor<4x3x6xf32>\n}\n"
    ),
    "gather_last_axis_2d_ids": (
        "func.func @main(%x: tensor<6x9xf32>, %i: tensor<2x4xi64>) -> tensor<6x2x4xf32> {\n"
        "  %y = graph.gather %x, %i axis = -1 : (tensor<6x9xf32>, tensor<2x4xi64>) -> tensor<6x2x4xf32>\n"
        "  func.return %y : tensor<6x2x4xf32>\n}\n"
    ),
    "constant_table": (
        "func.func @main(%ids: tensor<1x8xi64>) -> tensor<1x8x8xf32> {\n"
        "  %w = graph.constant dense<[[0.5, -1.0, 2.0, 3.5, -0.25, 1.0, 0.0, 4.0]]> : tensor<1x8xf32>\n"
        "  %t = graph.expand %w : tensor<1x8xf32> -> tensor<16x8xf32>\n"
        "  %k = graph.constant dense<[[1.0], [2.0], [3.0], [4.0], [5.0], [6.0], [7.0], [8.0], [9.0], [10.0], [11.0], [12.0], [13.0], [14.0], [15.0], [16.0]]> : tensor<16x1xf32>\n"
        "  %s = graph.mul %t, %k : (tensor<16x8xf32>, tensor<16x1xf32>) -> tensor<16x8xf32>\n"
        "  %y = graph.gather %s, %ids : (tensor<16x8xf32>, tensor<1x8xi64>) -> tensor<1x8x8xf32>\n"
        "  func.return %y : tensor<1x8x8xf32>\n}\n"
    ),
    "gather_elements": (
        "func.func @main(%x: tensor<4x6xf32>, %i: tensor<2x6xi64>) -> tensor<2x6xf32> {\n"
        "  %y = graph.gather_elements %x, %i axis = 0 : (tensor<4x6xf32>, tensor<2x6xi64>) -> tensor<2x6xf32>\n"
        "  func.return %y : tensor<2x6xf32>\n}\n"
    ),
    "gather_elements_axis1": (
        "func.func @main(%x: tensor<3x8xf32>, %i: tensor<3x5xi64>) -> tensor<3x5xf32> {\n"
        "  %y = graph.gather_elements %x, %i axis = 1 : (tensor<3x8xf32>, tensor<3x5xi64>) -> tensor<3x5xf32>\n"
        "  func.return %y : tensor<3x5xf32>\n}\n"
    ),
    "embedding_then_matmul": (
        "func.func @main(%w: tensor<32x16xf32>, %ids: tensor<8xi64>, %p: tensor<16x8xf32>) -> tensor<8x8xf32> {\n"
        "  %e = graph.gather %w, %ids : (tensor<32x16xf32>, tensor<8xi64>) -> tensor<8x16xf32>\n"
        "  %y = graph.matmul %e, %p : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>\n"
        "  func.return %y : tensor<8x8xf32>\n}\n"
    ),
}
"""Gathers by run-time indices (arguments), by name."""


def _gathered_sizes(module: Any) -> list[int]:
    """The extent of the gathered axis of each gather of `module`, in order."""
    out: list[int] = []
    for op in module.walk():
        if op.name in ("graph.gather", "graph.gather_elements"):
            axis = op.axis.value.data
            shape = op.data.type.get_shape()
            out.append(shape[axis % len(shape)])
    return out


def inputs(name: str, seed: int = 0) -> tuple[Any, list[np.ndarray[Any, Any]]]:
    """The module and random inputs; indices span `[-V, V)` of their gathered axis."""
    module = parse_module(PROGRAMS[name])
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    (size,) = set(_gathered_sizes(module))
    rng = np.random.default_rng(seed)
    args: list[np.ndarray[Any, Any]] = []
    for t in fn.function_type.inputs.data:
        shape = tuple(t.get_shape())  # pyright: ignore[reportAttributeAccessIssue]
        if "i" in str(t.element_type):  # pyright: ignore[reportAttributeAccessIssue]
            dtype = np.int32 if "i32" in str(t) else np.int64
            args.append(rng.integers(-size, size, shape).astype(dtype))
        else:
            args.append(rng.standard_normal(shape).astype(np.float32))
    ids = [a for a in args if a.dtype.kind == "i"]
    assert any((a < 0).any() for a in ids)
    assert any((a >= 0).any() for a in ids)
    return module, args


def check(name: str, got: np.ndarray[Any, Any], want: np.ndarray[Any, Any]) -> None:
    """A gather is exact (one nonzero term); a matmul after it sums in another order."""
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    if name == "embedding_then_matmul":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_loop_level_matches_the_graph(name: str):
    module, args = inputs(name)
    (want,) = evaluate_function(module, "main", args)
    ConvertGraphToLoopPass().apply(Context(), module)
    module.verify()
    (got,) = evaluate_function(module, "main", args)
    check(name, got, want)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_run_time_indices_block_at_the_tile_level(name: str):
    module, args = inputs(name)
    (want,) = evaluate_function(module, "main", args)
    ConvertGraphToLoopPass().apply(Context(), module)
    ConvertLoopToTilePass(fit=True).apply(Context(), module)
    module.verify()
    assert not any(isinstance(op, loop.NestOp) for op in module.walk())
    assert any(isinstance(op, tile.ReduceOp | tile.DotOp) for op in module.walk())
    (got,) = evaluate_function(module, "main", args)
    check(name, got, want)


@pytest.mark.parametrize("grid", [(2, 2), (3, 3)], ids=["2x2", "3x3"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_mesh_program_matches_the_graph(name: str, grid: tuple[int, int]):
    module, args = inputs(name, seed=1)
    (want,) = evaluate_function(module, "main", args)
    compile_module(make_context(), module, CompileOptions(grid=grid, substitute=False))
    module.verify()
    entry = select_entry(module, None)
    assert entry.name == "mesh.program"
    (got,), report = run_entry(module, entry, args)
    assert report is not None
    assert report.cycles > 0
    check(name, got, want)


def test_the_mesh_program_costs_the_selection_in_timing_mode():
    cycles: list[float] = []
    for name in ("embedding_16x8", "embedding_128x64"):
        module, args = inputs(name)
        compile_module(
            make_context(), module, CompileOptions(grid=(2, 2), substitute=False)
        )
        entry = select_entry(module, None)
        _, report = run_entry(module, entry, args, mode="timing")
        assert report is not None
        cycles.append(report.cycles)
    assert 0 < cycles[0] < cycles[1]  # a larger table costs more


def test_constant_indices_and_integer_data_keep_the_plain_read():
    module = parse_module(
        "func.func @main(%x: tensor<6x4xi64>, %i: tensor<3xi64>) -> (tensor<3x4xi64>, tensor<2x4xi64>) {\n"
        "  %a = graph.gather %x, %i : (tensor<6x4xi64>, tensor<3xi64>) -> tensor<3x4xi64>\n"
        "  %k = graph.constant dense<[5, -6]> : tensor<2xi64>\n"
        "  %b = graph.gather %x, %k : (tensor<6x4xi64>, tensor<2xi64>) -> tensor<2x4xi64>\n"
        "  func.return %a, %b : tensor<3x4xi64>, tensor<2x4xi64>\n}\n"
    )
    x = np.arange(24, dtype=np.int64).reshape(6, 4)
    i = np.array([-1, 0, 4], dtype=np.int64)
    want = evaluate_function(module, "main", [x, i])
    ConvertGraphToLoopPass().apply(Context(), module)
    nests = [op for op in module.walk() if isinstance(op, loop.NestOp)]
    assert [len(n.dims) for n in nests] == [2, 2]  # no reduction over the gathered axis
    got = evaluate_function(module, "main", [x, i])
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(want[1], x[[5, 0]])
