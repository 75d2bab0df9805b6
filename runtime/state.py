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
by the decode step's nests split another way) is re-placed on the wafer; its bytes are
reported apart (`state_moved_bytes`), never as host traffic. A state the wafer does not
hold yet starts as zeros (an empty cache).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from plmr.dialects import mesh
from plmr.errors import PlmrError
from plmr.runtime.placement import gather_array, scatter_array
from plmr.values import Array


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

    def place(
        self, want: StateInput, d: mesh.DistType, grid: tuple[int, int], timing: bool
    ) -> tuple[Array, int]:
        """The blocks of state `want` in layout `d` and the bytes re-placed on the wafer."""
        block = d.block_shape(grid)
        if timing:
            return np.broadcast_to(np.zeros((), dtype=want.dtype), grid + block), 0
        held = self.values.get(want.name)
        if held is None:
            return scatter_array(np.zeros(want.shape, want.dtype), d.layout, grid, 0.0), 0
        if (
            held.layout == d.layout
            and held.grid == grid
            and held.shape == want.shape
            and tuple(held.blocks.shape) == grid + block
        ):
            return held.blocks, 0
        tensor = held.tensor()
        if tensor.shape != want.shape:
            raise PlmrError(
                f"the wafer holds state '{want.name}' of shape {list(tensor.shape)}, the "
                f"program reads it as {list(want.shape)}; compile both programs with the "
                "same capacity"
            )
        return scatter_array(tensor, d.layout, grid, 0.0), held.nbytes

    def keep(self, name: str, value: Resident) -> None:
        self.values[name] = value


__all__ = [
    "Resident",
    "StateInput",
    "WaferState",
]
