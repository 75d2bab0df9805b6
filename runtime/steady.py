"""
Steady-state extrapolation of loops in the mesh runtime's timing mode.

A `tile.for` inside `mesh.spmd` whose iterations repeat the same ops on the same
per-PE shapes (MeshGEMM's rotation, ring attention, a chain of GEMV phases) is a
max-plus system: each iteration maps the clock state — the ready times of the
loop-carried values, every PE's compute-engine clock, the flow-control state of the
loop's collectives — through `max` and `+ constant`. Such a system becomes periodic:
after a transient, every clock advances by the same increment `λ` per iteration. Once
that is observed, the remaining `m` iterations are one step: every clock moves by
`m·λ`, and the counters (compute cycles, bytes, messages, time by op, per-PE
communication time) by `m` times their per-iteration increment.

When the jump is exact. The iteration map `F` is monotone and commutes with adding a
constant to every clock, except where a clock meets a constant: the ready time of a
value defined before the loop (or a clock that the loop does not advance). So if
(1) the per-iteration increments `Dₜ = Sₜ − Sₜ₋₁` of every clock of every PE are the
same for `WINDOW` consecutive iterations, (2) they are uniform — each is `λ` or 0 —
and (3) every constant (the ready times of values defined outside the loop, the clocks
with increment 0) is at most the smallest advancing clock, then `F(S + λ) = F(S) + λ`
on every later iteration, and extrapolating is exact. (3) also holds for ever once it
holds, since advancing clocks only grow. Non-uniform increments (2) are refused: two
PEs advancing at different rates may later swap which one another waits for (a ring
allreduce's steps do that: each PE's increment is the delay of a link further up the
ring). Loops whose timing depends on the iteration — a broadcast or reduce root, or a
send/recv mask, computed from the induction variable or a carried index (SUMMA's
owner) — and loops whose carried data changes between iterations are never
extrapolated; neither is anything in functional mode.

Tolerance. Clocks are float64; the increments are differences of sums of fractional
device parameters, so two equal increments can differ in their last bits.
Increments count as equal when they differ by at most `TOLERANCE` times the largest
clock (2⁻⁴⁰ ≈ 9.1e-13, i.e. 4,096 units in the last place): far above rounding, far
below any real difference of timings (device parameters are multiples of 0.01 cycle;
below 10¹⁰ cycles the tolerance is under 0.01 cycle). An extrapolated run agrees
with the stepped one to about `iterations × TOLERANCE` relative.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from plmr.dialects import mesh, tile

if TYPE_CHECKING:
    from plmr.runtime.interpreter import MeshRuntime

F64 = npt.NDArray[np.float64]

WINDOW = 3
"""Consecutive iterations whose increments must agree before a jump."""

TOLERANCE = 2.0**-40
"""Increments are equal within this fraction of the largest clock (see the module doc)."""

SMALL_DATA = 1 << 16
"""Carried data arrays up to this size are compared by value, larger ones by identity."""


@dataclass
class Extrapolated:
    """One jump: `iterations` iterations (or collective stages) not stepped."""

    what: str
    iterations: int
    start: F64
    end: F64


@dataclass
class ExtrapolationLog:
    """What a run extrapolated (for the report)."""

    loops: int = 0
    """Jumps over loop iterations."""
    iterations: int = 0
    """Loop iterations not stepped (an outer loop's iteration counts once)."""
    jumps: list[Extrapolated] = field(default_factory=list[Extrapolated])


# ---------------------------------------------------------------------------------------
# Which loops may be extrapolated (static)
# ---------------------------------------------------------------------------------------


def _defined_inside(op: Operation) -> set[SSAValue]:
    inside: set[SSAValue] = set()
    for region in op.regions:
        for block in region.blocks:
            inside.update(block.args)
            for inner in block.ops:
                for nested in inner.walk():
                    inside.update(nested.results)
                    for r in nested.regions:
                        for b in r.blocks:
                            inside.update(b.args)
    return inside


def external_operands(op: tile.ForOp) -> list[SSAValue]:
    """Values defined before the loop and read inside it (their ready times are constants)."""
    inside = _defined_inside(op)
    seen: set[SSAValue] = set()
    out: list[SSAValue] = []
    for inner in op.body.block.ops:
        for nested in inner.walk():
            for v in nested.operands:
                if v not in inside and v not in seen:
                    seen.add(v)
                    out.append(v)
    return out


def timing_controls(op: Operation) -> list[SSAValue]:
    """The operands of `op` whose values (not only ready times) change its timing."""
    if isinstance(op, mesh.BroadcastOp | mesh.ReduceOp):
        return [op.root]
    if isinstance(op, mesh.SendOp | mesh.RecvOp):
        return list(op.operands[1:] if isinstance(op, mesh.SendOp) else op.operands)
    return []


def iteration_invariant(op: tile.ForOp) -> bool:
    """
    Whether every iteration of `op` has the same timing structure: no broadcast/reduce
    root and no send/recv mask depends on the induction variable or on a carried value
    that is not a tensor.
    """
    block = op.body.block
    tainted: set[SSAValue] = {block.args[0]}
    tainted.update(a for a in block.args[1:] if not isinstance(a.type, TensorType))
    for inner in block.ops:
        hit = False
        for nested in inner.walk():
            if any(v in tainted for v in nested.operands):
                tainted.update(nested.results)
                hit = True
        if hit:
            tainted.update(inner.results)
    for inner in block.ops:
        for nested in inner.walk():
            if any(v in tainted for v in timing_controls(nested)):
                return False
    return True


def comm_ops(op: tile.ForOp) -> list[Operation]:
    """The collectives of the loop body (their flow-control state is loop state)."""
    return [
        nested
        for inner in op.body.block.ops
        for nested in inner.walk()
        if isinstance(nested, mesh.ShiftOp | mesh.BroadcastOp | mesh.AllreduceOp)
        or isinstance(nested, mesh.ReduceOp)
    ]


# ---------------------------------------------------------------------------------------
# Detection and the jump (dynamic)
# ---------------------------------------------------------------------------------------


def _agree(steps: list[list[F64]], tol: float) -> bool:
    """Whether consecutive increments (each a list of arrays) agree within `tol`."""
    for older, newer in itertools.pairwise(steps):
        for a, b in zip(older, newer, strict=True):
            if a.size and float(np.abs(a - b).max()) > tol:
                return False
    return True


def _grid_f64(value: Any, grid: tuple[int, int]) -> F64:
    return np.array(np.broadcast_to(np.asarray(value, dtype=np.float64), grid))


def _same_data(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if not isinstance(a, np.ndarray | np.generic) or not isinstance(
        b, np.ndarray | np.generic
    ):
        return False
    x: npt.NDArray[Any] = np.asarray(cast(Any, a))
    y: npt.NDArray[Any] = np.asarray(cast(Any, b))
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    if x.size <= SMALL_DATA:
        return bool(np.array_equal(x, y))
    if all(s == 0 for s in x.strides) and all(s == 0 for s in y.strides):
        return bool(x.reshape(-1)[0] == y.reshape(-1)[0])
    return False


@dataclass
class _Snapshot:
    clocks: list[F64]
    """Carried ready times, compute engine, this iteration's finish, collectives' issue."""
    counters: F64
    counter_keys: tuple[str, ...]
    busy: F64 | None
    values: list[Any]


class LoopWatch:
    """Watches the iterations of one loop execution and extrapolates once periodic."""

    def __init__(self, rt: MeshRuntime, op: tile.ForOp, constants: float):
        self.rt = rt
        self.op = op
        self.comms = comm_ops(op)
        self.constants = constants
        self.history: list[_Snapshot] = []
        self._finish_before: Any = None

    def begin_iteration(self) -> None:
        """Separates this iteration's receive times from the run's finishing times."""
        clocks = self.rt.clocks
        self._finish_before = clocks.finish
        clocks.finish = np.zeros(self.rt.grid, dtype=clocks.finish.dtype)

    def end_iteration(
        self, carried: list[Any], values: list[Any], remaining: int
    ) -> list[Any] | None:
        """
        Records the state after an iteration; if the loop is periodic, jumps the
        `remaining` iterations and returns the carried ready times after the last one.
        """
        rt = self.rt
        clocks = rt.clocks
        iteration_finish = clocks.finish
        clocks.finish = np.maximum(self._finish_before, iteration_finish)
        snap = self._snapshot(carried, iteration_finish, values)
        if snap is None:
            self.history.clear()
            return None
        self.history.append(snap)
        if len(self.history) > WINDOW + 1:
            self.history.pop(0)
        if remaining < 1 or len(self.history) < WINDOW + 1:
            return None
        deltas = self._periodic()
        if deltas is None:
            return None
        return self._jump(deltas, carried, remaining)

    def _snapshot(
        self, carried: list[Any], finish: Any, values: list[Any]
    ) -> _Snapshot | None:
        rt = self.rt
        if any(q for q in rt.pending_messages()):
            return None
        issues: list[F64] = []
        for c in self.comms:
            last = rt.last_issue(c)
            if last is None:
                return None
            issues.append(_grid_f64(last, rt.grid))
        clocks = [_grid_f64(r, rt.grid) for r in carried]
        clocks += [_grid_f64(rt.clocks.ce_free, rt.grid), _grid_f64(finish, rt.grid)]
        clocks += issues
        keys = tuple(sorted(rt.op_times))
        counters = [
            rt.clocks.compute,
            rt.traffic.bytes,
            rt.traffic.hop_bytes,
            float(rt.traffic.messages),
        ]
        for k in keys:
            counters += [float(rt.op_times[k].count), rt.op_times[k].cycles]
        busy = _grid_f64(rt.clocks.comm_busy, rt.grid) if rt.track_busy else None
        return _Snapshot(clocks, np.asarray(counters), keys, busy, list(values))

    def _periodic(self) -> tuple[list[F64], F64, F64 | None] | None:
        """The per-iteration increments if the last WINDOW agree (see the module doc)."""
        h = self.history
        last = h[-1]
        if any(s.counter_keys != last.counter_keys for s in h):
            return None
        if any(
            not all(_same_data(a, b) for a, b in zip(s.values, last.values, strict=True))
            for s in h[:-1]
        ):
            return None
        scale = max(
            max((float(np.abs(c).max()) for c in last.clocks), default=0.0),
            float(np.abs(last.counters).max()) if last.counters.size else 0.0,
            1.0,
        )
        tol = TOLERANCE * scale
        steps = [
            [b - a for a, b in zip(h[i].clocks, h[i + 1].clocks, strict=True)]
            for i in range(WINDOW)
        ]
        if not _agree(steps, tol):
            return None
        counter_steps = [[h[i + 1].counters - h[i].counters] for i in range(WINDOW)]
        if not _agree(counter_steps, tol):
            return None
        busy_step: F64 | None = None
        busies = [s.busy for s in h]
        if all(b is not None for b in busies):
            known = [b for b in busies if b is not None]
            if not _agree([[b - a] for a, b in itertools.pairwise(known)], tol):
                return None
            busy_step = (known[-1] - known[0]) / WINDOW
        newest = steps[-1]
        growing = [d > tol for d in newest]
        if any(float(d.min()) < -tol for d in newest):
            return None
        grow_values = [d[g] for d, g in zip(newest, growing, strict=True) if g.any()]
        if grow_values:
            high = max(float(v.max()) for v in grow_values)
            low = min(float(v.min()) for v in grow_values)
            if high - low > tol:
                return None
            smallest_growing = min(
                float(c[g].min())
                for c, g in zip(last.clocks, growing, strict=True)
                if g.any()
            )
            largest_constant = max(
                [self.constants]
                + [
                    float(c[~g].max())
                    for c, g in zip(last.clocks, growing, strict=True)
                    if (~g).any()
                ]
            )
            if largest_constant > smallest_growing:
                return None
        clock_step = [
            (b - a) / WINDOW for a, b in zip(h[0].clocks, last.clocks, strict=True)
        ]
        clock_step = [np.where(g, d, 0.0) for d, g in zip(clock_step, growing, strict=True)]
        counter_step = (last.counters - h[0].counters) / WINDOW
        return clock_step, counter_step, busy_step

    def _jump(
        self,
        deltas: tuple[list[F64], F64, F64 | None],
        carried: list[Any],
        remaining: int,
    ) -> list[Any]:
        rt = self.rt
        clock_step, counter_step, busy_step = deltas
        last = self.history[-1]
        m = float(remaining)
        dtype = rt.clocks.ce_free.dtype
        moved = [
            (c + m * d).astype(dtype) for c, d in zip(last.clocks, clock_step, strict=True)
        ]
        n = len(carried)
        new_carried: list[Any] = [
            r if not clock_step[i].any() else moved[i] for i, r in enumerate(carried)
        ]
        start = np.array(rt.clocks.ce_free, dtype=np.float64)
        rt.clocks.ce_free = moved[n]
        rt.clocks.finish = np.maximum(rt.clocks.finish, moved[n + 1])
        for c, issue in zip(self.comms, moved[n + 2 :], strict=True):
            rt.set_last_issue(c, issue)
        rt.clocks.compute += m * float(counter_step[0])
        rt.traffic.bytes += m * float(counter_step[1])
        rt.traffic.hop_bytes += m * float(counter_step[2])
        rt.traffic.messages += round(m * float(counter_step[3]))
        for i, k in enumerate(last.counter_keys):
            entry = rt.op_times[k]
            entry.count += round(m * float(counter_step[4 + 2 * i]))
            entry.cycles += m * float(counter_step[5 + 2 * i])
        if busy_step is not None:
            rt.clocks.comm_busy = (rt.clocks.comm_busy + m * busy_step).astype(dtype)
        rt.log_extrapolation(
            Extrapolated("tile.for", remaining, start, np.asarray(moved[n], np.float64))
        )
        self.history.clear()
        return new_carried


def watch_loop(
    rt: MeshRuntime, op: tile.ForOp, ready: dict[SSAValue, Any]
) -> LoopWatch | None:
    """A watcher for one execution of `op`, or None where extrapolation does not apply."""
    if rt.mode != "timing" or rt.exact:
        return None
    trips = len(range(op.lb.value.data, op.ub.value.data, op.step.value.data))
    if trips < WINDOW + 2:
        return None
    if not rt.loop_invariant(op):
        return None
    constants = 0.0
    for v in rt.loop_externals(op):
        r = ready.get(v)
        if r is not None:
            constants = max(constants, float(np.max(r)))
    return LoopWatch(rt, op, constants)
