"""
The stages of a collective's plan (`plmr.target.collectives`) as arrays over the grid:
who sends to whom at each stage, for the mesh runtime's vectorised timing and data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from xdsl.ir import Operation

from plmr.dialects import mesh
from plmr.target.collectives import Plan
from plmr.target.device import Device


@dataclass
class StageArrays:
    """One stage of a plan as index arrays over the positions of a line."""

    src: npt.NDArray[np.int64]
    dst: npt.NDArray[np.int64]
    hops: npt.NDArray[np.int64]
    load: npt.NDArray[np.int64]
    """Messages on the busiest link of each transfer's path (contention)."""
    combine: bool
    fraction: float
    streamed: bool
    unique_dst: bool = True
    """Every destination receives one message (plain fancy assignment suffices)."""
    counts: npt.NDArray[np.float64] | None = None
    """Messages each position receives (for combine costs)."""
    src_of: npt.NDArray[np.int64] | None = None
    """For unique-destination stages: the sender of each position (itself if none)."""
    hops_of: npt.NDArray[np.float64] | None = None
    """Hops to each position (-inf where nothing arrives)."""
    load_of: npt.NDArray[np.float64] | None = None
    dst_of: npt.NDArray[np.int64] | None = None
    """For stages where every position sends at most once: its receiver (itself if none)."""
    back_hops_of: npt.NDArray[np.float64] | None = None
    """Hops back from each sender's receiver (-inf where the position sends nothing)."""


def combine_along(
    kind: str, x: npt.NDArray[np.generic], axis: int
) -> npt.NDArray[np.generic]:
    """
    The combine of `kind` over the blocks stacked along `axis` (kept, of size 1): a sum,
    maximum or minimum, or for `softmax` the split-K rescaling of rows `[m, l, o...]`
    along the last axis: `M = max m`, `[l, o] = Σ [l, o]·exp(m − M)`.
    """
    if kind != "softmax":
        fn = {"sum": np.sum, "max": np.max, "min": np.min}[kind]
        return fn(x, axis=axis, keepdims=True).astype(x.dtype)
    values: npt.NDArray[np.float64] = x.astype(np.float64)
    m = values[..., :1]
    top: npt.NDArray[np.float64] = np.max(m, axis=axis, keepdims=True)
    # A row whose maxima are all -inf (nothing seen) keeps zero weights, not nan.
    unseen: npt.NDArray[np.bool_] = np.isneginf(top)
    safe = np.where(unseen, 0.0, top)
    with np.errstate(invalid="ignore", over="ignore"):
        weights = np.exp(m - safe)
        rest = np.sum(values[..., 1:] * weights, axis=axis, keepdims=True)
    return np.concatenate([top, rest], axis=-1).astype(x.dtype)


def combine_cycles(
    device: Device, kind: str, elems: int, width: int, fraction: float
) -> float:
    """
    Cycles to combine one received message of `elems · fraction` values into a block: one
    vector operation (an add, max or min), or for `softmax` (rows of `width` values) the
    rows' new maximum, the two differences and exponentials, and the two scaled sums of
    the rows' other values.
    """
    dev = device
    part = math.ceil(elems * fraction)
    if kind != "softmax":
        return dev.op_overhead_cycles + math.ceil(part / dev.simd_fp16)
    rows = math.ceil(part / width)
    per_rows = math.ceil(rows / dev.simd_fp16)
    per_rest = math.ceil((part - rows) / dev.simd_fp16)
    return 7 * dev.op_overhead_cycles + 5 * per_rows + 2 * per_rest


def segmented_data(
    op: Operation, lines: npt.NDArray[np.generic], segment: int, root: int | None
) -> npt.NDArray[np.generic]:
    """
    The data of a segmented broadcast, reduce or allreduce on `(lines, positions, ...)`
    blocks: the positions are viewed as `(segments, segment)` and each segment combines
    its own blocks; the positions past the last whole segment keep their block (a
    reduce's result is zero there, as on every PE that is not a segment's root).
    """
    n = lines.shape[1]
    whole = (n // segment) * segment
    out = lines.copy()
    seg = lines[:, :whole].reshape(lines.shape[0], n // segment, segment, *lines.shape[2:])
    if isinstance(op, mesh.BroadcastOp):
        assert root is not None
        done = np.broadcast_to(seg[:, :, root : root + 1], seg.shape)
    else:
        total = combine_along(getattr(op, "kind").data, seg, 2)
        if isinstance(op, mesh.AllreduceOp):
            done = np.broadcast_to(total, seg.shape)
        else:
            assert root is not None
            out[:, whole:] = 0
            done = np.zeros_like(seg)
            done[:, :, root : root + 1] = total
    out[:, :whole] = done.reshape(lines.shape[0], whole, *lines.shape[2:])
    return out


def line_cycles(
    plan: Plan,
    elems: int,
    device: Device,
    start: npt.NDArray[np.float64] | None = None,
    kind: str = "sum",
    width: int = 1,
) -> npt.NDArray[np.float64]:
    """
    When each position of a line finishes `plan` on blocks of `elems` values, started at
    `start` (zero): the mesh runtime's timing of a collective (hops, ramps, step
    overheads, wavelets of stages that are not streamed, combines) on one line, without
    flow control between repeated collectives. The planner's estimate of a collective;
    `kind` and `width` (the last dimension of a block) price a reduction's combines.
    """
    dev = device
    n = plan.n
    block_bytes = elems * dev.elem_bytes
    now = np.zeros(n) if start is None else start.astype(np.float64)
    now = now + dev.send_overhead_cycles
    streamed = False
    for index, st in enumerate(stage_arrays(plan)):
        if st.src.size == 0:
            continue
        wavelets = math.ceil(block_bytes * st.fraction / dev.link_bytes_per_cycle)
        delay = st.hops * dev.hop_cycles + 2 * dev.ramp_cycles
        if index:
            delay = delay + dev.step_overhead_cycles
        if not st.streamed:
            delay = delay + wavelets * st.load
        arrival = now[st.src] + delay
        np.maximum.at(now, st.dst, arrival)
        if st.combine:
            assert st.counts is not None
            per = combine_cycles(dev, kind, elems, width, st.fraction)
            now = now + st.counts * per
        streamed = streamed or st.streamed
    if streamed:
        now = now + math.ceil(block_bytes / dev.link_bytes_per_cycle)
    return now + dev.recv_overhead_cycles


_BUILT: dict[int, tuple[Plan, list[StageArrays]]] = {}
"""Arrays of the plans built so far (plans are cached and shared: keyed by identity, the
plan kept alive with its arrays)."""


def stage_arrays(plan: Plan) -> list[StageArrays]:
    """
    The stages of `plan` as arrays, built once per plan object: every collective with the
    same plan (the same algorithm on the same axis length) shares them; never modify them.
    """
    known = _BUILT.get(id(plan))
    if known is not None and known[0] is plan:
        return known[1]
    if len(_BUILT) >= 4096:
        _BUILT.clear()
    out = _build(plan)
    _BUILT[id(plan)] = (plan, out)
    return out


def _build(plan: Plan) -> list[StageArrays]:
    out: list[StageArrays] = []
    n = plan.n
    # A plan repeats its stage objects (a ring's steps): build each once.
    built: dict[int, StageArrays] = {}
    for stage in plan.stages:
        if id(stage) in built:
            out.append(built[id(stage)])
            continue
        srcs: list[int] = []
        dsts: list[int] = []
        # Directed link loads along the line: east links i -> i+1, west links i+1 -> i.
        east = np.zeros(max(n, 1), dtype=np.int64)
        west = np.zeros(max(n, 1), dtype=np.int64)
        for t in stage.transfers:
            far_e = max([d for d in t.dsts if d > t.src], default=t.src)
            far_w = min([d for d in t.dsts if d < t.src], default=t.src)
            east[t.src : far_e] += 1
            west[far_w : t.src] += 1
            for d in t.dsts:
                srcs.append(t.src)
                dsts.append(d)
        load: list[int] = []
        for s, d in zip(srcs, dsts, strict=True):
            seg = east[s:d] if d > s else west[d:s]
            load.append(int(seg.max()) if seg.size else 1)
        src = np.asarray(srcs, dtype=np.int64)
        dst = np.asarray(dsts, dtype=np.int64)
        combine = any(t.combine for t in stage.transfers)
        out.append(
            StageArrays(
                src,
                dst,
                np.abs(dst - src),
                np.asarray(load, dtype=np.int64),
                combine,
                stage.fraction,
                stage.streamed,
                unique_dst=len(set(dsts)) == len(dsts),
                counts=np.bincount(dst, minlength=n).astype(np.float64),
            )
        )
        st = out[-1]
        if st.unique_dst:
            src_of = np.arange(n, dtype=np.int64)
            hops_of = np.full(n, -np.inf)
            load_of = np.zeros(n)
            src_of[dst] = src
            hops_of[dst] = st.hops
            load_of[dst] = st.load
            st.src_of, st.hops_of, st.load_of = src_of, hops_of, load_of
        if len(set(srcs)) == len(srcs):
            dst_of = np.arange(n, dtype=np.int64)
            back = np.full(n, -np.inf)
            dst_of[src] = dst
            back[src] = st.hops
            st.dst_of, st.back_hops_of = dst_of, back
        built[id(stage)] = st
    return out
