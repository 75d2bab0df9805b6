"""
Re-layouts for `convert-tile-to-mesh`: turning a PE's block of a value placed in one layout
into its block in the layout a nest reads it in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    IndexType,
    TensorType,
)
from xdsl.ir import Block, Region, SSAValue
from xdsl.rewriter import InsertPoint

from plmr.dialects import mesh, tile
from plmr.dialects.graph import static_shape
from plmr.lowering.tile_to_mesh.analysis import (
    Layout,
    Options,
    entry_band,
    entry_parts,
    layout_band,
)
from plmr.lowering.tile_to_mesh.analysis import other_axis as _other
from plmr.lowering.tile_to_mesh.builders import add_index as _add
from plmr.lowering.tile_to_mesh.builders import const_index as _index
from plmr.lowering.tile_to_mesh.builders import element_type as _elt
from plmr.lowering.tile_to_mesh.builders import mul_index as _mul
from plmr.lowering.tile_to_mesh.builders import ring_for as _ring_for
from plmr.lowering.tile_to_mesh.builders import ring_position as _ring_pos
from plmr.lowering.tile_to_mesh.cost import diagonal_move as _diagonal_move
from plmr.lowering.tile_to_mesh.cost import gather_order
from plmr.lowering.tile_to_mesh.cost import ring_realignable as _ring_realignable
from plmr.lowering.tile_to_mesh.mapping import Mapping
from plmr.lowering.tile_to_mesh.segments import allgather_choice, allreduce_choice


class Relayout:
    """
    Layout changes at the head of a nest's spmd body: all-gathers, a block from the
    diagonal PE, Cannon's pre-skew (mixed into `emit.NestEmitter`).
    """

    b: Builder
    entry: Builder
    opts: Options
    m: Mapping
    coord: dict[str, SSAValue]
    band_coords: dict[tuple[str, int, bool], SSAValue]

    def _band_coord(self, axis: str, width: int, inner: bool) -> SSAValue:
        """`p % width` (the place in the band) or `p // width` (the band) along `axis`."""
        key = (axis, width, inner)
        found = self.band_coords.get(key)
        if found is not None:
            return found
        b = self.entry
        w = _index(b, width)
        op = (
            arith.RemUIOp(self.coord[axis], w)
            if inner
            else arith.DivUIOp(self.coord[axis], w)
        )
        value = b.insert(op).result
        self.band_coords[key] = value
        return value

    def _entry_coord(self, entry: str) -> SSAValue:
        """This PE's block index along the dim a layout entry splits."""
        band = entry_band(entry)
        if band is None:
            return self.coord[entry]
        return self._band_coord(entry[0], band[0], band[1])

    def _gather_bands(self, src: SSAValue, value: SSAValue, cur: list[str]) -> SSAValue:
        """
        Makes the dims of a banded layout whole: each band's first PE (with an inner dim:
        every PE of a band) puts its block in place in a zero tensor, the PEs past the
        last band put zeros, and a sum along the axis delivers every block to every PE.
        """
        b, opts = self.b, self.opts
        band = layout_band(cur)
        assert band is not None
        axis, width = band
        shape = static_shape(src, "source")
        dims = [j for j, e in enumerate(cur) if entry_band(e) is not None]
        cur_shape = self._shape(shape, cur)
        full = list(cur_shape)
        offs = [_index(b, 0) for _ in shape]
        for j in dims:
            full[j] = cur_shape[j] * entry_parts(cur[j], opts.grid)
            offs[j] = _mul(b, self._entry_coord(cur[j]), cur_shape[j])
        n = opts.n(axis)
        bands = n // width
        owner: SSAValue | None = None
        if bands * width < n:
            owner = b.insert(
                arith.CmpiOp(self.coord[axis], _index(b, bands * width), "ult")
            ).result
        inner = [j for j in dims if (e := entry_band(cur[j])) is not None and e[1]]
        if not inner:
            first = b.insert(
                arith.CmpiOp(self._band_coord(axis, width, True), _index(b, 0), "eq")
            ).result
            owner = first if owner is None else b.insert(arith.AndIOp(owner, first)).result
        zero = b.insert(tile.FillOp(0.0, TensorType(_elt(src), full))).result
        if owner is None:
            stored = b.insert(tile.StoreOp(value, zero, offs)).result
        else:
            # The PEs past the last band (and the replicas) put their block at the
            # first place, then keep the zeros.
            offs = [b.insert(arith.SelectOp(owner, o, _index(b, 0))).result for o in offs]
            stored = b.insert(tile.StoreOp(value, zero, offs)).result
            stored = b.insert(tile.SelectOp(owner, stored, zero)).result
        elems = math.prod(full)
        value = b.insert(
            mesh.AllreduceOp("sum", stored, axis, *allreduce_choice(opts, axis, elems))
        ).result
        if any(full[j] != shape[j] for j in dims):
            exact = list(full)
            for j in dims:
                exact[j] = shape[j]
            value = b.insert(
                tile.LoadOp(value, [_index(b, 0) for _ in shape], exact)
            ).result
        for j in dims:
            cur[j] = "-"
        return value

    def _relayout(
        self,
        src: SSAValue,
        blk: SSAValue,
        have: Layout,
        want: Layout,
        skew: tuple[str, str, int],
    ) -> SSAValue:
        """Turns this PE's block under `have` into its block under `want` (+ skew)."""
        b, opts = self.b, self.opts
        shape = static_shape(src, "source")
        cur = list(have)
        value = blk
        skew_done = False
        if layout_band(have) is not None:
            value = self._gather_bands(src, value, cur)
        for j in gather_order(cur, want):
            a = cur[j]
            if a == "-" or (want[j] == a and skew[0] != a):
                continue
            if want[j] == a and _ring_realignable(skew, opts):
                # Already split over the skew axis, one chunk per PE: the blocks pass
                # once round the ring and each PE keeps the one it starts with.
                value = self._realigned(src, value, j, skew)
                skew_done = True
                continue
            if not skew[0] and _diagonal_move(tuple(cur), want, j, opts, src):
                # Split over a, wanted over the other axis (and replicated along it): the
                # PE at position coord[o] along a holds this PE's block and multicasts it
                # along a.
                value = self._from_diagonal(value, a)
                cur[j] = _other(a)
                continue
            # All-gather dim j along a: the blocks of the PEs that hold one (the rest
            # hold padding only), concatenated (of their padded length).
            cur_shape = self._shape(shape, cur)
            full = list(cur_shape)
            owners = -(-shape[j] // cur_shape[j])
            full[j] = cur_shape[j] * owners
            elems = math.prod(full)
            value = b.insert(
                mesh.AllgatherOp(
                    value, a, j, owners, *allgather_choice(self.opts, a, elems)
                )
            ).result
            if full[j] != shape[j]:
                exact = list(full)
                exact[j] = shape[j]
                zeros = [_index(b, 0) for _ in shape]
                value = b.insert(tile.LoadOp(value, zeros, exact)).result
            cur[j] = "-"
        # Take this PE's part of the dims now whole (of their padded length).
        offs = [_index(b, 0) for _ in shape]
        target = list(cur)
        padded = self._shape(shape, cur)
        taken = False
        for j, a in enumerate(want):
            if a == "-" or cur[j] == a or skew[0] == a:
                continue
            parts = entry_parts(a, opts.grid)
            size = -(-shape[j] // parts)
            owners = -(-shape[j] // size)
            coord = self._entry_coord(a)
            offs[j] = _mul(b, coord, size)
            if owners < parts or entry_band(a) is not None:
                # The PEs past the last block (or band) take the first block's place.
                owner = b.insert(arith.CmpiOp(coord, _index(b, owners), "ult")).result
                offs[j] = b.insert(arith.SelectOp(owner, offs[j], _index(b, 0))).result
            padded[j] = size * owners
            target[j] = a
            taken = True
        if taken:
            whole = self._shape(shape, cur)
            if padded != whole:
                buf = b.insert(tile.FillOp(0.0, TensorType(_elt(src), padded))).result
                zeros = [_index(b, 0) for _ in shape]
                value = b.insert(tile.StoreOp(value, buf, zeros)).result
            value = b.insert(tile.LoadOp(value, offs, self._shape(shape, target))).result
            cur = target
        if skew[0] and not skew_done:
            value = self._skewed(src, value, cur, skew)
        return value

    def _realigned(
        self, src: SSAValue, blk: SSAValue, j: int, skew: tuple[str, str, int]
    ) -> SSAValue:
        """
        Cannon's pre-skew of a value split over the skew axis (PE at position c holds
        chunk c): PE (a, o) needs chunk (r(a) + r(o)) mod n, r the ring position. The
        blocks move n - 1 times one step round the ring; after t steps the PE at ring
        position p holds the block that started at ring position p - t, so it keeps the
        one with t = (p - r(chunk)) mod n. Two blocks of SRAM, n - 1 one-step shifts.
        """
        b, opts = self.b, self.opts
        axis, ring, chunks = skew
        n = opts.n(axis)
        ring = _ring_for(ring, n)
        pos_a = _ring_pos(b, self.coord[axis], ring, n)
        pos_o = _ring_pos(b, self.coord[_other(axis)], ring, n)
        want = b.insert(arith.RemUIOp(_add(b, pos_a, pos_o), _index(b, chunks))).result
        back = _add(b, pos_a, _index(b, n))
        t_keep = b.insert(
            arith.RemUIOp(
                b.insert(arith.SubiOp(back, _ring_pos(b, want, ring, n))).result,
                _index(b, n),
            )
        ).result
        shape = static_shape(blk, "block")
        rows = shape[j]
        double = list(shape)
        double[j] = 2 * rows
        body = Block(arg_types=[IndexType(), blk.type, blk.type])
        inner = Builder(InsertPoint.at_end(body))
        step, moving, kept = body.args
        # kept' = moving if step == t_keep else kept: both in one buffer, one load.
        zero = inner.insert(tile.FillOp(0.0, TensorType(_elt(src), double))).result
        at = [_index(inner, 0) for _ in shape]
        at[j] = _index(inner, rows)
        both = inner.insert(tile.StoreOp(kept, zero, [_index(inner, 0) for _ in shape]))
        both = inner.insert(tile.StoreOp(moving, both.result, at)).result
        take = inner.insert(arith.CmpiOp(step, t_keep, "eq")).result
        offs = [_index(inner, 0) for _ in shape]
        offs[j] = inner.insert(
            arith.SelectOp(take, _index(inner, rows), _index(inner, 0))
        ).result
        new_kept = inner.insert(tile.LoadOp(both, offs, shape)).result
        new_moving = inner.insert(mesh.ShiftOp(moving, axis, ring)).result
        inner.insert(tile.YieldOp(new_moving, new_kept))
        loop = b.insert(tile.ForOp(0, n, 1, "reduction", [blk, blk], Region(body)))
        return loop.res[1]

    def _from_diagonal(self, blk: SSAValue, a: str) -> SSAValue:
        """
        Every PE gets the block of the PE on its line along `a` whose position equals
        its own coordinate on the other axis: `[a]` -> `[other]` for dim `j`, one
        `mesh.diagonal_broadcast` (the grid is square).
        """
        return self.b.insert(mesh.DiagonalBroadcastOp(blk, a)).result

    def _skewed(
        self, src: SSAValue, full: SSAValue, cur: list[str], skew: tuple[str, str, int]
    ) -> SSAValue:
        """Cuts this PE's chunks of the skewed dim out of a block holding it whole."""
        b, opts = self.b, self.opts
        axis, ring, chunks = skew
        other = _other(axis)
        shape = static_shape(src, "source")
        j = self.m.layouts[src].index(axis)
        n_a, n_o = opts.n(axis), opts.n(other)
        per_a, per_o = chunks // n_a, chunks // n_o
        size = -(-shape[j] // chunks)
        if size * chunks > shape[j]:
            # Padded chunks (`fit_tiles`): the last ones end in zeros.
            whole = static_shape(full, "block")
            padded = list(whole)
            padded[j] = size * chunks
            zero = b.insert(tile.FillOp(0.0, TensorType(_elt(src), padded))).result
            at = [_index(b, 0) for _ in shape]
            full = b.insert(tile.StoreOp(full, zero, at)).result
        target = list(cur)
        target[j] = axis
        out_shape = self._shape(shape, target)
        pos_a = _ring_pos(b, self.coord[axis], ring, n_a)
        pos_o = _ring_pos(b, self.coord[other], ring, n_o)
        base = _add(b, _mul(b, pos_a, per_a), _mul(b, pos_o, per_o))
        buf = b.insert(tile.FillOp(0.0, TensorType(_elt(src), out_shape))).result
        chunk_shape = list(out_shape)
        chunk_shape[j] = size
        for u in range(per_a):
            c = b.insert(
                arith.RemUIOp(_add(b, base, _index(b, u)), _index(b, chunks))
            ).result
            offs = [_index(b, 0) for _ in shape]
            offs[j] = _mul(b, c, size)
            piece = b.insert(tile.LoadOp(full, offs, chunk_shape)).result
            at = [_index(b, 0) for _ in shape]
            at[j] = _index(b, u * size)
            buf = b.insert(tile.StoreOp(piece, buf, at)).result
        return buf

    def _shape(self, shape: Sequence[int], layout: Sequence[str]) -> list[int]:
        return [
            -(-s // entry_parts(a, self.opts.grid))
            for s, a in zip(shape, layout, strict=True)
        ]
