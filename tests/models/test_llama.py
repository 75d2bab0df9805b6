"""The LLaMA-style model: numpy oracle, graph programs, and generation on the mesh."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from plmr.dialects.context import make_context, parse_module
from plmr.errors import PlmrError
from plmr.models.generate import MeshLlama
from plmr.models.llama import (
    KVCache,
    LlamaConfig,
    NumpyLlama,
    ProgramBuilder,
    cache_mask,
    cache_slot,
    causal_mask,
    decode_cache_args,
    get_config,
    random_weights,
    rope_half_tables,
    rope_tables,
    split_kv_rows,
)
from plmr.passes.pipeline import CompileOptions
from plmr.runtime.running import run_function, select_function

PROMPT = [1, 2, 3, 4, 5, 6, 7, 8]


def _heads_decode_args(
    config: LlamaConfig, x: np.ndarray, length: int, cos: np.ndarray, sin: np.ndarray
) -> list[np.ndarray]:
    """
    x, mask, slot, cos, sin of a heads-form decode step after `length` cached tokens:
    the new token takes slot `length`, visible with the cache."""
    return [x, cache_mask(config, length + 1), cache_slot(config, length), cos, sin]


@pytest.fixture(scope="module")
def tiny() -> tuple[LlamaConfig, dict[str, np.ndarray]]:
    config = get_config("tiny")
    return config, random_weights(config, 0)


@pytest.fixture
def cached_mesh_llama(compile_cache: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`MeshLlama` compiles each program once a session: the KV placements share it."""
    from plmr.models import generate

    monkeypatch.setattr(generate, "compile_module", compile_cache.compile)


def test_numpy_decode_with_cache_equals_full_recompute(tiny):  # pyright: ignore[reportMissingParameterType, reportUnknownParameterType]
    """The KV-cached forward pass equals running the whole sequence again."""
    config, weights = tiny
    model = NumpyLlama(config, weights)
    tokens = PROMPT + model.generate(PROMPT, 4)
    cache = KVCache.empty(config)
    x = weights["embed"][np.asarray(tokens[:-1])]
    full, _, _ = model.forward(x, range(len(tokens) - 1), cache)
    cache2 = KVCache.empty(config)
    logits, ks, vs = model.forward(x[:-1], range(len(tokens) - 2), cache2)
    cache2.store(ks, vs)
    step, _, _ = model.forward(x[-1:], [len(tokens) - 2], cache2)
    np.testing.assert_allclose(step, full, rtol=1e-4, atol=1e-4)
    assert int(np.argmax(full)) == tokens[-1]
    del logits


@pytest.mark.parametrize("form", ["heads", "per-head"])
def test_graph_programs_equal_numpy(tiny, form: str):  # pyright: ignore[reportMissingParameterType, reportUnknownParameterType]
    config, weights = tiny
    half = config.head_dim // 2
    model = NumpyLlama(config, weights)
    builder = ProgramBuilder(config, weights, form=form)
    prefill = parse_module(builder.prefill(len(PROMPT)))
    decode = parse_module(builder.decode())
    x = weights["embed"][np.asarray(PROMPT)]
    tables = rope_tables if form == "heads" else rope_half_tables
    cos, sin = tables(config, range(len(PROMPT)))
    fn = select_function(prefill, "prefill")
    outs = run_function(prefill, fn, [x, causal_mask(8), cos, sin])
    want, ks, vs = model.forward(x, range(8), KVCache.empty(config))
    np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-4)
    if form == "heads":
        # K and V of every KV head side by side, per layer.
        got_k, got_v = split_kv_rows(outs[1:], config)
    else:
        # K comes out as its two halves, then V, per KV head.
        got_k = [[np.concatenate([outs[1], outs[2]], axis=1)]]
        got_v = [[outs[3]]]
    np.testing.assert_allclose(got_k[0][0], ks[0][0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_v[0][0], vs[0][0], rtol=1e-4, atol=1e-5)
    cache = KVCache.empty(config)
    cache.store(ks, vs)
    token = int(np.argmax(want[0]))
    cos, sin = tables(config, [8])
    if form == "heads":
        args = _heads_decode_args(config, weights["embed"][[token]], 8, cos, sin)
        args += decode_cache_args(cache, config)
    else:
        args = [weights["embed"][[token]], cache_mask(config, 8), cos, sin]
        for layer in range(config.n_layers):
            for g in range(config.n_kv_heads):
                k, v = cache.kv(layer, g)
                args += [k[:, :half], k[:, half:], v]
    got = run_function(decode, select_function(decode, "decode"), args)
    step, k_new, _ = model.forward(weights["embed"][[token]], [8], cache)
    np.testing.assert_allclose(got[0], step, rtol=1e-4, atol=1e-4)
    if form == "heads":
        new_k = split_kv_rows(got[1:], config)[0][0][1]
        np.testing.assert_allclose(new_k, k_new[0][1], rtol=1e-4, atol=1e-5)
    else:
        np.testing.assert_allclose(
            np.concatenate([got[1], got[2]], axis=1), k_new[0][0], rtol=1e-4, atol=1e-5
        )


@pytest.mark.parametrize("grid", [(2, 2), (2, 4)])
@pytest.mark.usefixtures("cached_mesh_llama")
def test_tokens_generated_on_the_mesh_equal_numpy(tiny, grid: tuple[int, int]):  # pyright: ignore[reportMissingParameterType, reportUnknownParameterType]
    """Prefill and 16 decode steps compiled to the mesh give numpy's tokens."""
    config, weights = tiny
    steps = 16 if grid == (2, 2) else 4
    want = NumpyLlama(config, weights).generate(PROMPT, steps)
    model = MeshLlama(
        config,
        weights,
        len(PROMPT),
        CompileOptions(grid=grid, substitute=False, tile_sizes=(16, 16)),
    )
    result = model.generate(PROMPT, steps)
    assert result.tokens == want
    assert [s.kind for s in result.steps] == ["prefill"] + ["decode"] * steps
    assert all(s.cycles > 0 and s.max_sram_bytes > 0 for s in result.steps)


def test_generation_limits(tiny):  # pyright: ignore[reportMissingParameterType, reportUnknownParameterType]
    config, _ = tiny
    rows = [[np.zeros((40, config.head_dim), np.float32)] * config.n_kv_heads] * (
        config.n_layers
    )
    with pytest.raises(PlmrError, match="the KV cache holds 32 tokens; cannot add 40 more"):
        KVCache.empty(config).store(rows, rows)
    with pytest.raises(PlmrError, match="unknown model 'gpt'"):
        get_config("gpt")
    with pytest.raises(PlmrError, match="too large for random weights"):
        random_weights(get_config("llama3-8b"))


@pytest.mark.usefixtures("cached_mesh_llama")
def test_shift_kv_cache_on_the_wafer(tiny):  # pyright: ignore[reportMissingParameterType, reportUnknownParameterType]
    """WaferLLM's shift-based cache keeps generating where the concat baseline is full."""
    config, weights = tiny
    want = NumpyLlama(config, weights).generate(PROMPT, 12)
    options = CompileOptions(grid=(2, 2), substitute=False, tile_sizes=(16, 16))
    shift = MeshLlama(config, weights, len(PROMPT), options, kv="shift")
    result = shift.generate(PROMPT, 12)
    assert result.tokens == want
    # One 1-hop shift per layer and token.
    assert all(0 < s.kv_cycles < 1000 for s in result.steps)
    concat = MeshLlama(config, weights, len(PROMPT), options, kv="concat")
    # The bottom row of PEs holds 32 / 2 = 16 tokens: the 9th generated token overflows.
    with pytest.raises(
        PlmrError, match="concat KV cache is full: the bottom row of PEs holds 16"
    ):
        concat.generate(PROMPT, 12)
    with pytest.raises(PlmrError, match="unknown KV-cache placement"):
        MeshLlama(config, weights, len(PROMPT), options, kv="paged")


def test_llama_examples_are_current():
    """examples/llama/*.mlir are what the builder writes (weights as arguments)."""
    from pathlib import Path

    here = Path(__file__).resolve().parents[2] / "examples" / "llama"
    builder = ProgramBuilder(get_config("tiny"), None)
    prefill = (here / "tiny_prefill.mlir").read_text()
    decode = (here / "tiny_decode.mlir").read_text()
    assert prefill.endswith(builder.prefill(8))
    assert decode.endswith(builder.decode())
    module = parse_module(decode)
    fn = select_function(module, "decode")
    config = get_config("tiny")
    # x, mask, slot, cos, sin; the K and V caches of every layer; per layer the norms and
    # the Q with rotated Q (stacked), K, V, rotated K, output, W1 and W3 (stacked) and
    # W2 weights; the final norm and the LM head.
    assert len(fn.args) == 5 + 2 * config.n_layers + 9 * config.n_layers + 2


def test_taso_fuses_projections_of_the_decode_step():
    """
    The compile's TASO (concatenations of constants only) merges projections that share
    their input into one matmul on concatenated weights and a split; same results.
    """
    from plmr.dialects import graph
    from plmr.passes.taso.substitute import TasoSubstitutePass
    from plmr.runtime.running import random_inputs

    config = get_config("tiny")
    builder = ProgramBuilder(config, random_weights(config, 0), form="per-head")
    module = parse_module(builder.decode())
    fn = select_function(module, None)
    args = random_inputs(fn, 0)
    want = run_function(module, fn, args)
    before = sum(isinstance(op, graph.MatmulOp) for op in module.walk())
    TasoSubstitutePass(budget=3, concats="constant").apply(make_context(), module)
    after = sum(isinstance(op, graph.MatmulOp) for op in module.walk())
    assert after < before
    assert any(isinstance(op, graph.SplitOp) for op in module.walk())
    assert not any(isinstance(op, graph.ConcatOp) for op in module.walk())
    for g, w in zip(run_function(module, fn, args), want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def _gqa(kv_heads: int) -> LlamaConfig:
    return LlamaConfig(
        f"gqa{kv_heads}",
        dim=32,
        n_layers=1,
        n_heads=8,
        n_kv_heads=kv_heads,
        ffn_dim=64,
        vocab=32,
        max_seq=8,
    )


def _on_mesh(text: str, grid: tuple[int, int], args: list[np.ndarray]) -> list[np.ndarray]:
    from plmr.passes.pipeline import compile_module
    from plmr.runtime.mesh_machine import run_mesh

    opts = CompileOptions(grid=grid, substitute=False, tile_sizes=(4, 4), fit_tiles=True)
    module = compile_module(make_context(), parse_module(text), opts)
    outs, _ = run_mesh(module, args, mode="functional")
    return list(outs)


GQA_KV_HEADS = (1, 2, 8)
GQA_GRIDS = ((2, 2), (3, 3), (2, 4))


@pytest.mark.parametrize(
    ("kv_heads", "grid"),
    [
        # Each KV head count and each grid once by default; the rest of the product
        # with `pytest -m slow`.
        pytest.param(
            kv,
            grid,
            marks=() if i == j else pytest.mark.slow,
            id=f"kv{kv}-{grid[0]}x{grid[1]}",
        )
        for i, kv in enumerate(GQA_KV_HEADS)
        for j, grid in enumerate(GQA_GRIDS)
    ],
)
def test_grouped_query_attention_on_the_mesh_equals_numpy(
    kv_heads: int, grid: tuple[int, int]
):
    """
    Prefill and a decode step of the heads program, compiled (odd grids split the heads
    and the head dimension unevenly), give numpy's logits, K and V.
    """
    config = _gqa(kv_heads)
    weights = random_weights(config, 1)
    model = NumpyLlama(config, weights)
    builder = ProgramBuilder(config, weights)
    prompt = [3, 1, 4, 1, 5]
    x = weights["embed"][np.asarray(prompt)]
    cos, sin = rope_tables(config, range(len(prompt)))
    args = [x, causal_mask(len(prompt)), cos, sin]
    got = _on_mesh(builder.prefill(len(prompt)), grid, args)
    want, ks, vs = model.forward(x, range(len(prompt)), KVCache.empty(config))
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4)
    got_k, got_v = split_kv_rows(got[1:], config)
    for g in range(kv_heads):
        np.testing.assert_allclose(got_k[0][g], ks[0][g], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got_v[0][g], vs[0][g], rtol=1e-4, atol=1e-5)
    cache = KVCache.empty(config)
    cache.store(ks, vs)
    token = int(np.argmax(want[0]))
    cos, sin = rope_tables(config, [len(prompt)])
    args = _heads_decode_args(config, weights["embed"][[token]], len(prompt), cos, sin)
    got = _on_mesh(builder.decode(), grid, args + decode_cache_args(cache, config))
    step, k_new, _ = model.forward(weights["embed"][[token]], [len(prompt)], cache)
    np.testing.assert_allclose(got[0], step, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(
        split_kv_rows(got[1:], config)[0][0][kv_heads - 1],
        k_new[0][kv_heads - 1],
        rtol=1e-4,
        atol=1e-5,
    )


def test_head_dimension_over_an_axis_on_a_large_grid(decode_case: Callable[..., Any]):
    """
    On a grid whose axes are longer than the head dimension (16 on 20 PEs) but more
    than 8 times the KV heads (2), the blocking splits the head dimension in blocks of 1
    and keeps the heads whole: the projections put the head dimension over y (16 rows
    work, each allreduces its heads' values), attention reduces it along y, and the
    decode step still gives numpy's logits and K row (with the projections in one
    GEMV, as the benchmarks write it on large grids).
    """
    from plmr.lowering.tile_to_mesh import NestPlan
    from plmr.passes.pipeline import compile_module
    from plmr.runtime.mesh_machine import run_mesh

    config = LlamaConfig(
        "g",
        dim=40,
        n_layers=1,
        n_heads=4,
        n_kv_heads=2,
        ffn_dim=80,
        vocab=20,
        max_seq=20,
        head_dim_override=16,
    )
    case = decode_case(config)
    plans: list[NestPlan] = []
    opts = CompileOptions(
        grid=(20, 20), substitute=False, tile_sizes=(4, 4), fit_tiles=True
    )
    text = ProgramBuilder(config, case.weights, one_projection=True).decode()
    module = compile_module(make_context(), parse_module(text), opts, plans)
    got, _ = run_mesh(module, case.args, mode="functional")
    case.check(got, [1])
    # The projection (Q, rotated Q, K, rotated K and V of every KV head): heads whole
    # (one block), the head dimension's 16 blocks over an axis; the scores reduce the
    # head dimension along an axis.
    maps = [p.mapping() for p in plans]
    assert "i0(1)" in maps[1], maps
    assert "i3(16) -> " in maps[1], maps
    assert any("i4(16) -> " in m and m.endswith("[allreduce]") for m in maps), maps


def _decode_layer_nests(heads: int) -> tuple[int, int]:
    """spmds and allreduces of one decode layer with `heads` query heads of one group."""
    from plmr.models.nests import count_ops
    from plmr.passes.pipeline import compile_module

    config = LlamaConfig(
        "h",
        dim=64,
        n_layers=1,
        n_heads=heads,
        n_kv_heads=1,
        ffn_dim=128,
        vocab=16,
        max_seq=16,
        head_dim_override=8,
    )
    text = ProgramBuilder(config, None).decode(layers=[0], head=False)
    # Unpacked: `mesh-pack-allreduces` merges the nests whose only collective is one
    # allreduce, and how many heads' values arrive by allgather decides which those are.
    opts = CompileOptions(
        grid=(2, 2),
        substitute=False,
        tile_sizes=(4, 4),
        fit_tiles=True,
        pack_allreduces=False,
    )
    counts = count_ops(compile_module(make_context(), parse_module(text), opts))
    return counts.spmds, counts.allreduces


def test_attention_over_more_heads_compiles_to_the_same_nests():
    """
    Heads are a loop dimension: 1, 4 or 32 heads give the same mesh.spmd count. With one
    head the softmax's scalar reductions lower to whole-tensor reductions and straight-line
    code, which runs inside the nests next to it (its fill, its reshape and the running
    maximum), not as mesh.spmds of its own.
    """
    spmds = {heads: _decode_layer_nests(heads)[0] for heads in (1, 4, 32)}
    assert spmds[1] == spmds[4] == spmds[32], spmds


ONNX_ATTENTION = """
func.func @main(%x: tensor<4x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<16x16xf32>, %wv: tensor<16x16xf32>, %wo: tensor<16x16xf32>) -> tensor<4x16xf32> {
  %q = graph.matmul %x, %wq : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %k = graph.matmul %x, %wk : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %v = graph.matmul %x, %wv : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %q3 = graph.reshape %q : tensor<4x16xf32> -> tensor<4x2x8xf32>
  %k3 = graph.reshape %k : tensor<4x16xf32> -> tensor<4x2x8xf32>
  %v3 = graph.reshape %v : tensor<4x16xf32> -> tensor<4x2x8xf32>
  %qh = graph.transpose %q3 perm = [1, 0, 2] : tensor<4x2x8xf32> -> tensor<2x4x8xf32>
  %kh = graph.transpose %k3 perm = [1, 0, 2] : tensor<4x2x8xf32> -> tensor<2x4x8xf32>
  %vh = graph.transpose %v3 perm = [1, 0, 2] : tensor<4x2x8xf32> -> tensor<2x4x8xf32>
  %s = graph.matmul %qh, %kh transpose_b : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %p = graph.softmax %s axis = -1 : tensor<2x4x4xf32>
  %o = graph.matmul %p, %vh : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %ot = graph.transpose %o perm = [1, 0, 2] : tensor<2x4x8xf32> -> tensor<4x2x8xf32>
  %om = graph.reshape %ot : tensor<4x2x8xf32> -> tensor<4x16xf32>
  %y = graph.matmul %om, %wo : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  func.return %y : tensor<4x16xf32>
}
"""


@pytest.mark.parametrize("grid", [(2, 2), (3, 3)])
def test_head_splits_and_merges_move_no_data(grid: tuple[int, int]):
    """
    Attention as exporters spell it (heads split by reshape and transpose, merged back)
    compiles with every reshape and transpose an index map: no nest only copies, no
    tile.transpose turns a whole tensor; the results are the graph's.
    """
    from plmr.dialects import mesh, tile
    from plmr.models.nests import describe
    from plmr.passes.pipeline import compile_module
    from plmr.runtime.mesh_machine import run_mesh
    from plmr.runtime.running import random_inputs

    graph_module = parse_module(ONNX_ATTENTION)
    fn = select_function(graph_module, "main")
    args = random_inputs(fn, 0)
    want = run_function(graph_module, fn, args)
    opts = CompileOptions(grid=grid, substitute=False, tile_sizes=(4, 4), fit_tiles=True)
    module = compile_module(make_context(), parse_module(ONNX_ATTENTION), opts)
    spmds = [op for op in module.walk() if isinstance(op, mesh.SpmdOp)]
    assert len(spmds) <= 5  # the Q, K, V projections, attention, the output projection
    copies = [describe(s) for s in spmds if describe(s).startswith("copy")]
    assert not copies, copies
    for op in module.walk():
        if isinstance(op, tile.TransposeOp):
            shape = op.result.type.get_shape()  # pyright: ignore[reportAttributeAccessIssue]
            assert max(shape) <= 4, f"a transpose of a whole tensor: {op}"
    got, _ = run_mesh(module, args, mode="functional")
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)


Tiny = tuple[LlamaConfig, dict[str, np.ndarray]]


def _k_token_case(
    config: LlamaConfig, weights: dict[str, np.ndarray], prompt: list[int], new: list[int]
) -> tuple[list[np.ndarray], np.ndarray, list[np.ndarray]]:
    """
    The k-token decode step's arguments after `prompt` (cached), and what k single
    numpy steps give: the logits of each new token and the first layer's new K rows.
    """
    model = NumpyLlama(config, weights)
    cache = KVCache.empty(config)
    x = weights["embed"][np.asarray(prompt)]
    _, ks, vs = model.forward(x, range(len(prompt)), cache)
    cache.store(ks, vs)
    cached = decode_cache_args(cache, config)
    k = len(new)
    xs = weights["embed"][np.asarray(new)]
    cos, sin = rope_tables(config, range(len(prompt), len(prompt) + k))
    args = [
        xs,
        cache_mask(config, len(prompt) + 1, k),
        cache_slot(config, len(prompt), k),
        cos,
        sin,
        *cached,
    ]
    logits: list[np.ndarray] = []
    k_rows: list[np.ndarray] = []
    for i, token in enumerate(new):
        step, k_new, v_new = model.forward(
            weights["embed"][[token]], [len(prompt) + i], cache
        )
        cache.store(k_new, v_new)
        logits.append(step[0])
        k_rows.append(k_new[0][0][0])
    return args, np.stack(logits), k_rows


@pytest.mark.parametrize("k", [1, 2, 4])
def test_k_token_step_equals_k_single_steps(tiny: Tiny, k: int):
    """
    The verification step over k new tokens (graph level) gives each token the logits
    of k decode steps one after the other, and their K rows."""
    config, weights = tiny
    new = [11, 3, 42, 7][:k]
    args, want, k_rows = _k_token_case(config, weights, PROMPT, new)
    module = parse_module(ProgramBuilder(config, weights).decode(tokens=k))
    got = run_function(module, select_function(module, "decode"), args)
    assert got[0].shape == (k, config.vocab)
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4)
    got_k = split_kv_rows(got[1:], config)[0][0][0]
    np.testing.assert_allclose(got_k, np.stack(k_rows), rtol=1e-4, atol=1e-5)


def test_k_token_step_on_the_mesh_equals_k_single_steps(tiny: Tiny):
    """Compiled to a 2x2 mesh, the 3-token step gives numpy's logits for each token."""
    config, weights = tiny
    args, want, _ = _k_token_case(config, weights, PROMPT, [11, 3, 42])
    got = _on_mesh(ProgramBuilder(config, weights).decode(tokens=3), (2, 2), args)
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4)
    assert [int(t) for t in np.argmax(got[0], axis=1)] == [
        int(t) for t in np.argmax(want, axis=1)
    ]


def test_k_token_step_appends_elementwise(tiny: Tiny):
    """
    The k new rows enter the cache's read as k broadcast products (inlined by the
    fusion into the scores' and P·V's reads), not as a one-hot matmul `slotᵀ·rows`: no
    matmul reads the slots.
    """
    from xdsl.ir import BlockArgument, SSAValue

    from plmr.dialects import graph

    config, weights = tiny

    def from_slot(value: SSAValue) -> bool:
        while not isinstance(value, BlockArgument):
            owner = value.owner
            if not isinstance(owner, graph.ReshapeOp | graph.TransposeOp | graph.SliceOp):
                return False
            value = owner.operands[0]
        return value.index == 2  # decode(x, mask, slot, ...)

    for k in (2, 4):
        module = parse_module(ProgramBuilder(config, weights).decode(tokens=k))
        products = [op for op in module.walk() if isinstance(op, graph.MatmulOp)]
        assert products
        assert not [op for op in products if any(from_slot(v) for v in op.operands)]
        muls = [op for op in module.walk() if isinstance(op, graph.MulOp)]
        assert sum(any(from_slot(v) for v in op.operands) for op in muls) == 2 * k * (
            config.n_layers
        )


@pytest.mark.parametrize("decode_rows", [1, 3])
def test_k_token_step_compiled_as_a_decode_step(tiny: Tiny, decode_rows: int):
    """
    `decode_rows = k` compiles the k-token step's norms and queries as a decode step's
    (deferred norm scales): the logits stay numpy's on 2x3.
    """
    from plmr.dialects import graph
    from plmr.passes.pipeline import compile_module, graph_passes
    from plmr.runtime.mesh_machine import run_mesh

    config, weights = tiny
    args, want, _ = _k_token_case(config, weights, PROMPT, [11, 3, 42])
    opts = CompileOptions(
        grid=(2, 3),
        substitute=False,
        tile_sizes=(4, 4),
        fit_tiles=True,
        decode_rows=decode_rows,
    )
    text = ProgramBuilder(config, weights).decode(tokens=3)
    at_graph = parse_module(text)
    for rewrite in graph_passes(opts)[:-1]:  # up to the lowering to loops
        rewrite.apply(make_context(), at_graph)
    norms = sum(isinstance(op, graph.RmsNormOp) for op in at_graph.walk())
    # Each layer's two norms and the final one stay norms unless deferred (3 rows).
    deferred = norms != 2 * config.n_layers + 1
    assert deferred == (decode_rows >= 3)
    module = compile_module(make_context(), parse_module(text), opts)
    got, _ = run_mesh(module, args, mode="functional")
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4)


def test_decode_rows_must_be_positive(tiny: Tiny):
    from plmr.passes.pipeline import compile_module

    config, weights = tiny
    text = ProgramBuilder(config, weights).decode(tokens=2)
    opts = CompileOptions(grid=(2, 2), substitute=False, decode_rows=0)
    with pytest.raises(PlmrError, match="decode_rows must be at least 1, got 0"):
        compile_module(make_context(), parse_module(text), opts)


def test_k_token_step_errors(tiny: Tiny):
    config, weights = tiny
    with pytest.raises(PlmrError, match="heads form only"):
        ProgramBuilder(config, weights, form="per-head").decode(tokens=2)
    with pytest.raises(PlmrError, match="at least one new token"):
        ProgramBuilder(config, weights).decode(tokens=0)
    with pytest.raises(PlmrError, match="the cache is full"):
        cache_slot(config, config.max_seq - 1, 2)


@pytest.mark.parametrize("kv_heads", [1, 2])
def test_one_projection_prefill_rotates_as_exports_do(kv_heads: int):
    """
    The prefill of the heads form with one projection (the benchmarks' form on large
    grids) projects Q, K and V and rotates them as exports write it (`rotate_half`: a
    negation per rotation, no projection by rotated weights): numpy's logits, K and V,
    at the graph level and compiled.
    """
    config = _gqa(kv_heads)
    weights = random_weights(config, 2)
    model = NumpyLlama(config, weights)
    text = ProgramBuilder(config, weights, one_projection=True).prefill(5)
    module = parse_module(text)
    negs = sum(op.name == "graph.neg" for op in module.walk())
    assert negs == config.n_layers * 2
    prompt = [3, 1, 4, 1, 5]
    x = weights["embed"][np.asarray(prompt)]
    cos, sin = rope_tables(config, range(len(prompt)))
    args = [x, causal_mask(len(prompt)), cos, sin]
    want, ks, vs = model.forward(x, range(len(prompt)), KVCache.empty(config))
    graph_outs = run_function(module, select_function(module, "prefill"), args)
    for got in (graph_outs, _on_mesh(text, (2, 2), args)):
        np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4)
        got_k, got_v = split_kv_rows(got[1:], config)
        for g in range(kv_heads):
            np.testing.assert_allclose(got_k[0][g], ks[0][g], rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(got_v[0][g], vs[0][g], rtol=1e-4, atol=1e-5)
