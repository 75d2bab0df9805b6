"""
The cost model of `convert-tile-to-mesh`: estimated cycles of a mapping on the critical PE
(compute, reduction messages, placement and layout changes) and the block sizes behind it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.ir import Operation, SSAValue

from plmr.dialects import tile
from plmr.dialects.graph import static_shape
from plmr.lowering.tile_to_mesh.analysis import (
    Layout,
    Nest,
    Options,
    entry_axis,
    entry_band,
    entry_parts,
    layout_band,
)
from plmr.lowering.tile_to_mesh.analysis import other_axis as _other
from plmr.lowering.tile_to_mesh.mapping import Mapping
from plmr.lowering.tile_to_mesh.segments import (
    band_allreduce_cycles,
    diagonal_cycles_of,
    gather_cycles_of,
    line_cycles_of,
    segment_of,
)
from plmr.target.op_cost import op_cycles


class CostModel:
    """The planner's estimate of a mapping: compute per PE, messages, layout changes."""

    nest: Nest
    opts: Options
    placed: dict[SSAValue, Layout]
    """The layouts of the values earlier nests left on the grid."""
    deferred_kinds: list[str] | None = None
    """The outputs' combines if the allreduce can wait for the end of the nest
    (`batching.deferrable`)."""

    def _per_pe_trips(self, op: Operation, m: Mapping) -> int:
        """How many times one PE runs `op` under mapping `m`."""
        trips = 1
        stop = self.nest.top.parent_op()
        parent = op.parent_op()
        while parent is not None and parent is not stop:
            if isinstance(parent, tile.ForOp):
                trips *= -(-parent.trip_count // m.parts(parent, self.opts))
            parent = parent.parent_op()
        return trips

    def _estimate(self, m: Mapping) -> float:
        """Estimated cycles of the nest on the critical PE: compute plus messages."""
        nest, opts = self.nest, self.opts
        dev, grid = opts.device, opts.grid
        ratio = dev.elem_bytes / 4
        link = dev.link_bytes_per_cycle
        latency = dev.send_overhead_cycles + dev.recv_overhead_cycles + 2 * dev.ramp_cycles

        def message(nbytes: float, hops: float = 1.0) -> float:
            return latency + hops * dev.hop_cycles + nbytes * ratio / link

        compute = 0.0
        for op in nest.top.walk():
            if op is nest.top or isinstance(op, tile.ForOp | tile.YieldOp):
                continue
            compute += self._per_pe_trips(op, m) * op_cycles(dev, op)
        comm = 0.0
        red = nest.reduction
        if red is not None and m.mode != "local":
            count = self._per_pe_trips(red, m)
            accs = sum(_bytes(v) for v in red.iter_args)
            if m.mode == "allreduce":
                axis = m.axis_of(red)
                assert axis is not None
                stages = 2 * max(1, math.ceil(math.log2(opts.n(axis))))
                # Within the PEs holding data when the loop is shorter than the axis,
                # or within each band.
                within = self._within(m, red, accs // 4, axis)
                # Timed as the runtime times an allreduce of that many values per PE.
                each = count * line_cycles_of(opts, axis, max(1, accs // 4)) * within
                # Or one allreduce per output block at the end (fewer, larger messages).
                kinds = self.deferred_kinds if count > 1 else None
                outs = [
                    block_bytes(o, lay, grid)
                    for o, lay in zip(nest.outputs, m.outputs, strict=True)
                ]
                once = sum(
                    line_cycles_of(opts, axis, max(1, b // 4))
                    * self._within(m, red, b // 4, axis)
                    for b in outs
                )
                m.deferred = kinds if kinds is not None and once < each else None
                comm += each if m.deferred is None else once
            elif m.mode == "merge":
                axis = m.axis_of(red)
                assert axis is not None
                stages = 2 * max(1, math.ceil(math.log2(opts.n(axis))))
                # The maxima first, then the rescaled accumulators.
                comm += count * stages * (message(accs / 4) + message(accs))
            else:
                chunk = sum(
                    block_bytes(s, m.layouts[s], grid) * opts.n(p) / m.chunks
                    for s, p in m.paths.items()
                )
                if opts.gemm == "summa":
                    n = max(opts.n(p) for p in m.paths.values())
                    comm += count * m.chunks * message(chunk, n / 2)
                else:
                    comm += count * (m.chunks - 1) * message(chunk, 2.0)
        for src, layout in m.layouts.items():
            have = self.placed.get(src)
            if have is None:
                # Host operands arrive over the PE's link when they are placed.
                comm += block_bytes(src, layout, grid) * ratio / link
                continue
            if have == layout and src not in m.paths:
                continue
            full = math.prod(static_shape(src, "source")) * 4
            skewed = src in m.paths and cannon_skew(m, opts)
            block = block_bytes(src, layout, grid)
            before = comm
            cur = list(have)
            band = layout_band(have)
            if band is not None and not skewed:
                # The bands made whole first: one sum along their axis of the blocks
                # placed in zeros (`Relayout._gather_bands`).
                dims = [j for j, e in enumerate(have) if entry_band(e) is not None]
                comm += line_cycles_of(opts, band[0], _gathered_elems(src, cur, dims, grid))
                for j in dims:
                    cur[j] = "-"
            for j in gather_order(tuple(cur), layout):
                a = cur[j]
                if a == "-":
                    continue
                stages = 2 * max(1, math.ceil(math.log2(opts.n(a))))
                if (
                    skewed
                    and layout[j] == a == m.paths[src]
                    and ring_realignable((a, "", m.chunks), opts)
                ):
                    comm += opts.n(a) * message(block, 2.0)
                elif not skewed and diagonal_move(tuple(cur), layout, j, opts, src):
                    # One multicast from each line's diagonal PE (the farthest line's
                    # root at its end), timed as the runtime times it.
                    comm += diagonal_cycles_of(opts, a, max(1, block // 4))
                    cur[j] = _other(a)
                elif skewed:
                    comm += stages * message(full)
                elif layout[j] == a:
                    continue  # stays split as it is
                else:
                    # An all-gather of dim j along a (`Relayout._relayout`), timed as
                    # the runtime times that `mesh.allgather`.
                    comm += gather_cycles_of(opts, a, _gathered_elems(src, cur, [j], grid))
                    cur[j] = "-"
            if m.mode == "merge" and not self._indexed_by_reduction(src):
                # The queries' layout becomes the outputs', which the rest of the
                # program follows: move the keys rather than the queries.
                comm += comm - before
        return compute + comm

    def reader_gathers(self, m: Mapping) -> float:
        """
        The all-gathers the readers of the nest's outputs are expected to pay for `m`'s
        output layouts, which the planner ranks by but the nest's estimate leaves out
        (the readers' estimates hold what they pay): one along the axis for each output
        dim with fewer elements than the axis has PEs that `m` splits over an axis no
        operand an earlier nest placed is split over. Such a split (two heads over four
        rows) only saves the nest's own compute, on part of the axis; its readers, split
        over the longer dims, read the value whole along that axis and gather it, and
        the allreduces that `mesh-pack-allreduces` would have shared with a sibling
        reading the same value apart stay apart. Bands (`entry_band`), which place a
        short dim on purpose, and nests that read no placed operand pay nothing.
        """
        placed = [self.placed[src] for src in m.layouts if src in self.placed]
        if not placed:
            return 0.0
        used = {entry_axis(e) for layout in placed for e in layout if e != "-"}
        grid = self.opts.grid
        total = 0.0
        for out, layout in zip(self.nest.outputs, m.outputs, strict=True):
            shape = static_shape(out, "output")
            for j, e in enumerate(layout):
                if e == "-" or entry_band(e) is not None or entry_axis(e) in used:
                    continue
                if shape[j] >= self.opts.n(entry_axis(e)):
                    continue
                total += line_cycles_of(
                    self.opts, entry_axis(e), _gathered_elems(out, layout, [j], grid)
                )
        return total

    def _within(self, m: Mapping, red: tile.ForOp, elems: int, axis: str) -> float:
        """The cycles of the reduction's allreduce over those of one along the axis."""
        found = m.band_of(red)
        if found is None:
            return segment_of(red, elems, axis, self.opts)[1]
        band, inner = found
        if not inner or band.outer.kind.data != tile.LoopKind.PARALLEL:
            return 1.0
        whole = line_cycles_of(self.opts, axis, elems)
        return band_allreduce_cycles(self.opts, axis, elems, band.width) / whole

    def _indexed_by_reduction(self, src: SSAValue) -> bool:
        """Whether the nest reads `src` at the reduction's index (the keys' side)."""
        r = self.nest.reduction_var
        return any(ld.source is src and r in ld.indices for ld in self.nest.loads)


def diagonal_move(
    have: Sequence[str], want: Sequence[str], j: int, opts: Options, src: SSAValue
) -> bool:
    """
    Dim `j` is split over one axis and wanted over the other, which the value does not
    use, on a square grid: each PE's block is on the diagonal of its line
    (`_NestEmitter._from_diagonal`), so one block moves, not a strip. With `fit_tiles`
    the dim may split unevenly: both axes cut it in the same padded blocks, and a PE
    past the last block takes a block of padding, as its loops skip it.
    """
    a = have[j]
    if a == "-" or layout_band(have) is not None or layout_band(want) is not None:
        return False
    o = _other(a)
    return (
        want[j] == o
        and o not in have
        and opts.n(a) == opts.n(o)
        and (static_shape(src, "source")[j] % opts.n(a) == 0 or opts.fit_tiles)
    )


def cannon_skew(m: Mapping, opts: Options) -> bool:
    """Operands rotating in both directions are placed pre-skewed (SUMMA broadcasts)."""
    return m.mode == "rotate" and len(set(m.paths.values())) == 2 and opts.gemm != "summa"


def shared_block(
    views: dict[SSAValue, SSAValue], m: Mapping, src: SSAValue, skewed: bool
) -> tuple[SSAValue, Layout, str]:
    """
    Which block on a PE an operand `src` of a nest mapped by `m` is: views of one tensor
    (`views`: each view's source) in one layout are one block, unless placed pre-skewed
    (`skewed`, `cannon_skew`), where each rotation path has its own. The planner counts a
    block's SRAM once per key and the emitter places it once per key; an operand that
    rotates (`m.paths`) always has a block of its own, which operands after it may share.
    """
    path = m.paths[src] if skewed and src in m.paths else ""
    return (views.get(src, src), m.layouts[src], path)


def ring_realignable(skew: tuple[str, str, int], opts: Options) -> bool:
    """Cannon's skew on a square grid with one chunk per PE: a ring pass realigns it."""
    axis, _, chunks = skew
    if not axis:
        return False
    n = opts.n(axis)
    return n == opts.n(_other(axis)) == chunks and n > 1


def gather_order(have: Sequence[str], want: Sequence[str]) -> list[int]:
    """
    The order `Relayout._relayout` moves the dims of a value in: first those wanted whole
    whose axis another dim is wanted over, so that this dim then moves from the diagonal
    PE (one block) rather than after an all-gather of the whole line (`[y, x]` wanted as
    `[x, -]`: the columns gathered along x, then the rows from the diagonal, never the
    whole tensor on a PE); the others in order.
    """
    first = [
        j
        for j, a in enumerate(have)
        if a != "-"
        and want[j] == "-"
        and any(want[k] == a != have[k] for k in range(len(want)) if k != j)
    ]
    return first + [j for j in range(len(have)) if j not in first]


def _gathered_elems(
    value: SSAValue, layout: Sequence[str], dims: Sequence[int], grid: tuple[int, int]
) -> int:
    """
    Values per PE of the all-gather of `dims` of `value` placed in `layout`: a banded
    dim over all its bands, a dim split over an axis over the PEs that hold a block.
    """
    shape = static_shape(value, "value")
    per = [-(-s // entry_parts(a, grid)) for s, a in zip(shape, layout, strict=True)]
    for j in dims:
        if entry_band(layout[j]) is not None:
            per[j] *= entry_parts(layout[j], grid)
        else:
            per[j] *= -(-shape[j] // per[j])
    return math.prod(per)


def _bytes(value: SSAValue) -> int:
    return math.prod(static_shape(value, "value")) * 4


def block_bytes(value: SSAValue, layout: Layout, grid: tuple[int, int]) -> int:
    shape = static_shape(value, "value")
    per = [-(-s // entry_parts(a, grid)) for s, a in zip(shape, layout, strict=True)]
    return math.prod(per) * 4
