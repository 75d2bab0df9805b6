"""
Allreduces of reductions split over part of an axis for `convert-tile-to-mesh`: when a
reduction loop is shorter than the axis it is split over (a head dimension of 128 on
420 PEs), only the first PEs hold data and the rest hold padding. The combine then runs
within a segment of those PEs (`mesh.allreduce ... segment = D`) and the result is
multicast from the last of them along the whole axis (`mesh.broadcast`): the chain
reductions span D PEs instead of the axis (on 420 PEs, 320 values: 2,998 cycles as one
allreduce, 2,408 as a segment of 128 and a multicast). Whether it pays is decided on the
runtime's timing of both on one line (`line_allreduce_cycles`, cached).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import numpy.typing as npt
from xdsl.builder import Builder
from xdsl.ir import SSAValue

from plmr.dialects import mesh, tile
from plmr.dialects.graph import static_shape
from plmr.lowering.tile_to_mesh.analysis import Options
from plmr.lowering.tile_to_mesh.builders import const_index, ktree_groups
from plmr.target.collective_stages import line_cycles
from plmr.target.collectives import (
    allgather_plan,
    allreduce_plan,
    broadcast_plan,
    segmented_plan,
)
from plmr.target.device import Device, get_device


def data_positions(loop: tile.ForOp, n: int) -> int:
    """How many of the `n` PEs of an axis hold blocks of `loop` split over it."""
    per = -(-loop.trip_count // n)
    return -(-loop.trip_count // per)


def segment_for(loop: tile.ForOp, value: SSAValue, axis: str, opts: Options) -> int | None:
    """
    The segment of the allreduce of `value`, the partial results of `loop` split over
    `axis` (None: the whole axis): the PEs holding data, when they are fewer than the
    axis and the segment and its multicast take fewer cycles than one allreduce (for a
    few values on a short axis, the multicast's extra step costs more than the shorter
    chains save).
    """
    return segment_of(loop, math.prod(static_shape(value, "value")), axis, opts)[0]


def segment_of(
    loop: tile.ForOp, elems: int, axis: str, opts: Options
) -> tuple[int | None, float]:
    """
    `segment_for` for partial results of `elems` values per PE, with the cycles of the
    chosen allreduce over those of one allreduce along the whole axis (1 without a
    segment): what the planner's cost model scales its allreduce estimate by.
    """
    n = opts.n(axis)
    data = data_positions(loop, n)
    if data < 2 or data >= n:
        return None, 1.0
    seg, whole = line_cycles_of(opts, axis, elems, data), line_cycles_of(opts, axis, elems)
    if seg >= whole:
        return None, 1.0
    return data, seg / whole


AUTO_K = (2, 3)
"""The K-tree phases `gemv = auto` chooses from (K = 4 wins a few long lines but needs
more colors than a decode layer has left)."""


def allreduce_choice(
    opts: Options, axis: str, elems: int, segment: int | None = None
) -> tuple[str, int, int | None]:
    """
    The algorithm, K and groups of an allreduce of `elems` values per PE along `axis`
    (within segments of `segment` PEs): the options', or with `gemv = auto` the K-tree
    whose K takes the fewest cycles on one line.
    """
    groups = ktree_groups(opts, axis)
    if groups is not None and segment is not None:
        groups = min(groups, segment)
    if opts.gemv != "auto":
        return opts.gemv, opts.k, groups
    n = opts.n(axis)

    def cycles(k: int) -> float:
        return line_allreduce_cycles(opts.device_spec, n, elems, "ktree", k, None, segment)

    return "ktree", min(AUTO_K, key=cycles), None


def allgather_choice(opts: Options, axis: str, elems: int) -> tuple[str, int, int | None]:
    """
    The algorithm, K and groups of an allgather of `elems` values per PE (the gathered
    block) along `axis`: the options' K-tree groups, with `gemv = auto` the K whose
    chains take the fewest cycles on one line; a `ring` option gathers with a K-tree.
    """
    groups = ktree_groups(opts, axis)
    if opts.gemv not in ("auto", "ring"):
        return opts.gemv, opts.k, groups
    n = opts.n(axis)

    def cycles(k: int) -> float:
        return line_allgather_cycles(opts.device_spec, n, elems, "ktree", k, None)

    return "ktree", min(AUTO_K, key=cycles), None


def gather_cycles_of(opts: Options, axis: str, elems: int) -> float:
    """Cycles on one line of the allgather `allgather_choice` picks."""
    algorithm, k, groups = allgather_choice(opts, axis, elems)
    return line_allgather_cycles(
        opts.device_spec, opts.n(axis), elems, algorithm, k, groups
    )


def diagonal_cycles_of(opts: Options, axis: str, elems: int) -> float:
    """
    Cycles of a diagonal broadcast of `elems` values per PE along `axis`: its slowest
    line's, the one whose root is at an end of it.
    """
    return line_broadcast_cycles(opts.device_spec, opts.n(axis), elems)


@lru_cache(maxsize=1024)
def line_broadcast_cycles(device: str, n: int, elems: int) -> float:
    """The runtime's timing (`line_cycles`) of a multicast from one end of a line."""
    return float(line_cycles(broadcast_plan(n, 0), elems, get_device(device)).max())


@lru_cache(maxsize=1024)
def line_allgather_cycles(
    device: str, n: int, elems: int, algorithm: str, k: int, groups: int | None
) -> float:
    """The runtime's timing (`line_cycles`) of an allgather of `elems` values per PE."""
    plan = allgather_plan(n, algorithm, k, groups)
    return float(line_cycles(plan, elems, get_device(device)).max())


def line_cycles_of(
    opts: Options, axis: str, elems: int, segment: int | None = None
) -> float:
    """Cycles of the allreduce `allreduce_choice` picks, on one line."""
    algorithm, k, groups = allreduce_choice(opts, axis, elems, segment)
    n = opts.n(axis)
    return line_allreduce_cycles(opts.device_spec, n, elems, algorithm, k, groups, segment)


@lru_cache(maxsize=1024)
def line_allreduce_cycles(
    device: str,
    n: int,
    elems: int,
    algorithm: str,
    k: int,
    groups: int | None,
    segment: int | None,
) -> float:
    """
    The runtime's timing (`line_cycles`) of an allreduce of `elems` values per PE along
    a line of `n` PEs: over the whole line, or within its first `segment` PEs and then
    multicast from the last of them.
    """
    dev = get_device(device)
    if segment is None:
        return float(line_cycles(allreduce_plan(n, algorithm, k, groups), elems, dev).max())
    done = _within_segments(dev, n, elems, algorithm, k, groups, segment)
    root = segment - 1
    spread = line_cycles(broadcast_plan(n, root), elems, dev, np.full(n, done[root]))
    return float(spread.max())


def band_allreduce_cycles(opts: Options, axis: str, elems: int, width: int) -> float:
    """
    Cycles on one line of the allreduce of `elems` values per PE within every band of
    `width` PEs along `axis` (`mesh.allreduce ... segment = width`, no multicast).
    """
    algorithm, k, groups = allreduce_choice(opts, axis, elems, width)
    return band_line_cycles(
        opts.device_spec, opts.n(axis), elems, algorithm, k, groups, width
    )


@lru_cache(maxsize=1024)
def band_line_cycles(
    device: str,
    n: int,
    elems: int,
    algorithm: str,
    k: int,
    groups: int | None,
    width: int,
) -> float:
    """The runtime's timing of an allreduce within every segment of `width` PEs."""
    dev = get_device(device)
    return float(_within_segments(dev, n, elems, algorithm, k, groups, width).max())


def _within_segments(
    dev: Device,
    n: int,
    elems: int,
    algorithm: str,
    k: int,
    groups: int | None,
    segment: int,
) -> npt.NDArray[np.float64]:
    """Each PE's end of an allreduce within every segment of `segment` PEs of a line."""
    inside = allreduce_plan(
        segment, algorithm, k, None if groups is None else min(groups, segment)
    )
    return line_cycles(segmented_plan(inside, n), elems, dev)


def reduction_allreduce(
    b: Builder,
    kind: str,
    value: SSAValue,
    axis: str,
    opts: Options,
    segment: int | None,
    spread: bool = True,
) -> SSAValue:
    """
    The allreduce of the partial results `value` of a reduction split over `axis`: over
    the whole axis, or within the `segment` of PEs holding data and then (`spread`)
    multicast from its last PE; without `spread`, within every segment (the bands of a
    banded layout, each reducing its own blocks).
    """
    elems = math.prod(static_shape(value, "value"))
    algorithm, k, groups = allreduce_choice(opts, axis, elems, segment)
    if segment is None:
        return b.insert(mesh.AllreduceOp(kind, value, axis, algorithm, k, groups)).result
    part = b.insert(
        mesh.AllreduceOp(kind, value, axis, algorithm, k, groups, segment)
    ).result
    if not spread:
        return part
    return b.insert(mesh.BroadcastOp(part, axis, const_index(b, segment - 1))).result
