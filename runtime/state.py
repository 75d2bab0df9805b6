"""
State that lives on the wafer across runs of mesh programs (a decoder's KV cache).

A mesh program records which of its inputs and outputs are named state
(`plmr.state_args` / `plmr.state_results`, from `graph-kv-state`'s `plmr.state`
attributes). Run with a `WaferState`, such an output is not handed to the host: its
per-PE blocks stay where the program left them, under the state's name, and the next
run's input of that name is those blocks, placed by no transfer. Only the other inputs
and outputs cross the host link, and the report counts their bytes.

A state input whose blocks were left in another layout (e.g. the prefill's buffer read
by the decode step's nests split another way) is re-placed on the wafer; its bytes are
reported apart (`state_moved_bytes`), never as host traffic. A state the wafer does not
hold yet starts as zeros (an empty cache).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, StringAttr
from xdsl.ir import Attribute

from plmr.dialects import mesh
from plmr.errors import PlmrError
from plmr.runtime.placement import gather_array, scatter_array
from plmr.runtime.reference import Array

STATE_ATTR = "plmr.state"
"""Argument/result attribute: the value is the named state that stays on the wafer across
runs (`graph-kv-state`); a mesh.program records them as `plmr.state_args` /
`plmr.state_results` (the state's name, or "" for a host value)."""
STATE_ARGS_ATTR = "plmr.state_args"
STATE_RESULTS_ATTR = "plmr.state_results"


def program_names(program: mesh.ProgramOp, key: str, n: int) -> list[str | None]:
    """The `n` names a mesh.program records under `key` (None where none is given)."""
    names = program.attributes.get(key)
    if not isinstance(names, ArrayAttr):
        return [None] * n
    values = cast(ArrayAttr[Attribute], names).data
    if len(values) != n:
        return [None] * n
    return [v.data if isinstance(v, StringAttr) and v.data else None for v in values]


def _states(
    fn: func.FuncOp | mesh.ProgramOp,
    attrs: Sequence[DictionaryAttr] | None,
    key: str,
    n: int,
) -> list[str | None]:
    if isinstance(fn, mesh.ProgramOp):
        return program_names(fn, key, n)
    out: list[str | None] = []
    for i in range(n):
        value = (
            attrs[i].data.get(STATE_ATTR) if attrs is not None and i < len(attrs) else None
        )
        out.append(value.data if isinstance(value, StringAttr) else None)
    return out


def state_args(fn: func.FuncOp | mesh.ProgramOp) -> list[str | None]:
    """Per input: the name of the wafer-resident state it is, or None (a host input)."""
    attrs = None
    if isinstance(fn, func.FuncOp) and fn.arg_attrs is not None:
        attrs = list(fn.arg_attrs.data)
    return _states(fn, attrs, STATE_ARGS_ATTR, len(fn.function_type.inputs.data))


def state_results(fn: func.FuncOp | mesh.ProgramOp) -> list[str | None]:
    """Per output: the name of the wafer-resident state it is, or None (to the host)."""
    attrs = None
    if isinstance(fn, func.FuncOp) and fn.res_attrs is not None:
        attrs = list(fn.res_attrs.data)
    return _states(fn, attrs, STATE_RESULTS_ATTR, len(fn.function_type.outputs.data))


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
    "STATE_ARGS_ATTR",
    "STATE_ATTR",
    "STATE_RESULTS_ATTR",
    "Resident",
    "StateInput",
    "WaferState",
    "state_args",
    "state_results",
]
