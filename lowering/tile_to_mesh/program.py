"""
The pass `convert-tile-to-mesh`: every function becomes a `mesh.program`, nest by nest
(`analysis` → `planning` → `emit`), the first mapping whose spmd fits SRAM kept.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, tensor
from xdsl.dialects.builtin import (
    ArrayAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    UnrealizedConversionCastOp,
)
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint

from plmr.dialects import mesh, tile
from plmr.dialects.graph import static_shape
from plmr.errors import PassOptionError, PlmrError
from plmr.lowering.tile_to_mesh import memo as _memo
from plmr.lowering.tile_to_mesh.analysis import (
    GEMM_CHOICES,
    GEMV_CHOICES,
    Layout,
    Nest,
    Options,
    analyze_nest,
)
from plmr.lowering.tile_to_mesh.analysis import loop_name as _loop_name
from plmr.lowering.tile_to_mesh.batching import epilogue, starts_a_nest
from plmr.lowering.tile_to_mesh.builders import dist_type as _dist
from plmr.lowering.tile_to_mesh.emit import NestEmitter as _NestEmitter
from plmr.lowering.tile_to_mesh.emit import Placed as _Placed
from plmr.lowering.tile_to_mesh.emit import StraightEmitter as _StraightEmitter
from plmr.lowering.tile_to_mesh.host_nests import host_nest, is_host_nest
from plmr.lowering.tile_to_mesh.host_slices import HostSlice, slice_host_reads
from plmr.lowering.tile_to_mesh.mapping import Mapping
from plmr.lowering.tile_to_mesh.planning import NestPlan
from plmr.lowering.tile_to_mesh.planning import Planner as _Planner
from plmr.lowering.tile_to_mesh.planning import gathered_whole as _gathered
from plmr.lowering.tile_to_mesh.planning import split_entries as _entries
from plmr.lowering.tile_to_mesh.views import split_read_views
from plmr.target.device import get_device
from plmr.target.interface import (
    ARG_NAMES_ATTR,
    RESULT_NAMES_ATTR,
    STATE_ARGS_ATTR,
    STATE_RESULTS_ATTR,
    arg_names,
    result_names,
    state_args,
    state_results,
    weight_args,
)
from plmr.target.sram import spmd_sram


class OverBound(Exception):
    """A bounded lowering stopped: its nests so far cost at least the bound."""


class RestRefusal(PlmrError):
    """
    A nest fits no mapping with its weights at rest (`Options.rest_weights`) but one
    with copies of them (`Options.rest_copies`).
    """


class FunctionLowering:
    def __init__(
        self,
        fn: func.FuncOp,
        opts: Options,
        price_only: bool = False,
        bound: float = math.inf,
        spent: float = 0.0,
    ):
        self.fn = fn
        self.opts = opts
        self.price_only = price_only
        self.bound = bound
        """Stop (`OverBound`) once `spent` and the nests lowered cost at least this."""
        self.spent = spent
        """The estimate of the functions lowered before this one."""
        """
        Only the estimate is wanted: a nest whose mapping the memo holds is not emitted,
        its results are placeholders of their placed types (`_place_known`).
        """
        self.block = fn.body.block
        self.placed: dict[SSAValue, _Placed] = {}
        self.scattered: dict[tuple[SSAValue, Layout, str], SSAValue] = {}
        self.host: dict[SSAValue, SSAValue] = {}
        self.cost = 0.0
        """The estimated cycles of the chosen mappings, summed over the nests."""
        self.plans: list[NestPlan] = []
        self.absorbed: set[Operation] = set()
        """Straight-line ops emitted at the end of the nest before them."""
        self.slices: dict[SSAValue, HostSlice] = {}
        """Slices of host tensors that nests read (`host_slices`), placed on their own."""
        self.views: dict[SSAValue, SSAValue] = {}
        """Views of a tensor a nest reads indexed by different loops (`views`): source."""
        self.weights: set[SSAValue] = set()
        """With `rest_weights`: the arguments that are a layer's own weights."""
        self.state: list[SSAValue] = [
            arg for arg, name in zip(self.block.args, state_args(fn), strict=True) if name
        ]
        """The arguments kept on the wafer as state: never read by a host nest."""

    # -- program ----------------------------------------------------------------------

    def run(self) -> mesh.ProgramOp:
        fn, opts = self.fn, self.opts
        ft = fn.function_type
        program = mesh.ProgramOp(
            fn.sym_name.data,
            list(ft.inputs.data),
            list(ft.outputs.data),
            opts.device_spec,
            opts.grid,
        )
        program.attributes[ARG_NAMES_ATTR] = ArrayAttr(
            [StringAttr(n) for n in arg_names(fn)]
        )
        program.attributes[RESULT_NAMES_ATTR] = ArrayAttr(
            [StringAttr(n) for n in result_names(fn)]
        )
        for key, states in (
            (STATE_ARGS_ATTR, state_args(fn)),
            (STATE_RESULTS_ATTR, state_results(fn)),
        ):
            if any(states):
                program.attributes[key] = ArrayAttr([StringAttr(s or "") for s in states])
        pblock = program.body.block
        for old, new in zip(self.block.args, pblock.args, strict=True):
            new.name_hint = old.name_hint
            self.host[old] = new
        if opts.rest_weights:
            listed = weight_args(fn)
            self.weights.update(a for i, a in enumerate(self.block.args) if i in listed)
        self.builder = Builder(InsertPoint.at_end(pblock))
        self.slices = slice_host_reads(self.block)
        self.views = split_read_views(self.block)
        straight: list[Operation] = []
        for op in self.block.ops:
            if isinstance(op, arith.ConstantOp):
                if isinstance(op.result.type, TensorType):
                    clone = self.builder.insert(op.clone())
                    clone.result.name_hint = op.result.name_hint
                    self.host[op.result] = clone.result
                continue
            if isinstance(op, tensor.EmptyOp) or (
                op.results and op.results[0] in self.slices
            ):
                continue
            if op in self.absorbed or starts_a_nest(op):
                continue  # run inside a nest's spmd (`batching`)
            if isinstance(op, tile.LookupOp):
                self._lookup(op)
                continue
            if isinstance(op, tile.TileOp) and not isinstance(op, tile.ForOp):
                # Straight-line block code between nests: one replicated spmd per run.
                straight.append(op)
                continue
            if straight:
                _StraightEmitter(self, straight).emit()
                straight = []
            if op.results and op.results[0] in self.views:
                self._view(op.results[0])
                continue
            if isinstance(op, tile.ForOp) and is_host_nest(op, self.host, self.state):
                made, pairs = host_nest(op, self.host)
                for new in made:
                    self.builder.insert(new)
                self.host.update(pairs)
                continue
            if isinstance(op, tile.ForOp):
                self._nest(op)
                continue
            if isinstance(op, func.ReturnOp):
                outs = [self._gathered(v) for v in op.arguments]
                self.builder.insert(mesh.ReturnOp(*outs))
                continue
            remark = op.attributes.get("loop.remark")
            why = f" ({remark.data})" if isinstance(remark, StringAttr) else ""
            expected = (
                "expected tile nests; a 'loop.nest' here was left untiled by "
                "convert-loop-to-tile"
                if op.name == "loop.nest"
                else "expected tile nests, straight-line tile ops, constants and the return"
            )
            raise PlmrError(
                f"convert-tile-to-mesh: '{op.name}' at the top of @{fn.sym_name.data} "
                f"cannot be placed on the mesh ({expected}){why}"
            )
        # Placements made for mappings that were then rejected.
        for dead in [o for o in pblock.ops if isinstance(o, mesh.ScatterOp)]:
            if not dead.result.uses:
                dead.detach()
                dead.erase()
        return program

    def _view(self, view: SSAValue) -> None:
        """A view is its source: placed (or scattered) on its own where a nest reads it."""
        src = self.views[view]
        if src in self.placed:
            self.placed[view] = self.placed[src]
        elif src in self.slices:
            self.slices[view] = self.slices[src]
        elif src in self.host:
            self.host[view] = self.host[src]
        else:
            raise PlmrError(
                f"convert-tile-to-mesh: internal error: %{src.name_hint or '?'} is read "
                "through a view before it is placed"
            )

    def _lookup(self, op: tile.LookupOp) -> None:
        """A lookup of host rows runs on the host; only its result is scattered."""
        if op.table not in self.host or op.ids not in self.host:
            raise PlmrError(
                f"convert-tile-to-mesh: tile.lookup of @{self.fn.sym_name.data} looks "
                "up rows on the host, so its table and ids must be host tensors "
                "(function arguments or constants); gather a computed tensor with "
                "graph.gather, which lowers to a one-hot contraction on the wafer"
            )
        clone = self.builder.insert(
            tile.LookupOp(self.host[op.table], self.host[op.ids], op.axis.value.data)
        )
        clone.result.name_hint = op.result.name_hint
        self.host[op.result] = clone.result

    def _gathered(self, value: SSAValue) -> SSAValue:
        placed = self.placed.get(value)
        if placed is None:
            layout = tuple("-" for _ in static_shape(value, "result"))
            dist = self.scatter(value, layout)
        else:
            dist = placed.value
        return self.builder.insert(mesh.GatherOp(dist)).result

    def _at_rest(self, value: SSAValue) -> bool:
        """Whether `value` is a weight placed at rest (`Options.rest_weights`)."""
        return (self.slices[value][0] if value in self.slices else value) in self.weights

    def rest_layout(self, value: SSAValue, layout: Layout) -> Layout:
        """
        Where a model weight read in `layout` is placed (`Options.rest_weights`): split
        along each axis `layout` leaves it replicated on, over its longest dimension
        `layout` keeps whole; `layout` itself for any other value.
        """
        if not self._at_rest(value) or any(a not in ("-", "x", "y") for a in layout):
            return layout
        rest = list(layout)
        shape = static_shape(value, "weight")
        for axis in ("y", "x"):
            free = [j for j, a in enumerate(rest) if a == "-" and shape[j] > 1]
            if axis in rest or self.opts.n(axis) == 1 or not free:
                continue
            rest[max(free, key=lambda j: shape[j])] = axis
        return tuple(rest)

    def scatter(
        self,
        value: SSAValue,
        layout: Layout,
        skew: str = "",
        ring: str = "",
        chunks: int = 0,
    ) -> SSAValue:
        key = (value, layout, f"{skew}/{ring}/{chunks}")
        found = self.scattered.get(key)
        if found is not None:
            return found
        dist = _dist(value, layout, skew, ring, chunks).layout
        part = self.slices.get(value)
        if part is None:
            op = self.builder.insert(mesh.ScatterOp(self.host[value], dist))
        else:
            src, offsets = part
            shape = static_shape(value, "slice")
            op = self.builder.insert(
                mesh.ScatterOp(self.host[src], dist, offsets=offsets, shape=shape)
            )
        if value.name_hint:
            op.result.name_hint = value.name_hint
        self.scattered[key] = op.result
        return op.result

    # -- one nest ---------------------------------------------------------------------

    def _nest(self, top: tile.ForOp) -> None:
        nest = analyze_nest(top, self.block)
        layouts = {v: p.layout for v, p in self.placed.items()}
        key, structure = _memo.nest_key(top, self.opts, layouts, self.slices, self.weights)
        names = tuple(v.name_hint for v in structure.numbers)
        known = _memo.lookup(key, nest, names)
        if isinstance(known, PlmrError):
            raise known
        if known is not None and self.price_only:
            self._place_known(nest, known)
            return
        if known is not None:
            self._accept(nest, known, _NestEmitter(self, nest, known))
            return
        try:
            ranked = _Planner(nest, self.opts, layouts, self.views).ranked()
        except PlmrError as e:
            _memo.record_error(key, names, e)
            raise
        sram = self.opts.device.sram_bytes
        needed: list[tuple[int, Mapping]] = []
        # With weights at rest, when no mapping's gathers fit, the mappings that gather
        # a weight are tried with copies of it (a PE holds one copy for the nest either
        # way, but a gather needs its strip and the assembled block at once): taken with
        # `rest_copies`, else the nest is refused (`RestRefusal`).
        copies = [dataclasses.replace(m, copies=True) for m in ranked if self._gathers(m)]
        for m in [*ranked, *copies]:
            if m.copies and not self.opts.rest_copies:
                if not self._fits(nest, m):
                    continue
                message = (
                    "convert-tile-to-mesh: the nest computing "
                    f"%{nest.outputs[0].name_hint or '?'} fits no placement with its "
                    "weights at rest (gathered in the nest), only with copies of them "
                    "(rest-copies)"
                )
                refusal = RestRefusal(message)
                _memo.record_error(key, names, refusal)
                raise refusal
            emitter = _NestEmitter(self, nest, m)
            spmd = emitter.emit()
            # The block estimate leaves out the body's temporaries: measure the peak.
            report = spmd_sram(spmd, self.opts.device)
            if report.peak_bytes <= sram:
                _memo.record(key, nest, m)
                self._accept(nest, m, emitter, spmd)
                return
            needed.append((report.peak_bytes, m))
            self._withdraw(emitter, nest, spmd)
        name = nest.outputs[0].name_hint or "?"
        grid = self.opts.grid
        peak, least = min(needed, key=lambda t: t[0])
        message = (
            f"convert-tile-to-mesh: the nest computing %{name} does not fit a "
            f"{grid[0]}x{grid[1]} grid of {self.opts.device.name}: its smallest per-PE "
            f"placement needs {peak} bytes of SRAM, a PE has {sram}"
            f"{_gathered(least, layouts)}; use a larger grid, smaller tiles or a device "
            "with more SRAM"
        )
        error = PlmrError(message)
        _memo.record_error(key, names, error)
        raise error

    def _gathers(self, m: Mapping) -> bool:
        """Whether `m` reads a weight at rest in a layout other than its rest one."""
        return any(
            self.rest_layout(v, layout) != layout
            for v, layout in m.layouts.items()
            if v not in self.placed and v not in m.paths
        )

    def _fits(self, nest: Nest, m: Mapping) -> bool:
        """Whether `nest`'s spmd under `m` fits a PE's SRAM (emitted, then taken out)."""
        emitter = _NestEmitter(self, nest, m)
        spmd = emitter.emit()
        fits = spmd_sram(spmd, self.opts.device).peak_bytes <= self.opts.device.sram_bytes
        self._withdraw(emitter, nest, spmd)
        return fits

    def _withdraw(self, emitter: _NestEmitter, nest: Nest, spmd: mesh.SpmdOp) -> None:
        """Takes out an emitted `spmd` that is not kept, and what it placed."""
        for op in emitter.epilogue:
            for r in op.results:
                self.placed.pop(r, None)
        for out in nest.outputs:
            del self.placed[out]
        spmd.detach()
        spmd.erase()

    def _add_cost(self, cycles: float) -> None:
        """Adds a nest's estimate, stopping at the bound (totals only grow)."""
        if cycles < 0:
            self.bound = math.inf  # a total that can shrink bounds nothing
        self.cost += cycles
        if self.spent + self.cost >= self.bound:
            raise OverBound(self.spent + self.cost)

    def _place_known(self, nest: Nest, m: Mapping) -> None:
        """
        Prices `nest` under `m`, the memo's mapping, without emitting it: its results
        and those of the epilogue it absorbs (`batching.epilogue`, as `NestEmitter`
        takes it) are placed in their layouts as values of the mesh types its spmd
        would give them, so the nests after it are planned (and emitted) as before.
        """
        held = {
            v
            for v, p in self.placed.items()
            if v not in nest.outputs and all(a == "-" for a in p.layout)
        }
        tail = epilogue(nest.top, m.outputs, held)
        absorbed = set(tail)
        extra = [
            r
            for op in tail
            for r in op.results
            if isinstance(r.type, TensorType)
            and any(u.operation not in absorbed for u in r.uses)
        ]
        layouts = [*m.outputs, *(tuple("-" for _ in static_shape(v, "r")) for v in extra)]
        values = [*nest.outputs, *extra]
        types = [_dist(v, lay) for v, lay in zip(values, layouts, strict=True)]
        stand_in = self.builder.insert(UnrealizedConversionCastOp.get([], types))
        for old, new, layout in zip(values, stand_in.results, layouts, strict=True):
            new.name_hint = old.name_hint
            self.placed[old] = _Placed(new, layout)
        self.absorbed |= absorbed
        self._add_cost(m.cost)

    def _accept(
        self,
        nest: Nest,
        m: Mapping,
        emitter: _NestEmitter,
        spmd: mesh.SpmdOp | None = None,
    ) -> None:
        """Keeps `m` for `nest`: emits it (unless done) and records its plan."""
        if spmd is None:
            spmd = emitter.emit()
        self.absorbed |= emitter.epilogue
        self._add_cost(m.cost)
        loops = [*nest.chain, *([nest.reduction] if nest.reduction else [])]
        loops += [lp for lp in m.loops() if lp not in loops]
        self.plans.append(
            NestPlan(
                nest.outputs[0].name_hint or "?",
                tuple((_loop_name(lp), lp.trip_count) for lp in loops),
                tuple((e, _loop_name(lp)) for e, lp in sorted(_entries(m.axes, m.bands))),
                m.mode,
                m.cost,
                spmd,
                m.sram,
            )
        )


def parse_options(
    grid: Sequence[int],
    device: str,
    gemm: str,
    gemv: str,
    k: int,
    groups: int = 0,
    fit_tiles: bool = False,
    rest_weights: bool = False,
    rest_copies: bool = False,
) -> Options:
    if len(grid) != 2 or any(g <= 0 for g in grid):
        raise PassOptionError(
            f"convert-tile-to-mesh: grid must be two positive sizes ROWS,COLS, got {list(grid)}"
        )
    if gemm not in GEMM_CHOICES:
        raise PassOptionError(
            f"convert-tile-to-mesh: unknown gemm '{gemm}' (choose {', '.join(GEMM_CHOICES)})"
        )
    if gemv not in GEMV_CHOICES:
        raise PassOptionError(
            f"convert-tile-to-mesh: unknown gemv '{gemv}' (choose {', '.join(GEMV_CHOICES)})"
        )
    if k < 1:
        raise PassOptionError(f"convert-tile-to-mesh: k must be >= 1, got {k}")
    if groups < 0:
        raise PassOptionError(f"convert-tile-to-mesh: groups must be >= 0, got {groups}")
    try:
        dev = get_device(device)
    except PlmrError as e:
        raise PassOptionError(f"convert-tile-to-mesh: device: {e}") from e
    if grid[0] > dev.height or grid[1] > dev.width:
        raise PassOptionError(
            f"convert-tile-to-mesh: a {grid[0]}x{grid[1]} grid does not fit {dev.name} "
            f"({dev.height}x{dev.width} PEs)"
        )
    return Options(
        (grid[0], grid[1]),
        dev,
        device,
        gemm,
        gemv,
        k,
        groups,
        fit_tiles,
        rest_weights,
        rest_copies,
    )


def lower_module(
    module: ModuleOp,
    opts: Options,
    plans: list[NestPlan] | None = None,
    price_only: bool = False,
    bound: float = math.inf,
) -> float:
    """
    Replaces every function of `module` by its mesh program (all or nothing) and returns
    the estimated cycles of the chosen mappings; `plans` receives each nest's mapping.
    With `price_only` only the estimate counts: the nests whose mappings the memo holds
    are priced without being emitted, so the programs left in `module` are not runnable
    (the estimate is the one a full lowering gives). With a finite `bound` (not with
    `gemv = auto`, whose fallback prices differently), the lowering stops with
    `OverBound` as soon as the nests lowered cost at least `bound` (each nest's
    estimate adds to the total), leaving `module` unusable: a search wanting only
    programs under the bound lowers no more nests of one that cannot be.
    """
    fns = [op for op in module.ops if isinstance(op, func.FuncOp) and op.body.blocks]
    if not fns:
        already = any(isinstance(op, mesh.ProgramOp) for op in module.ops)
        raise PlmrError(
            "convert-tile-to-mesh: the module has no function to partition"
            + (" (it is already a mesh program: run it with plmr run)" if already else "")
        )
    # With `gemv = auto`, a copy is lowered first (lowering rewrites a function's host
    # reads): when its K-trees need more colors than the device routes, the function
    # itself is lowered with the default K-tree for every allreduce.
    first = [fn.clone() for fn in fns] if opts.gemv == "auto" else fns
    # `gemv = auto` routes the programs it chose: those are emitted in full.
    price_only = price_only and opts.gemv != "auto"
    if opts.gemv == "auto":
        bound = math.inf
    lowerings: list[FunctionLowering] = []
    programs: list[tuple[func.FuncOp, mesh.ProgramOp]] = []
    spent = 0.0
    for fn, copy in zip(fns, first, strict=True):
        low = FunctionLowering(copy, opts, price_only, bound, spent)
        programs.append((fn, low.run()))
        lowerings.append(low)
        spent += low.cost
    if opts.gemv == "auto" and not routable([p for _, p in programs], opts):
        fallback = dataclasses.replace(opts, gemv="ktree", k=2)
        lowerings = [FunctionLowering(fn, fallback) for fn in fns]
        programs = [(fn, low.run()) for fn, low in zip(fns, lowerings, strict=True)]
    if plans is not None:
        for low in lowerings:
            plans.extend(low.plans)
    for fn, program in programs:
        Builder(InsertPoint.before(fn)).insert(program)
        fn.detach()
        fn.erase()
    return sum(low.cost for low in lowerings)


def routable(programs: Sequence[mesh.ProgramOp], opts: Options) -> bool:
    """Whether every collective of `programs` routes within the device's colors."""
    from plmr.target.route_plan import route_program

    for program in programs:
        try:
            route_program(program, False, opts.device)
        except PlmrError as e:
            if "colors" not in str(e):
                raise
            return False
    return True


@dataclass(frozen=True)
class ConvertTileToMeshPass(ModulePass):
    """
    Partitions tile programs over a 2D grid of PEs (see the module docstring):
    `grid = ROWS,COLS`, `device`, `gemm = meshgemm|cannon|summa` (how reductions
    rotate), `gemv = ktree|pipeline|ring|auto` (the allreduce algorithm; `auto`: a K-tree
    whose K each allreduce takes from the runtime's timing of its line, one K-tree for
    all when those need more colors than the device routes), `k` (K-tree phases),
    `groups` (K-tree groups of the first phase; 0 = about √n), `fit-tiles` (rotations
    also over padded chunks of a reduction and uneven splits, as `plmr compile
    --fit-tiles`).
    """

    name = "convert-tile-to-mesh"

    grid: tuple[int, ...] = (4, 4)
    device: str = "wse2"
    gemm: str = "meshgemm"
    gemv: str = "ktree"
    k: int = 2
    groups: int = 0
    fit_tiles: bool = False
    rest_weights: bool = False
    rest_copies: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        opts = parse_options(
            self.grid,
            self.device,
            self.gemm,
            self.gemv,
            self.k,
            self.groups,
            self.fit_tiles,
            self.rest_weights,
            self.rest_copies,
        )
        lower_module(op, opts)
