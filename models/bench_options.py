"""
What `plmr bench decode|prefill` compiles: the default context or prompt, the model's
sizes padded to the grid (`bench_config`), the block size of large grids (`grid_block`)
and the compile options (`default_options`).
"""

from __future__ import annotations

import dataclasses
import math

from plmr.models.llama import LlamaConfig, get_config
from plmr.passes.pipeline import CompileOptions


def default_tokens(kind: str, config: LlamaConfig) -> int:
    """
    The default context (decode) or prompt (prefill): 4096 tokens (WaferLLM's), or the
    model's positions if fewer; tiny: its cache (decode) or 8 tokens (prefill).
    """
    if config.name == "tiny":
        return config.max_seq if kind == "decode" else 8
    return min(4096, config.max_seq)


def resolve_model(model: str | LlamaConfig) -> LlamaConfig:
    """A preset by name, or the config itself."""
    return get_config(model) if isinstance(model, str) else model


def grid_block(
    model: str | LlamaConfig, grid: tuple[int, int], kind: str = "prefill"
) -> int:
    """
    The block size of large grids, 0 for small ones (the compile's own search): a PE's
    share of the (padded) FFN width, so that every GEMV (decode) and every step of a
    MeshGEMM over the FFN (prefill) has one block per PE and axis (`fit` shrinks it to
    the narrower dims), as the kernel library's kernels do. (Prefill blocks of a PE's
    share of the model's width made the FFN's block products 5 thin ones per step:
    llama3-8b on 480², 11.35M cycles per layer against 7.47M.)
    """
    del kind
    p, q = grid
    if p * q <= 64:
        return 0
    config = resolve_model(model)
    n, m = max(p, q), math.lcm(p, q)
    return max(1, math.ceil(-(-config.ffn_dim // m) * m / n))


def bench_config(
    model: str | LlamaConfig, grid: tuple[int, int], tokens: int
) -> LlamaConfig:
    """
    The preset with `tokens` positions, its sizes padded where they need it to a
    multiple of lcm(P, Q), so that every dimension splits evenly over the PEs (the
    blocks are then fitted to the grid: `convert-loop-to-tile{fit fit-grid}`).
    """
    base = dataclasses.replace(resolve_model(model), max_seq=tokens)
    multiple = math.lcm(*grid)
    sizes = (base.dim, base.ffn_dim, base.vocab, base.max_seq)
    if all(s % multiple == 0 for s in sizes):
        return base
    return base.padded(multiple)


def default_options(
    model: str | LlamaConfig, grid: tuple[int, int], device: str, kind: str = "prefill"
) -> CompileOptions:
    """
    16×16 blocks on small grids, `grid_block` blocks on large ones. On large grids
    prefill splits fused reductions into lcm(P, Q) chunks; decode does not split them
    (chunks = 1: the attention's maximum over the cache is one nest whose reduction the
    mesh allreduces, not chunk maxima and a nest that combines them). Decode on large
    grids: each allreduce takes the K-tree's K that its line times fastest (`gemv =
    auto`; prefill's allreduces keep K = 2 without the cost of trying).
    """
    block = grid_block(model, grid, kind)
    if not block:
        return CompileOptions(
            grid=grid, device=device, substitute=False, tile_sizes=(16, 16), fit_tiles=True
        )
    return CompileOptions(
        grid=grid,
        device=device,
        substitute=False,
        tile_sizes=(block, block),
        fit_tiles=True,
        chunks=1 if kind == "decode" else math.lcm(*grid),
        gemv="auto" if kind == "decode" else "ktree",
    )
