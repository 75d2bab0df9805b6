"""
Differential tests of the gather lowerings (`plmr.lowering.gather`): the graph reference
semantics against the loop runtime after `convert-graph-to-loop` and against the mesh
runtime (functional mode) after `plmr compile` for 2x2 and 3x3 grids, on random indices
that include negative ones. A gather of a table argument by id arguments (a token
embedding) is looked up on the host (`tile.lookup`): only the rows reach the wafer, and
the report counts them. Any other gather is a one-hot select-and-sum over the gathered
axis, which blocks at the tile level and maps to the mesh.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import func

from plmr.dialects import loop, tile
from plmr.dialects.context import make_context, parse_module
from plmr.dialects.printing import module_text
from plmr.errors import PlmrError
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


LOOKED_UP = {
    "embedding_16x8",
    "embedding_128x64",
    "embedding_13x6_odd",
    "embedding_40x24_i32",
    "embedding_vector_ids",
    "gather_axis1",
    "gather_last_axis_2d_ids",
    "embedding_then_matmul",
}
"""Gathers of a table argument by id arguments: looked up on the host (`tile.lookup`)."""


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gathers_are_looked_up_on_the_host_or_blocked_at_the_tile_level(name: str):
    module, args = inputs(name)
    (want,) = evaluate_function(module, "main", args)
    ConvertGraphToLoopPass().apply(Context(), module)
    ConvertLoopToTilePass(fit=True).apply(Context(), module)
    module.verify()
    assert not any(isinstance(op, loop.NestOp) for op in module.walk())
    lookups = [op for op in module.walk() if isinstance(op, tile.LookupOp)]
    assert len(lookups) == (1 if name in LOOKED_UP else 0)
    if name not in LOOKED_UP:
        # A one-hot select-and-sum over the gathered axis.
        assert any(isinstance(op, tile.ReduceOp) for op in module.walk())
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
    # `plmr compile` folds the constant table, which is then on the host too.
    host = LOOKED_UP | {"constant_table"}
    if name in host:
        assert report.host_lookup_bytes > 0  # the rows, streamed in
    if name not in host or name == "embedding_then_matmul":
        assert report.cycles > 0
    check(name, got, want)


def _levels(text: str, args: list[np.ndarray[Any, Any]]) -> list[np.ndarray[Any, Any]]:
    """The result at the graph, loop, tile and mesh (2x2) levels."""
    out: list[np.ndarray[Any, Any]] = []
    module = parse_module(text)
    out.append(evaluate_function(module, "main", args)[0])
    ConvertGraphToLoopPass().apply(Context(), module)
    out.append(evaluate_function(module, "main", args)[0])
    ConvertLoopToTilePass(fit=True).apply(Context(), module)
    out.append(evaluate_function(module, "main", args)[0])
    module = parse_module(text)
    compile_module(make_context(), module, CompileOptions(grid=(2, 2), substitute=False))
    (got,), _ = run_entry(module, select_entry(module, None), args)
    out.append(got)
    return out


def test_embedding_rows_first_last_negative_and_repeated_at_every_level():
    rng = np.random.default_rng(3)
    table = rng.standard_normal((24, 8)).astype(np.float32)
    # The first and last rows, both counted from the end, and repeated ids.
    ids = np.array([[0, 23, -1, -24, 5, 5], [5, 0, 23, 7, 7, 7]], dtype=np.int64)
    want = table[np.where(ids < 0, ids + 24, ids)]
    for got in _levels(embedding(24, 8, (2, 6)), [table, ids]):
        np.testing.assert_array_equal(got, want)


def test_embedding_of_a_computed_table_at_every_level():
    text = (
        "func.func @main(%t: tensor<16x8xf32>, %ids: tensor<2x5xi64>) -> tensor<2x5x8xf32> {\n"
        "  %w = graph.exp %t : tensor<16x8xf32>\n"
        "  %y = graph.gather %w, %ids : (tensor<16x8xf32>, tensor<2x5xi64>) -> tensor<2x5x8xf32>\n"
        "  func.return %y : tensor<2x5x8xf32>\n}\n"
    )
    rng = np.random.default_rng(4)
    t = rng.standard_normal((16, 8)).astype(np.float32)
    ids = np.array([[0, 15, -1, 3, 3], [-16, 2, 2, 2, 9]], dtype=np.int64)
    want = np.exp(t)[np.where(ids < 0, ids + 16, ids)]
    for got in _levels(text, [t, ids]):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_the_host_lookup_streams_only_the_rows():
    """
    The table stays on the host: the wafer's cycles and the host link's bytes do not
    grow with the vocabulary; the report counts the rows (8 ids x 64 floats)."""
    reports: list[Any] = []
    for vocab in (16, 4096):
        module = parse_module(embedding(vocab, 64, (1, 8)))
        compile_module(
            make_context(), module, CompileOptions(grid=(2, 2), substitute=False)
        )
        text = module_text(module)
        assert "tile.lookup" in text
        assert f"mesh.scatter %w : tensor<{vocab}x64xf32>" not in text
        w = np.zeros((vocab, 64), dtype=np.float32)
        args = [w, np.zeros((1, 8), dtype=np.int64)]
        _, report = run_entry(module, select_entry(module, None), args, mode="timing")
        assert report is not None
        reports.append(report)
    for r in reports:
        assert r.host_lookup_bytes == 8 * 64 * 4
        assert r.host_lookup_cycles == 8 * 64 * 4 / 4
        assert any("host lookup" in line for line in r.summary())
    assert reports[0].cycles == reports[1].cycles


def test_an_id_out_of_range_is_one_clear_error():
    module = parse_module(embedding(16, 8, (1, 3)))
    compile_module(make_context(), module, CompileOptions(grid=(2, 2), substitute=False))
    table = np.zeros((16, 8), dtype=np.float32)
    ids = np.array([[1, 16, 2]], dtype=np.int64)
    with pytest.raises(PlmrError, match=r"id 16 is out of range for 16 rows"):
        run_entry(module, select_entry(module, None), [table, ids])


def test_a_full_vocabulary_embedding_compiles_for_480x480_without_the_table():
    """
    LLaMA's 32,000 x 4,096 table by one token, then the first op of a layer (the
    norm's gain), for 480x480 in timing mode: no SRAM refusal, the table never placed
    on the wafer (it is an argument, nothing is materialised)."""
    text = (
        "func.func @main(%table: tensor<32000x4096xf32>, %ids: tensor<1x1xi64>, "
        "%g: tensor<4096xf32>) -> tensor<1x1x4096xf32> {\n"
        "  %e = graph.gather %table, %ids : (tensor<32000x4096xf32>, tensor<1x1xi64>) "
        "-> tensor<1x1x4096xf32>\n"
        "  %y = graph.mul %e, %g : (tensor<1x1x4096xf32>, tensor<4096xf32>) "
        "-> tensor<1x1x4096xf32>\n"
        "  func.return %y : tensor<1x1x4096xf32>\n}\n"
    )
    module = parse_module(text)
    compile_module(make_context(), module, CompileOptions(grid=(480, 480)))
    out = module_text(module)
    assert "tile.lookup %table[%ids]" in out
    assert "mesh.scatter %table" not in out
    args = [
        np.broadcast_to(np.float32(0), (32000, 4096)),
        np.zeros((1, 1), dtype=np.int64),
        np.zeros((4096,), dtype=np.float32),
    ]
    _, report = run_entry(module, select_entry(module, None), args, mode="timing")
    assert report is not None
    assert report.max_sram_bytes <= report.sram_capacity
    assert report.host_lookup_bytes == 4096 * 4
