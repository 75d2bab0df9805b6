"""
Emission for `convert-tile-to-mesh`: one `mesh.spmd` per nest under its chosen mapping
(split loops, allreduces, rotation steps, guarded padding), and the replicated spmd of
straight-line tile code between nests.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from xdsl.builder import Builder
from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import (
    IndexType,
    TensorType,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint

from plmr.dialects import mesh, tile
from plmr.dialects.graph import static_shape
from plmr.dialects.narrow import terminator, type_of
from plmr.errors import PlmrError
from plmr.lowering.tile_to_mesh.analysis import (
    Composite,
    Layout,
    Nest,
    Options,
    initial_fill,
)
from plmr.lowering.tile_to_mesh.analysis import is_global as _is_global
from plmr.lowering.tile_to_mesh.batching import epilogue
from plmr.lowering.tile_to_mesh.builders import add_index as _add
from plmr.lowering.tile_to_mesh.builders import const_index as _index
from plmr.lowering.tile_to_mesh.builders import dist_type as _dist
from plmr.lowering.tile_to_mesh.builders import element_type as _elt
from plmr.lowering.tile_to_mesh.builders import layout_of as _layout_of
from plmr.lowering.tile_to_mesh.builders import mul_index as _mul
from plmr.lowering.tile_to_mesh.builders import ring_coord as _ring_coord
from plmr.lowering.tile_to_mesh.builders import ring_for as _ring_for
from plmr.lowering.tile_to_mesh.builders import ring_position as _ring_pos
from plmr.lowering.tile_to_mesh.cost import cannon_skew as _cannon_skew
from plmr.lowering.tile_to_mesh.cost import shared_block as _shared_block
from plmr.lowering.tile_to_mesh.mapping import Mapping
from plmr.lowering.tile_to_mesh.planning import plain_accumulators as _plain_accumulators
from plmr.lowering.tile_to_mesh.relayout import Relayout
from plmr.lowering.tile_to_mesh.rolling_merge import emit_merge, rolling_roles
from plmr.lowering.tile_to_mesh.segments import (
    allreduce_choice,
    reduction_allreduce,
    segment_for,
)


@dataclass
class Placed:
    """A value on the grid: its mesh value and layout."""

    value: SSAValue
    layout: Layout


class _Lowering(Protocol):
    """What the emitters use of the function being lowered (`program.FunctionLowering`)."""

    opts: Options
    block: Block
    builder: Builder
    placed: dict[SSAValue, Placed]
    views: dict[SSAValue, SSAValue]

    def rest_layout(self, value: SSAValue, layout: Layout) -> Layout: ...

    def scatter(
        self,
        value: SSAValue,
        layout: Layout,
        skew: str = "",
        ring: str = "",
        chunks: int = 0,
    ) -> SSAValue: ...


@dataclass
class _Operand:
    """How the PE holds one global tensor inside the spmd body."""

    layout: Layout
    block: SSAValue
    skewed: bool = False


def _padded_reduction(var: SSAValue) -> bool:
    """Whether `var` is the index of a reduction loop whose last block is padded."""
    if not isinstance(var, BlockArgument):
        return False
    loop = var.owner.parent_op()
    return (
        isinstance(loop, tile.ForOp)
        and loop.kind.data == tile.LoopKind.REDUCTION
        and loop.ub.value.data % loop.step.value.data != 0
    )


class NestEmitter(Relayout):
    def __init__(self, low: _Lowering, nest: Nest, m: Mapping):
        self.low = low
        self.nest = nest
        self.m = m
        self.opts = low.opts
        # Cannon's pre-alignment; SUMMA broadcasts from the owners instead.
        self.skew = _cannon_skew(m, self.opts)
        self.ring = "interleaved" if self.opts.gemm == "meshgemm" else "torus"
        self.loads = {ld.op: ld for ld in nest.loads}
        self.epilogue: set[Operation] = set()
        """Straight-line ops after the nest emitted at the end of its spmd."""
        self.band_coords = {}

    def _skew_of(self, src: SSAValue) -> tuple[str, str, int]:
        if not self.skew or src not in self.m.paths:
            return ("", "", 0)
        return (self.m.paths[src], self.ring, self.m.chunks)

    def emit(self) -> mesh.SpmdOp:
        low, nest, m, opts = self.low, self.nest, self.m, self.opts
        inputs: list[SSAValue] = []
        wants: list[tuple[SSAValue, Layout, tuple[str, str, int]]] = []
        firsts: dict[tuple[SSAValue, Layout, str], SSAValue] = {}
        shared: dict[SSAValue, SSAValue] = {}
        for src in nest.globals:
            layout = m.layouts[src]
            skew = self._skew_of(src)
            key = _shared_block(low.views, m, src, self.skew)
            if key in firsts and src not in m.paths:
                # A view in the layout of its tensor (or of another view): one block.
                shared[src] = firsts[key]
                continue
            firsts[key] = src
            placed = low.placed.get(src)
            if placed is None and not skew[0] and not m.copies:
                # A weight is placed at rest and gathered here (`rest_weights`).
                inputs.append(low.scatter(src, low.rest_layout(src, layout)))
            elif placed is None:
                inputs.append(low.scatter(src, layout, *skew))
            else:
                inputs.append(placed.value)
            wants.append((src, layout, skew))
        out_types = [_dist(o, lay) for o, lay in zip(nest.outputs, m.outputs, strict=True)]
        arg_types: list[Attribute] = [IndexType(), IndexType()]
        for v in inputs:
            d = type_of(v, mesh.DistType)
            arg_types.append(TensorType(d.tensor.element_type, d.block_shape(opts.grid)))
        body = Block(arg_types=arg_types)
        b = Builder(InsertPoint.at_end(body))
        self.b = b
        self.entry = Builder(InsertPoint.at_start(body))
        self.coord = {"y": body.args[0], "x": body.args[1]}
        body.args[0].name_hint = "py"
        body.args[1].name_hint = "px"
        self.operands: dict[SSAValue, _Operand] = {}
        self.vmap: dict[SSAValue, SSAValue] = {}
        self.local: dict[SSAValue, SSAValue] = {}
        self.guards: list[SSAValue] = []
        """Conditions of the enclosing loops split unevenly: this block is not padding."""
        self.chunk_limit: SSAValue | None = None
        """Inside a rotation's step with a padded last block: where the reduction ends in
        the chunk in view."""
        for (src, layout, skew), value, arg in zip(
            wants, inputs, body.args[2:], strict=True
        ):
            d = type_of(value, mesh.DistType)
            have = _layout_of(d)
            already = (
                have == layout
                and (d.layout.skew.data, d.layout.ring.data, d.layout.chunks.data) == skew
            )
            block: SSAValue = arg
            if not already:
                block = self._relayout(src, arg, have, layout, skew)
            self.operands[src] = _Operand(layout, block, bool(skew[0]))
            if src in nest.wholes:
                self.vmap[src] = block
        for src, first in shared.items():
            self.operands[src] = self.operands[first]
            if src in nest.wholes:
                self.vmap[src] = self.operands[first].block
        results = self._emit_loop(
            nest.top, [self._init(k) for k in range(len(nest.outputs))]
        )
        if m.deferred is not None and nest.reduction is not None:
            axis = m.axis_of(nest.reduction)
            assert axis is not None
            results = [
                self._allreduce(kind, r, nest.reduction, axis)
                for kind, r in zip(m.deferred, results, strict=True)
            ]
        extra = self._emit_epilogue(inputs, results)
        b.insert(mesh.YieldOp(*results, *(self.vmap[v] for v in extra)))
        whole = [tuple("-" for _ in static_shape(v, "result")) for v in extra]
        out_types += [_dist(v, lay) for v, lay in zip(extra, whole, strict=True)]
        spmd = low.builder.insert(mesh.SpmdOp(inputs, out_types, Region(body)))
        layouts = [*m.outputs, *whole]
        for k, (old, new) in enumerate(
            zip([*nest.outputs, *extra], spmd.outputs, strict=True)
        ):
            new.name_hint = old.name_hint
            low.placed[old] = Placed(new, layouts[k])
        return spmd

    def _emit_epilogue(
        self, inputs: list[SSAValue], results: Sequence[SSAValue]
    ) -> list[SSAValue]:
        """
        Emits the straight-line ops after the nest that `batching.epilogue` takes (values
        of earlier nests they read become inputs); returns their results used later.
        """
        low, nest, b = self.low, self.nest, self.b
        body = b.insertion_point.block
        for old, new in zip(nest.outputs, results, strict=True):
            self.vmap[old] = new
        held = {
            v
            for v, p in low.placed.items()
            if v not in nest.outputs and all(a == "-" for a in p.layout)
        }
        tail = epilogue(nest.top, self.m.outputs, held)
        self.epilogue = set(tail)
        extra: list[SSAValue] = []
        for op in tail:
            for v in op.operands:
                if v in self.vmap:
                    continue
                if v in held:
                    placed = low.placed[v].value
                    inputs.append(placed)
                    d = type_of(placed, mesh.DistType)
                    shape = d.block_shape(self.opts.grid)
                    arg = body.insert_arg(
                        TensorType(d.tensor.element_type, shape), len(body.args)
                    )
                    self.vmap[v] = arg
                elif isinstance(v.owner, tensor.EmptyOp):
                    empty = TensorType(_elt(v), static_shape(v, "empty"))
                    self.vmap[v] = b.insert(tile.FillOp(0.0, empty)).result
            self._emit_ops([op])
            extra += [
                r
                for r in op.results
                if isinstance(r.type, TensorType)
                and any(u.operation not in self.epilogue for u in r.uses)
            ]
        return extra

    # -- loops ------------------------------------------------------------------------

    def _init(self, k: int) -> SSAValue:
        init = self.nest.top.iter_args[k]
        if init in self.operands:
            return self.operands[init].block
        shape = self._shape(static_shape(init, "init"), self.m.outputs[k])
        fill = initial_fill(init, self.nest.top)
        value = 0.0 if fill is None else fill.value.value.data
        return self.b.insert(tile.FillOp(value, TensorType(_elt(init), shape))).result

    def _emit_loop(self, loop: tile.ForOp, inits: list[SSAValue]) -> list[SSAValue]:
        m, opts = self.m, self.opts
        axis = m.axis_of(loop)
        if loop is self.nest.reduction and m.mode == "rotate":
            return self._emit_rotation(loop, inits)
        lb, ub, step = loop.lb.value.data, loop.ub.value.data, loop.step.value.data
        parts = m.parts(loop, opts)
        uneven = axis is not None and (
            loop.trip_count % parts != 0 or self._band_padding(loop)
        )
        if axis is not None:
            lb, ub = 0, -(-loop.trip_count // parts) * step
        body = Block(arg_types=[IndexType(), *(v.type for v in inits)])
        outer = self.b
        self.b = Builder(InsertPoint.at_end(body))
        old = loop.body.block
        iv = body.args[0]
        iv.name_hint = old.args[0].name_hint
        valid: SSAValue | None = None
        if axis is not None:
            origin = _mul(self.b, self._loop_coord(loop, axis), ub)
            index = _add(self.b, origin, iv)
            if uneven:
                # Past the end: padding. Clamp the index for whatever reads it whole,
                # and ignore the block (stores and accumulations below).
                end = loop.ub.value.data
                valid = self.b.insert(
                    arith.CmpiOp(index, _index(self.b, end), "ult")
                ).result
                last = _index(self.b, end - step)
                index = self.b.insert(arith.SelectOp(valid, index, last)).result
                self.guards.append(valid)
            self.vmap[old.args[0]] = index
            self.local[old.args[0]] = iv
        else:
            self.vmap[old.args[0]] = iv
        for o, n in zip(old.args[1:], body.args[1:], strict=True):
            self.vmap[o] = n
        self._emit_ops(old.ops)
        if valid is not None:
            self.guards.pop()
            if loop.kind.data == tile.LoopKind.REDUCTION:
                # A block of padding leaves the accumulators as they were.
                yield_op = terminator(body, tile.YieldOp)
                kept = [
                    self.b.insert(tile.SelectOp(valid, new, prev)).result
                    for new, prev in zip(yield_op.values, body.args[1:], strict=True)
                ]
                yield_op.detach()
                yield_op.erase()
                self.b.insert(tile.YieldOp(*kept))
        self.b = outer
        new = self.b.insert(tile.ForOp(lb, ub, step, loop.kind.data, inits, Region(body)))
        results = list(new.res)
        if axis is not None and loop is self.nest.reduction and m.mode == "merge":
            roles = rolling_roles(loop)
            assert roles is not None
            elems = math.prod(static_shape(results[0], "accumulator"))
            results = emit_merge(
                self.b, roles, results, axis, *allreduce_choice(opts, axis, elems)
            )
        if (
            axis is not None
            and loop is self.nest.reduction
            and m.mode == "allreduce"
            and m.deferred is None
        ):
            kinds = _plain_accumulators(loop)
            assert kinds is not None
            results = [
                self._allreduce(kind, r, loop, axis)
                for kind, r in zip(kinds, results, strict=True)
            ]
        for o, n in zip(loop.res, results, strict=True):
            self.vmap[o] = n
        return list[SSAValue](results)

    def _loop_coord(self, loop: tile.ForOp, axis: str) -> SSAValue:
        """This PE's part of a split loop: its coordinate, or its band / place in it."""
        found = self.m.band_of(loop)
        if found is None:
            return self.coord[axis]
        band, inner = found
        return self._band_coord(axis, band.width, inner)

    def _band_padding(self, loop: tile.ForOp) -> bool:
        """Whether `loop` is over bands that leave PEs past the last band."""
        found = self.m.band_of(loop)
        if found is None or found[1]:
            return False
        axis = self.m.axis_of(loop)
        assert axis is not None
        n, width = self.opts.n(axis), found[0].width
        return (n // width) * width < n

    def _allreduce(
        self, kind: str, value: SSAValue, loop: tile.ForOp, axis: str
    ) -> SSAValue:
        """
        The allreduce of the reduction `loop`'s partial results: within each band when
        the loop is blocked within bands over a parallel loop, along the whole axis when
        both loops of the band reduce, else as `segments.segment_for` decides.
        """
        found = self.m.band_of(loop)
        if found is None:
            segment = segment_for(loop, value, axis, self.opts)
            return reduction_allreduce(self.b, kind, value, axis, self.opts, segment)
        band, inner = found
        if inner and band.outer.kind.data == tile.LoopKind.PARALLEL:
            return reduction_allreduce(
                self.b, kind, value, axis, self.opts, band.width, spread=False
            )
        return reduction_allreduce(self.b, kind, value, axis, self.opts, None)

    def _emit_rotation(self, loop: tile.ForOp, inits: list[SSAValue]) -> list[SSAValue]:
        """The reduction as steps over circulating chunks (Cannon / MeshGEMM / SUMMA)."""
        m, opts = self.m, self.opts
        chunks = m.chunks
        step = loop.step.value.data
        # Chunks of ceil(blocks / chunks) blocks: with `fit_tiles` the last ones may be
        # padded, and the blocks past the reduction's end leave the accumulators alone.
        size = -(-loop.trip_count // chunks) * step
        padded = size * chunks > loop.ub.value.data
        rotating = list(m.paths)
        bufs = [self.operands[s].block for s in rotating]
        summa = opts.gemm == "summa"
        n_acc = len(inits)

        def inner(
            views: dict[SSAValue, SSAValue], accs: Sequence[SSAValue], at: SSAValue
        ) -> list[SSAValue]:
            saved = {s: self.operands[s] for s in rotating}
            for s in rotating:
                self.operands[s] = _Operand(self.operands[s].layout, views[s], False)
            # The blocks of this step's chunk before the reduction's end: `k < limit`
            # (none when the chunk is all padding).
            limit: SSAValue | None = None
            if padded:
                start = _mul(self.b, self._chunk_at(at), size)
                end = _index(self.b, loop.ub.value.data)
                limit = self.b.insert(arith.SubiOp(end, start)).result
            body = Block(arg_types=[IndexType(), *(v.type for v in accs)])
            outer = self.b
            self.b = Builder(InsertPoint.at_end(body))
            old = loop.body.block
            body.args[0].name_hint = old.args[0].name_hint
            self.local[old.args[0]] = body.args[0]
            for o, nv in zip(old.args[1:], body.args[1:], strict=True):
                self.vmap[o] = nv
            # A padded last block's loads end where the reduction does (`_limits`).
            self.chunk_limit = limit
            self._emit_ops(old.ops)
            self.chunk_limit = None
            if limit is not None:
                # A block past the reduction's end (padding) keeps the accumulators.
                yield_op = terminator(body, tile.YieldOp)
                valid = self.b.insert(arith.CmpiOp(body.args[0], limit, "slt")).result
                kept = [
                    self.b.insert(tile.SelectOp(valid, new, prev)).result
                    for new, prev in zip(yield_op.values, body.args[1:], strict=True)
                ]
                yield_op.detach()
                yield_op.erase()
                self.b.insert(tile.YieldOp(*kept))
            self.b = outer
            new = self.b.insert(
                tile.ForOp(0, size, step, "reduction", list(accs), Region(body))
            )
            self.operands.update(saved)
            return list(new.res)

        def chunk_view(src: SSAValue, buf: SSAValue, at: SSAValue | None) -> SSAValue:
            shape = static_shape(buf, "buffer")
            j = self.m.layouts[src].index(self.m.paths[src])
            view = list(shape)
            view[j] = size
            if view == list(shape) and at is None:
                return buf
            offs = [_index(self.b, 0) for _ in shape]
            if at is not None:
                offs[j] = at
            return self.b.insert(tile.LoadOp(buf, offs, view)).result

        steps = Block(
            arg_types=[IndexType(), *(v.type for v in inits), *(v.type for v in bufs)]
        )
        outer = self.b
        self.b = Builder(InsertPoint.at_end(steps))
        u = steps.args[0]
        u.name_hint = "step"
        accs = list(steps.args[1 : 1 + n_acc])
        cur = list(steps.args[1 + n_acc :])
        views: dict[SSAValue, SSAValue] = {}
        moved: list[SSAValue] = []
        if summa:
            for s, buf in zip(rotating, cur, strict=True):
                axis = m.paths[s]
                per = chunks // opts.n(axis)
                slot = self.b.insert(arith.RemUIOp(u, _index(self.b, per))).result
                root = self.b.insert(arith.DivUIOp(u, _index(self.b, per))).result
                panel = chunk_view(s, buf, _mul(self.b, slot, size))
                views[s] = self.b.insert(mesh.BroadcastOp(panel, axis, root)).result
            moved = list[SSAValue](cur)
        else:
            for s, buf in zip(rotating, cur, strict=True):
                axis = m.paths[s]
                ring = _ring_for(self.ring, opts.n(axis))
                moved.append(self._rotate(s, buf, size, axis, ring))
                views[s] = chunk_view(s, buf, None)
        results = inner(views, accs, u)
        self.b.insert(tile.YieldOp(*results, *moved))
        self.b = outer
        count = chunks if summa else chunks - 1
        loop_op = self.b.insert(
            tile.ForOp(0, count, 1, "reduction", [*inits, *bufs], Region(steps))
        )
        results = list(loop_op.res[:n_acc])
        if not summa:
            last = list(loop_op.res[n_acc:])
            views = {
                s: chunk_view(s, buf, None) for s, buf in zip(rotating, last, strict=True)
            }
            results = inner(views, results, _index(self.b, chunks - 1))
        for o, n in zip(loop.res, results, strict=True):
            self.vmap[o] = n
        return list[SSAValue](results)

    def _chunk_at(self, step: SSAValue) -> SSAValue:
        """
        The reduction chunk this PE combines at rotation `step` (its views' first
        chunk). SUMMA broadcasts chunk `step`. A rotation moves every ring's chunks one
        place on per step, so the first place holds the chunk that started `step` places
        back: with Cannon's skew, PE (i, j) starts with chunk `L(i)·C/ny + L(j)·C/nx` at
        its first place (`L` the ring position, `mesh.layout`'s skew); without, the PE
        at ring position `q` holds the chunks of the PE at its physical coordinate.
        """
        b, m, opts = self.b, self.m, self.opts
        chunks = m.chunks
        if opts.gemm == "summa":
            return step
        back = b.insert(arith.SubiOp(_index(b, chunks), step)).result
        if self.skew:
            base = back
            for a in ("y", "x"):
                n = opts.n(a)
                pos = _ring_pos(b, self.coord[a], _ring_for(self.ring, n), n)
                base = _add(b, base, _mul(b, pos, chunks // n))
            return b.insert(arith.RemUIOp(base, _index(b, chunks))).result
        (a,) = set(m.paths.values())
        n = opts.n(a)
        per = chunks // n
        ring = _ring_for(self.ring, n)
        start = _mul(b, _ring_pos(b, self.coord[a], ring, n), per)
        place = b.insert(arith.RemUIOp(_add(b, start, back), _index(b, chunks))).result
        owner = b.insert(arith.DivUIOp(place, _index(b, per))).result
        slot = b.insert(arith.RemUIOp(place, _index(b, per))).result
        return _add(b, _mul(b, _ring_coord(b, owner, ring, n), per), slot)

    def _rotate(
        self, src: SSAValue, buf: SSAValue, size: int, axis: str, ring: str
    ) -> SSAValue:
        """Sends the buffer's last chunk to the ring successor and shifts the rest up."""
        b = self.b
        shape = static_shape(buf, "buffer")
        j = self.m.layouts[src].index(self.m.paths[src])
        count = shape[j] // size
        if count == 1:
            return b.insert(mesh.ShiftOp(buf, axis, ring)).result
        zero = [_index(b, 0) for _ in shape]
        last_at = list(zero)
        last_at[j] = _index(b, (count - 1) * size)
        chunk = list(shape)
        chunk[j] = size
        head_shape = list(shape)
        head_shape[j] = shape[j] - size
        last = b.insert(tile.LoadOp(buf, last_at, chunk)).result
        head = b.insert(tile.LoadOp(buf, zero, head_shape)).result
        arrived = b.insert(mesh.ShiftOp(last, axis, ring)).result
        fresh = b.insert(tile.FillOp(0.0, TensorType(_elt(buf), shape))).result
        at_head = list(zero)
        at_head[j] = _index(b, size)
        moved = b.insert(tile.StoreOp(head, fresh, at_head)).result
        return b.insert(tile.StoreOp(arrived, moved, zero)).result

    # -- ops --------------------------------------------------------------------------

    def _value(self, v: SSAValue) -> SSAValue:
        got = self.vmap.get(v)
        if got is not None:
            return got
        owner = v.owner
        if isinstance(owner, arith.ConstantOp) and owner.parent_block() is self.low.block:
            if isinstance(v.type, TensorType):
                raise PlmrError(
                    "convert-tile-to-mesh: a tensor constant is used whole inside a nest"
                )
            # Hoisted to the start of the body so that every scope sees it.
            clone = self.entry.insert(owner.clone())
            self.vmap[v] = clone.result
            return clone.result
        raise PlmrError(
            f"convert-tile-to-mesh: value %{v.name_hint or '?'} is used inside a nest but "
            "defined outside it"
        )

    def _emit_ops(self, ops: Iterable[Operation]) -> None:
        for op in ops:
            if isinstance(op, tile.YieldOp):
                self.b.insert(tile.YieldOp(*(self._value(v) for v in op.values)))
                continue
            if isinstance(op, tile.ForOp):
                inits = [self._value(v) for v in op.iter_args]
                self._emit_loop(op, inits)
                continue
            if isinstance(op, tile.LoadOp) and op in self.loads:
                # A load of the nest's own (an epilogue's load of a held value is cloned).
                self._emit_load(op)
                continue
            if isinstance(op, tile.StoreOp) and self._output_of(op) is not None:
                self._emit_store(op)
                continue
            for operand in op.operands:
                self._value(operand)
            clone = op.clone(value_mapper=self.vmap)
            self.b.insert(clone)
            for o, n in zip(op.results, clone.results, strict=True):
                n.name_hint = o.name_hint
                self.vmap[o] = n

    def _index_for(self, v: SSAValue, distributed: bool) -> SSAValue:
        if distributed:
            local = self.local.get(v)
            if local is None:
                raise PlmrError(
                    "convert-tile-to-mesh: internal error: a distributed dim is indexed "
                    "by a loop that is not split"
                )
            return local
        return self._value(v)

    def _emit_load(self, op: tile.LoadOp) -> None:
        operand = self.operands[op.source]
        info = self.loads[op]
        offs: list[SSAValue] = []
        for v, idx, a in zip(op.offsets, info.indices, operand.layout, strict=True):
            if a != "-" and isinstance(idx, Composite):
                outer = self._index_for(idx.outer, True)
                offs.append(
                    _add(self.b, _mul(self.b, outer, idx.scale), self._value(idx.inner))
                )
            else:
                offs.append(self._index_for(v, a != "-"))
        padding = None if op.padding is None else op.padding.value.data
        shape = static_shape(op.result, "r")
        limits = self._limits(op, info.indices, operand) if padding is not None else []
        new = self.b.insert(tile.LoadOp(operand.block, offs, shape, padding, limits))
        new.result.name_hint = op.result.name_hint
        self.vmap[op.result] = new.result

    def _limits(
        self,
        op: tile.LoadOp,
        indices: Sequence[SSAValue | Composite | None],
        operand: _Operand,
    ) -> list[SSAValue]:
        """
        The `limits` of a padded load along a reduction loop whose last block is padded
        (`fit`) and which is split over an axis (or a band): in that dim, where the
        tensor ends in this PE's share (`extent - the global index of its first
        element`), so that whatever the share holds past it reads as the load's padding
        (the reduction's identity); the local extent in the other dims. No limits (an
        empty list) when no such dim is read: a parallel dim's padded lanes are never
        stored.
        """
        full = static_shape(op.source, "source")
        local = static_shape(operand.block, "block")
        padded = [
            a != "-" and var is not None and _padded_reduction(var)
            for idx, a in zip(indices, operand.layout, strict=True)
            for var in [idx.outer if isinstance(idx, Composite) else idx]
        ]
        if not any(padded):
            return []
        limits: list[SSAValue] = []
        for d, idx in enumerate(indices):
            var = idx.outer if isinstance(idx, Composite) else idx
            if not padded[d] or var is None:
                limits.append(_index(self.b, local[d]))
                continue
            if var in self.vmap and var in self.local:
                # global - local: the global index of the share's first element.
                scale = idx.scale if isinstance(idx, Composite) else 1
                origin = self.b.insert(arith.SubiOp(self.vmap[var], self.local[var]))
                start = _mul(self.b, origin.result, scale)
                end = _index(self.b, full[d])
                limits.append(self.b.insert(arith.SubiOp(end, start)).result)
                continue
            if self.chunk_limit is None:
                raise PlmrError(
                    "convert-tile-to-mesh: internal error: a padded reduction block is "
                    "read where its end is not known"
                )
            # A rotation's step: the chunk in view ends where the reduction does.
            limits.append(self.chunk_limit)
        return limits

    def _output_of(self, op: tile.StoreOp) -> int | None:
        for k, stores in self.nest.stores.items():
            if op in stores:
                return k
        return None

    def _emit_store(self, op: tile.StoreOp) -> None:
        k = self._output_of(op)
        assert k is not None
        layout = self.m.outputs[k]
        offs = [
            self._index_for(v, a != "-") for v, a in zip(op.offsets, layout, strict=True)
        ]
        dest = self._value(op.dest)
        clip = op.clip is not None
        new = self.b.insert(tile.StoreOp(self._value(op.block), dest, offs, clip))
        result = new.result
        if self.guards:
            # Inside a block of padding the output keeps its (zero) padding.
            cond = self.guards[0]
            for g in self.guards[1:]:
                cond = self.b.insert(arith.AndIOp(cond, g)).result
            result = self.b.insert(tile.SelectOp(cond, result, dest)).result
        result.name_hint = op.result.name_hint
        self.vmap[op.result] = result


class StraightEmitter(NestEmitter):
    """
    Tile ops at the top of a function (blocks small enough to need no loop): they run on
    every PE on whole, replicated tensors.
    """

    def __init__(self, low: _Lowering, ops: list[Operation]):
        self.low = low
        self.ops = ops
        self.opts = low.opts
        self.m = Mapping({}, "local")
        self.loads = {}
        self.skew = False
        self.ring = "torus"
        self.band_coords = {}

    def emit(self) -> mesh.SpmdOp:
        low, opts = self.low, self.opts
        inside = {r for op in self.ops for r in op.results}
        globals_: list[SSAValue] = []
        empties: list[SSAValue] = []
        for op in self.ops:
            for inner in op.walk():
                for v in inner.operands:
                    if v in inside or not isinstance(v.type, TensorType):
                        continue
                    if not _is_global(v, low.block):
                        continue
                    if isinstance(v.owner, tensor.EmptyOp):
                        if v not in empties:
                            empties.append(v)
                    elif v not in globals_:
                        globals_.append(v)
        outputs = [
            r
            for op in self.ops
            for r in op.results
            if isinstance(r.type, TensorType)
            and any(u.operation not in self.ops for u in r.uses)
        ]
        inputs: list[SSAValue] = []
        for src in globals_:
            whole = tuple("-" for _ in static_shape(src, "input"))
            placed = low.placed.get(src)
            inputs.append(low.scatter(src, whole) if placed is None else placed.value)
        arg_types: list[Attribute] = [IndexType(), IndexType()]
        for v in inputs:
            d = type_of(v, mesh.DistType)
            arg_types.append(TensorType(d.tensor.element_type, d.block_shape(opts.grid)))
        body = Block(arg_types=arg_types)
        self.b = Builder(InsertPoint.at_end(body))
        self.entry = Builder(InsertPoint.at_start(body))
        self.coord = {"y": body.args[0], "x": body.args[1]}
        body.args[0].name_hint = "py"
        body.args[1].name_hint = "px"
        self.vmap = {}
        self.local = {}
        self.operands = {}
        for src, value, arg in zip(globals_, inputs, body.args[2:], strict=True):
            d = type_of(value, mesh.DistType)
            whole = tuple("-" for _ in static_shape(src, "input"))
            have = _layout_of(d)
            block: SSAValue = arg
            if have != whole:
                block = self._relayout(src, arg, have, whole, ("", "", 0))
            self.vmap[src] = block
        for e in empties:
            self.vmap[e] = self.b.insert(
                tile.FillOp(0.0, TensorType(_elt(e), static_shape(e, "empty")))
            ).result
        self._emit_ops(self.ops)
        self.b.insert(mesh.YieldOp(*(self.vmap[o] for o in outputs)))
        out_types = [_dist(o, tuple("-" for _ in static_shape(o, "r"))) for o in outputs]
        spmd = low.builder.insert(mesh.SpmdOp(inputs, out_types, Region(body)))
        for old, new in zip(outputs, spmd.outputs, strict=True):
            new.name_hint = old.name_hint
            low.placed[old] = Placed(new, tuple("-" for _ in static_shape(old, "r")))
        return spmd

    def _output_of(self, op: tile.StoreOp) -> int | None:
        del op
        return None
