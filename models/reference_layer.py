"""
The hand-composed reference layer: a LLaMA layer built directly from the kernel library
(`lowering/kernels.py`) the way WaferLLM composes it, each kernel simulated in timing
mode on the same device and grid, and the cycles summed. It is the physical reference a
compiled layer (`plmr bench decode|prefill`) must reach, next to the compute floor.

**Decode** (one token over a cache of S positions, on a P×Q grid). The activation is a
vector; every GEMV is `gemv ktree` (MeshGEMV: local block products, then a K = 2 tree
allreduce, groups ≈ √P), and consecutive GEMVs reduce along alternating axes so that the
layout comes back at the end of the layer (a GEMV reducing along x is timed on the
transposed Q×P grid). Heads are bands of columns, `max(1, Q // n_heads)` wide (several
heads per column, one after another, when there are more heads than columns); K and V
are cached per query head, tokens over the P rows as the shift cache keeps them.

| part | kernel | sizes (y = x·W: M reduced, N out) | grid |
|---|---|---|---|
| attention norm | `sum_of_squares` | a scalar allreduced along y | P×Q |
| QKV | `gemv ktree` | M = dim, N = (n_heads + 2·n_kv_heads)·head_dim | P×Q |
| scores | `gemv ktree` | M = head_dim, N = S (along x, in a head's band) | band×P |
| softmax max, sum | `vector_allreduce` | one value per head, along y | P×Q |
| PV | `gemv ktree` | M = S, N = n_heads·head_dim | P×Q |
| O | `gemv ktree` | M = n_heads·head_dim, N = dim (along x) | Q×P |
| FFN norm | `sum_of_squares` | as the attention norm | P×Q |
| up + gate | `gemv ktree` | M = dim, N = 2·ffn_dim | P×Q |
| down | `gemv ktree` | M = ffn_dim, N = dim (along x) | Q×P |

Ten allreduces, as WaferLLM's decode has.

**Prefill** (a prompt of L tokens: tokens over y, the width over x). Every GEMM is
MeshGEMM (`cannon_gemm`, interleaved rings; operands placed pre-skewed). Heads run at
once on a t×t arrangement of tiles (t = ⌈√n_heads⌉, each ⌊P/t⌋×⌊Q/t⌋ PEs; more rounds
when heads outnumber tiles): per head QKᵀ and PV are MeshGEMMs on its tile (K placed
transposed), and the softmax's row max and sum are allreduces along x of the tile.

| part | kernel | sizes (M×K·K×N) | grid |
|---|---|---|---|
| attention norm | `sum_of_squares` | L rows of dim, allreduced along x | P×Q |
| QKV | `meshgemm` | L × dim · dim × (n_heads + 2·n_kv_heads)·head_dim | P×Q |
| scores | `meshgemm` | L × head_dim · head_dim × L | tile |
| softmax max, sum | `vector_allreduce` | ⌈L / tile rows⌉ values per PE, along x | tile |
| PV | `meshgemm` | L × L · L × head_dim | tile |
| O | `meshgemm` | L × n_heads·head_dim · n_heads·head_dim × dim | P×Q |
| FFN norm | `sum_of_squares` | as the attention norm | P×Q |
| up + gate | `meshgemm` | L × dim · dim × 2·ffn_dim | P×Q |
| down | `meshgemm` | L × ffn_dim · ffn_dim × dim | P×Q |

Left out of both: the elementwise work (RoPE, SiLU, the softmax's exp and division,
residual adds, the norms' scaling; a few cycles per element of a PE's share) and any
change of layout (the operands are placed as each kernel wants them). On a non-square
grid K is padded to a multiple of lcm(P, Q) for MeshGEMM.

**Compute floor**: the layer's multiply-accumulates (the real sizes, attention over all
S or L×L positions) divided by what the PEs do per cycle, `P·Q·fmac_fp16`; that is,
layer FLOPs / (PEs · SIMD width · 2 FLOPs per FMAC).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from plmr.errors import PlmrError
from plmr.lowering.kernels import (
    Kernel,
    cannon_gemm,
    gemv,
    sum_of_squares,
    vector_allreduce,
)
from plmr.models.llama import LlamaConfig
from plmr.target.device import Device, get_device


@dataclass(frozen=True)
class Part:
    """One kernel of the composed layer."""

    name: str
    kernel: str
    """The kernel's description (sizes, grid, algorithm)."""
    grid: tuple[int, int]
    count: int
    """Runs one after another (heads that share a column or a tile)."""
    cycles: float
    """One run, simulated."""
    macs: int
    """Multiply-accumulates of the part (all runs; 0 for reductions)."""

    @property
    def total(self) -> float:
        return self.count * self.cycles

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kernel": self.kernel,
            "grid": list(self.grid),
            "count": self.count,
            "cycles": self.cycles,
            "total_cycles": self.total,
            "macs": self.macs,
        }


@dataclass(frozen=True)
class ReferenceLayer:
    """A hand-composed layer: its parts, their sum and the compute floor."""

    kind: str
    model: str
    device: str
    grid: tuple[int, int]
    tokens: int
    parts: tuple[Part, ...]
    macs: int
    """The layer's multiply-accumulates (real sizes)."""
    floor_cycles: float

    @property
    def cycles(self) -> float:
        return sum(p.total for p in self.parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "model": self.model,
            "device": self.device,
            "grid": list(self.grid),
            "tokens": self.tokens,
            "cycles": self.cycles,
            "macs": self.macs,
            "compute_floor_cycles": self.floor_cycles,
            "parts": [p.to_json() for p in self.parts],
        }

    def summary(self) -> list[str]:
        p, q = self.grid
        lines = [
            f"  hand-composed {self.cycles:,.0f} cycles per layer from the kernel library "
            f"on {p}x{q}; compute floor {self.floor_cycles:,.0f}"
        ]
        for part in self.parts:
            times = f"{part.count} x " if part.count > 1 else ""
            lines.append(
                f"    {part.name:<14} {times}{part.cycles:>10,.0f} cycles  {part.kernel}"
            )
        return lines


def layer_macs(kind: str, config: LlamaConfig, tokens: int, new: int = 1) -> int:
    """
    Multiply-accumulates of one layer: projections, FFN and attention (all positions);
    decode: `new` tokens over a cache of `tokens` positions.
    """
    c = config
    q_dim, kv_dim = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    dense = c.dim * (q_dim + 2 * kv_dim) + q_dim * c.dim + 3 * c.dim * c.ffn_dim
    if kind == "decode":
        return new * (dense + 2 * c.n_heads * c.head_dim * tokens)
    return tokens * dense + 2 * c.n_heads * c.head_dim * tokens * tokens


def compute_floor(macs: int, grid: tuple[int, int], device: Device) -> float:
    """Cycles to do `macs` multiply-accumulates on every PE at full SIMD width."""
    return macs / (grid[0] * grid[1] * device.fmac_fp16)


def _simulate(kernel: Kernel, dev: Device) -> float:
    from plmr.runtime.mesh_machine import run_mesh

    zeros = [np.zeros(s, np.float32) for s in kernel.inputs]
    _, report = run_mesh(kernel.module, zeros, device=dev, mode="timing")
    return float(report.cycles)


def _pad(k: int, grid: tuple[int, int]) -> int:
    if grid[0] == grid[1]:
        return k
    m = math.lcm(*grid)
    return -(-k // m) * m


def _decode_parts(
    c: LlamaConfig, grid: tuple[int, int], dev: Device, s: int
) -> list[tuple[str, Kernel, int]]:
    p, q = grid
    hd, q_dim, kv_dim = c.head_dim, c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    band = max(1, q // c.n_heads)
    per_column = math.ceil(c.n_heads / q)
    name = dev.name
    norm = sum_of_squares(1, c.dim, grid, name)
    return [
        ("attention norm", norm, 1),
        ("QKV", gemv("ktree", c.dim, q_dim + 2 * kv_dim, grid, name), 1),
        ("scores", gemv("ktree", hd, s, (band, p), name), per_column),
        ("softmax max", vector_allreduce(per_column, grid, name, "y", "max"), 1),
        ("softmax sum", vector_allreduce(per_column, grid, name, "y", "sum"), 1),
        ("PV", gemv("ktree", s, q_dim, grid, name), 1),
        ("O", gemv("ktree", q_dim, c.dim, (q, p), name), 1),
        ("FFN norm", norm, 1),
        ("up + gate", gemv("ktree", c.dim, 2 * c.ffn_dim, grid, name), 1),
        ("down", gemv("ktree", c.ffn_dim, c.dim, (q, p), name), 1),
    ]


def head_tiles(n_heads: int, grid: tuple[int, int]) -> tuple[tuple[int, int], int]:
    """The tile of a head in prefill attention and the rounds the heads take."""
    p, q = grid
    t = math.ceil(math.sqrt(n_heads))
    ty, tx = min(p, t), min(q, t)
    return (p // ty, q // tx), math.ceil(n_heads / (ty * tx))


def _prefill_parts(
    c: LlamaConfig, grid: tuple[int, int], dev: Device, n: int
) -> list[tuple[str, Kernel, int]]:
    hd, q_dim, kv_dim = c.head_dim, c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    tile_grid, rounds = head_tiles(c.n_heads, grid)
    name = dev.name

    def mesh_gemm(m: int, k: int, n_: int, on: tuple[int, int]) -> Kernel:
        return cannon_gemm(m, _pad(k, on), n_, on, name, "interleaved")

    norm = sum_of_squares(n, c.dim, grid, name)
    row_share = math.ceil(n / tile_grid[0])
    return [
        ("attention norm", norm, 1),
        ("QKV", mesh_gemm(n, c.dim, q_dim + 2 * kv_dim, grid), 1),
        ("scores", mesh_gemm(n, hd, n, tile_grid), rounds),
        ("softmax max", vector_allreduce(row_share, tile_grid, name, "x", "max"), rounds),
        ("softmax sum", vector_allreduce(row_share, tile_grid, name, "x", "sum"), rounds),
        ("PV", mesh_gemm(n, n, hd, tile_grid), rounds),
        ("O", mesh_gemm(n, q_dim, c.dim, grid), 1),
        ("FFN norm", norm, 1),
        ("up + gate", mesh_gemm(n, c.dim, 2 * c.ffn_dim, grid), 1),
        ("down", mesh_gemm(n, c.ffn_dim, c.dim, grid), 1),
    ]


def _part_macs(name: str, kind: str, c: LlamaConfig, tokens: int) -> int:
    q_dim, kv_dim = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    rows = 1 if kind == "decode" else tokens
    per_row = {
        "QKV": c.dim * (q_dim + 2 * kv_dim),
        "scores": c.n_heads * c.head_dim * tokens,
        "PV": c.n_heads * c.head_dim * tokens,
        "O": q_dim * c.dim,
        "up + gate": 2 * c.dim * c.ffn_dim,
        "down": c.ffn_dim * c.dim,
    }
    return rows * per_row.get(name, 0)


def hand_composed_layer(
    kind: str,
    config: LlamaConfig,
    grid: tuple[int, int],
    device: Device | str = "wse2",
    tokens: int | None = None,
) -> ReferenceLayer:
    """
    Builds and simulates (timing mode) the kernels of one decode or prefill layer of
    `config` on a `grid` (see the module docstring) and the compute floor.
    `tokens`: the cache's length (decode) or the prompt's (prefill); by default the
    config's `max_seq`.
    """
    if kind not in ("decode", "prefill"):
        raise PlmrError(f"unknown layer kind '{kind}' (decode or prefill)")
    dev = get_device(device) if isinstance(device, str) else device
    n = config.max_seq if tokens is None else tokens
    if n < 1:
        raise PlmrError(f"the {'context' if kind == 'decode' else 'prompt'} must be >= 1")
    p, q = grid
    if p < 1 or q < 1 or p > dev.height or q > dev.width:
        raise PlmrError(
            f"a {p}x{q} grid does not fit {dev.name} ({dev.height}x{dev.width} PEs)"
        )
    build = _decode_parts if kind == "decode" else _prefill_parts
    parts: list[Part] = []
    cycles: dict[int, float] = {}
    for name, kernel, count in build(config, grid, dev, n):
        key = id(kernel)
        if key not in cycles:
            cycles[key] = _simulate(kernel, dev)
        parts.append(
            Part(
                name,
                kernel.description,
                _kernel_grid(kernel),
                count,
                cycles[key],
                _part_macs(name, kind, config, n),
            )
        )
    macs = layer_macs(kind, config, n)
    return ReferenceLayer(
        kind,
        config.name,
        dev.name,
        grid,
        n,
        tuple(parts),
        macs,
        compute_floor(macs, grid, dev),
    )


def _kernel_grid(kernel: Kernel) -> tuple[int, int]:
    from plmr.runtime.mesh_machine import find_program

    return find_program(kernel.module, None).grid_shape


__all__ = [
    "Part",
    "ReferenceLayer",
    "compute_floor",
    "hand_composed_layer",
    "head_tiles",
    "layer_macs",
]
