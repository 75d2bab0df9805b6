"""
Planning for `convert-tile-to-mesh`: the feasible mappings of a nest on the grid (parallel
loops to mesh axes, the reduction as an allreduce or a rotation), the operand layouts and
SRAM each needs, ranked by the cost model (`cost.CostModel`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import SSAValue

from plmr.dialects import mesh, tile
from plmr.dialects.graph import static_shape
from plmr.dialects.narrow import terminator
from plmr.errors import PlmrError
from plmr.lowering.loop_to_tile.analysis import BAND_MIN_WIDTH
from plmr.lowering.tile_to_mesh.analysis import (
    Composite,
    Layout,
    Load,
    Nest,
    Options,
    band_entry,
    entry_band,
    layout_band,
)
from plmr.lowering.tile_to_mesh.analysis import depends_on as _depends_on
from plmr.lowering.tile_to_mesh.analysis import splits_unevenly as _uneven
from plmr.lowering.tile_to_mesh.batching import deferrable
from plmr.lowering.tile_to_mesh.cost import CostModel
from plmr.lowering.tile_to_mesh.cost import block_bytes as _block_bytes
from plmr.lowering.tile_to_mesh.cost import cannon_skew as _cannon_skew
from plmr.lowering.tile_to_mesh.cost import shared_block as _shared_block
from plmr.lowering.tile_to_mesh.mapping import Band, Mapping
from plmr.lowering.tile_to_mesh.rolling_merge import rolling_roles

_PLAIN = {"add": "sum", "max": "max", "min": "min"}
_IDENTITY = {"sum": 0.0, "max": -3.0e38, "min": 3.0e38}


def gathered_whole(m: Mapping, layouts: dict[SSAValue, Layout]) -> str:
    """
    The operands `m` holds whole on every PE although they are distributed (a read the
    mapping cannot block, e.g. at an offset of a split loop's index), for a refusal.
    """
    whole = [
        f"%{src.name_hint or '?'} ({'x'.join(map(str, static_shape(src, 'value')))})"
        for src, layout in m.layouts.items()
        if all(a == "-" for a in layout) and any(a != "-" for a in layouts.get(src, ("-",)))
    ]
    if not whole:
        return ""
    return (
        f"; it gathers {', '.join(whole)} whole on every PE, as its reads of "
        f"{'it' if len(whole) == 1 else 'them'} are not blocked by the loops it splits"
    )


@dataclass(frozen=True)
class NestPlan:
    """The mapping chosen for one nest: what `plmr compile --explain` prints."""

    name: str
    """The SSA name of the nest's first result."""
    loops: tuple[tuple[str, int], ...]
    """The nest's parallel loops, then its reduction: (name, blocks)."""
    axes: tuple[tuple[str, str], ...]
    """(mesh axis, loop name) for every split loop (a banded loop: its layout entry,
    `y/52` over bands of 52 PEs along y, `y%52` within them)."""
    mode: str
    """`local`, `allreduce` or `rotate`."""
    estimate: float
    """The cost model's cycles for the nest on the critical PE."""
    spmd: mesh.SpmdOp
    sram: int = 0
    """The planner's bytes per PE for the nest's blocks (its operands', its outputs' and
    the rotation buffers'), by which it chose the mapping."""

    def mapping(self) -> str:
        """`i1(2816) -> x, i2(840) -> y [allreduce]`."""
        axis = {loop: a for a, loop in self.axes}
        loops = ", ".join(
            f"{name}({blocks})" + (f" -> {axis[name]}" if name in axis else "")
            for name, blocks in self.loops
        )
        return f"{loops} [{self.mode}]"


def _extent_ok(loop: tile.ForOp, n: int) -> bool:
    """
    Whether `loop` can be split over an axis of `n` PEs: evenly, or unevenly when each
    PE's share of blocks is exactly its block of the padded layout (`ceil(extent / n)`
    elements, e.g. blocks of one element); the PEs past the end then work on padding,
    which their stores and accumulations ignore (`_NestEmitter`).
    """
    if loop.lb.value.data != 0 or n < 2:
        return False
    # A PE's run of blocks must be its share of the padded layout of the extent (with a
    # padded last block, `trips · step` overshoots the extent: 45 in blocks of 12 over
    # 2 PEs is 24 elements a PE, where the layout gives each 23).
    trips, step = loop.trip_count, loop.step.value.data
    return -(-trips // n) * step == -(-loop.ub.value.data // n)


def split_entries(
    axes: dict[str, tile.ForOp], bands: dict[str, Band]
) -> list[tuple[str, tile.ForOp]]:
    """The layout entry of every split loop: its axis, or its band entry."""
    out: list[tuple[str, tile.ForOp]] = []
    for a, lp in axes.items():
        band = bands.get(a)
        if band is None:
            out.append((a, lp))
            continue
        out.append((band_entry(a, band.width, False), band.outer))
        if band.inner is not None:
            out.append((band_entry(a, band.width, True), band.inner))
    return out


def _legal_band(layout: Layout) -> Layout:
    """
    A banded layout `#mesh.layout` can spell: the dim over the bands before the one
    within them, and not the inner one alone (such dims are kept whole).
    """
    outer = [
        j for j, e in enumerate(layout) if (b := entry_band(e)) is not None and not b[1]
    ]
    inner = [j for j, e in enumerate(layout) if (b := entry_band(e)) is not None and b[1]]
    if not inner or (outer and outer[0] < inner[0]):
        return layout
    return tuple("-" if j in inner or j in outer else e for j, e in enumerate(layout))


def _nested_reductions(red: tile.ForOp | None) -> list[tile.ForOp]:
    """Reduction loops directly in the body of `red`."""
    if red is None:
        return []
    return [
        op
        for op in red.body.block.ops
        if isinstance(op, tile.ForOp) and op.kind.data == tile.LoopKind.REDUCTION
    ]


def _fits(loop: tile.ForOp, parts: int) -> bool:
    """
    Whether `loop` splits into `parts` (a band count or width) with each part's blocks
    exactly its block of the padded layout (`ceil(extent / parts)` elements).
    """
    return loop.trip_count >= 2 and _extent_ok(loop, parts)


def plain_accumulators(red: tile.ForOp) -> list[str] | None:
    """The combine kind of each accumulator if all are plain (acc ⊕ independent term)."""
    block = red.body.block
    terminator(block, tile.YieldOp)
    kinds: list[str] = []
    for i in range(len(block.args) - 1):
        kind = _plain_combine(red, i)
        if kind is None:
            return None
        init = red.iter_args[i].owner
        if not isinstance(init, tile.FillOp):
            return None
        value = init.value.value.data
        want = _IDENTITY[_PLAIN[kind]]
        if (want == 0.0 and value != 0.0) or (want != 0.0 and abs(value) < 1e38):
            return None
        if (want < 0) != (value < 0) and want != 0.0:
            return None
        kinds.append(_PLAIN[kind])
    return kinds


def _plain_combine(red: tile.ForOp, i: int) -> str | None:
    """
    The map kind combining accumulator `i` of `red` with a term independent of the
    accumulators (`acc ⊕ term`), or the kind of a nested reduction that carries it
    (`Σ_g Σ_d …`: the only accumulator, the inner loop starts from it and is plain).
    """
    block = red.body.block
    last = terminator(block, tile.YieldOp)
    accs = list(block.args[1:])
    acc = accs[i]
    uses = [u.operation for u in acc.uses]
    if len(uses) != 1:
        return None
    use = uses[0]
    if (
        isinstance(use, tile.ForOp)
        and use.kind.data == tile.LoopKind.REDUCTION
        and len(accs) == 1
        and len(use.iter_args) == 1
        and use.iter_args[0] is acc
        and last.values[i] is use.res[0]
    ):
        return _plain_combine(use, 0)
    if not isinstance(use, tile.MapOp):
        return None
    kind = use.kind.data if use.kind is not None else ""
    if kind not in _PLAIN or len(use.inputs) != 2:
        return None
    if last.values[i] is not use.result:
        return None
    other = use.inputs[1] if use.inputs[0] is acc else use.inputs[0]
    if _depends_on(other, set(accs)):
        return None
    return kind


def _var_uses_ok(var: SSAValue, nest: Nest, allow_other: bool) -> bool:
    """Whether `var` indexes loads only directly (and other uses are allowed or absent)."""
    load_ops = {ld.op for ld in nest.loads}
    for use in var.uses:
        op = use.operation
        if isinstance(op, tile.LoadOp) and op in load_ops:
            continue
        if isinstance(op, tile.StoreOp):
            continue
        if not allow_other:
            return False
    return True


class Planner(CostModel):
    def __init__(
        self,
        nest: Nest,
        opts: Options,
        placed: dict[SSAValue, Layout],
        views: dict[SSAValue, SSAValue] | None = None,
    ):
        self.nest = nest
        self.opts = opts
        self.placed = placed
        self.views = {} if views is None else views
        """The views of tensors the nest reads (`views`): their sources."""
        red = nest.reduction
        if red is not None:
            self.deferred_kinds = deferrable(nest, plain_accumulators(red))

    # -- layouts ----------------------------------------------------------------------

    def _output_layouts(
        self, axes: dict[str, tile.ForOp], bands: dict[str, Band] | None = None
    ) -> list[Layout] | None:
        layouts: list[Layout] = []
        par = [
            (e, lp)
            for e, lp in split_entries(axes, bands or {})
            if lp.kind.data == tile.LoopKind.PARALLEL
        ]
        for k, out in enumerate(self.nest.outputs):
            shape = static_shape(out, "output")
            dims = ["-"] * len(shape)
            for a, loop in par:
                hits: set[int] = set()
                for st in self.nest.stores.get(k, []):
                    blk = static_shape(st.block, "block")
                    found = [
                        j
                        for j, v in enumerate(st.offsets)
                        if v is loop.induction_var
                        and blk[j] == loop.step.value.data
                        and shape[j] == loop.ub.value.data
                    ]
                    if len(found) != 1:
                        return None
                    hits.add(found[0])
                if len(hits) != 1:
                    return None
                dims[hits.pop()] = a
            layout = tuple(dims)
            if _legal_band(layout) != layout:
                return None
            layouts.append(layout)
        return layouts

    def _load_layout(
        self, ld: Load, axes: dict[str, tile.ForOp], bands: dict[str, Band] | None = None
    ) -> Layout:
        shape = static_shape(ld.source, "source")
        blk = static_shape(ld.op.result, "block")
        dims = ["-"] * len(shape)
        entries = split_entries(axes, bands or {})
        mapped = {lp.induction_var for _, lp in entries}
        for a, loop in entries:
            for j, v in enumerate(ld.indices):
                direct = (
                    v is loop.induction_var
                    and blk[j] == loop.step.value.data
                    and shape[j] == loop.ub.value.data
                )
                n = self.opts.n(a)
                chunked = (
                    entry_band(a) is None
                    and isinstance(v, Composite)
                    and v.outer is loop.induction_var
                    and v.inner not in mapped
                    and shape[j] == loop.trip_count * v.scale
                    and -(-loop.trip_count // n) * v.scale == -(-shape[j] // n)
                )
                if direct or chunked:
                    dims[j] = a if a not in dims else "-"
        return _legal_band(tuple(dims))

    def _merge(self, layouts: dict[SSAValue, list[Layout]]) -> dict[SSAValue, Layout]:
        out: dict[SSAValue, Layout] = {}
        for src, ls in layouts.items():
            first = ls[0]
            out[src] = tuple(
                d if all(layout[j] == d for layout in ls) else "-"
                for j, d in enumerate(first)
            )
        return out

    # -- candidates -------------------------------------------------------------------

    def candidates(self) -> list[Mapping]:
        nest, opts = self.nest, self.opts
        par_choices: dict[str, list[tile.ForOp | None]] = {}
        for a in ("y", "x"):
            par_choices[a] = [None] + [lp for lp in nest.chain if _extent_ok(lp, opts.n(a))]
        result: list[Mapping] = []
        for ly in par_choices["y"]:
            for lx in par_choices["x"]:
                if ly is not None and ly is lx:
                    continue
                axes = {a: lp for a, lp in (("y", ly), ("x", lx)) if lp is not None}
                outs = self._output_layouts(axes)
                if outs is None:
                    continue
                result.append(self._finish(Mapping(dict(axes), "local", outputs=outs)))
                red = nest.reduction
                if red is None:
                    continue
                free = [a for a in ("y", "x") if a not in axes]
                kinds = plain_accumulators(red)
                roles = None if kinds is not None else rolling_roles(red)
                for a in free:
                    if kinds is not None and _extent_ok(red, opts.n(a)):
                        m = Mapping({**axes, a: red}, "allreduce", outputs=outs)
                        result.append(self._finish(m))
                    if roles is not None and _extent_ok(red, opts.n(a)):
                        # A rolling update split over the axis, merged (split-K).
                        m = Mapping({**axes, a: red}, "merge", outputs=outs)
                        result.append(self._finish(m))
                even = all(not _uneven(lp, opts.n(a)) for a, lp in axes.items())
                if axes and (even or opts.fit_tiles):
                    rot = self._rotation(axes, outs)
                    if rot is not None:
                        result.append(self._finish(rot))
        return result + self._band_candidates()

    # -- bands ------------------------------------------------------------------------

    def _band_options(self, axis: str) -> list[Band]:
        """
        The bands `axis` can hold: an outer loop of at least two blocks over bands of
        `n // blocks` PEs (at least `BAND_MIN_WIDTH` each), and an inner loop blocked within each band
        or none (when an operand is banded so already). Both parallel; the outer parallel and the inner the reduction (reduced
        within each band); or both reductions (the reduction and one nested in it,
        reduced along the whole axis).
        """
        nest, n = self.nest, self.opts.n(axis)
        red = nest.reduction
        nested = _nested_reductions(red) if red is not None else []
        loops = [*nest.chain, *([red] if red is not None else []), *nested]
        placed = {layout_band(self.placed[v]) for v in nest.globals if v in self.placed}
        out: list[Band] = []
        for outer in loops:
            trips = outer.trip_count
            if outer.lb.value.data != 0 or trips < 2 or n // trips < BAND_MIN_WIDTH:
                continue
            width = n // trips
            if not _fits(outer, n // width):
                continue
            par = outer.kind.data == tile.LoopKind.PARALLEL
            if not par and outer is not red and outer not in nested:
                continue
            for inner in [None, *loops]:
                if inner is outer:
                    continue
                if inner is None:
                    # Replicated within each band: only to read values left banded.
                    if par and (axis, width) in placed:
                        out.append(Band(outer, None, width))
                    continue
                if not _fits(inner, width):
                    continue
                inner_par = inner.kind.data == tile.LoopKind.PARALLEL
                if par and (inner_par or inner is red):
                    out.append(Band(outer, inner, width))
                elif not par and not inner_par and red in (outer, inner):
                    out.append(Band(outer, inner, width))
        return out

    def _band_candidates(self) -> list[Mapping]:
        """Mappings with a band on one axis and a loop (or none) on the other."""
        nest, opts = self.nest, self.opts
        red = nest.reduction
        kinds = plain_accumulators(red) if red is not None else None
        result: list[Mapping] = []
        for a in ("y", "x"):
            o = "x" if a == "y" else "y"
            others: list[tile.ForOp | None] = [None]
            others += [lp for lp in nest.chain if _extent_ok(lp, opts.n(o))]
            if red is not None and kinds is not None and _extent_ok(red, opts.n(o)):
                others.append(red)
            for band in self._band_options(a):
                in_band = {band.outer, band.inner}
                reduces = red is not None and red in in_band
                if not reduces and in_band & set(_nested_reductions(red)):
                    continue
                if reduces and kinds is None:
                    continue
                for other in others:
                    if other is not None and other in in_band:
                        continue
                    if reduces and other is not None and other is red:
                        continue
                    axes = {a: band.outer}
                    if other is not None:
                        axes[o] = other
                    bands = {a: band}
                    outs = self._output_layouts(axes, bands)
                    if outs is None:
                        continue
                    split_red = red is not None and other is red
                    mode = "allreduce" if reduces or split_red else "local"
                    m = Mapping(axes, mode, outputs=outs, bands=bands)
                    result.append(self._finish(m))
        return result

    def _rotation(self, axes: dict[str, tile.ForOp], outs: list[Layout]) -> Mapping | None:
        nest, opts = self.nest, self.opts
        red = nest.reduction
        assert red is not None
        if red.lb.value.data != 0:
            return None
        r = red.induction_var
        if not _var_uses_ok(r, nest, allow_other=False):
            return None
        py, px = axes.get("y"), axes.get("x")
        paths: dict[SSAValue, str] = {}
        loose: list[SSAValue] = []
        for ld in nest.loads:
            if r not in ld.indices:
                continue
            shape = static_shape(ld.source, "source")
            blk = static_shape(ld.op.result, "block")
            dims = [j for j, v in enumerate(ld.indices) if v is r]
            if len(dims) != 1:
                return None
            j = dims[0]
            if blk[j] != red.step.value.data or shape[j] != red.ub.value.data:
                return None
            uses_y = py is not None and py.induction_var in ld.indices
            uses_x = px is not None and px.induction_var in ld.indices
            if uses_y and uses_x:
                return None
            path = "x" if uses_y else "y" if uses_x else ""
            if not path:
                loose.append(ld.source)
                continue
            if paths.get(ld.source, path) != path:
                return None
            paths[ld.source] = path
        used = set(paths.values())
        default = "y" if "y" in used or (not used and px is not None) else "x"
        for src in loose:
            if paths.get(src, default) != default:
                return None
            paths[src] = default
        if not paths:
            return None
        used = set(paths.values())
        chunks = math.lcm(*(opts.n(a) for a in used))
        if chunks < 2 or not self._chunks_ok(red, chunks, used):
            return None
        # Every read of a rotated operand must index it by the reduction.
        for ld in nest.loads:
            if ld.source in paths and r not in ld.indices:
                return None
        return Mapping(dict(axes), "rotate", paths=paths, chunks=chunks, outputs=outs)

    def _chunks_ok(self, red: tile.ForOp, chunks: int, used: set[str]) -> bool:
        """
        Whether the reduction cuts into `chunks` chunks: evenly, or (`fit_tiles`) into
        chunks of `ceil(blocks / chunks)` blocks, the last ones padded, when that chunk
        is `ceil(extent / chunks)` elements and every PE's block of the padded layout
        (`ceil(extent / n)` along an axis of `n` PEs) is exactly its `chunks / n` chunks.
        """
        step = red.step.value.data
        if red.trip_count % chunks == 0 and red.ub.value.data % step == 0:
            return True
        if not self.opts.fit_tiles or not _extent_ok(red, chunks):
            return False
        extent = red.ub.value.data
        size = -(-red.trip_count // chunks) * red.step.value.data
        return all(
            -(-extent // self.opts.n(a)) == chunks // self.opts.n(a) * size for a in used
        )

    # -- costing ----------------------------------------------------------------------

    def _finish(self, m: Mapping) -> Mapping:
        nest, opts = self.nest, self.opts
        per_load: dict[SSAValue, list[Layout]] = {}
        for ld in nest.loads:
            axes = {a: lp for a, lp in m.axes.items()}
            layout = self._load_layout(ld, axes, m.bands)
            if m.mode == "rotate" and ld.source in m.paths:
                j = next(j for j, v in enumerate(ld.indices) if v is nest.reduction_var)
                layout = tuple(
                    m.paths[ld.source] if i == j else d for i, d in enumerate(layout)
                )
            per_load.setdefault(ld.source, []).append(layout)
        for k, init in enumerate(nest.top.iter_args):
            if init in nest.globals:
                per_load.setdefault(init, []).append(m.outputs[k])
        for whole in nest.wholes:
            per_load.setdefault(whole, []).append(
                tuple("-" for _ in static_shape(whole, "value"))
            )
        m.layouts = {src: _legal_band(lay) for src, lay in self._merge(per_load).items()}
        if m.mode == "rotate":
            for src, path in m.paths.items():
                if path not in m.layouts[src]:
                    m.cost = math.inf
                    return m
        # SRAM: every operand block, every output block, rotation double buffers.
        grid = opts.grid
        sram = 0
        held: set[tuple[SSAValue, Layout, str]] = set()
        skewed = _cannon_skew(m, opts)
        for src, layout in m.layouts.items():
            # Views of one tensor in one layout share their block, as `emit` places them.
            key = _shared_block(self.views, m, src, skewed)
            if key in held and src not in m.paths:
                continue
            held.add(key)
            sram += _block_bytes(src, layout, grid)
            if m.mode == "rotate" and src in m.paths:
                sram += _block_bytes(src, layout, grid)
        for out, layout in zip(nest.outputs, m.outputs, strict=True):
            sram += _block_bytes(out, layout, grid)
        m.sram = sram
        m.cost = self._estimate(m)
        m.readers = self.reader_gathers(m)
        return m

    def ranked(self) -> list[Mapping]:
        """
        The mappings whose blocks fit SRAM, cheapest first with what their readers
        are expected to pay (ties: more PEs used).
        """
        every = self.candidates()
        options = [
            m for m in every if m.cost < math.inf and m.sram <= self.opts.device.sram_bytes
        ]
        if not options:
            raise PlmrError(self._no_fit_message(every))
        return sorted(options, key=lambda m: (round(m.cost + m.readers, 3), -len(m.axes)))

    def _no_fit_message(self, every: Sequence[Mapping]) -> str:
        nest, opts = self.nest, self.opts
        grid = opts.grid
        best = min(every, key=lambda m: m.sram)
        name = nest.outputs[0].name_hint or "?"
        where = ", ".join(
            f"{a} = %{lp.induction_var.name_hint or '?'}" for a, lp in best.axes.items()
        )
        hint = ""
        if not best.axes:
            counts = ", ".join(
                f"%{lp.induction_var.name_hint or '?'}: {lp.trip_count}"
                for lp in nest.chain
            )
            fit = (
                ": `plmr compile --fit-tiles` gives the last PEs a padded share"
                if grid != (1, 1)
                else ""
            )
            hint = (
                f" (no loop's block count ({counts}) is a multiple of the {grid[0]} or "
                f"{grid[1]} PEs of an axis{fit})"
            )
        return (
            f"convert-tile-to-mesh: the nest computing %{name} does not fit a "
            f"{grid[0]}x{grid[1]} grid of {opts.device.name}: its smallest per-PE "
            f"placement ({where or 'no loop split'}) needs {best.sram} bytes of SRAM, a "
            f"PE has {opts.device.sram_bytes}{hint}{gathered_whole(best, self.placed)}; "
            "use a larger grid, smaller tiles or "
            "a device with more SRAM"
        )
