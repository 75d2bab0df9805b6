"""
The mesh runtime: executes a `mesh.program` on a modelled wafer.

SPMD and vectorised: inside `mesh.spmd`, every value is one numpy array whose leading
axes are the grid `(rows, cols)`, so each op runs once for all PEs (the tile ops'
reference semantics with `lead = (rows, cols)`). Two modes share the interpreter:
`functional` carries data and computes exact numbers; `timing` carries shapes only
(zero-stride placeholder arrays), so full-wafer grids fit in memory.

Time: every PE has a clock. A compute op advances it by its per-op overhead plus
`ceil(flops / SIMD width)` (or its SRAM traffic, if larger). A collective runs its plan
(`plmr.runtime.collectives`) stage by stage: a message leaves when its sender reaches
the op, pays the send overhead, the ramp twice, one `hop_cycles` per router, and one
cycle per 32-bit wavelet (times the load of the busiest link on its path, for
contention; once per chain for streamed chains); a receiver waits for its message and
then combines it. Point-to-point `mesh.send` / `mesh.recv` follow the route rules; a
receive that no message can satisfy is a deadlock, reported with the waiting PEs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from xdsl.dialects import arith
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp, TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from plmr.dialects import mesh, tile
from plmr.dialects.graph import static_shape
from plmr.errors import PlmrError
from plmr.runtime.collectives import Plan
from plmr.runtime.device import Device, get_device
from plmr.runtime.memory import check_host_memory
from plmr.runtime.reference import Array, ReferenceEvaluator, dense_to_numpy, tensor_dtype
from plmr.runtime.report import OpTime, Report
from plmr.runtime.routing import RouteTable
from plmr.runtime.sram import SramReport, spmd_sram
from plmr.runtime.steady import (
    STAGES,
    Extrapolated,
    ExtrapolationLog,
    LayerRepeat,
    LayerRunner,
    chain_power,
    chain_run,
    external_operands,
    iteration_invariant,
    watch_loop,
)
from plmr.runtime.trace import TraceRecorder

FloatArray = npt.NDArray[np.floating[Any]]

CLOCK = np.float64
"""Clocks are float64: their rounding (1e-16 relative per operation) stays far below a
cycle even on 10⁹-cycle programs, and periodic loops show equal increments
(`plmr.runtime.steady`)."""

MODES = ("functional", "timing")


# ---------------------------------------------------------------------------------------
# Placement
# ---------------------------------------------------------------------------------------


def scatter_array(
    x: Array, layout: mesh.LayoutAttr, grid: tuple[int, int], pad: float = 0.0
) -> Array:
    """Host tensor -> per-PE blocks of shape `(rows, cols, *block)`."""
    shape = x.shape
    block = mesh.block_shape(shape, layout, grid)
    pads = [
        (0, 0) if a == "-" else (0, b * mesh.axis_size(a, grid) - s)
        for s, b, a in zip(shape, block, layout.axes, strict=True)
    ]
    if any(p[1] for p in pads):
        x = np.pad(x, pads, constant_values=pad)
    split: list[int] = []
    axis_pos: dict[str, int] = {}
    for s, b, a in zip(x.shape, block, layout.axes, strict=True):
        if a == "-":
            split.append(s)
            continue
        n = mesh.axis_size(a, grid)
        if layout.mode.data == "interleaved":
            split += [b, n]
            axis_pos[a] = len(split) - 1
        else:
            split += [n, b]
            axis_pos[a] = len(split) - 2
    y = x.reshape(split)
    block_axes = [i for i in range(len(split)) if i not in axis_pos.values()]
    lead: list[int] = []
    for a in ("y", "x"):
        if a in axis_pos:
            lead.append(axis_pos[a])
    y = np.transpose(y, [*lead, *block_axes])
    for i, a in enumerate(("y", "x")):
        if a not in axis_pos:
            y = np.expand_dims(y, i)
    out = np.ascontiguousarray(np.broadcast_to(y, (grid[0], grid[1], *block)))
    if layout.skew.data and layout.chunks.data:
        dim = layout.dim_of(layout.skew.data)
        assert dim is not None
        rows, cols, units = chunk_index(layout, grid)
        moved = _chunked(out, dim, layout.chunks.data, grid, layout.skew.data)
        picked = moved[rows, cols, units]
        return _unchunked(picked, dim, out.shape)
    if layout.skew.data:
        rows, cols = skew_index(layout, grid)
        out = np.ascontiguousarray(out[rows, cols])
    return out


def _chunked(
    blocks: Array, dim: int, chunks: int, grid: tuple[int, int], axis: str
) -> Array:
    """(H, W, ..., S, ...) -> (H, W, per-PE chunks, ..., chunk size, ...)."""
    n = grid[1] if axis == "x" else grid[0]
    per = chunks // n
    size = blocks.shape[2 + dim] // per
    shape = (*blocks.shape[: 2 + dim], per, size, *blocks.shape[3 + dim :])
    return np.moveaxis(blocks.reshape(shape), 2 + dim, 2)


def _unchunked(moved: Array, dim: int, shape: Sequence[int]) -> Array:
    return np.ascontiguousarray(np.moveaxis(moved, 2, 2 + dim).reshape(shape))


def chunk_index(
    layout: mesh.LayoutAttr, grid: tuple[int, int]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """For a chunked skew: (row, col, local chunk) of the standard placement per chunk."""
    from plmr.runtime.collectives import ring_order

    ny, nx = grid
    ring = layout.ring.data
    chunks = layout.chunks.data
    ord_y = np.asarray(ring_order(ring, ny) if ny >= 3 or ring == "torus" else range(ny))
    ord_x = np.asarray(ring_order(ring, nx) if nx >= 3 or ring == "torus" else range(nx))
    pos_y, pos_x = np.argsort(ord_y), np.argsort(ord_x)
    per_x, per_y = chunks // nx, chunks // ny
    if layout.skew.data == "x":
        yy, xx, uu = np.indices((ny, nx, per_x), dtype=np.int64)
        c = (pos_x[xx] * per_x + uu + pos_y[yy] * per_y) % chunks
        return yy, c // per_x, c % per_x
    yy, xx, uu = np.indices((ny, nx, per_y), dtype=np.int64)
    c = (pos_y[yy] * per_y + uu + pos_x[xx] * per_x) % chunks
    return c // per_y, xx, c % per_y


def skew_index(
    layout: mesh.LayoutAttr, grid: tuple[int, int]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """For a skewed layout: the standard-placement PE whose block each PE holds."""
    from plmr.runtime.collectives import ring_order

    ny, nx = grid
    ring = layout.ring.data
    ord_y = np.asarray(ring_order(ring, ny) if ny >= 3 or ring == "torus" else range(ny))
    ord_x = np.asarray(ring_order(ring, nx) if nx >= 3 or ring == "torus" else range(nx))
    pos_y = np.argsort(ord_y)
    pos_x = np.argsort(ord_x)
    yy, xx = np.indices(grid, dtype=np.int64)
    if layout.skew.data == "x":
        return yy, ord_x[(pos_x[xx] + pos_y[yy]) % nx]
    return ord_y[(pos_y[yy] + pos_x[xx]) % ny], xx


def gather_array(
    blocks: Array, layout: mesh.LayoutAttr, shape: Sequence[int], grid: tuple[int, int]
) -> Array:
    """Per-PE blocks -> host tensor (replicas from the first PE of replicated axes)."""
    block = list(blocks.shape[2:])
    arr = blocks
    if layout.skew.data and layout.chunks.data:
        dim = layout.dim_of(layout.skew.data)
        assert dim is not None
        rows, cols, units = chunk_index(layout, grid)
        moved = _chunked(arr, dim, layout.chunks.data, grid, layout.skew.data)
        standard = np.empty_like(moved)
        standard[rows, cols, units] = moved
        arr = _unchunked(standard, dim, arr.shape)
    elif layout.skew.data:
        rows, cols = skew_index(layout, grid)
        unskewed = np.empty_like(arr)
        unskewed[rows, cols] = arr
        arr = unskewed
    if layout.dim_of("x") is None:
        arr = arr[:, :1]
    if layout.dim_of("y") is None:
        arr = arr[:1]
    # arr: (ny, nx, *block) with ny/nx = 1 when replicated.
    out = arr
    rank = len(block)
    # Move each mesh axis next to the tensor dim it splits, then merge.
    order: list[int] = []
    merged: list[int] = []
    for d in range(rank):
        a = layout.axes[d]
        if a == "-":
            order.append(2 + d)
            merged.append(block[d])
            continue
        lead_axis = 0 if a == "y" else 1
        n = out.shape[lead_axis]
        if layout.mode.data == "interleaved":
            order += [2 + d, lead_axis]
        else:
            order += [lead_axis, 2 + d]
        merged.append(n * block[d])
    rest = [i for i in (0, 1) if i not in order]
    out = np.transpose(out, [*order, *rest]).reshape(merged)
    # `reshape`: ascontiguousarray makes a rank-0 tensor (a numpy scalar here) rank 1.
    return np.ascontiguousarray(out[tuple(slice(0, s) for s in shape)]).reshape(shape)


# ---------------------------------------------------------------------------------------
# Collective execution
# ---------------------------------------------------------------------------------------


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


def stage_arrays(plan: Plan) -> list[StageArrays]:
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


# ---------------------------------------------------------------------------------------
# The SPMD evaluator
# ---------------------------------------------------------------------------------------


@dataclass
class Clocks:
    """Per-PE time, in cycles: when the compute engine is free, and what it did."""

    ce_free: FloatArray
    compute: float
    """Every PE runs the same ops on blocks of the same shapes: one number for all."""
    comm_busy: FloatArray
    finish: FloatArray

    @staticmethod
    def zeros(grid: tuple[int, int]) -> Clocks:
        def zero() -> FloatArray:
            return np.zeros(grid, dtype=CLOCK)

        return Clocks(zero(), 0.0, zero(), zero())


@dataclass
class Traffic:
    bytes: float = 0.0
    hop_bytes: float = 0.0
    messages: int = 0


@dataclass
class _Pending:
    """Messages that arrived at PEs on one color and wait to be received."""

    has: npt.NDArray[np.bool_]
    data: Array | None
    arrival: FloatArray


Ready = FloatArray | float


class SpmdEvaluator(ReferenceEvaluator):
    """
    Runs `mesh.spmd` bodies for all PEs at once. Time is dataflow: every value has a
    per-PE ready time; an op starts when its operands are ready and the PE's compute
    engine is free, so communication overlaps with independent computation (e.g. the
    shifts of MeshGEMM's next step with this step's block product).
    """

    def __init__(self, runtime: MeshRuntime, program: mesh.ProgramOp):
        super().__init__(None, lead=runtime.grid)
        self.runtime = runtime
        self.program = program
        self.ready: dict[SSAValue, Ready] = {}
        self.eval_impls.update(
            {
                tile.ForOp: _run_for,
                mesh.ShiftOp: _run_collective,
                mesh.BroadcastOp: _run_collective,
                mesh.AllreduceOp: _run_collective,
                mesh.ReduceOp: _run_collective,
                mesh.SendOp: _run_send,
                mesh.RecvOp: _run_recv,
            }
        )

    def ready_of(self, values: Sequence[SSAValue]) -> Ready:
        """The latest ready time of `values` (clocks are never negative: 0 is none)."""
        out: Ready | None = None
        for v in values:
            r = self.ready.get(v)
            if r is None or r is out or (isinstance(r, float) and r <= 0.0):
                continue
            out = r if out is None else np.maximum(out, r)
        return 0.0 if out is None else out

    def run_op(self, op: Operation, operands: list[Any]) -> list[Any]:
        rt = self.runtime
        in_map_body = isinstance(op.parent_op(), tile.MapOp)
        if rt.mode == "timing" and _is_compute(op):
            results = [rt.placeholder(r) for r in op.results]
        else:
            results = super().run_op(op, operands)
        if in_map_body or isinstance(op, tile.ForOp | mesh.CommOp):
            return results
        cycles = rt.compute_cycles(op)
        if not cycles:
            ready = self.ready_of(list(op.operands))
            for r in op.results:
                self.ready[r] = ready
            return results
        ready = self.ready_of(list(op.operands))
        free = rt.clocks.ce_free
        # The engine's clock is never negative: max(0, free) and max(free, free) are free.
        start = (
            free if ready is free or isinstance(ready, float) else np.maximum(ready, free)
        )
        if isinstance(ready, float) and ready > 0.0:
            start = np.maximum(ready, free)
        if rt.recorder is not None:
            rt.recorder.record(op.name, start, start + cycles, rt.grid)
        end = start + cycles
        rt.clocks.ce_free = end
        rt.clocks.compute += cycles
        rt.account(op, cycles)
        for r in op.results:
            self.ready[r] = end
        return results


def _is_compute(op: Operation) -> bool:
    if isinstance(op, tile.ForOp | mesh.CommOp):
        return False
    return isinstance(op, tile.TileOp)


def _uniform_index(value: Any, what: str) -> int:
    arr = np.asarray(value)
    if arr.ndim == 0:
        return int(arr)
    first = arr.reshape(-1)[0]
    if not np.all(arr == first):
        raise PlmrError(f"{what} must be the same on every PE")
    return int(first)


def _run_for(ev: ReferenceEvaluator, op: Operation, args: list[Any]) -> list[Any]:
    assert isinstance(ev, SpmdEvaluator)
    assert isinstance(op, tile.ForOp)
    block = op.body.block
    carried_ready = [ev.ready.get(v, 0.0) for v in op.iter_args]
    values = list(args)
    yield_op = block.last_op
    assert yield_op is not None
    # Timing mode: once the iterations are periodic, the rest are extrapolated.
    watch = watch_loop(ev.runtime, op, ev.ready)
    trips = range(op.lb.value.data, op.ub.value.data, op.step.value.data)
    for n, i in enumerate(trips):
        ev.ready[block.args[0]] = 0.0
        for arg, r in zip(block.args[1:], carried_ready, strict=True):
            ev.ready[arg] = r
        if watch is not None:
            watch.begin_iteration()
        values = ev.run_block(block, [np.int64(i), *values])
        carried_ready = [ev.ready.get(v, 0.0) for v in yield_op.operands]
        if watch is not None:
            jumped = watch.end_iteration(carried_ready, values, len(trips) - n - 1)
            if jumped is not None:
                carried_ready = jumped
                break
    for res, r in zip(op.res, carried_ready, strict=True):
        ev.ready[res] = r
    return values


def _run_collective(ev: ReferenceEvaluator, op: Operation, args: list[Any]) -> list[Any]:
    assert isinstance(ev, SpmdEvaluator)
    rt = ev.runtime
    values = dict(zip(op.operands, args, strict=True))
    source: SSAValue = getattr(op, "input")
    x = values[source]
    root: int | None = None
    if isinstance(op, mesh.BroadcastOp | mesh.ReduceOp):
        root = _uniform_index(values[op.root], f"the root of '{op.name}'")
        n = mesh.axis_size(op.axis.data, rt.grid)
        if not 0 <= root < n:
            raise PlmrError(f"root {root} is outside the {n} PEs along {op.axis.data}")
    result = rt.collective_data(op, x, root) if rt.mode == "functional" else None
    ev.ready[op.results[0]] = rt.collective_time(op, root, ev.ready_of([source]))
    if result is None:
        return [rt.placeholder(op.results[0])]
    return [result]


def _run_send(ev: ReferenceEvaluator, op: Operation, args: list[Any]) -> list[Any]:
    assert isinstance(ev, SpmdEvaluator)
    assert isinstance(op, mesh.SendOp)
    ev.runtime.send(
        op, args[0], args[1] if len(args) > 1 else None, ev.ready_of([op.input])
    )
    return []


def _run_recv(ev: ReferenceEvaluator, op: Operation, args: list[Any]) -> list[Any]:
    assert isinstance(ev, SpmdEvaluator)
    assert isinstance(op, mesh.RecvOp)
    data, ready = ev.runtime.recv(op, args[0] if args else None)
    ev.ready[op.result] = ready
    return [data]


# ---------------------------------------------------------------------------------------
# The runtime
# ---------------------------------------------------------------------------------------


@dataclass
class MeshRuntime:
    """Executes mesh programs on a device model."""

    device: Device
    mode: str = "functional"
    relay: bool = False
    grid: tuple[int, int] = (0, 0)
    clocks: Clocks = field(default_factory=lambda: Clocks.zeros((1, 1)))
    traffic: Traffic = field(default_factory=Traffic)
    op_times: dict[str, OpTime] = field(default_factory=dict[str, OpTime])
    table: RouteTable | None = None
    relayed: set[Operation] = field(default_factory=set[Operation])
    sram: SramReport = field(default_factory=SramReport)
    _plans: dict[tuple[int, int | None], list[StageArrays]] = field(
        default_factory=dict[tuple[int, int | None], list[StageArrays]]
    )
    _pending: dict[int, list[_Pending]] = field(default_factory=dict[int, list[_Pending]])
    recorder: TraceRecorder | None = None
    """Collects a timeline of selected PEs (for --trace)."""
    track_busy: bool | None = None
    """Keep the per-PE sum of communication durations (two more passes per collective);
    by default only on grids up to 256×256 PEs, where it is cheap."""
    _cycles: dict[Operation, float] = field(default_factory=dict[Operation, float])
    _elems: dict[Operation, int] = field(default_factory=dict[Operation, int])
    _placeholders: dict[SSAValue, Array] = field(default_factory=dict[SSAValue, Array])
    _last_issue: dict[Operation, FloatArray] = field(
        default_factory=dict[Operation, FloatArray]
    )
    exact: bool = False
    """Step every loop iteration; by default timing mode extrapolates periodic loops
    (`plmr.runtime.steady`). Functional mode always steps."""
    extrapolation: ExtrapolationLog = field(default_factory=ExtrapolationLog)
    _invariant: dict[Operation, bool] = field(default_factory=dict[Operation, bool])
    _externals: dict[Operation, list[SSAValue]] = field(
        default_factory=dict[Operation, list[SSAValue]]
    )
    layers: LayerRepeat | None = None
    """Timing mode: run the program's window of one layer for every further layer of
    the model (`plmr.runtime.steady.LayerRepeat`), extrapolating once layers repeat."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise PlmrError(f"unknown mode '{self.mode}' (functional or timing)")

    # -- entry point ---------------------------------------------------------------------

    def run(
        self, module: ModuleOp, name: str | None, inputs: Sequence[Array]
    ) -> tuple[list[Array], Report]:
        program = find_program(module, name)
        return self.run_program(program, inputs)

    def run_program(
        self, program: mesh.ProgramOp, inputs: Sequence[Array]
    ) -> tuple[list[Array], Report]:
        from plmr.passes.mesh_route import route_program

        started = time.perf_counter()
        self.grid = program.grid_shape
        rows, cols = self.grid
        if rows > self.device.height or cols > self.device.width:
            raise PlmrError(
                f"@{program.sym_name.data} needs a {rows}x{cols} grid, but {self.device.name} "
                f"has {self.device.height}x{self.device.width} PEs"
            )
        self.clocks = Clocks.zeros(self.grid)
        if self.track_busy is None:
            self.track_busy = rows * cols <= 256 * 256
        self.traffic = Traffic()
        self.op_times = {}
        self._plans = {}
        self._pending = {}
        self._last_issue = {}
        self._placeholders = {}
        self.extrapolation = ExtrapolationLog()
        routing = route_program(program, self.relay, self.device)
        self.table = routing.table
        self.relayed = routing.relayed
        counts = routing.table.colors_per_router()
        max_routes = int(counts.max()) if counts.size else 0
        if max_routes > self.device.usable_colors and not self.relay:
            y, x = np.unravel_index(int(np.argmax(counts)), counts.shape)
            raise PlmrError(
                f"router ({y}, {x}) of @{program.sym_name.data} needs {max_routes} colors, "
                f"but {self.device.name} routes at most {self.device.usable_colors} "
                "(use relay mode or fewer routes)"
            )
        check_host_memory(program, self.mode)
        self.sram = SramReport()
        for spmd in [op for op in program.walk() if isinstance(op, mesh.SpmdOp)]:
            report = spmd_sram(spmd, self.device)
            if report.peak_bytes > self.sram.peak_bytes:
                self.sram = report
        if self.sram.peak_bytes > self.device.sram_bytes:
            live = ", ".join(f"{n} ({b} B)" for n, b in self.sram.live[:8])
            raise PlmrError(
                f"SRAM overflow in @{program.sym_name.data}: every PE (e.g. PE (0, 0)) needs "
                f"{self.sram.peak_bytes} B at `{self.sram.at}`, but {self.device.name} has "
                f"{self.device.sram_bytes} B per PE; live: {live}. Use a larger grid or "
                "smaller blocks"
            )
        outputs = self._execute(program, inputs)
        leftover = [c for c, q in self._pending.items() if q]
        if leftover:
            raise PlmrError(
                f"messages on color {leftover[0]} were sent but never received (a "
                "mesh.recv is missing)"
            )
        finish = np.maximum(self.clocks.finish, self.clocks.ce_free)
        report = Report.build(
            program.sym_name.data,
            self.device,
            self.grid,
            self.mode,
            finish,
            np.full(self.grid, self.clocks.compute, dtype=CLOCK),
            self.clocks.comm_busy if self.track_busy else None,
            self.traffic.bytes,
            self.traffic.hop_bytes,
            self.sram,
            max_routes,
            self.op_times,
            time.perf_counter() - started,
        )
        report.relayed_collectives = len(self.relayed)
        report.exact = self.exact or self.mode != "timing"
        report.extrapolated_loops = self.extrapolation.loops
        report.extrapolated_iterations = self.extrapolation.iterations
        report.extrapolated_layers = self.extrapolation.layers
        report.extrapolated_stages = self.extrapolation.stages
        report.simulated_layers = self.extrapolation.simulated_layers
        return outputs, report

    def _execute(self, program: mesh.ProgramOp, inputs: Sequence[Array]) -> list[Array]:
        block = program.body.block
        if len(inputs) != len(block.args):
            raise PlmrError(
                f"@{program.sym_name.data} takes {len(block.args)} inputs, got {len(inputs)}"
            )
        env: dict[SSAValue, Any] = {}
        ready: dict[SSAValue, Ready] = {}
        for arg, value in zip(block.args, inputs, strict=True):
            want = static_shape(arg, "input")
            if tuple(np.shape(value)) != want:
                raise PlmrError(
                    f"input %{arg.name_hint or '?'} has shape {np.shape(value)}, expected {want}"
                )
            env[arg] = np.asarray(value)
        ops = list(block.ops)
        layers: LayerRunner | None = None
        for index, op in enumerate(ops):
            if isinstance(op, mesh.ReturnOp):
                return [env[v] for v in op.values]
            if self.layers is not None and index == self.layers.start:
                layers = LayerRunner(self, program, ops, self.layers)
            self.program_op(program, op, env, ready)
            if layers is not None and index == layers.plan.stop - 1:
                # The window of one layer ran once; run it for the model's other layers.
                layers.run(env, ready)
        raise PlmrError(f"@{program.sym_name.data} has no mesh.return")

    def program_op(
        self,
        program: mesh.ProgramOp,
        op: Operation,
        env: dict[SSAValue, Any],
        ready: dict[SSAValue, Ready],
    ) -> None:
        """Runs one op of a program's body (not its mesh.return)."""
        if isinstance(op, mesh.RouteOp):
            return
        if isinstance(op, arith.ConstantOp) and isinstance(
            op.value, DenseIntOrFPElementsAttr
        ):
            # A host constant (e.g. a weight), placed by a later mesh.scatter.
            env[op.result] = dense_to_numpy(op.value)
        elif isinstance(op, mesh.ScatterOp):
            env[op.result] = self._scatter(op, env[op.input])
        elif isinstance(op, mesh.GatherOp):
            env[op.result] = self._gather(op, env[op.input])
        elif isinstance(op, mesh.SpmdOp):
            ev = SpmdEvaluator(self, program)
            args = list(op.body.block.args)
            for arg, value in zip(args[2:], op.inputs, strict=True):
                ev.ready[arg] = ready.get(value, 0.0)
            yy, xx = np.indices(self.grid, dtype=np.int64)
            results = ev.run_block(op.body.block, [yy, xx, *(env[v] for v in op.inputs)])
            yield_op = op.body.block.last_op
            assert yield_op is not None
            for value, result, yielded in zip(
                op.outputs, results, yield_op.operands, strict=True
            ):
                env[value] = result
                r = ev.ready.get(yielded, 0.0)
                ready[value] = r
                self.clocks.finish = np.maximum(self.clocks.finish, r)
        else:
            raise PlmrError(
                f"'{op.name}' cannot appear directly in a mesh.program (put it inside "
                "a mesh.spmd body)"
            )

    # -- steady-state extrapolation (plmr.runtime.steady) --------------------------------

    def loop_invariant(self, op: tile.ForOp) -> bool:
        cached = self._invariant.get(op)
        if cached is None:
            cached = self._invariant[op] = iteration_invariant(op)
        return cached

    def loop_externals(self, op: tile.ForOp) -> list[SSAValue]:
        cached = self._externals.get(op)
        if cached is None:
            cached = self._externals[op] = external_operands(op)
        return cached

    def forget_issue(self, op: Operation) -> None:
        """Drops a collective's flow-control state (the next run is another op's)."""
        self._last_issue.pop(op, None)

    def on_layer(self, layer: int) -> None:
        """Called before the window of one layer runs again for layer `layer`."""

    def pending_messages(self) -> list[list[_Pending]]:
        return list(self._pending.values())

    def last_issue(self, op: Operation) -> FloatArray | None:
        return self._last_issue.get(op)

    def set_last_issue(self, op: Operation, issue: FloatArray) -> None:
        self._last_issue[op] = issue

    def log_extrapolation(self, jump: Extrapolated) -> None:
        self.extrapolation.add(jump)
        if self.recorder is not None:
            self.recorder.record_extrapolated(
                jump.what, jump.iterations, jump.start, jump.end, self.grid
            )

    # -- data placement --------------------------------------------------------------

    def placeholder(self, value: SSAValue) -> Array:
        """A zero-stride array with the value's per-PE shape (timing mode)."""
        cached = self._placeholders.get(value)
        if cached is None:
            cached = self._make_placeholder(value)
            self._placeholders[value] = cached
        return cached

    def _make_placeholder(self, value: SSAValue) -> Array:
        t = value.type
        if not isinstance(t, TensorType):
            return np.zeros(self.grid, dtype=np.int64)
        shape = self.grid + static_shape(value, "value")
        return np.broadcast_to(np.zeros((), dtype=tensor_dtype(cast(Attribute, t))), shape)

    def _scatter(self, op: mesh.ScatterOp, x: Array) -> Array:
        d = op.result.type
        assert isinstance(d, mesh.DistType)
        if self.mode == "timing":
            block = d.block_shape(self.grid)
            return np.broadcast_to(np.zeros((), dtype=x.dtype), self.grid + block)
        pad = 0.0 if op.pad is None else op.pad.value.data
        return scatter_array(x, d.layout, self.grid, pad)

    def _gather(self, op: mesh.GatherOp, blocks: Array) -> Array:
        d = op.input.type
        assert isinstance(d, mesh.DistType)
        shape = d.tensor.get_shape()
        if self.mode == "timing":
            return np.broadcast_to(np.zeros((), dtype=blocks.dtype), shape)
        return gather_array(blocks, d.layout, shape, self.grid)

    # -- compute -------------------------------------------------------------------------

    def compute_cycles(self, op: Operation) -> float:
        cached = self._cycles.get(op)
        if cached is None:
            cached = self._compute_cycles(op)
            self._cycles[op] = cached
        return cached

    def _compute_cycles(self, op: Operation) -> float:
        return op_cycles(self.device, op)

    def account(self, op: Operation, cycles: float | FloatArray) -> None:
        entry = self.op_times.setdefault(op.name, OpTime(op.name))
        entry.count += 1
        entry.cycles += float(np.max(cycles))

    # -- collectives ---------------------------------------------------------------------

    def _line_view(self, a: Array, axis: str) -> Array:
        """(rows, cols, ...) -> (lines, positions, ...) for the axis."""
        return a if axis == "x" else np.swapaxes(a, 0, 1)

    def collective_data(self, op: Operation, x: Array, root: int | None) -> Array:
        axis = getattr(op, "axis").data
        lines = self._line_view(np.asarray(x), axis)
        n = lines.shape[1]
        if isinstance(op, mesh.ShiftOp):
            from plmr.runtime.collectives import shift_plan

            plan = shift_plan(op.ring.data, n, op.distance.value.data)
            out = lines
            for stage in plan.stages:
                src = np.full(n, -1, dtype=np.int64)
                for t in stage.transfers:
                    for d in t.dsts:
                        src[d] = t.src
                nxt = np.zeros_like(out)
                has = src >= 0
                nxt[:, has] = out[:, src[has]]
                out = nxt
            result = out
        elif isinstance(op, mesh.BroadcastOp):
            assert root is not None
            result = np.broadcast_to(lines[:, root : root + 1], lines.shape).copy()
        else:
            kind = getattr(op, "kind").data
            fn = {"sum": np.sum, "max": np.max, "min": np.min}[kind]
            total = fn(lines, axis=1, keepdims=True).astype(lines.dtype)
            if isinstance(op, mesh.AllreduceOp):
                result = np.broadcast_to(total, lines.shape).copy()
            else:
                assert root is not None
                result = np.zeros_like(lines)
                result[:, root : root + 1] = total
        return self._line_view(result, axis)

    def _stages(self, op: Operation, root: int | None) -> list[StageArrays]:
        from plmr.passes.mesh_route import plan_of

        key = (id(op), root)
        cached = self._plans.get(key)
        if cached is None:
            cached = stage_arrays(plan_of(op, self.grid, root))
            self._plans[key] = cached
        return cached

    def collective_time(self, op: Operation, root: int | None, ready: Ready) -> FloatArray:
        """Runs the plan's stages from when the input is ready; returns the result's ready."""
        dev = self.device
        axis = getattr(op, "axis").data
        elems = self._elems.get(op)
        if elems is None:
            elems = math.prod(static_shape(op.results[0], "value"))
            self._elems[op] = elems
        block_bytes = elems * dev.elem_bytes
        hop = dev.hop_cycles + (dev.relay_cycles if op in self.relayed else 0.0)
        issue = np.maximum(ready, self.clocks.ce_free)
        stages = self._stages(op, root)
        issue = self._flow_control(op, stages, issue, axis, hop)
        sent = issue + dev.send_overhead_cycles
        now = np.broadcast_to(sent, self.grid)
        # Positions along the axis are columns (x) or rows (y); no transposes.
        pos_axis = 1 if axis == "x" else 0
        lines = self.grid[1 - pos_axis]

        def along(v: npt.NDArray[Any]) -> npt.NDArray[Any]:
            return v if pos_axis == 1 else v[:, None]

        streamed_any = False
        reduces = False
        resume = 0
        for index, st in enumerate(stages):
            if index < resume or st.src.size == 0:
                continue
            # A chain of identical stages (a ring's steps) is one closed-form jump.
            repeat = 1 if self.mode != "timing" or self.exact else chain_run(stages, index)
            msg_bytes = block_bytes * st.fraction
            wavelets = math.ceil(msg_bytes / dev.link_bytes_per_cycle)
            delay = st.hops * hop + 2 * dev.ramp_cycles
            if index:
                delay = delay + dev.step_overhead_cycles
            if not st.streamed:
                delay = delay + wavelets * st.load
            if st.unique_dst:
                assert st.src_of is not None
                assert st.hops_of is not None
                assert st.load_of is not None
                delay_of = st.hops_of * hop + 2 * dev.ramp_cycles
                if index:
                    delay_of = delay_of + dev.step_overhead_cycles
                if not st.streamed:
                    delay_of = delay_of + wavelets * st.load_of
                if repeat > 1:
                    add = self._combine_cost(st, elems) if st.combine else 0.0
                    now = chain_power(
                        now, st.src_of, delay_of.astype(CLOCK), add, repeat, pos_axis
                    )
                    resume = index + repeat
                    self.log_extrapolation(Extrapolated(STAGES, repeat - 1, now, now))
                else:
                    arrival = np.take(now, st.src_of, axis=pos_axis)
                    arrival += along(delay_of.astype(CLOCK))
                    now = np.maximum(now, arrival)
            else:
                arrival = np.take(now, st.src, axis=pos_axis)
                arrival += along(delay.astype(CLOCK))
                now = np.array(now, dtype=CLOCK)
                target = (slice(None), st.dst) if pos_axis == 1 else (st.dst,)
                np.maximum.at(now, target, arrival)  # pyright: ignore[reportArgumentType]
            if st.combine:
                reduces = True
                if repeat == 1:
                    assert st.counts is not None
                    per = self._combine_cost(st, elems)
                    now = now + along((st.counts * per).astype(CLOCK))
            streamed_any = streamed_any or st.streamed
            n_msgs = st.src.size * lines * repeat
            self.traffic.bytes += msg_bytes * n_msgs
            self.traffic.hop_bytes += msg_bytes * float(st.hops.sum()) * lines * repeat
            self.traffic.messages += n_msgs
        if streamed_any:
            now = now + math.ceil(block_bytes / dev.link_bytes_per_cycle)
        now = now + dev.recv_overhead_cycles
        done = np.asarray(now, dtype=CLOCK)
        # The compute engine issues the send; reductions also keep it busy combining.
        self.clocks.ce_free = done.copy() if reduces else np.broadcast_to(sent, self.grid)
        if self.recorder is not None:
            self.recorder.record(op.name, issue, done, self.grid)
        if self.track_busy:
            self.clocks.comm_busy += done - issue
        # Time by op is sampled at PE (0, 0) (a full reduction per op would double the cost).
        self.account(op, float(done[0, 0]) - float(np.broadcast_to(issue, self.grid)[0, 0]))
        return done

    def _combine_cost(self, st: StageArrays, elems: int) -> float:
        """Cycles to combine one received message of a reducing stage."""
        dev = self.device
        return dev.op_overhead_cycles + math.ceil(elems * st.fraction / dev.simd_fp16)

    def _flow_control(
        self,
        op: Operation,
        stages: list[StageArrays],
        issue: FloatArray,
        axis: str,
        hop: float,
    ) -> FloatArray:
        """
        Double buffering: a PE may run at most one message ahead of each receiver of its
        first stage. When the same collective runs again (e.g. the next step of a loop), a
        sender waits until its receivers issued their previous instance and the credit
        travelled back to it.
        """
        issue = np.asarray(np.broadcast_to(issue, self.grid), dtype=CLOCK)
        previous = self._last_issue.get(op)
        self._last_issue[op] = issue
        first = next((st for st in stages if st.src.size), None)
        if previous is None or first is None:
            return issue
        pos_axis = 1 if axis == "x" else 0
        if first.dst_of is not None and first.back_hops_of is not None:
            delay_of = (first.back_hops_of * hop + 2 * self.device.ramp_cycles).astype(
                CLOCK
            )
            credit = np.take(previous, first.dst_of, axis=pos_axis)
            credit += delay_of if pos_axis == 1 else delay_of[:, None]
            issue = np.maximum(issue, credit)
            self._last_issue[op] = issue
            return issue
        credit = np.take(previous, first.dst, axis=pos_axis)
        delay = (first.hops * hop + 2 * self.device.ramp_cycles).astype(CLOCK)
        credit += delay if pos_axis == 1 else delay[:, None]
        need = np.full(self.grid, -np.inf, dtype=CLOCK)
        if len(set(first.src.tolist())) == first.src.size:
            index = (slice(None), first.src) if pos_axis == 1 else (first.src,)
            need[index] = credit
        else:
            moved = np.moveaxis(need, pos_axis, 0)
            np.maximum.at(moved, first.src, np.moveaxis(credit, pos_axis, 0))  # pyright: ignore[reportArgumentType]
        issue = np.maximum(issue, need)
        self._last_issue[op] = issue
        return issue

    # -- point to point ------------------------------------------------------------------

    def send(self, op: mesh.SendOp, value: Array, mask: Array | None, ready: Ready) -> None:
        assert self.table is not None
        dev = self.device
        color = op.color.value.data
        sources = np.ones(self.grid, dtype=bool) if mask is None else np.asarray(mask, bool)
        sources = np.broadcast_to(sources, self.grid)
        delivery = self.table.trace(color, sources)
        block_bytes = math.prod(static_shape(op.input, "input")) * dev.elem_bytes
        wavelets = math.ceil(block_bytes / dev.link_bytes_per_cycle)
        load = int(delivery.link_load.max()) if delivery.link_load.size else 1
        issue = np.maximum(ready, self.clocks.ce_free)
        sent = np.where(sources, issue + dev.send_overhead_cycles, self.clocks.ce_free)
        arrival = (
            sent[delivery.src_y, delivery.src_x]
            + 2 * dev.ramp_cycles
            + delivery.hops * dev.hop_cycles
            + wavelets * max(load, 1)
        )
        targets = set(zip(delivery.dst_y.tolist(), delivery.dst_x.tolist(), strict=True))
        if len(targets) != delivery.dst_y.size:
            raise PlmrError(
                f"color {color}: several messages reach the same PE at once; give each "
                "sender its own color"
            )
        has = np.zeros(self.grid, dtype=bool)
        times = np.zeros(self.grid, dtype=CLOCK)
        has[delivery.dst_y, delivery.dst_x] = True
        times[delivery.dst_y, delivery.dst_x] = arrival
        data: Array | None = None
        if self.mode == "functional":
            v = np.asarray(value)
            data = np.zeros_like(v)
            data[delivery.dst_y, delivery.dst_x] = v[delivery.src_y, delivery.src_x]
        self._pending.setdefault(color, []).append(_Pending(has, data, times))
        spent = sent - self.clocks.ce_free
        self.clocks.ce_free = np.asarray(sent, dtype=CLOCK)
        self.clocks.comm_busy += spent
        self.traffic.bytes += block_bytes * delivery.dst_y.size
        self.traffic.hop_bytes += block_bytes * float(delivery.hops.sum())
        self.traffic.messages += int(delivery.dst_y.size)
        self.account(op, spent)

    def recv(self, op: mesh.RecvOp, mask: Array | None) -> tuple[Array, FloatArray]:
        color = op.color.value.data
        want = np.ones(self.grid, dtype=bool) if mask is None else np.asarray(mask, bool)
        want = np.broadcast_to(want, self.grid)
        queue = self._pending.get(color, [])
        if not queue:
            ys, xs = np.nonzero(want)
            cores = ", ".join(f"({y}, {x})" for y, x in zip(ys[:6], xs[:6], strict=True))
            raise PlmrError(
                f"deadlock: PEs {cores}{' ...' if ys.size > 6 else ''} wait on color "
                f"{color} at `{str(op).strip()}`, but no message on that color is in "
                "flight (a send is missing, comes later, or is routed elsewhere)"
            )
        wave = queue.pop(0)
        missing = want & ~wave.has
        if missing.any():
            ys, xs = np.nonzero(missing)
            cores = ", ".join(f"({y}, {x})" for y, x in zip(ys[:6], xs[:6], strict=True))
            raise PlmrError(
                f"deadlock: PEs {cores}{' ...' if ys.size > 6 else ''} wait on color "
                f"{color}, but the routes deliver nothing to them"
            )
        ready = np.where(want, wave.arrival, 0.0)
        self.clocks.finish = np.maximum(self.clocks.finish, ready)
        self.account(op, 0.0)
        if self.mode == "timing" or wave.data is None:
            return self.placeholder(op.result), ready
        data = np.where(want.reshape(self.grid + (1,) * (wave.data.ndim - 2)), wave.data, 0)
        return data.astype(wave.data.dtype), ready


def op_cycles(dev: Device, op: Operation) -> float:
    """The compute cycles of one op on one PE (0 for ops that take no time)."""
    if isinstance(op, tile.DotOp):
        return _dot_cycles(dev, op)
    if isinstance(op, tile.TileOp):
        cost = op.cost()
        if cost.flops == 0 and cost.bytes_read == 0 and cost.bytes_written == 0:
            return 0.0
        ratio = _byte_ratio(dev, op)
        simd = dev.fmac_fp16 if cost.fmacs else dev.simd_fp16
        arithmetic = math.ceil(cost.flops / simd)
        memory = max(cost.bytes_read * ratio / 16, cost.bytes_written * ratio / 8)
        return dev.op_overhead_cycles + max(arithmetic, math.ceil(memory))
    if isinstance(op, arith.ConstantOp):
        return 0.0
    if op.name.startswith(("arith.", "math.")):
        return 1.0
    return 0.0


def _dot_cycles(dev: Device, op: tile.DotOp) -> float:
    """
    A block product as the PE runs it: for each row of the left block, one vector
    instruction per scalar of that row, each a multiply-accumulate of a row of the
    right block (N elements at the FMAC SIMD width) into the output row.
    """
    out = static_shape(op.result, "result")
    lhs = static_shape(op.lhs, "lhs")
    batch = math.prod(out[:-2])
    m, n = out[-2], out[-1]
    k = lhs[-2] if op.transpose_a is not None else lhs[-1]
    rows = batch * m
    instructions = rows * k
    return (
        dev.op_overhead_cycles
        + rows * dev.row_overhead_cycles
        + instructions * (dev.dsd_overhead_cycles + math.ceil(n / dev.fmac_fp16))
    )


def _byte_ratio(dev: Device, op: Operation) -> float:
    for v in (*op.results, *op.operands):
        t = v.type
        if isinstance(t, TensorType):
            itemsize = tensor_dtype(cast(Attribute, t)).itemsize
            return dev.elem_bytes / itemsize
    return 1.0


def find_program(module: ModuleOp, name: str | None) -> mesh.ProgramOp:
    programs = [op for op in module.ops if isinstance(op, mesh.ProgramOp)]
    names = ", ".join(f"@{p.sym_name.data}" for p in programs) or "none"
    if name is not None:
        for p in programs:
            if p.sym_name.data == name:
                return p
        raise PlmrError(f"no mesh.program @{name} (programs: {names})")
    if len(programs) == 1:
        return programs[0]
    if not programs:
        raise PlmrError("the module has no mesh.program")
    raise PlmrError(f"several mesh.programs ({names}); choose one with --entry")


def run_mesh(
    module: ModuleOp,
    inputs: Sequence[Array],
    *,
    device: Device | str | None = None,
    mode: str = "functional",
    name: str | None = None,
    relay: bool = False,
    recorder: TraceRecorder | None = None,
    exact: bool = False,
    layers: LayerRepeat | None = None,
) -> tuple[list[Array], Report]:
    """
    Runs a mesh program (on its own device unless `device` is given). In timing mode,
    loops that reach a periodic regime are extrapolated unless `exact` is set
    (`plmr.runtime.steady`); the report says how many iterations were. `layers` runs
    a window of the program once per further layer of a model (timing mode).
    """
    program = find_program(module, name)
    if device is None:
        device = program.device.spec.data
    dev = get_device(device) if isinstance(device, str) else device
    runtime = MeshRuntime(dev, mode, relay, recorder=recorder, exact=exact, layers=layers)
    return runtime.run_program(program, inputs)
