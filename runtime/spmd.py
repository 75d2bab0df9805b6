"""
The SPMD evaluator of the mesh runtime: `mesh.spmd` bodies run once for all PEs, every
value with a per-PE ready time (compute engine clocks, traffic, pending messages).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import numpy as np
import numpy.typing as npt
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    impl,
    register_impls,
)
from xdsl.ir import Operation, SSAValue

from plmr.dialects import mesh, tile
from plmr.errors import PlmrError
from plmr.runtime.reference import ReferenceEvaluator
from plmr.runtime.steady import MeshRuntime as SteadyRuntime
from plmr.runtime.steady import (
    watch_loop,
)
from plmr.runtime.trace import TraceRecorder
from plmr.values import Array

FloatArray = npt.NDArray[np.floating[Any]]


CLOCK = np.float64
"""Clocks are float64: their rounding (1e-16 relative per operation) stays far below a
cycle even on 10⁹-cycle programs, and periodic loops show equal increments
(`plmr.runtime.steady`)."""


BEHIND = -1
"""The mark of a clock at or before the engines' on every PE (not one of their values)."""


@dataclass
class Clocks:
    """
    Per-PE time, in cycles: when the compute engine is free, and what it did.

    The engines' clock `ce_free` never goes back on any PE (every update is a maximum
    with it or adds a non-negative time), so an array that was once `ce_free` is at or
    before the current one everywhere: `max(ready, ce_free)` is `ce_free` itself, and of
    two such arrays the later one is the maximum. `set_engine` numbers the engines'
    clocks as they come (their generation) and `mark_behind` marks other arrays known
    to be at or before them (a collective's issue times), so the SPMD evaluator skips
    those maxima: exact, as a maximum involves no rounding. Arrays are never updated in
    place; the marks are kept by identity and dropped with their arrays.
    """

    ce_free: FloatArray
    compute: float
    """Every PE runs the same ops on blocks of the same shapes: one number for all."""
    comm_busy: FloatArray
    finish: FloatArray
    _marks: dict[int, tuple[weakref.ref[FloatArray], int]] = field(
        default_factory=dict[int, tuple["weakref.ref[FloatArray]", int]]
    )
    _generation: int = 0

    @staticmethod
    def zeros(grid: tuple[int, int]) -> Clocks:
        def zero() -> FloatArray:
            return np.zeros(grid, dtype=CLOCK)

        clocks = Clocks(zero(), 0.0, zero(), zero())
        clocks.set_engine(clocks.ce_free)
        return clocks

    def set_engine(self, value: FloatArray, *same: FloatArray) -> None:
        """The engines' new clock, at or after the last on every PE (`same`: equal arrays)."""
        self.ce_free = value
        self._generation += 1
        for v in (value, *same):
            self._mark(v, self._generation)

    def mark_behind(self, value: FloatArray) -> None:
        """Marks `value` as at or before the engines' clock on every PE."""
        if self.engine_mark(value) is None:
            self._mark(value, BEHIND)

    def mark_engine(self, value: FloatArray, generation: int) -> None:
        """Marks `value`, equal to the engines' clock of `generation`, as that clock."""
        self._mark(value, generation)

    def engine_mark(self, value: object) -> int | None:
        """The generation of an engines' clock, `BEHIND`, or None (unknown)."""
        entry = self._marks.get(id(value))
        if entry is None or entry[0]() is not value:
            return None
        return entry[1]

    def _mark(self, value: FloatArray, mark: int) -> None:
        key = id(value)
        marks = self._marks

        def drop(_: object) -> None:
            marks.pop(key, None)

        marks[key] = (weakref.ref(value, drop), mark)


@dataclass
class Traffic:
    bytes: float = 0.0
    hop_bytes: float = 0.0
    messages: int = 0


@dataclass
class Pending:
    """Messages that arrived at PEs on one color and wait to be received."""

    has: npt.NDArray[np.bool_]
    data: Array | None
    arrival: FloatArray


Ready = FloatArray | float


class SpmdRuntime(SteadyRuntime, Protocol):
    """What the SPMD evaluator uses of the runtime (`plmr.runtime.mesh_machine.MeshRuntime`)."""

    clocks: Clocks
    recorder: TraceRecorder | None

    def placeholder(self, value: SSAValue) -> Array: ...

    def compute_cycles(self, op: Operation) -> float: ...

    def account(self, op: Operation, cycles: float | FloatArray) -> None: ...

    def collective_data(self, op: Operation, x: Array, root: int | None) -> Array: ...

    def collective_time(
        self, op: Operation, root: int | None, ready: Ready
    ) -> FloatArray: ...

    def send(
        self, op: mesh.SendOp, value: Array, mask: Array | None, ready: Ready
    ) -> None: ...

    def recv(self, op: mesh.RecvOp, mask: Array | None) -> tuple[Array, FloatArray]: ...


class SpmdEvaluator(ReferenceEvaluator):
    """
    Runs `mesh.spmd` bodies for all PEs at once. Time is dataflow: every value has a
    per-PE ready time; an op starts when its operands are ready and the PE's compute
    engine is free, so communication overlaps with independent computation (e.g. the
    shifts of MeshGEMM's next step with this step's block product).
    """

    def __init__(self, runtime: SpmdRuntime, program: mesh.ProgramOp):
        super().__init__(None, [SpmdFunctions()], lead=runtime.grid)
        self.runtime = runtime
        self.program = program
        self.ready: dict[SSAValue, Ready] = {}

    def ready_of(self, values: Sequence[SSAValue]) -> Ready:
        """
        The latest ready time of `values` (clocks are never negative: 0 is none). Of the
        engines' clocks among them only the latest counts (`Clocks`). The latest time of
        several distinct arrays is a new array object (a view of the latest engines'
        clock, if that is it): loop extrapolation tells clocks apart by identity.
        """
        clocks = self.runtime.clocks
        first: Ready | None = None
        several = False
        out: Ready | None = None
        latest: FloatArray | None = None
        generation = BEHIND
        for v in values:
            r = self.ready.get(v)
            if r is None or (isinstance(r, float) and r <= 0.0):
                continue
            if first is None:
                first = r
            elif r is not first:
                several = True
            if r is out or r is latest:
                continue
            mark = clocks.engine_mark(r)
            if mark is not None and mark != BEHIND:
                if mark > generation:
                    latest, generation = cast(FloatArray, r), mark
                continue
            out = r if out is None else np.maximum(out, r)
        if first is None:
            return 0.0
        if not several:
            return first
        if latest is None:
            assert out is not None
            return out
        if out is not None:
            return np.maximum(out, latest)
        view = latest.view()
        clocks.mark_engine(view, generation)
        return view

    def ready_after_engine(self, values: Sequence[SSAValue]) -> Ready | None:
        """
        The latest ready time of `values` that may be later than the engines' clock on
        some PE (None: none is); the clocks marked at or before it are left out.
        """
        clocks = self.runtime.clocks
        out: Ready | None = None
        for v in values:
            r = self.ready.get(v)
            if r is None or r is out or (isinstance(r, float) and r <= 0.0):
                continue
            if clocks.engine_mark(r) is not None:
                continue
            out = r if out is None else np.maximum(out, r)
        return out

    def evaluate_op(self, op: Operation, operands: list[Any]) -> list[Any]:
        rt = self.runtime
        in_map_body = isinstance(op.parent_op(), tile.MapOp)
        if rt.mode == "timing" and _is_compute(op):
            results = [rt.placeholder(r) for r in op.results]
        else:
            results = super().evaluate_op(op, operands)
        if in_map_body or isinstance(op, tile.ForOp | mesh.CommOp):
            return results
        cycles = rt.compute_cycles(op)
        if not cycles:
            ready = self.ready_of(list(op.operands))
            for r in op.results:
                self.ready[r] = ready
            return results
        ready = self.ready_after_engine(op.operands)
        free = rt.clocks.ce_free
        # The engine's clock is never negative: max(0, free) and max(free, free) are free.
        start = free if ready is None else np.maximum(ready, free)
        if rt.recorder is not None:
            rt.recorder.record(op.name, start, start + cycles, rt.grid)
        end = start + cycles
        rt.clocks.set_engine(end)
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


def _run_for(ev: SpmdEvaluator, op: tile.ForOp, args: list[Any]) -> list[Any]:
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


def _run_collective(ev: SpmdEvaluator, op: Operation, args: list[Any]) -> list[Any]:
    rt = ev.runtime
    values = dict(zip(op.operands, args, strict=True))
    source: SSAValue = getattr(op, "input")
    x = values[source]
    root: int | None = None
    if isinstance(op, mesh.BroadcastOp | mesh.ReduceOp):
        root = _uniform_index(values[op.root], f"the root of '{op.name}'")
        n = mesh.segment_of(op, rt.grid)
        if not 0 <= root < n:
            where = "of a segment along" if op.segment is not None else "along"
            raise PlmrError(f"root {root} is outside the {n} PEs {where} {op.axis.data}")
    result = rt.collective_data(op, x, root) if rt.mode == "functional" else None
    ev.ready[op.results[0]] = rt.collective_time(op, root, ev.ready_of([source]))
    if result is None:
        return [rt.placeholder(op.results[0])]
    return [result]


def _run_send(ev: SpmdEvaluator, op: mesh.SendOp, args: list[Any]) -> list[Any]:
    ev.runtime.send(
        op, args[0], args[1] if len(args) > 1 else None, ev.ready_of([op.input])
    )
    return []


def _run_recv(ev: SpmdEvaluator, op: mesh.RecvOp, args: list[Any]) -> list[Any]:
    data, ready = ev.runtime.recv(op, args[0] if args else None)
    ev.ready[op.result] = ready
    return [data]


@register_impls
class SpmdFunctions(InterpreterFunctions):
    """
    The ops whose meaning inside a `mesh.spmd` body involves time: loops (extrapolated
    once periodic), collectives and messages.
    """

    @impl(tile.ForOp)
    def run_for(
        self, interpreter: Interpreter, op: tile.ForOp, args: PythonValues
    ) -> PythonValues:
        return tuple(_run_for(cast(SpmdEvaluator, interpreter), op, list(args)))

    @impl(mesh.ShiftOp)
    def run_shift(
        self, interpreter: Interpreter, op: mesh.ShiftOp, args: PythonValues
    ) -> PythonValues:
        return tuple(_run_collective(cast(SpmdEvaluator, interpreter), op, list(args)))

    @impl(mesh.BroadcastOp)
    def run_broadcast(
        self, interpreter: Interpreter, op: mesh.BroadcastOp, args: PythonValues
    ) -> PythonValues:
        return tuple(_run_collective(cast(SpmdEvaluator, interpreter), op, list(args)))

    @impl(mesh.AllreduceOp)
    def run_allreduce(
        self, interpreter: Interpreter, op: mesh.AllreduceOp, args: PythonValues
    ) -> PythonValues:
        return tuple(_run_collective(cast(SpmdEvaluator, interpreter), op, list(args)))

    @impl(mesh.DiagonalBroadcastOp)
    def run_diagonal_broadcast(
        self, interpreter: Interpreter, op: mesh.DiagonalBroadcastOp, args: PythonValues
    ) -> PythonValues:
        return tuple(_run_collective(cast(SpmdEvaluator, interpreter), op, list(args)))

    @impl(mesh.AllgatherOp)
    def run_allgather(
        self, interpreter: Interpreter, op: mesh.AllgatherOp, args: PythonValues
    ) -> PythonValues:
        return tuple(_run_collective(cast(SpmdEvaluator, interpreter), op, list(args)))

    @impl(mesh.ReduceOp)
    def run_reduce(
        self, interpreter: Interpreter, op: mesh.ReduceOp, args: PythonValues
    ) -> PythonValues:
        return tuple(_run_collective(cast(SpmdEvaluator, interpreter), op, list(args)))

    @impl(mesh.SendOp)
    def run_send(
        self, interpreter: Interpreter, op: mesh.SendOp, args: PythonValues
    ) -> PythonValues:
        return tuple(_run_send(cast(SpmdEvaluator, interpreter), op, list(args)))

    @impl(mesh.RecvOp)
    def run_recv(
        self, interpreter: Interpreter, op: mesh.RecvOp, args: PythonValues
    ) -> PythonValues:
        return tuple(_run_recv(cast(SpmdEvaluator, interpreter), op, list(args)))
