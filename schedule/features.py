"""
Features of a program and of a schedule of it, for the tuner's learned cost model.

A program is described by its loop nests after the graph passes and fusion (`NestInfo`:
parallel and reduction trip counts, bytes read and written, FLOPs). A candidate — a
bound schedule of the program on a grid — is a fixed-length vector built from that table
and the schedule's choices: for every nest the block it gets (its per-nest block, else
the global one), how many blocks that makes, how many of the grid's PEs they occupy, the
work and traffic per PE, the footprint of a block against the PE's SRAM, and whether
the reduction is split across PEs (a collective, of which kind and size); summed over
the nests and spelled out for the heaviest three, plus the program-level totals and the
categorical choices (fusion strategy, GEMM/GEMV algorithm, K-tree k, TASO).

The vector does not mention knob names or nest names, so trials of one program inform
the model about another with similar nests (transfer, see `similarity`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from plmr.errors import PlmrError

Json = Any

TOP_NESTS = 3
"""Nests spelled out one by one (the heaviest by FLOPs); the rest only count in sums."""

GEMMS = ("meshgemm", "cannon", "summa")
GEMVS = ("ktree", "pipeline", "ring")
FUSES = ("auto", "rolling", "split-k")


@dataclass(frozen=True)
class NestInfo:
    """One loop nest of a program at the loop level."""

    name: str
    parallel: tuple[int, ...]
    reduction: tuple[int, ...]
    in_bytes: int
    """Bytes of the tensors the nest reads (each once)."""
    out_bytes: int
    flops: float

    def to_json(self) -> dict[str, Json]:
        return {
            "name": self.name,
            "parallel": list(self.parallel),
            "reduction": list(self.reduction),
            "in_bytes": self.in_bytes,
            "out_bytes": self.out_bytes,
            "flops": self.flops,
        }

    @staticmethod
    def from_json(data: Mapping[str, Json]) -> NestInfo:
        try:
            return NestInfo(
                str(data["name"]),
                tuple(int(v) for v in data["parallel"]),
                tuple(int(v) for v in data["reduction"]),
                int(data["in_bytes"]),
                int(data["out_bytes"]),
                float(data["flops"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise PlmrError(f"bad nest description {dict(data)}: {e}") from e


def _tensor_bytes(t: Any) -> int:
    from xdsl.dialects.builtin import TensorType

    if not isinstance(t, TensorType):
        return 4
    shape = cast(TensorType[Any], t).get_shape()
    return 4 * int(math.prod(max(1, d) for d in shape))


def nest_table(module: Any) -> list[NestInfo]:
    """The top-level loop nests of a loop-level module, in program order."""
    from plmr.dialects import loop
    from plmr.passes.neptune.nests import external_values

    out: list[NestInfo] = []
    for op in module.walk():
        if not isinstance(op, loop.NestOp) or isinstance(op.parent_op(), loop.NestOp):
            continue
        ext = op.extents
        par = tuple(ext[i] for i in range(len(ext)) if i not in op.reduction_dims)
        red = tuple(ext[i] for i in op.reduction_dims)
        ins = sum(_tensor_bytes(v.type) for v in external_values(op))
        outs = sum(_tensor_bytes(r.type) for r in op.results)
        arith = sum(1 for inner in op.walk() if inner is not op and not inner.regions)
        flops = float(math.prod(ext)) * max(1, arith - 1)
        name = next((r.name_hint for r in op.results if r.name_hint), "") or ""
        out.append(NestInfo(name, par, red, ins, outs, flops))
    return out


@dataclass(frozen=True)
class Choices:
    """What a bound schedule decides, as the features read it."""

    grid: tuple[int, int]
    sram: int
    tile: tuple[int, int] | None
    nests: Mapping[str, tuple[int, int]]
    gemm: str
    gemv: str
    k: int
    fuse: str
    substitute: bool


def choices_of(schedule: Mapping[str, Json], sram: int) -> Choices:
    """Reads the choices of a bound schedule (its JSON object)."""
    steps: dict[str, dict[str, Json]] = {}
    for step in cast(list[Json], schedule.get("steps", [])):
        if isinstance(step, dict):
            d = cast(dict[str, Json], step)
            steps[str(d.get("transform"))] = d
    part = steps.get("partition", {})
    tile = steps.get("tile", {})
    grid_v: Json = part.get("grid", [4, 4])
    grid = (4, 4)
    if isinstance(grid_v, list) and len(cast(list[Json], grid_v)) == 2:
        rows, cols = cast(list[Json], grid_v)
        grid = (int(rows), int(cols))
    p, r = tile.get("parallel", "auto"), tile.get("reduction", "auto")
    sizes = (int(p), int(r)) if isinstance(p, int) and isinstance(r, int) else None
    nests: dict[str, tuple[int, int]] = {}
    for name, pr in cast(dict[str, Json], tile.get("nests", {}) or {}).items():
        if isinstance(pr, list) and len(cast(list[Json], pr)) == 2:
            a, b = cast(list[Json], pr)
            if isinstance(a, int) and isinstance(b, int):
                nests[name] = (a, b)
    sub = steps.get("substitute")
    return Choices(
        grid=grid,
        sram=sram,
        tile=sizes,
        nests=nests,
        gemm=str(part.get("gemm", "meshgemm")),
        gemv=str(part.get("gemv", "ktree")),
        k=int(part.get("k", 2)),
        fuse=str(steps.get("fuse", {}).get("strategy", "auto")),
        substitute=bool(sub.get("enabled", True)) if sub is not None else False,
    )


def _auto_block(extent: int, pes: int) -> int:
    """What the blocking search tends to pick: one block per PE along the loop."""
    return max(1, extent // max(1, pes))


def _nest_vector(n: NestInfo, c: Choices) -> list[float]:
    pes = c.grid[0] * c.grid[1]
    side = max(c.grid)
    if n.name in c.nests:
        p, r = c.nests[n.name]
    elif c.tile is not None:
        p, r = c.tile
    else:
        p = _auto_block(max(n.parallel, default=1), side)
        r = _auto_block(n.reduction[-1], math.lcm(*c.grid)) if n.reduction else 1
    par_blocks = math.prod(math.ceil(e / min(e, p)) for e in n.parallel)
    red = n.reduction[-1] if n.reduction else 1
    red_blocks = math.ceil(red / min(red, r))
    used = min(pes, par_blocks * red_blocks)
    block_elems = math.prod(min(e, p) for e in n.parallel) * min(red, r)
    footprint = 4.0 * (block_elems + math.prod(min(e, p) for e in n.parallel))
    split = 1.0 if (n.reduction and par_blocks < pes and red_blocks > 1) else 0.0
    partial = 4.0 * math.prod(min(e, p) for e in n.parallel) if split else 0.0
    work = n.flops / max(1, used)
    traffic = (n.in_bytes + n.out_bytes) / max(1, used) + partial * math.log2(max(2, pes))
    return [
        math.log2(1 + n.flops),
        math.log2(1 + n.in_bytes + n.out_bytes),
        math.log2(1 + math.prod(n.parallel)),
        math.log2(1 + red),
        math.log2(p),
        math.log2(max(1, r)),
        math.log2(par_blocks),
        math.log2(red_blocks),
        used / pes,
        math.log2(1 + work),
        math.log2(1 + traffic),
        footprint / c.sram,
        split,
        math.log2(1 + partial),
    ]


NEST_WIDTH = 14


def features(table: Sequence[NestInfo], c: Choices) -> np.ndarray:
    """The feature vector of a candidate (fixed length, see `FEATURE_COUNT`)."""
    pes = c.grid[0] * c.grid[1]
    vectors = [_nest_vector(n, c) for n in table]
    heavy = sorted(range(len(table)), key=lambda i: -table[i].flops)[:TOP_NESTS]
    top: list[float] = []
    for i in heavy:
        top += vectors[i]
    top += [0.0] * (NEST_WIDTH * TOP_NESTS - len(top))
    work = [2.0 ** v[9] for v in vectors] or [0.0]
    traffic = [2.0 ** v[10] for v in vectors] or [0.0]
    splits = [v[12] for v in vectors]
    partial = sum(2.0 ** v[13] - 1 for v in vectors)
    total_flops = sum(n.flops for n in table)
    total_bytes = sum(n.in_bytes + n.out_bytes for n in table)
    head = [
        math.log2(pes),
        c.grid[0] / c.grid[1],
        math.log2(1 + total_flops),
        math.log2(1 + total_bytes),
        float(len(table)),
        math.log2(1 + sum(work)),
        math.log2(1 + max(work)),
        math.log2(1 + sum(traffic)),
        sum(splits),
        math.log2(1 + partial),
        max((v[11] for v in vectors), default=0.0),
        float(np.mean([v[8] for v in vectors])) if vectors else 0.0,
        1.0 if c.tile is None else 0.0,
        float(len(c.nests)),
        float(c.k),
        1.0 if c.substitute else 0.0,
    ]
    cats = [float(c.gemm == g) for g in GEMMS]
    cats += [float(c.gemv == g) for g in GEMVS]
    cats += [float(c.fuse == f) for f in FUSES]
    # Collectives by kind: the split reductions run the GEMV algorithm's collective.
    cats += [sum(splits) * float(c.gemv == g) for g in GEMVS]
    return np.array(head + cats + top, dtype=np.float64)


FEATURE_COUNT = 16 + 12 + NEST_WIDTH * TOP_NESTS


def program_vector(table: Sequence[NestInfo], grid: tuple[int, int]) -> np.ndarray:
    """What makes two programs alike: grid, totals and the heaviest nests' sizes."""
    flops = sorted((n.flops for n in table), reverse=True)[:TOP_NESTS]
    flops += [0.0] * (TOP_NESTS - len(flops))
    return np.array(
        [
            math.log2(grid[0] * grid[1]),
            math.log2(1 + sum(n.flops for n in table)),
            math.log2(1 + sum(n.in_bytes + n.out_bytes for n in table)),
            math.log2(1 + len(table)),
            *(math.log2(1 + f) for f in flops),
        ]
    )


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """1 for the same program vector, falling towards 0 as they differ (RBF kernel)."""
    d = float(np.sum((a - b) ** 2)) / max(1, a.size)
    return math.exp(-d / 4.0)


__all__ = [
    "FEATURE_COUNT",
    "Choices",
    "NestInfo",
    "choices_of",
    "features",
    "nest_table",
    "program_vector",
    "similarity",
]
