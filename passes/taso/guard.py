"""
The mesh guard of `taso-substitute{grid=...}`: the mesh partitioner's estimate of a graph
program on a grid, to keep a rewrite only if the mesh runs it faster.

The guard prices the region the rewrite changed (`region.changed_regions`: the changed
ops with the ops around them, before and after), since the rest of the program is
lowered alike either way. When the two versions cannot be paired, a region does not
lower on its own, or the regions' estimates are within `CLOSE` of each other (the
boundary of a cut region is priced a little differently from the program's, which
can tip a close call), it prices the whole programs.

The program goes down the pipeline of `plmr compile` without substitutions (graph clean-up,
transpose elimination, loops, fusion, blocking, partitioning; no routing) and the cheapest
estimate over the blockings `plmr compile` tries first is its price. Only the price is
wanted: a nest whose mapping the partitioner's memo holds is priced without being emitted
(`lower_module(price_only=True)`). The pipeline itself
runs `taso-substitute`, so this module lowers with the passes, not through the pipeline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import make_context
from plmr.errors import PlmrError
from plmr.passes.taso.region import changed_regions
from plmr.passes.timing import step

PARALLEL_TILES = (16, 8, 4, 2)
"""The parallel blocks `plmr compile` tries (besides ones derived from the grid)."""
REDUCTION_TILES = (16, 8, 4)
"""The reduction chunks it tries."""


CLOSE = 0.02
"""Relative difference of the region estimates under which the whole programs decide."""


def guard_prices(
    before: ModuleOp, after: ModuleOp, grid: tuple[int, int], device: str
) -> tuple[float, float]:
    """
    The mesh estimates (cycles) of `before` and `after` that the guard compares: of the
    changed regions, or of the whole programs (see the module docstring).

    `before` is priced over every blocking; `after` starts from the blocking that won
    for `before` and stops at the first estimate that decides for it (below `before`'s,
    by more than `CLOSE` for the regions): its price is then an upper bound of its best,
    and the decision, `after < before` (by more than `CLOSE` on the regions), is the one
    pricing every blocking of both gives.
    """
    regions = changed_regions(before, after)
    if regions is not None:
        with step("region"):
            old = best_blocking(regions[0], grid, device)
            new = (
                best_blocking(
                    regions[1], grid, device, old.blocking, old.cycles * (1 - CLOSE)
                )
                if math.isfinite(old.cycles)
                else Estimate(math.inf, None)
            )
        priced = (old.cycles, new.cycles)
        if all(math.isfinite(p) for p in priced) and abs(
            priced[1] - priced[0]
        ) > CLOSE * max(priced):
            return priced
    with step("whole program"):
        old = best_blocking(before, grid, device)
        new = best_blocking(after, grid, device, old.blocking, old.cycles)
        return old.cycles, new.cycles


BLOCKINGS = tuple((p, r) for p in PARALLEL_TILES for r in REDUCTION_TILES)
"""The blockings the guard tries, in order."""


@dataclass(frozen=True)
class Estimate:
    """The mesh partitioner's best estimate of a program and the blocking giving it."""

    cycles: float
    """Infinite if no blocking lowers."""
    blocking: tuple[int, int] | None
    """`(parallel, reduction)`; None if no blocking lowers."""


def mesh_estimate(module: ModuleOp, grid: tuple[int, int], device: str) -> float:
    """
    The mesh partitioner's estimate (cycles) of `module` lowered for `grid`, the best
    over the blockings tried; infinite if it does not lower. `module` is not changed.
    """
    return best_blocking(module, grid, device).cycles


def best_blocking(
    module: ModuleOp,
    grid: tuple[int, int],
    device: str,
    first: tuple[int, int] | None = None,
    stop_below: float = -math.inf,
) -> Estimate:
    """
    The best of `mesh_estimate`'s blockings, trying `first` first and stopping at the
    first estimate below `stop_below` (then the estimate is that blocking's, an upper
    bound of the best). A blocking stops lowering once its nests cost the best so far.
    `module` is not changed.
    """
    from plmr.lowering.graph_to_loop import ConvertGraphToLoopPass
    from plmr.lowering.loop_to_tile import ConvertLoopToTilePass
    from plmr.lowering.tile_to_mesh import OverBound, lower_module, parse_options
    from plmr.passes.graph_canonicalize import GraphCanonicalizePass
    from plmr.passes.loop_indices import LoopSimplifyIndicesPass
    from plmr.passes.neptune.fuse import NeptuneFusePass
    from plmr.passes.transpose_elim import TransposeElimPass

    ctx = make_context()
    work = module.clone()
    try:
        options = parse_options(grid, device, "meshgemm", "ktree", 2)
        GraphCanonicalizePass(unrepeat_kv=False).apply(ctx, work)
        TransposeElimPass().apply(ctx, work)
        ConvertGraphToLoopPass().apply(ctx, work)
        NeptuneFusePass(strategy="auto", chunks=4, remarks=False).apply(ctx, work)
        LoopSimplifyIndicesPass().apply(ctx, work)
    except PlmrError:
        return Estimate(math.inf, None)
    order = sorted(BLOCKINGS, key=lambda b: b != first)
    best = Estimate(math.inf, None)
    for blocking in order:
        trial = work.clone()
        try:
            with step("convert-loop-to-tile"):
                ConvertLoopToTilePass(tile_sizes=blocking).apply(ctx, trial)
            with step("convert-tile-to-mesh"):
                cycles = lower_module(trial, options, price_only=True, bound=best.cycles)
        except (PlmrError, OverBound):
            continue
        if cycles < best.cycles:
            best = Estimate(cycles, blocking)
        if best.cycles < stop_below:
            break
    return best
