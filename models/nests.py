"""
What a compiled mesh program is made of, and where its time goes, nest by nest.

- `count_ops`: the `mesh.spmd` nests and the `mesh.allreduce` collectives of a module
  (ops in the IR, not executions: an allreduce inside a `tile.for` counts once).
- `run_nests`: runs a program in the runtime (`MeshRuntime`) and attributes its time to
  its nests. The runtime runs the nests in program order; a nest's *end* is the latest
  time any PE finishes one of its ops (compute, collective or message), and its
  *critical-path cycles* are how far it moves the latest end of the program so far
  (`max(0, end_i - max(end_j, j < i))`). Nests that overlap an earlier one count only the
  time past it, so the parts sum to the program's end-to-end cycles.
- `layer_window`: the nests of one steady-state layer, found by comparing the programs of
  one and of two layers: the two-layer program is the one-layer program with one layer's
  nests inserted; of the places where they fit, the last one (the layer whose input came
  from a compiled layer) is taken.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from plmr.dialects import mesh, tile
from plmr.runtime.mesh_machine import MeshRuntime, Ready, find_program
from plmr.runtime.report import Report
from plmr.target.device import Device


@dataclass(frozen=True)
class OpCounts:
    """The nests and the allreduce and allgather collectives of a module."""

    spmds: int
    allreduces: int
    allgathers: int = 0


def count_ops(module: ModuleOp | mesh.ProgramOp) -> OpCounts:
    """
    Counts `mesh.spmd`, `mesh.allreduce` and `mesh.allgather` ops (in the IR, not
    executions).
    """
    spmds = allreduces = allgathers = 0
    for op in module.walk():
        if isinstance(op, mesh.SpmdOp):
            spmds += 1
        elif isinstance(op, mesh.AllreduceOp):
            allreduces += 1
        elif isinstance(op, mesh.AllgatherOp):
            allgathers += 1
    return OpCounts(spmds, allreduces, allgathers)


@dataclass(frozen=True)
class NestTime:
    """One `mesh.spmd` of a program and its share of the critical path."""

    index: int
    """Position among the program's nests."""
    name: str
    """The SSA name of its first result (from the graph op it computes)."""
    what: str
    """Its ops (block products, collectives, reductions, maps) and its result."""
    cycles: float
    """Critical-path cycles (see the module docstring)."""
    end: float
    """When its last op finishes (the latest PE)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "what": self.what,
            "cycles": self.cycles,
            "end": self.end,
        }


def _layout(t: Any) -> str:
    if not isinstance(t, mesh.DistType):
        return str(t)
    shape = "x".join(str(s) for s in t.tensor.get_shape()) or "scalar"
    axes = ", ".join(str(a) for a in t.layout.axes)
    return f"{shape} [{axes}]"


def describe(spmd: mesh.SpmdOp) -> str:
    """`dot, allreduce y -> 1x64 [-, x]`: what a nest runs and what it yields."""
    parts: list[str] = []

    def add(item: str) -> None:
        if item not in parts:
            parts.append(item)

    for op in spmd.walk():
        if isinstance(op, tile.DotOp):
            add("dot")
        elif isinstance(op, mesh.AllreduceOp | mesh.ReduceOp | mesh.BroadcastOp):
            within = "" if op.segment is None else f" segment {op.segment.value.data}"
            add(f"{op.name.removeprefix('mesh.')} {op.axis.data}{within}")
        elif isinstance(op, mesh.AllgatherOp):
            add(f"allgather {op.axis.data}")
        elif isinstance(op, mesh.DiagonalBroadcastOp):
            add(f"diagonal broadcast {op.axis.data}")
        elif isinstance(op, mesh.ShiftOp):
            add(f"shift {op.axis.data}")
        elif isinstance(op, mesh.SendOp):
            add("send")
        elif isinstance(op, tile.ReduceOp):
            add(f"reduce {op.kind.data}")
        elif isinstance(op, tile.MapOp) and op.kind_name is not None:
            add(op.kind_name)
    ops = ", ".join(parts[:6]) + (", ..." if len(parts) > 6 else "") or "copy"
    results = "; ".join(_layout(r.type) for r in spmd.outputs)
    return f"{ops} -> {results}"


def signature(spmd: mesh.SpmdOp) -> tuple[str, ...]:
    """The nest's ops and types, without SSA names: equal for the same nest of two layers."""
    return (
        *(op.name for op in spmd.walk()),
        *(str(r.type) for r in spmd.outputs),
        *(str(v.type) for v in spmd.inputs),
    )


@dataclass
class NestTimer(MeshRuntime):
    """The runtime, also noting when each nest's ops finish (read-only use of its clocks)."""

    nest_of: dict[Operation, int] = field(default_factory=dict[Operation, int])
    ends: list[float] = field(default_factory=list[float])
    current: int | None = None
    """The nest of the op accounted last."""
    engine: Any = None
    """The engines' clock last noted in the current nest, its maximum not yet taken:
    the clock never goes back (`plmr.runtime.spmd.Clocks`), so the last is the latest."""

    def run_program(
        self, program: mesh.ProgramOp, inputs: Sequence[Any]
    ) -> tuple[list[Any], Report]:
        nests = [op for op in program.body.block.ops if isinstance(op, mesh.SpmdOp)]
        self.nest_of = {op: i for i, nest in enumerate(nests) for op in nest.walk()}
        self.ends = [0.0] * len(nests)
        self.current = None
        self.engine = None
        out = super().run_program(program, inputs)
        self.flush()
        return out

    def flush(self) -> None:
        """Takes the noted engines' clock into `ends` (before `ends` is read)."""
        if self.engine is not None and self.current is not None:
            end = float(np.max(self.engine))
            if end > self.ends[self.current]:
                self.ends[self.current] = end
        self.engine = None

    def _nest(self, op: Operation | None) -> int | None:
        i = self.current if op is None else self.nest_of.get(op)
        if i is not None and i != self.current:
            self.flush()
            self.current = i
        return i

    def _note(self, op: Operation | None, value: Any) -> None:
        i = self._nest(op)
        if i is None:
            return
        end = float(np.max(value))
        if end > self.ends[i]:
            self.ends[i] = end

    def _note_engine(self, op: Operation | None) -> None:
        if self._nest(op) is not None:
            self.engine = self.clocks.ce_free

    def log_extrapolation(self, jump: Any) -> None:
        """A loop of the current nest jumped ahead in the steady state: note its end."""
        base = getattr(super(), "log_extrapolation", None)
        if base is not None:
            base(jump)
        self._note_engine(None)
        self._note(None, self.clocks.finish)

    def account(self, op: Operation, cycles: float | Any) -> None:
        super().account(op, cycles)
        self._note_engine(op)
        if isinstance(op, mesh.RecvOp):
            self._note(op, self.clocks.finish)

    def collective_time(self, op: Operation, root: int | None, ready: Ready) -> Any:
        done = super().collective_time(op, root, ready)
        self._note(op, done)
        return done


def critical_path(ends: Sequence[float]) -> list[float]:
    """How far each end moves the running maximum of the ends before it."""
    out: list[float] = []
    front = 0.0
    for end in ends:
        out.append(max(0.0, end - front))
        front = max(front, end)
    return out


def nest_name(spmd: mesh.SpmdOp) -> str | None:
    """The first name among the nest's results (a norm's statistic may come second)."""
    return next((r.name_hint for r in spmd.outputs if r.name_hint), None)


def run_nests(
    module: ModuleOp,
    inputs: Sequence[Any],
    device: Device,
    *,
    mode: str = "timing",
    relay: bool = False,
    runtime_options: dict[str, Any] | None = None,
    program_name: str | None = None,
) -> tuple[Report, list[NestTime]]:
    """
    Runs the module's program (`program_name`: that one of several, e.g. a layer body
    compiled once); returns the runtime's report and each nest's time.
    """
    program = find_program(module, program_name)
    timer = NestTimer(device, mode, relay, **(runtime_options or {}))
    _, report = timer.run_program(program, inputs)
    nests = [op for op in program.body.block.ops if isinstance(op, mesh.SpmdOp)]
    times = [
        NestTime(i, nest_name(nest) or f"nest{i}", describe(nest), cycles, end)
        for i, (nest, cycles, end) in enumerate(
            zip(nests, critical_path(timer.ends), timer.ends, strict=True)
        )
    ]
    return report, times


def layer_window(one: Sequence[tuple[str, ...]], two: Sequence[tuple[str, ...]]) -> range:
    """
    The positions in `two` (nest signatures of the two-layer program) of one layer: `d =
    len(two) - len(one)` nests from the end of the common prefix. When `two` is `one`
    with `d` nests inserted, that is the last place they fit (`two[:s] == one[:s]` and
    `two[s + d:] == one[s:]`); otherwise, the nests after the common prefix.
    """
    d = len(two) - len(one)
    if d <= 0:
        return range(0)
    prefix = 0
    while prefix < len(one) and one[prefix] == two[prefix]:
        prefix += 1
    return range(prefix, prefix + d)


def program_signatures(module: ModuleOp) -> list[tuple[str, ...]]:
    program = find_program(module, None)
    return [signature(op) for op in program.body.block.ops if isinstance(op, mesh.SpmdOp)]


__all__ = [
    "NestTime",
    "NestTimer",
    "OpCounts",
    "count_ops",
    "critical_path",
    "describe",
    "layer_window",
    "nest_name",
    "program_signatures",
    "run_nests",
]
