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
Clock increments count as equal when they differ by at most `TOLERANCE` times the
largest clock (2⁻⁴⁰ ≈ 9.1e-13, i.e. 4,096 units in the last place): far above
rounding, far below any real difference of timings (device parameters are multiples of
0.01 cycle; below 10¹⁰ cycles the tolerance is under 0.01 cycle). Each counter (bytes,
messages, time by op) is compared relative to its own magnitude, never to the clocks'
or another counter's (bytes run to 10¹³ where cycles are 10⁸). An extrapolated run agrees
with the stepped one to about `iterations × TOLERANCE` relative.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import numpy as np
import numpy.typing as npt
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from plmr.dialects import mesh, tile


class MeshRuntime(Protocol):
    """What extrapolation reads and moves of the runtime (`plmr.runtime.mesh_machine`)."""

    mode: str
    exact: bool
    grid: tuple[int, int]
    clocks: Any
    """`ce_free`, `finish`, `comm_busy` (per-PE arrays) and `compute`."""
    traffic: Any
    """`bytes`, `hop_bytes`, `messages`."""
    op_times: dict[str, Any]
    track_busy: bool | None
    extrapolation: ExtrapolationLog

    def pending_messages(self) -> list[list[Any]]: ...

    def last_issue(self, op: Operation) -> Any: ...

    def set_last_issue(self, op: Operation, issue: Any) -> None: ...

    def forget_issue(self, op: Operation) -> None: ...

    def log_extrapolation(self, jump: Extrapolated) -> None: ...

    def loop_invariant(self, op: tile.ForOp) -> bool: ...

    def loop_externals(self, op: tile.ForOp) -> list[SSAValue]: ...

    def on_layer(self, layer: int) -> None: ...

    def program_op(
        self,
        program: mesh.ProgramOp,
        op: Operation,
        env: dict[SSAValue, Any],
        ready: dict[SSAValue, Any],
    ) -> None: ...


F64 = npt.NDArray[np.float64]

WINDOW = 3
"""Consecutive iterations whose increments must agree before a jump."""

TOLERANCE = 2.0**-40
"""Increments are equal within this fraction of the largest clock (see the module doc)."""

SMALL_DATA = 1 << 16
"""Carried data arrays up to this size are compared by value, larger ones by identity."""


@dataclass
class Extrapolated:
    """One jump: `iterations` iterations not stepped; the engine clocks before and after."""

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
    jumps: list[tuple[str, int]] = field(default_factory=list[tuple[str, int]])
    """(what, iterations) of each jump, in order."""
    layers: int = 0
    """Layers of a model not simulated (`plmr.runtime.layer_repeat.LayerRunner`)."""
    stages: int = 0
    """Collective stages not stepped (periodic chains of stages)."""
    simulated_layers: int = 0
    """Layers simulated by a `layer_repeat.LayerRunner` (the window's runs, stepped)."""
    layer_ends: list[tuple[int, float]] = field(default_factory=list[tuple[int, float]])
    """(window runs done, latest clock of the layer's outputs and engines): before the
    first run, after each stepped one and after a jump."""

    def add(self, jump: Extrapolated) -> None:
        """Counts one jump."""
        self.jumps.append((jump.what, jump.iterations))
        if jump.what == LAYERS:
            self.layers += jump.iterations
        elif jump.what == STAGES:
            self.stages += jump.iterations
        else:
            self.loops += 1
            self.iterations += jump.iterations


LAYERS = "layers"
"""What a jump over a model's layers is logged as."""
STAGES = "collective stages"
"""What a jump over a collective's stages is logged as."""


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
        or isinstance(nested, mesh.ReduceOp | mesh.AllgatherOp | mesh.DiagonalBroadcastOp)
    ]


# ---------------------------------------------------------------------------------------
# Detection and the jump (dynamic)
# ---------------------------------------------------------------------------------------


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


SAMPLE = 32
"""Positions per axis of the grid at which two steps are compared first: a disagreement
there settles the comparison without a pass over the whole grid."""


def _sample_index(
    grid: tuple[int, int],
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """
    The sampled positions (rows, columns): two whole rows and two whole columns (a
    transient moves a row or a column of PEs at a time along a ring) and a mesh of up
    to `SAMPLE` x `SAMPLE` evenly spread PEs.
    """
    p, q = grid
    spread = [
        np.unique(np.linspace(0, n - 1, min(n, SAMPLE)).round().astype(np.intp))
        for n in grid
    ]
    mesh_y, mesh_x = np.meshgrid(*spread, indexing="ij")
    ys = [mesh_y.ravel()]
    xs = [mesh_x.ravel()]
    for y in sorted({0, p // 2}):
        ys.append(np.full(q, y, dtype=np.intp))
        xs.append(np.arange(q, dtype=np.intp))
    for x in sorted({0, q // 2}):
        ys.append(np.arange(p, dtype=np.intp))
        xs.append(np.full(p, x, dtype=np.intp))
    return np.concatenate(ys), np.concatenate(xs)


def _sampled(
    clock: Any,
    grid: tuple[int, int],
    index: tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]],
) -> Any:
    """The clock at the sampled positions (a float as is; None: not a grid's clock)."""
    if not isinstance(clock, np.ndarray):
        return clock
    try:
        return np.broadcast_to(cast(F64, clock), grid)[index]
    except ValueError:
        return None


@dataclass
class _Snapshot:
    clocks: list[Any]
    """Distinct clock objects: carried ready times, compute engine, this iteration's
    finish, the collectives' last issue (arrays are never updated in place, so they
    are kept by reference; floats are clocks uniform over the grid)."""
    layout: tuple[int, ...]
    """For each clock component, the index of its object in `clocks`."""
    counters: F64
    counter_keys: tuple[str, ...]
    busy: F64 | None
    values: list[Any]
    samples: list[Any]
    """Each clock at the sampled positions (`_sampled`)."""
    behind: list[bool]
    """Clocks known to be between 0 and the engines' clock, which is one of them."""


@dataclass
class _Step:
    """The increments from one snapshot to the next (computed when first needed)."""

    before: list[Any]
    after: list[Any]
    counters: F64
    busy: F64 | None
    samples: list[Any]
    """The increments at the sampled positions (None: not sampled)."""
    _clocks: list[Any] | None = None

    @staticmethod
    def between(a: _Snapshot, b: _Snapshot) -> _Step:
        return _Step(
            a.clocks,
            b.clocks,
            b.counters - a.counters,
            None if b.busy is None or a.busy is None else b.busy - a.busy,
            [
                None if x is None or y is None else np.subtract(y, x)
                for x, y in zip(a.samples, b.samples, strict=True)
            ],
        )

    @property
    def clocks(self) -> list[Any]:
        """The increment of each clock."""
        if self._clocks is None:
            self._clocks = [
                np.subtract(b, a) for a, b in zip(self.before, self.after, strict=True)
            ]
        return self._clocks

    def agrees(self, other: _Step, tol: float, counter_tol: F64) -> bool:
        """Clocks within `tol`; each counter within its own `counter_tol`."""
        if np.any(np.abs(self.counters - other.counters) > counter_tol):
            return False
        # The sampled positions first: one of them beyond `tol` is the answer.
        for a, b in zip(self.samples, other.samples, strict=True):
            if a is not None and b is not None and _beyond(np.subtract(a, b), tol):
                return False
        pairs = list(zip(self.clocks, other.clocks, strict=True))
        if self.busy is not None and other.busy is not None:
            pairs.append((self.busy, other.busy))
        for a, b in pairs:
            if _beyond(np.subtract(a, b), tol):
                return False
        return True


def _beyond(diff: Any, tol: float) -> bool:
    """|diff| > tol somewhere, without an array of |diff|."""
    return bool(np.size(diff) and (float(np.max(diff)) > tol or float(np.min(diff)) < -tol))


def _distinct(components: list[Any]) -> tuple[list[Any], tuple[int, ...]]:
    objects: list[Any] = []
    where: dict[int, int] = {}
    layout: list[int] = []
    for c in components:
        key = id(c)
        if key not in where:
            where[key] = len(objects)
            objects.append(c)
        layout.append(where[key])
    return objects, tuple(layout)


def _largest_magnitude(clock: Any) -> float:
    """max |clock|, as max(max, -min): no array of magnitudes."""
    values = np.asarray(clock, dtype=np.float64)
    if not values.size:
        return float(np.max(np.abs(values)))  # raises, as the maximum of nothing does
    return max(float(np.max(values)), -float(np.min(values)))


def _as_clock(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return cast(F64, value)
    return float(np.max(value))


class LoopWatch:
    """Watches the iterations of one loop execution and extrapolates once periodic."""

    def __init__(
        self,
        rt: MeshRuntime,
        comms: list[Operation],
        constants: float,
        what: str = "tile.for",
        window: int = WINDOW,
    ):
        self.rt = rt
        self.comms = comms
        self.constants = constants
        self.what = what
        self.window = window
        self.last: _Snapshot | None = None
        self.step: _Step | None = None
        self.run = 0
        """Consecutive iterations whose increments agree (with `step`)."""
        self._finish_before: Any = None
        self._no_finish: Any = None
        """The finishing times of an iteration that received nothing (zeros, shared)."""
        self._index = _sample_index(rt.grid)

    def begin_iteration(self) -> None:
        """Separates this iteration's receive times from the run's finishing times."""
        clocks = self.rt.clocks
        self._finish_before = clocks.finish
        if self._no_finish is None:
            self._no_finish = np.zeros(self.rt.grid, dtype=clocks.finish.dtype)
            mark = getattr(clocks, "mark_behind", None)
            if mark is not None:
                mark(self._no_finish)
        clocks.finish = self._no_finish

    def end_iteration(
        self, carried: list[Any], values: list[Any], remaining: int
    ) -> list[Any] | None:
        """
        Records the state after an iteration; if the loop is periodic, jumps the
        `remaining` iterations and returns the carried ready times after the last one.
        """
        clocks = self.rt.clocks
        iteration_finish = clocks.finish
        # Nothing received: the finishing times stay (they are never negative).
        clocks.finish = (
            self._finish_before
            if iteration_finish is self._no_finish
            else np.maximum(self._finish_before, iteration_finish)
        )
        snap = self._snapshot(carried, iteration_finish, values)
        prev, self.last = self.last, snap
        if snap is None or prev is None or not self._comparable(prev, snap):
            self.step, self.run = None, 0
            return None
        step = _Step.between(prev, snap)
        # Clocks share one scale; counters (bytes, cycles by op) each have their own.
        tol = TOLERANCE * self._scale(snap)
        counter_tol = TOLERANCE * np.maximum(np.abs(snap.counters), 1.0)
        if self.step is not None and step.agrees(self.step, tol, counter_tol):
            self.run += 1
        else:
            self.run = 1
        self.step = step
        if remaining < 1 or self.run < self.window or not self._uniform(snap, step, tol):
            return None
        return self._jump(snap, step, carried, remaining, tol)

    def _snapshot(
        self, carried: list[Any], finish: Any, values: list[Any]
    ) -> _Snapshot | None:
        rt = self.rt
        if any(q for q in rt.pending_messages()):
            return None
        components = [*carried, rt.clocks.ce_free, finish]
        for c in self.comms:
            last = rt.last_issue(c)
            if last is None:
                return None
            components.append(last)
        objects, layout = _distinct(components)
        keys = tuple(sorted(rt.op_times))
        counters = [
            rt.clocks.compute,
            rt.traffic.bytes,
            rt.traffic.hop_bytes,
            float(rt.traffic.messages),
        ]
        for k in keys:
            counters += [float(rt.op_times[k].count), rt.op_times[k].cycles]
        # comm_busy is accumulated in place: copy it.
        busy = np.array(rt.clocks.comm_busy, dtype=np.float64) if rt.track_busy else None
        clocks = [_as_clock(o) for o in objects]
        # Clocks marked by the runtime (`plmr.runtime.spmd.Clocks`) lie between 0 and
        # the engines' clock, which is one of the components.
        mark = getattr(rt.clocks, "engine_mark", None)
        engine = rt.clocks.ce_free
        behind = [
            mark is not None and o is not engine and mark(o) is not None for o in objects
        ]
        return _Snapshot(
            clocks,
            layout,
            np.asarray(counters),
            keys,
            busy,
            list(values),
            [_sampled(c, rt.grid, self._index) for c in clocks],
            behind,
        )

    @staticmethod
    def _comparable(a: _Snapshot, b: _Snapshot) -> bool:
        return (
            a.layout == b.layout
            and a.counter_keys == b.counter_keys
            and all(_same_data(x, y) for x, y in zip(a.values, b.values, strict=True))
        )

    @staticmethod
    def _scale(snap: _Snapshot) -> float:
        """
        The largest clock (the tolerance of clock increments is relative to it); the
        clocks between 0 and the engines' clock are left out.
        """
        biggest = max(
            (
                _largest_magnitude(c)
                for c, behind in zip(snap.clocks, snap.behind, strict=True)
                if not behind
            ),
            default=0.0,
        )
        if snap.busy is not None:
            biggest = max(biggest, _largest_magnitude(snap.busy))
        return max(biggest, 1.0)

    def _uniform(self, snap: _Snapshot, step: _Step, tol: float) -> bool:
        """Every increment is λ or 0, and no constant is ahead of an advancing clock."""
        high, low = -math.inf, math.inf
        smallest_growing, largest_constant = math.inf, self.constants
        for clock, d in zip(snap.clocks, step.clocks, strict=True):
            d = np.asarray(d)
            if float(np.min(d)) < -tol:
                return False
            growing = d > tol
            if growing.any():
                high = max(high, float(np.max(d[growing])))
                low = min(low, float(np.min(d[growing])))
                smallest_growing = min(
                    smallest_growing,
                    float(np.min(np.broadcast_to(clock, d.shape)[growing])),
                )
            if not growing.all():
                largest_constant = max(
                    largest_constant,
                    float(np.max(np.broadcast_to(clock, d.shape)[~growing])),
                )
        if high > -math.inf and high - low > tol:
            return False
        return largest_constant <= smallest_growing or high == -math.inf

    def _jump(
        self, snap: _Snapshot, step: _Step, carried: list[Any], remaining: int, tol: float
    ) -> list[Any]:
        rt = self.rt
        m = float(remaining)
        moved: list[Any] = []
        for clock, d in zip(snap.clocks, step.clocks, strict=True):
            d = np.asarray(d)
            growing = d > tol
            if not growing.any():
                moved.append(clock)
                continue
            jumped = np.asarray(clock, dtype=np.float64) + m * np.where(growing, d, 0.0)
            moved.append(jumped if jumped.ndim else float(jumped))
        new = [moved[i] for i in snap.layout]
        n = len(carried)
        start = np.array(np.broadcast_to(rt.clocks.ce_free, rt.grid), dtype=np.float64)
        new_carried = new[:n]
        rt.clocks.ce_free = np.array(np.broadcast_to(new[n], rt.grid), dtype=np.float64)
        rt.clocks.finish = np.maximum(rt.clocks.finish, new[n + 1])
        for c, issue in zip(self.comms, new[n + 2 :], strict=True):
            rt.set_last_issue(
                c, np.array(np.broadcast_to(issue, rt.grid), dtype=np.float64)
            )
        counter_step = step.counters
        rt.clocks.compute += m * float(counter_step[0])
        rt.traffic.bytes += m * float(counter_step[1])
        rt.traffic.hop_bytes += m * float(counter_step[2])
        rt.traffic.messages += round(m * float(counter_step[3]))
        for i, k in enumerate(snap.counter_keys):
            entry = rt.op_times[k]
            entry.count += round(m * float(counter_step[4 + 2 * i]))
            entry.cycles += m * float(counter_step[5 + 2 * i])
        if step.busy is not None:
            rt.clocks.comm_busy = rt.clocks.comm_busy + m * step.busy
        rt.log_extrapolation(Extrapolated(self.what, remaining, start, rt.clocks.ce_free))
        self.last, self.step, self.run = None, None, 0
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
    return LoopWatch(rt, comm_ops(op), constants)
