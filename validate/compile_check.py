"""
`plmr compile --check-each`: the default pipeline (`passes/pipeline.py`) as a sequence of
single passes, each checked by a `Checker`.

The stages are the ones `compile_module` runs, with the same options and in the same
order; where `compile_module` searches the blocking (`tile-sizes` unset), the same search
runs first and the winner becomes an explicit `convert-loop-to-tile{tile-sizes=P,R}`
stage, so every stage is one `plmr-opt` pass and a failing one reproduces alone.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from plmr.dialects import loop, tile
from plmr.dialects.context import describe_op, first_invalid_op
from plmr.dialects.printing import module_text
from plmr.errors import PlmrError
from plmr.lowering.tile_to_mesh import (
    ConvertTileToMeshPass,
    NestPlan,
    Options,
    lower_module,
    parse_options,
)
from plmr.passes.blocking_search import (
    blocking_trials,
    loop_to_tile_pass,
    search_blocking,
    spread_choices,
)
from plmr.passes.mesh_check_limits import MeshCheckLimitsPass
from plmr.passes.mesh_pack import (
    Merge,
    MeshPackAllreducesPass,
    pack_allreduces,
    update_plans,
)
from plmr.passes.mesh_route import MeshRoutePass
from plmr.passes.mesh_softmax import MeshFuseSoftmaxPass, fuse_softmax
from plmr.passes.mesh_softmax_nests import fuse_softmax_nests
from plmr.passes.pipeline import (
    CompileOptions,
    graph_passes,
    loop_passes,
    nothing_to_compile,
)
from plmr.validate.check_each import Checker, CheckOptions, PassFailed, Stage


def _has(module: ModuleOp, kinds: tuple[type[Operation], ...]) -> bool:
    return any(isinstance(op, kinds) for op in module.walk())


def _graph_ops(module: ModuleOp) -> bool:
    return any(op.name.startswith("graph.") for op in module.walk())


def _mesh_options(opts: CompileOptions) -> Options:
    if opts.budget < 0:
        raise PlmrError(f"plmr compile: budget must be >= 0, got {opts.budget}")
    return parse_options(opts.grid, opts.device, opts.gemm, opts.gemv, opts.k, opts.groups)


def _route_passes(opts: CompileOptions) -> list[ModulePass]:
    if not opts.route:
        return []
    return [MeshRoutePass(relay=opts.relay), MeshCheckLimitsPass(relay=opts.relay)]


def choose_blocking(
    ctx: Context, module: ModuleOp, opts: CompileOptions, mesh_opts: Options
) -> tuple[tuple[int, int], bool, bool]:
    """
    The blocking (blocks, bands, spread) `compile_module` picks for a loop-level
    `module` (left unchanged): its own search (`search_blocking`), run only when there
    is a choice, so that a single blocking's refusal is reported by its own stage.
    """
    trials = blocking_trials(module, opts)
    if len(trials) == 1 and len(spread_choices(opts)) == 1:
        return trials[0][0], trials[0][1], False
    best = search_blocking(ctx, module, opts, mesh_opts)
    return best.sizes, best.bands, best.spread


def _wrap_diagnostics(p: ModulePass) -> Stage:
    """A stage whose xDSL diagnostics become `PlmrError`s, as in `plmr compile`."""
    stage = Stage.of_pass(p)

    def apply(ctx: Context, module: ModuleOp) -> None:
        try:
            p.apply(ctx, module)
        except DiagnosticException as e:
            raise PlmrError(str(e)) from e

    return Stage(stage.spec, apply)


def compile_checked(
    ctx: Context,
    module: ModuleOp,
    opts: CompileOptions,
    checker: Checker,
    plans: list[NestPlan] | None = None,
) -> ModuleOp:
    """`compile_module`, pass by pass, each checked by `checker` (started here)."""
    mesh_opts = _mesh_options(opts)
    checker.start(module)
    if _graph_ops(module):
        for p in graph_passes(opts):
            checker.apply(Stage.of_pass(p), ctx, module)
    if _has(module, (loop.NestOp,)):
        for p in loop_passes(opts):
            checker.apply(Stage.of_pass(p), ctx, module)
    if _has(module, (loop.NestOp,)):
        checker.current = "convert-loop-to-tile"
        try:
            sizes, bands, spread = choose_blocking(ctx, module, opts, mesh_opts)
        except PlmrError:
            raise
        except Exception as e:
            spec = "convert-loop-to-tile{blocking search}"
            raise PassFailed(spec, e, module_text(module)) from e
        blocking = loop_to_tile_pass(opts, sizes, bands, spread)
        checker.apply(Stage.of_pass(blocking), ctx, module)
    elif not _has(module, (tile.ForOp, tile.LookupOp)):
        checker.current = "plmr compile"
        raise nothing_to_compile(module)
    to_mesh = ConvertTileToMeshPass(
        grid=opts.grid,
        device=opts.device,
        gemm=opts.gemm,
        gemv=opts.gemv,
        k=opts.k,
        groups=opts.groups,
    )

    def partition(ctx: Context, m: ModuleOp) -> None:
        del ctx
        lower_module(m, mesh_opts, plans)

    checker.apply(Stage(Stage.of_pass(to_mesh).spec, partition), ctx, module)
    if opts.fuse_softmax:

        def fuse(ctx: Context, m: ModuleOp) -> None:
            del ctx
            fuse_softmax(m)

        checker.apply(Stage(Stage.of_pass(MeshFuseSoftmaxPass()).spec, fuse), ctx, module)

    def merging(
        merge: Callable[[ModuleOp], list[Merge]],
    ) -> Callable[[Context, ModuleOp], None]:
        """A stage running `merge`, the nests' plans following its merges."""

        def run(ctx: Context, m: ModuleOp) -> None:
            del ctx
            merges = merge(m)
            if plans is not None:
                update_plans(plans, merges)

        return run

    if opts.pack_allreduces:
        pack = merging(pack_allreduces)
        checker.apply(
            Stage(Stage.of_pass(MeshPackAllreducesPass()).spec, pack), ctx, module
        )
    if opts.fuse_softmax:
        # The three-nest form, once its sums are packed (as `plmr compile` runs it).
        fuse_nests = merging(fuse_softmax_nests)
        checker.apply(
            Stage(Stage.of_pass(MeshFuseSoftmaxPass()).spec, fuse_nests), ctx, module
        )
    for p in _route_passes(opts):
        checker.apply(_wrap_diagnostics(p), ctx, module)
    return module


def find_unverified_pass(
    ctx: Context, source: ModuleOp, opts: CompileOptions
) -> PlmrError | None:
    """
    The compiler error naming the stage of `plmr compile`'s pipeline after which
    `source` (left unchanged) no longer verifies: a copy is compiled pass by pass,
    verified after each, without running it. None when every stage's output verifies or
    a stage refuses the program first.
    """
    module = source.clone()
    checker = Checker(CheckOptions(execute=False))
    try:
        compile_checked(ctx, module, opts, checker)
    except PassFailed as e:
        if not isinstance(e.cause, DiagnosticException):
            return None
        found = first_invalid_op(module)
        if found is None:
            return None
        op, reason = found
        return PlmrError(
            f"compiler error: pass {e.spec} produced a program that does not verify at "
            f"{describe_op(op)}: {reason.splitlines()[0]}"
        )
    except PlmrError:
        return None
    return None


__all__ = ["choose_blocking", "compile_checked", "find_unverified_pass"]
