"""
The blocking search of `plmr compile`: which `P,R` blocks (and bands, and uneven
spreads) a loop-level program is lowered with.

Each candidate of `blocking_trials` (the fixed sizes {16, 8, 4, 2} x {16, 8, 4}, and
with a grid the blocks that give each PE one block) is lowered to the mesh on a copy
and priced by the partitioner's cost model without emitting the nests the mapping memo
already holds (`lower_module(price_only=True)`); a trial whose nests get the same tile
programs as an earlier trial's is not priced again, and a trial stops as soon as its
nests cost what the cheapest so far costs. The cheapest (ties to the earlier) is then
lowered in full, packed (`pack`: mesh-fuse-softmax, mesh-pack-allreduces, mesh-shape-trees)
and routed (`route`: mesh-route, mesh-check-limits); if it does not route, every trial is
lowered in full (`_search_each`) and the cheapest that routes is kept.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException

from plmr.dialects import loop
from plmr.errors import PlmrError
from plmr.passes.timing import count, step

if TYPE_CHECKING:
    from plmr.lowering.loop_to_tile import ConvertLoopToTilePass
    from plmr.lowering.tile_to_mesh import NestPlan, Options
    from plmr.passes.compile_options import CompileOptions

PARALLEL_TILES = (16, 8, 4, 2)
REDUCTION_TILES = (16, 8, 4)


def pack(module: ModuleOp, opts: CompileOptions, plans: list[NestPlan] | None) -> None:
    """
    mesh-fuse-softmax and mesh-pack-allreduces; the plans of merged nests point at the
    merged nest.
    """
    from plmr.passes.mesh_pack import Merge, pack_allreduces, update_plans
    from plmr.passes.mesh_softmax import fuse_softmax
    from plmr.passes.mesh_softmax_nests import fuse_softmax_nests

    if opts.fuse_softmax:
        with step("mesh-fuse-softmax"):
            fuse_softmax(module)
    merges: list[Merge] = []
    if opts.pack_allreduces:
        with step("mesh-pack-allreduces"):
            merges += pack_allreduces(module)
    if opts.fuse_softmax:
        # The softmax's sums are one nest once packed.
        with step("mesh-fuse-softmax (nests)"):
            merges += fuse_softmax_nests(module)
    if plans is not None:
        update_plans(plans, merges)
    if opts.shape_trees and opts.gemv == "auto":
        from plmr.lowering.tile_to_mesh.segments import AUTO_K
        from plmr.passes.mesh_trees import shape_trees

        with step("mesh-shape-trees"):
            # Shapes are checked against the colors even when the program is not
            # routed here: a shape never makes a program that fit stop fitting.
            shape_trees(module, check_routes=True, phases=AUTO_K)


def route(ctx: Context, module: ModuleOp, opts: CompileOptions) -> None:
    """mesh-route and mesh-check-limits, with their failures as plmr errors."""
    from plmr.passes.mesh_check_limits import MeshCheckLimitsPass
    from plmr.passes.mesh_route import MeshRoutePass

    if not opts.route:
        return
    try:
        for p in (MeshRoutePass(relay=opts.relay), MeshCheckLimitsPass(relay=opts.relay)):
            with step(p.name):
                p.apply(ctx, module)
    except DiagnosticException as e:
        raise PlmrError(str(e)) from e


@dataclass
class Blocking:
    """The blocking the search keeps for a loop-level module, and its lowering."""

    sizes: tuple[int, int]
    bands: bool
    spread: bool
    cost: float
    """The partitioner's estimate of the lowered program."""
    module: ModuleOp
    """The module blocked, partitioned, packed and routed with this blocking."""
    plans: list[NestPlan]


def search_blocking(
    ctx: Context, module: ModuleOp, opts: CompileOptions, mesh_opts: Options
) -> Blocking:
    """
    The blocking `plmr compile` picks for a loop-level `module` (left unchanged): each
    of `blocking_trials` (for each of `spread_choices`, the next only when no trial
    fitted SRAM) priced on a copy, the cheapest (ties to the earlier) lowered to the
    mesh, packed and routed (see the module docstring). Raises the first trial's error
    (one out of SRAM preferred) when none lowers. With weights at rest, when every
    trial that fails fails only because a nest's gathers do not fit (`RestRefusal`),
    the search runs again with copies of those nests' weights (`rest_copies`).
    """
    from plmr.lowering.tile_to_mesh import RestRefusal

    try:
        return _search_blocking(ctx, module, opts, mesh_opts)
    except RestRefusal:
        copies = dataclasses.replace(mesh_opts, rest_copies=True)
        return _search_blocking(ctx, module, opts, copies)


def _search_blocking(
    ctx: Context, module: ModuleOp, opts: CompileOptions, mesh_opts: Options
) -> Blocking:
    trials = blocking_trials(module, opts)
    if mesh_opts.gemv != "auto" or len(trials) == 1:
        return _search(ctx, module, opts, mesh_opts, trials, spread_choices(opts))
    # `gemv = auto` times each line's K-trees as it lowers, which no trial's price
    # needs: the blockings are ranked with the default K-tree, and the one kept is
    # lowered again with each line's own.
    with step("blocking search (ranked with K-trees of k = 2)"):
        ranked = _search(
            ctx,
            module,
            dataclasses.replace(opts, gemv="ktree", k=2),
            dataclasses.replace(mesh_opts, gemv="ktree", k=2),
            trials,
            spread_choices(opts),
        )
    try:
        return _search(
            ctx, module, opts, mesh_opts, [(ranked.sizes, ranked.bands)], (ranked.spread,)
        )
    except PlmrError:
        # Each line's K-trees did not fit (SRAM, colors): the default K-tree did.
        return ranked


def _search(
    ctx: Context,
    module: ModuleOp,
    opts: CompileOptions,
    mesh_opts: Options,
    trials: list[tuple[tuple[int, int], bool]],
    spreads: tuple[bool, ...],
) -> Blocking:
    """
    `search_blocking` over the given trials and spread choices. Each trial is priced
    (`lower_module(price_only=True)`: a nest whose mapping the memo holds is not
    emitted), stopped once it costs what the cheapest so far costs; the cheapest (ties
    to the earlier) is then lowered in full, packed and routed. That is the trial the
    exhaustive search (`_search_each`) keeps, unless it fails to route: then the
    exhaustive search runs (a trial stopped at its price may be the cheapest that
    routes).
    """
    from plmr.lowering.tile_to_mesh import OverBound, lower_module

    if len(trials) == 1:
        return _search_each(ctx, module, opts, mesh_opts, trials, spreads)
    from plmr.lowering.loop_to_tile import memo as tile_memo

    failures = _Failures()
    stopped = same = 0
    for turn, spread in enumerate(spreads):
        if turn and not _out_of_sram(failures.first):
            break
        kept: tuple[tuple[int, int], bool] | None = None
        best = math.inf
        seen: set[tuple[Hashable, ...]] = set()
        for sizes, bands in trials:
            trial = module.clone()
            try:
                with step("convert-loop-to-tile"), tile_memo.traced() as keys:
                    loop_to_tile_pass(opts, sizes, bands, spread).apply(ctx, trial)
                # The same nest keys are the same tile program, priced the same: an
                # earlier trial (kept on a tie) has it.
                fingerprint = tuple(keys)
                if keys and None not in keys and fingerprint in seen:
                    same += 1
                    continue
                seen.add(fingerprint)
                with step("convert-tile-to-mesh (priced)"):
                    cost = lower_module(
                        trial, mesh_opts, price_only=True, bound=best * 0.999
                    )
            except OverBound:
                stopped += 1
                continue
            except PlmrError as e:
                failures.add(e, spread)
                continue
            if cost >= best * 0.999:
                continue
            best, kept = cost, (sizes, bands)
        if kept is None:
            continue
        count("blocking trials stopped at the best's estimate", stopped)
        count("blocking trials blocked as an earlier one", same)
        sizes, bands = kept
        try:
            return _lowered(ctx, module, opts, mesh_opts, sizes, bands, spread)
        except PlmrError:
            return _search_each(ctx, module, opts, mesh_opts, trials, spreads[turn:])
    count("blocking trials stopped at the best's estimate", stopped)
    raise failures.refusal()


def _lowered(
    ctx: Context,
    module: ModuleOp,
    opts: CompileOptions,
    mesh_opts: Options,
    sizes: tuple[int, int],
    bands: bool,
    spread: bool,
) -> Blocking:
    """One blocking of `module` lowered in full, packed and routed."""
    from plmr.lowering.tile_to_mesh import lower_module

    trial = module.clone()
    plans: list[NestPlan] = []
    with step("convert-loop-to-tile"):
        loop_to_tile_pass(opts, sizes, bands, spread).apply(ctx, trial)
    with step("convert-tile-to-mesh"):
        cost = lower_module(trial, mesh_opts, plans)
    pack(trial, opts, plans)
    route(ctx, trial, opts)
    return Blocking(sizes, bands, spread, cost, trial, plans)


def _search_each(
    ctx: Context,
    module: ModuleOp,
    opts: CompileOptions,
    mesh_opts: Options,
    trials: list[tuple[tuple[int, int], bool]],
    spreads: tuple[bool, ...],
) -> Blocking:
    """
    `search_blocking` lowering every trial in full: the one with the lowest estimate
    that packs and routes kept (ties to the earlier). Only a trial whose estimate
    improves on the best so far is packed and routed, and a trial stops lowering once
    its nests lowered cost what the best so far costs.
    """
    from plmr.lowering.tile_to_mesh import OverBound, lower_module

    best: Blocking | None = None
    failures = _Failures()
    stopped = 0
    for turn, spread in enumerate(spreads):
        if best is not None or (turn and not _out_of_sram(failures.first)):
            break
        for sizes, bands in trials:
            trial = module.clone()
            trial_plans: list[NestPlan] = []
            try:
                with step("convert-loop-to-tile"):
                    loop_to_tile_pass(opts, sizes, bands, spread).apply(ctx, trial)
                bound = math.inf if best is None else best.cost * 0.999
                with step("convert-tile-to-mesh"):
                    cost = lower_module(trial, mesh_opts, trial_plans, bound=bound)
                # Packing and routing leave the estimate as it is: only a trial that
                # would be kept is routed (a routing error still rejects it).
                if cost >= bound:
                    continue
                pack(trial, opts, trial_plans)
                route(ctx, trial, opts)
            except OverBound:
                stopped += 1
                continue
            except PlmrError as e:
                failures.add(e, spread)
                continue
            best = Blocking(sizes, bands, spread, cost, trial, trial_plans)
    count("blocking trials stopped at the best's estimate", stopped)
    if best is None:
        raise failures.refusal()
    return best


def blocking_trials(
    module: ModuleOp, opts: CompileOptions
) -> list[tuple[tuple[int, int], bool]]:
    """
    The blockings `plmr compile` tries on a loop-level `module`, in order: `(P, R)`
    blocks (the given ones, or the fixed candidates and those that give each PE one
    block) and, with a grid (`fit_tiles`), each also blocked for bands of PEs (the heads
    over bands, their head dimension within each) where a nest could use them. The
    trial with the lowest planner's estimate is kept.
    """
    from plmr.lowering.loop_to_tile import may_band

    choices: Sequence[tuple[int, int]]
    if opts.tile_sizes is not None:
        choices = [opts.tile_sizes]
    else:
        par, red = _grid_blocks(module, opts.grid, opts.fit_tiles)
        choices = [
            (p, r) for p in (*PARALLEL_TILES, *par) for r in (*REDUCTION_TILES, *red)
        ]
    banding = [False, True] if opts.fit_tiles and may_band(module, opts.grid) else [False]
    return [(s, b) for s in choices for b in banding]


def spread_choices(opts: CompileOptions) -> tuple[bool, ...]:
    """
    The `spread` settings of `convert-loop-to-tile` the blocking search tries, in turn:
    with `fit_tiles`, when no trial fits SRAM with the dimensions no axis divides kept
    whole, the trials again with them split unevenly over the grid.
    """
    return (False, True) if opts.fit_tiles else (False,)


class _Failures:
    """The errors of a search's trials."""

    def __init__(self) -> None:
        self.first: PlmrError | None = None
        """The first trial's error (one out of SRAM preferred, without spreads)."""
        self.all: list[PlmrError] = []

    def add(self, error: PlmrError, spread: bool) -> None:
        if self.first is None or (not spread and "SRAM" in str(error)):
            self.first = error
        self.all.append(error)

    def refusal(self) -> PlmrError:
        """
        The error of a search without a blocking: a `RestRefusal` when every trial
        failed for one (copies of the weights would fit), else the first.
        """
        from plmr.lowering.tile_to_mesh import RestRefusal

        assert self.first is not None
        rest = [e for e in self.all if isinstance(e, RestRefusal)]
        return rest[0] if rest and len(rest) == len(self.all) else self.first


def _out_of_sram(error: PlmrError | None) -> bool:
    return error is not None and "SRAM" in str(error)


def loop_to_tile_pass(
    opts: CompileOptions, sizes: tuple[int, int], bands: bool, spread: bool = False
) -> ConvertLoopToTilePass:
    """`convert-loop-to-tile` as `plmr compile` runs it for one blocking trial."""
    from plmr.lowering.loop_to_tile import ConvertLoopToTilePass

    nests = ";".join(f"{n}={p},{r}" for n, p, r in opts.nest_tile_sizes)
    return ConvertLoopToTilePass(
        tile_sizes=sizes,
        nest_tile_sizes=nests,
        fit=opts.fit_tiles,
        fit_grid=opts.grid if opts.fit_tiles else (),
        bands=bands,
        spread=spread,
    )


def _grid_blocks(
    module: ModuleOp, grid: tuple[int, int], fit: bool = False
) -> tuple[list[int], list[int]]:
    """
    Blocks that give each PE exactly one block of a loop: extent / PEs along an axis for
    parallel dims, extent / lcm(P, Q) (one Cannon chunk) for reductions; the most
    common few of each, larger than the fixed candidates. With `fit`, an extent no
    axis divides gives its padded block too (`ceil(extent / PEs)`, the last block
    partly padding: a reduction's where `convert-loop-to-tile` finds a padding that
    leaves its combine as it is).
    """
    import math
    from collections import Counter

    par: Counter[int] = Counter()
    red: Counter[int] = Counter()
    chunks = math.lcm(*grid)
    for op in module.walk():
        if not isinstance(op, loop.NestOp):
            continue
        ext = op.extents
        for i in op.parallel_dims:
            for n in set(grid):
                if n > 1 and ext[i] % n == 0 and ext[i] // n > PARALLEL_TILES[0]:
                    par[ext[i] // n] += 1
                elif fit and 1 < n <= ext[i] and -(-ext[i] // n) > PARALLEL_TILES[0]:
                    par[-(-ext[i] // n)] += 1
        for i in op.reduction_dims:
            if (
                chunks > 1
                and ext[i] % chunks == 0
                and ext[i] // chunks > REDUCTION_TILES[0]
            ):
                red[ext[i] // chunks] += 1
            elif fit:
                # A padded share of the longest axis the dim spans (`fit`: one padded
                # reduction block per PE where its padding leaves the combine as it
                # is; `convert-loop-to-tile` pads to that axis).
                spanned = [n for n in grid if 1 < n <= ext[i]]
                share = -(-ext[i] // max(spanned)) if spanned else 0
                if share > REDUCTION_TILES[0] and ext[i] % share:
                    red[share] += 1
    return [b for b, _ in par.most_common(2)], [b for b, _ in red.most_common(2)]


__all__ = [
    "PARALLEL_TILES",
    "REDUCTION_TILES",
    "Blocking",
    "blocking_trials",
    "loop_to_tile_pass",
    "pack",
    "route",
    "search_blocking",
    "spread_choices",
]
