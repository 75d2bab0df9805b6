"""
State that lives on the wafer across runs of mesh programs (a decoder's KV cache).

A mesh program records which of its inputs and outputs are named state
(`plmr.state_args` / `plmr.state_results`, from `graph-kv-state`'s `plmr.state`
attributes; `plmr.target.interface` reads them). Run with a `WaferState`, such an
output is not handed to the host: its per-PE blocks stay where the program left them,
under the state's name, and the next run's input of that name is those blocks, placed
by no transfer. Only the other inputs
and outputs cross the host link, and the report counts their bytes.

A state input whose blocks were left in another layout (e.g. the prefill's buffer read
by the decode step's nests split another way, or a layer's hidden state read by the next
layer's first nest) is re-placed on the wafer; its bytes are reported apart
(`state_moved_bytes`), never as host traffic. The re-layout is priced by the machine model
as `convert-tile-to-mesh` moves a value between layouts inside a program
(`relayout_cycles`): the value is ready for the nest that reads it only after it. A state
the wafer does not hold yet starts as zeros (an empty cache).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from plmr.dialects import mesh
from plmr.dialects.mesh.attrs import axis_size, block_shape
from plmr.errors import PlmrError
from plmr.runtime.placement import gather_array, scatter_array
from plmr.target.collective_stages import line_cycles
from plmr.target.collectives import allgather_plan, allreduce_plan, broadcast_plan
from plmr.target.device import Device
from plmr.values import Array

RELAYOUT_K = (2, 3)
"""The K-trees a re-layout's allreduce chooses from (as `convert-tile-to-mesh` does)."""


def _allreduce_cycles(n: int, elems: int, device: Device, gather: bool = False) -> float:
    """
    The runtime's timing of an allreduce (with `gather`, an allgather) of `elems`
    values per PE over `n` PEs.
    """
    if n <= 1:
        return 0.0
    plan = allgather_plan if gather else allreduce_plan
    return min(
        float(line_cycles(plan(n, "ktree", k), elems, device).max()) for k in RELAYOUT_K
    )


def relayout_cycles(
    shape: Sequence[int],
    have: mesh.LayoutAttr,
    want: mesh.LayoutAttr,
    grid: tuple[int, int],
    device: Device,
) -> float:
    """
    Cycles to turn every PE's block of a `shape` value in layout `have` into its block in
    `want`, done as `convert-tile-to-mesh` does at a nest's head: a dim split over an axis
    and wanted over the other comes from the diagonal PE (`mesh.diagonal_broadcast`), any other dim split otherwise is all-gathered (`mesh.allgather` along the
    axis), one after the other; taking a PE's part of a whole dim
    is local. The same layout costs nothing.
    """
    if have == want:
        return 0.0
    plain = (
        have.mode == want.mode
        and have.skew == want.skew
        and have.band is None
        and want.band is None
    )
    block = list(block_shape(shape, have, grid))
    cycles = 0.0
    for j, axis in enumerate(have.axes):
        if axis == "-" or (plain and want.axes[j] == axis):
            continue
        n = axis_size(axis, grid)
        other = "x" if axis == "y" else "y"
        if plain and want.axes[j] == other and other not in have.axes:
            if n > 1:
                plan = broadcast_plan(n, 0)  # the slowest line's: its root at an end
                cycles += float(line_cycles(plan, math.prod(block), device).max())
            continue
        block[j] = min(shape[j], block[j] * n)
        cycles += _allreduce_cycles(n, math.prod(block), device, gather=True)
    return cycles


@dataclass
class Resident:
    """One state's value on the wafer: per-PE blocks in a layout, or a whole tensor."""

    shape: tuple[int, ...]
    grid: tuple[int, int]
    blocks: Array
    layout: mesh.LayoutAttr | None
    """None: `blocks` is the whole tensor (a state not left distributed)."""

    def tensor(self) -> Array:
        """The logical tensor (functional mode)."""
        if self.layout is None:
            return self.blocks
        return gather_array(self.blocks, self.layout, self.shape, self.grid)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.blocks.dtype.itemsize


@dataclass
class StateInput:
    """A program input that is named state (its value is taken from the wafer)."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype[np.generic]


@dataclass
class WaferState:
    """The named values a sequence of program runs keeps on the wafer."""

    values: dict[str, Resident] = field(default_factory=dict[str, Resident])

    @property
    def nbytes(self) -> int:
        return sum(v.nbytes for v in self.values.values())

    def tensor(self, name: str) -> Array:
        """The logical value of a state (functional mode; for checks, not a transfer)."""
        return self.values[name].tensor()

    def held_layout(self, name: str) -> str:
        """The layout state `name` is held in ("" when the wafer does not hold it)."""
        held = self.values.get(name)
        if held is None:
            return ""
        return "whole" if held.layout is None else str(held.layout)

    def place(
        self,
        want: StateInput,
        d: mesh.DistType,
        grid: tuple[int, int],
        timing: bool,
        device: Device | None = None,
        pad: float = 0.0,
    ) -> tuple[Array, int, float]:
        """
        The blocks of state `want` in layout `d`, the bytes re-placed on the wafer and
        the cycles of the re-layout (priced with `device`; 0 without it).
        """
        block = d.block_shape(grid)
        held = self.values.get(want.name)
        if held is None:
            if timing:
                return np.broadcast_to(np.zeros((), dtype=want.dtype), grid + block), 0, 0.0
            zeros = np.zeros(want.shape, want.dtype)
            return scatter_array(zeros, d.layout, grid, pad), 0, 0.0
        if held.shape != want.shape:
            raise PlmrError(
                f"the wafer holds state '{want.name}' of shape {list(held.shape)}, the "
                f"program reads it as {list(want.shape)}; compile both programs with the "
                "same capacity"
            )
        if (
            held.layout == d.layout
            and held.grid == grid
            and tuple(held.blocks.shape) == grid + block
        ):
            return held.blocks, 0, 0.0
        cycles = 0.0
        if device is not None and held.grid == grid:
            # A whole value (not left distributed) is every PE's: taking a part is local.
            if held.layout is not None:
                cycles = relayout_cycles(held.shape, held.layout, d.layout, grid, device)
        # Taking a part of a value every PE holds whole moves nothing.
        moved = held.nbytes if cycles or device is None else 0
        if timing:
            blocks = np.broadcast_to(np.zeros((), dtype=want.dtype), grid + block)
            return blocks, moved, cycles
        return scatter_array(held.tensor(), d.layout, grid, pad), moved, cycles

    def keep(self, name: str, value: Resident) -> None:
        self.values[name] = value


__all__ = [
    "Resident",
    "StateInput",
    "WaferState",
    "relayout_cycles",
]
