"""
`plmr-compile`: the whole default pipeline, from any level down to a routed mesh program.

    graph-canonicalize → graph-fold-rotate-half → graph-fold-repeat-kv → transpose-elim
      → graph-defer-norm-scale → graph-fold-heads
      → taso-substitute → graph-merge-matmuls → convert-graph-to-loop → neptune-fuse
      → loop-simplify-indices → loop-materialize-indices → convert-loop-to-tile
      → convert-tile-to-mesh
      → mesh-fuse-softmax → mesh-pack-allreduces → mesh-fuse-softmax (three-nest form)
      → mesh-shape-trees (with gemv = auto) → mesh-route → mesh-check-limits

Stages whose input level is absent are skipped (a tile program starts at
`convert-tile-to-mesh`). With `tile-sizes` unset, the blocking of the loop nests is
chosen for the grid by the blocking search (`passes/blocking_search.py`): the candidate
`P,R` blocks are priced on the mesh by the partitioner's cost model and the cheapest is
kept, ties going to larger blocks.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Attribute, Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.utils.hints import isa

from plmr.dialects import loop, tile
from plmr.errors import PassOptionError, PlmrError
from plmr.passes.blocking_search import pack, route, search_blocking
from plmr.passes.compile_options import CompileOptions
from plmr.passes.timing import count, note, step, timing

if TYPE_CHECKING:
    from plmr.lowering.tile_to_mesh import NestPlan, Options


MERGE_MIN_ROWS = 2
"""`graph-merge-matmuls{min-rows}` as `plmr compile` runs it: a decode step's GEMVs stay
apart (their allreduces are packed into one by mesh-pack-allreduces; the merged
product's slices would be gathered across the other axis by their readers)."""


LARGE_GRID_PES = 64
"""Grids of more PEs than this take `gemv = auto` in `plmr compile` by default
(`default_gemv`)."""


def large_grid(grid: tuple[int, int]) -> bool:
    """
    More than `LARGE_GRID_PES` PEs: where `plmr compile` takes auto allreduces
    (`default_gemv`), folds a prefill's projections by heads and stacks its gate and up.
    """
    return grid[0] * grid[1] > LARGE_GRID_PES


def rotation_rows(opts: CompileOptions) -> int:
    """
    `graph-fold-rotate-half`'s `max-rows`: on large grids a decode step's projections
    only (a prefill's rotation is a local permutation of rows whose head dimension is
    whole on a PE, cheaper than the projection folding it makes); every projection on
    small grids, where a head's dimension splits over the PEs.
    """
    return opts.decode_rows if large_grid(opts.grid) else 0


def default_gemv(grid: tuple[int, int]) -> str:
    """
    `plmr compile`'s allreduce algorithm for a grid: on grids of more than
    `LARGE_GRID_PES` PEs each allreduce's K-tree takes the first-phase groups that time
    fastest on its line (`auto`, `mesh-shape-trees`; the blocking is still searched with
    K = 2: `search_blocking`), on small ones the K-tree of K = 2. A user's LLaMA3-8B
    decode export on 420x420: 13,346 → 12,490 cycles per layer.
    """
    return "auto" if large_grid(grid) else "ktree"


def _has(module: ModuleOp, dialect_ops: tuple[type[Operation], ...]) -> bool:
    return any(isinstance(op, dialect_ops) for op in module.walk())


def _matmuls(module: ModuleOp) -> int:
    return sum(op.name == "graph.matmul" for op in module.walk())


def _graph_ops(module: ModuleOp) -> bool:
    return any(op.name.startswith("graph.") for op in module.walk())


def compile_module(
    ctx: Context,
    module: ModuleOp,
    opts: CompileOptions,
    plans: list[NestPlan] | None = None,
) -> ModuleOp:
    """
    Lowers `module` in place to a mesh program (and returns it); `plans` receives the
    mapping chosen for each nest (`plmr compile --explain`).
    """
    from plmr.lowering.loop_to_tile import memo as tile_memo
    from plmr.lowering.tile_to_mesh import memo

    mesh_opts = _check_options(opts)
    check_sizes(module)
    if opts.kv_state and _graph_ops(module) and keep_state(module, opts):
        if opts.layers:
            raise PlmrError(
                f"plmr compile: layers={opts.layers} asks for repeated layers compiled "
                "once, but the decode step keeps its KV caches on the wafer, one per "
                "layer, and is compiled whole; drop the number of layers, or compile "
                "the step as exported (no state)"
            )
        opts = dataclasses.replace(opts, outline_layers=False)
    if opts.outline_layers and _graph_ops(module):
        from plmr.passes.layer_programs import compile_layered

        def prepare(whole: ModuleOp) -> None:
            # The rewrites of weights first: inside a layer body the weights are
            # arguments, which folding rotations and merging projections cannot see.
            # Their counters are the parts' to report (`timing()` keeps these apart).
            with timing():
                for rewrite in weight_passes(opts):
                    rewrite.apply(ctx, whole)

        def compile_part(part: ModuleOp, fit: bool) -> ModuleOp:
            inner = dataclasses.replace(
                opts, outline_layers=False, layers=0, fit_tiles=opts.fit_tiles or fit
            )
            return compile_module(ctx, part, inner, plans)

        if compile_layered(
            module,
            compile_part,
            prepare=prepare,
            fit_tiles=opts.fit_tiles,
            min_ops=opts.layer_min_ops,
            layers=opts.layers,
        ):
            return module
    hits, misses = memo.stats()
    tile_hits, tile_misses = tile_memo.stats()
    to_loop_level(ctx, module, opts)
    from_loop_level(ctx, module, opts, mesh_opts, plans)
    now = tile_memo.stats()
    count("nest tile programs found in the memo", now[0] - tile_hits)
    count("nest tile programs blocked", now[1] - tile_misses)
    now = memo.stats()
    count("nest mappings found in the memo", now[0] - hits)
    count("nest mappings planned", now[1] - misses)
    return module


def keep_state(module: ModuleOp, opts: CompileOptions) -> int:
    """
    `graph-kv-state` as `plmr compile` runs it: a decode step's caches (found by name,
    or `opts.state`) become state kept on the wafer; a prefill is left as exported
    unless its pairs are given. Returns the number of caches rewritten.
    """
    from plmr.passes.kv_state import PASS, kv_state, parse_state_pairs

    pairs = parse_state_pairs(opts.state) if opts.state.strip() else None
    kept = kv_state(module, pairs, 0, opts.position, opts.mask, decode_only=True)
    if kept:
        count(f"KV caches kept on the wafer ({PASS})", kept)
        note(
            f"{PASS}: {kept} KV cache(s) kept on the wafer as state; the step is "
            "compiled whole (its layers keep caches of their own)"
        )
    return kept


def _check_options(opts: CompileOptions) -> Options:
    from plmr.lowering.tile_to_mesh import parse_options

    rest = large_grid(opts.grid) if opts.rest_weights is None else opts.rest_weights
    mesh_opts = parse_options(
        opts.grid,
        opts.device,
        opts.gemm,
        opts.gemv,
        opts.k,
        opts.groups,
        opts.fit_tiles,
        rest,
    )
    if opts.layers < 0 or opts.layers == 1:
        raise PassOptionError(
            f"plmr compile: layers must be 0 (whatever repeats) or >= 2, got {opts.layers}"
        )
    if opts.layers and not opts.outline_layers:
        raise PassOptionError(
            "plmr compile: a number of layers asks for repeated layers compiled once; "
            "drop it or the option that compiles every layer"
        )
    if opts.budget < 0:
        raise PassOptionError(f"plmr compile: budget must be >= 0, got {opts.budget}")
    if opts.decode_rows < 1:
        raise PassOptionError(
            f"plmr compile: decode_rows must be at least 1, got {opts.decode_rows}"
        )
    if opts.fuse not in ("auto", "rolling", "split-k"):
        raise PassOptionError(
            f"plmr compile: unknown fuse strategy '{opts.fuse}' (auto, rolling, split-k)"
        )
    return mesh_opts


def weight_passes(opts: CompileOptions) -> list[ModulePass]:
    """
    The graph rewrites that fold constants into weights (rotate-half; on grids of more
    than `LARGE_GRID_PES` PEs the projections by heads) and merge the projections
    sharing an input, run on the whole program before repeated layers are outlined
    (`graph_passes` runs them again on each part: nothing more to do there).
    """
    from plmr.passes.graph_canonicalize import GraphCanonicalizePass
    from plmr.passes.heads_fold import GraphFoldHeadsPass
    from plmr.passes.merge_matmuls import GraphMergeMatmulsPass
    from plmr.passes.rotate_fold import GraphFoldRotateHalfPass

    large = large_grid(opts.grid)
    passes: list[ModulePass] = [GraphCanonicalizePass(unrepeat_kv=False)]
    if opts.fold_rotate_half:
        passes.append(GraphFoldRotateHalfPass(max_rows=rotation_rows(opts)))
    if opts.fold_heads and large:
        # Before the merge (which would concatenate a prefill's Q, K and V): on large
        # grids a prefill's heads run one after the other, each reading its own.
        passes.append(GraphFoldHeadsPass(rows=True))
    if opts.merge_matmuls:
        passes.append(GraphMergeMatmulsPass(min_rows=MERGE_MIN_ROWS, stack_rows=large))
    return passes


def graph_passes(opts: CompileOptions) -> list[ModulePass]:
    """The graph passes `plmr compile` runs, ending with the lowering to loops."""
    from plmr.lowering.graph_to_loop import ConvertGraphToLoopPass
    from plmr.passes.graph_canonicalize import GraphCanonicalizePass
    from plmr.passes.heads_fold import GraphFoldHeadsPass
    from plmr.passes.merge_matmuls import GraphMergeMatmulsPass
    from plmr.passes.norm_defer import GraphDeferNormScalePass
    from plmr.passes.repeat_kv_fold import GraphFoldRepeatKvPass
    from plmr.passes.rotate_fold import GraphFoldRotateHalfPass
    from plmr.passes.taso.substitute import TasoSubstitutePass
    from plmr.passes.transpose_elim import TransposeElimPass

    # graph-fold-repeat-kv, not unrepeat-kv's broadcast `[hkv, g]` form, regroups GQA.
    passes: list[ModulePass] = [GraphCanonicalizePass(unrepeat_kv=False)]
    if opts.fold_rotate_half:
        passes.append(GraphFoldRotateHalfPass(max_rows=rotation_rows(opts)))
    if opts.fold_repeat_kv:
        # Decode steps (one query row per head); a prefill's grouped scores blocked worse.
        passes.append(GraphFoldRepeatKvPass(max_rows=opts.decode_rows))
    if opts.eliminate_transposes:
        passes.append(TransposeElimPass())
    if opts.defer_norm_scale:
        passes.append(GraphDeferNormScalePass(max_rows=opts.decode_rows))
    if opts.fold_heads:
        # A prefill's projections by heads too on large grids, where its heads then run
        # one after the other over all PEs (`loop-split-heads`), each reading only its
        # own head; on small grids its flat Q, K and V merge into one product instead.
        passes.append(GraphFoldHeadsPass(rows=large_grid(opts.grid)))
    if opts.substitute:
        # Keep the substitutions whose concatenations fold into constants (fused
        # weights): a concatenation of computed values is a copy on the mesh.
        passes.append(
            TasoSubstitutePass(
                alpha=opts.alpha,
                budget=opts.budget,
                device=opts.device,
                concats="constant",
                engine=opts.engine,
                grid=f"{opts.grid[0]}x{opts.grid[1]}",
                node_limit=opts.saturation_nodes,
                ilp_nodes=opts.extraction_nodes,
            )
        )
    if opts.merge_matmuls:
        # After the substitutions: the merged weights (concatenated references for
        # weights by reference) are what the search would have to find otherwise.
        stack = large_grid(opts.grid)
        passes.append(GraphMergeMatmulsPass(min_rows=MERGE_MIN_ROWS, stack_rows=stack))
    passes.append(ConvertGraphToLoopPass())
    return passes


def loop_passes(opts: CompileOptions) -> list[ModulePass]:
    """The loop passes `plmr compile` runs before blocking: fusion, then indices."""
    from plmr.passes.loop_index_values import LoopMaterializeIndicesPass
    from plmr.passes.loop_indices import LoopSimplifyIndicesPass
    from plmr.passes.neptune.fuse import NeptuneFusePass

    fuse = NeptuneFusePass(strategy=opts.fuse, chunks=opts.chunks, remarks=False)
    return [fuse, LoopSimplifyIndicesPass(), LoopMaterializeIndicesPass()]


def to_loop_level(ctx: Context, module: ModuleOp, opts: CompileOptions) -> ModuleOp:
    """The graph part of the pipeline and fusion: graph passes, to loops, neptune-fuse."""
    if _graph_ops(module):
        count("graph.matmul imported", _matmuls(module))
        for p in graph_passes(opts):
            with step(p.name):
                p.apply(ctx, module)
            if p.name != "convert-graph-to-loop":
                count(f"graph.matmul after {p.name}", _matmuls(module))
    if _has(module, (loop.NestOp,)):
        for p in loop_passes(opts):
            with step(p.name):
                p.apply(ctx, module)
    return module


def from_loop_level(
    ctx: Context,
    module: ModuleOp,
    opts: CompileOptions,
    mesh_opts: Options | None = None,
    plans: list[NestPlan] | None = None,
) -> ModuleOp:
    """The rest: blocking (searched for the grid), partitioning, routing, verification."""
    from plmr.lowering.tile_to_mesh import lower_module

    if mesh_opts is None:
        mesh_opts = _check_options(opts)
    if _has(module, (loop.NestOp,)):
        try:
            with step("blocking search"):
                _tile_for_grid(ctx, module, opts, mesh_opts, plans)
        except PlmrError as e:
            from plmr.passes.neptune.split_heads import split_module_heads

            # Heads too few for the grid: run them one after the other, each over
            # all PEs (loop-split-heads), if that splits anything.
            if "SRAM" not in str(e) or not split_module_heads(module):
                raise
            try:
                with step("blocking search (heads split)"):
                    _tile_for_grid(ctx, module, opts, mesh_opts, plans)
            except PlmrError:
                raise e from None
    elif _has(module, (tile.ForOp, tile.LookupOp)):
        with step("convert-tile-to-mesh"):
            lower_module(module, mesh_opts, plans)
        pack(module, opts, plans)
        route(ctx, module, opts)
    else:
        raise nothing_to_compile(module)
    return module


def check_sizes(module: ModuleOp) -> None:
    """Raises a `PlmrError` if a function takes or returns a zero-size tensor."""
    for fn in module.ops:
        if not isinstance(fn, func.FuncOp):
            continue
        types = [*fn.function_type.inputs.data, *fn.function_type.outputs.data]
        empty = [t for t in types if isa(t, TensorType[Attribute]) and 0 in t.get_shape()]
        if empty:
            raise PlmrError(
                f"plmr compile: @{fn.sym_name.data} has a zero-size tensor ({empty[0]}), "
                "so there is nothing to compute on the wafer; give every dimension a "
                "size >= 1"
            )


def nothing_to_compile(module: ModuleOp) -> PlmrError:
    """The error of a module without graph, loop or tile operations, with its reason."""
    already = any(op.name == "mesh.program" for op in module.ops)
    if already:
        return PlmrError(
            "plmr compile: the program has no graph, loop or tile operations to compile "
            "(it is already a mesh program: run it with plmr run)"
        )
    check_sizes(module)
    return PlmrError(
        "plmr compile: the program has no graph, loop or tile operations to compile"
    )


def loop_nests(module: ModuleOp) -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
    """The loop nests of a loop-level module by result name: (parallel, reduction) extents."""
    out: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    for op in module.walk():
        if not isinstance(op, loop.NestOp) or isinstance(op.parent_op(), loop.NestOp):
            continue
        ext = op.extents
        extents = (
            tuple(ext[i] for i in op.parallel_dims),
            tuple(ext[i] for i in op.reduction_dims),
        )
        for result in op.results:
            if result.name_hint:
                out[result.name_hint] = extents
    return out


def _tile_for_grid(
    ctx: Context,
    module: ModuleOp,
    opts: CompileOptions,
    mesh_opts: Options,
    plans: list[NestPlan] | None = None,
) -> None:
    best = search_blocking(ctx, module, opts, mesh_opts)
    _replace_body(module, best.module)
    if plans is not None:
        plans.extend(best.plans)


def _replace_body(module: ModuleOp, new: ModuleOp) -> None:
    for op in list(module.ops):
        Rewriter.erase_op(op)
    for op in list(new.ops):
        op.detach()
        module.body.block.add_op(op)


@dataclass(frozen=True)
class PlmrCompilePass(ModulePass):
    """
    The whole plmr pipeline as one pass: `grid = ROWS,COLS`, `device`, `gemm`, `gemv`,
    `k`, `groups`, `tile-sizes = P,R` (default: chosen for the grid), `nest-tile-sizes`
    (`"name=P,R;..."`), `substitute` (TASO, with `alpha` and `budget`),
    `eliminate-transposes`, `defer-norm-scale` (graph-defer-norm-scale), `fuse`
    (neptune-fuse strategy) and `chunks` (split-K chunks), `fuse-softmax`
    (mesh-fuse-softmax), `pack-allreduces` (mesh-pack-allreduces), `shape-trees`
    (mesh-shape-trees, with `gemv = auto`), `route` (mesh-route + mesh-check-limits),
    `relay` (accept programs that need more colors than the device has).
    """

    name = "plmr-compile"

    grid: tuple[int, ...] = (4, 4)
    device: str = "wse2"
    gemm: str = "meshgemm"
    gemv: str = "ktree"
    k: int = 2
    groups: int = 0
    tile_sizes: tuple[int, ...] = ()
    nest_tile_sizes: str = ""
    substitute: bool = True
    alpha: float = 1.05
    budget: int = 100
    eliminate_transposes: bool = True
    defer_norm_scale: bool = True
    fuse: str = "auto"
    chunks: int = 4
    fuse_softmax: bool = True
    pack_allreduces: bool = True
    shape_trees: bool = True
    route: bool = True
    relay: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        opts = self.options()
        try:
            _check_options(opts)
        except PassOptionError as e:
            # The stage that checks the option names itself: name plmr-compile instead.
            reason = str(e).split(": ", 1)[-1]
            raise PassOptionError(f"plmr-compile: {reason}") from e
        compile_module(ctx, op, opts)

    def options(self) -> CompileOptions:
        if len(self.grid) != 2:
            raise PassOptionError(
                f"plmr-compile: grid must be ROWS,COLS, got {list(self.grid)}"
            )
        sizes: tuple[int, int] | None = None
        if self.tile_sizes:
            if len(self.tile_sizes) not in (1, 2) or any(s <= 0 for s in self.tile_sizes):
                raise PassOptionError(
                    "plmr-compile: tile-sizes must be one or two positive sizes, got "
                    f"{list(self.tile_sizes)}"
                )
            sizes = (self.tile_sizes[0], self.tile_sizes[-1])
        from plmr.lowering.loop_to_tile import parse_nest_sizes

        nests = tuple(
            (name, p, r) for name, (p, r) in parse_nest_sizes(self.nest_tile_sizes).items()
        )
        return CompileOptions(
            grid=(self.grid[0], self.grid[1]),
            device=self.device,
            gemm=self.gemm,
            gemv=self.gemv,
            k=self.k,
            groups=self.groups,
            tile_sizes=sizes,
            nest_tile_sizes=nests,
            substitute=self.substitute,
            alpha=self.alpha,
            budget=self.budget,
            eliminate_transposes=self.eliminate_transposes,
            defer_norm_scale=self.defer_norm_scale,
            fuse=self.fuse,
            chunks=self.chunks,
            route=self.route,
            relay=self.relay,
            pack_allreduces=self.pack_allreduces,
            fuse_softmax=self.fuse_softmax,
            shape_trees=self.shape_trees,
        )


__all__ = [
    "CompileOptions",
    "PlmrCompilePass",
    "compile_module",
]
