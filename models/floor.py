"""
The floor of a compiled layer under the device model: the cycles no program with the
same collectives can go below on this device (`plmr bench decode|prefill`, "floor").

**A collective's floor** (`collective_floor`). An allreduce over a line of `n` PEs
leaves every PE with a value that depends on every PE's block, so a block must travel
from each end of the line to the middle and the result back: with the best root (the
middle), ⌊n/2⌋ hops out and ⌊n/2⌋ back, each hop a pass-through router (α,
`hop_cycles`), each of the two messages through the ramps at both ends (2·T_R). The
calibrated software overheads are paid once each: the send overhead at the start, the
receive overhead at the end and the step overhead of the second stage; a block's worth
of wavelets crosses the middle link (streamed, `⌈e · bytes / link_bytes_per_cycle⌉`),
and the `(n − 1)·e` additions, shared by the n PEs at best (a reduce-scatter), take at
least one op of `⌈(n − 1)·e / (n · simd_fp16)⌉` cycles:

    allreduce(n, e) = send + recv + 2·(⌊n/2⌋·α + 2·T_R) + step
                      + ⌈e·bytes / link⌉ + op + ⌈(n − 1)·e / (n·simd)⌉

A reduce or a broadcast goes one way (⌊n/2⌋ hops, one message, no step overhead; a
broadcast combines nothing). An allgather (the PE at one end needs the block of the PE
at the other) and a diagonal broadcast (its slowest line's root is at an end) go n − 1
hops one way, one message of the block they deliver, and combine nothing. A collective over a segment of `S` PEs takes `n = S`; over
one PE it costs nothing.

**A layer's floor** (`layer_floor`): the compute floor (`reference_layer.compute_floor`:
the layer's multiply-accumulates over every PE at full SIMD width) plus the floor of each
collective of the layer's nests, one after the other (the decode layer's collectives
depend on each other: a norm's statistic, the scores' max and sum, the projections'
partial sums). A collective inside a loop counts once (ops in the IR, as
`allreduces_per_layer`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.ir import Operation

from plmr.dialects import mesh
from plmr.dialects.graph import static_shape
from plmr.target.collective_stages import line_cycles
from plmr.target.device import Device
from plmr.target.route_plan import plan_of

COLLECTIVES = (
    mesh.AllreduceOp,
    mesh.ReduceOp,
    mesh.BroadcastOp,
    mesh.AllgatherOp,
    mesh.DiagonalBroadcastOp,
)
"""The collectives a floor is derived for (a shift's cost is its distance, not a floor)."""


def collective_floor(kind: str, n: int, elems: int, device: Device) -> float:
    """
    The floor of one collective (`allreduce`, `reduce`, `broadcast`, `allgather` or
    `diagonal_broadcast`) over `n` PEs of a line on blocks of `elems` values (an
    allgather's: the gathered block; see the module docstring).
    """
    if kind not in ("allreduce", "reduce", "broadcast", "allgather", "diagonal_broadcast"):
        raise ValueError(f"no floor for a collective '{kind}'")
    if n < 1 or elems < 0:
        raise ValueError(f"a collective over {n} PEs of {elems} values")
    if n == 1:
        return 0.0
    dev = device
    across = kind in ("allgather", "diagonal_broadcast")
    half = n - 1 if across else n // 2
    ways = 2 if kind == "allreduce" else 1
    combine = (
        0.0
        if kind == "broadcast" or across
        else dev.op_overhead_cycles + math.ceil((n - 1) * elems / (n * dev.simd_fp16))
    )
    return (
        dev.send_overhead_cycles
        + dev.recv_overhead_cycles
        + ways * (half * dev.hop_cycles + 2 * dev.ramp_cycles)
        + (ways - 1) * dev.step_overhead_cycles
        + math.ceil(elems * dev.elem_bytes / dev.link_bytes_per_cycle)
        + combine
    )


@dataclass(frozen=True)
class CollectiveFloor:
    """One collective of a layer and its floor."""

    nest: int
    """Index of its nest among the program's nests."""
    name: str
    """The nest's name (its first result)."""
    kind: str
    combine: str
    """`sum`, `max` or `min` (empty for a broadcast)."""
    axis: str
    pes: int
    """PEs of the line it spans (a segment's, if segmented)."""
    elems: int
    """Values of each PE's block."""
    floor_cycles: float
    compiled_cycles: float = 0.0
    """The runtime's timing of the compiled collective (its plan) on one line."""

    @property
    def compiled_over_floor(self) -> float | None:
        return self.compiled_cycles / self.floor_cycles if self.floor_cycles else None

    def to_json(self) -> dict[str, Any]:
        return {
            "nest": self.nest,
            "name": self.name,
            "kind": self.kind,
            "combine": self.combine,
            "axis": self.axis,
            "pes": self.pes,
            "elems": self.elems,
            "floor_cycles": self.floor_cycles,
            "compiled_cycles": self.compiled_cycles,
            "compiled_over_floor": self.compiled_over_floor,
        }


def collective_floors(
    nests: Sequence[tuple[int, str, mesh.SpmdOp]],
    grid: tuple[int, int],
    device: Device,
) -> list[CollectiveFloor]:
    """The floor of every collective of the nests `(index, name, nest)`, in order."""
    out: list[CollectiveFloor] = []
    for index, name, nest in nests:
        for op in nest.walk():
            if not isinstance(op, COLLECTIVES):
                continue
            out.append(_floor_of(op, index, name, grid, device))
    return out


def _floor_of(
    op: Operation, index: int, name: str, grid: tuple[int, int], device: Device
) -> CollectiveFloor:
    kind = op.name.removeprefix("mesh.")
    n = mesh.segment_of(op, grid)
    elems = math.prod(static_shape(op.results[0], "value"))
    plain = isinstance(op, mesh.BroadcastOp | mesh.AllgatherOp | mesh.DiagonalBroadcastOp)
    combine = "" if plain else getattr(op, "kind").data
    axis: str = getattr(op, "axis").data
    shape = static_shape(op.results[0], "value")
    width = shape[-1] if combine == "softmax" and shape else 1
    compiled = line_cycles(
        plan_of(op, grid), elems, device, kind=combine or "sum", width=width
    )
    return CollectiveFloor(
        index,
        name,
        kind,
        combine,
        axis,
        n,
        elems,
        collective_floor(kind, n, elems, device),
        float(compiled.max()),
    )


@dataclass(frozen=True)
class LayerFloor:
    """A layer's floor: its compute floor plus its collectives' floors."""

    compute_cycles: float
    collectives: tuple[CollectiveFloor, ...]

    @property
    def collective_cycles(self) -> float:
        return sum(c.floor_cycles for c in self.collectives)

    @property
    def cycles(self) -> float:
        return self.compute_cycles + self.collective_cycles

    def to_json(self) -> dict[str, Any]:
        return {
            "cycles": self.cycles,
            "compute_cycles": self.compute_cycles,
            "collective_cycles": self.collective_cycles,
            "collectives": [c.to_json() for c in self.collectives],
        }

    def summary(
        self, layer_cycles: float, nest_cycles: dict[int, float] | None = None
    ) -> list[str]:
        """The floor next to the compiled layer's cycles, collective by collective."""
        ratio = layer_cycles / self.cycles if self.cycles else 0.0
        lines = [
            f"  floor       {self.cycles:,.0f} cycles per layer under the device model "
            f"(compute {self.compute_cycles:,.0f} + {len(self.collectives)} collective(s) "
            f"{self.collective_cycles:,.0f}); compiled / floor {ratio:,.2f}"
        ]
        for c in self.collectives:
            what = f"{c.kind} {c.combine}".rstrip()
            nest = "" if nest_cycles is None else nest_cycles.get(c.nest)
            beside = "" if nest in ("", None) else f", nest {nest:,.0f}"
            over = c.compiled_over_floor
            compiled = f"  (compiled {c.compiled_cycles:,.0f}" + (
                f" = {over:,.2f}×{beside})" if over else f"{beside})"
            )
            lines.append(
                f"    #{c.nest:<4} {c.floor_cycles:>8,.0f}  {what} {c.axis} over {c.pes} "
                f"PEs, {c.elems} value(s) per PE, %{c.name}{compiled}"
            )
        return lines


def layer_floor(
    compute_cycles: float,
    nests: Sequence[tuple[int, str, mesh.SpmdOp]],
    grid: tuple[int, int],
    device: Device,
) -> LayerFloor:
    """The floor of a layer made of `nests` whose compute floor is `compute_cycles`."""
    return LayerFloor(compute_cycles, tuple(collective_floors(nests, grid, device)))


__all__ = [
    "COLLECTIVES",
    "CollectiveFloor",
    "LayerFloor",
    "collective_floor",
    "collective_floors",
    "layer_floor",
]
