"""
Host memory of a mesh-runtime run.

Timing mode carries shapes only (zero-stride placeholders), so it needs no host memory
for the data whatever the sizes. Functional mode holds real arrays: the host inputs and
outputs and, while a `mesh.spmd` runs, each of its operands and results as one array
over the whole grid. `functional_bytes` is a lower bound of that peak; `check_host_memory`
refuses a functional run whose lower bound exceeds the memory available, before anything
is allocated, with one `PlmrError` that gives the bytes needed.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, SSAValue

from plmr.dialects import mesh
from plmr.errors import PlmrError
from plmr.values import tensor_dtype


@dataclass(frozen=True)
class HostBytes:
    """The host memory a functional run needs at least, by part."""

    inputs: int
    """The program's host inputs (and the host outputs, which outlive the run)."""
    spmd: int
    """The largest `mesh.spmd`: its operands and results over the whole grid."""
    spmd_name: str

    @property
    def total(self) -> int:
        return self.inputs + self.spmd


def _value_bytes(value: SSAValue, grid: tuple[int, int]) -> int:
    t = value.type
    if isinstance(t, mesh.DistType):
        itemsize = tensor_dtype(t.tensor).itemsize
        return grid[0] * grid[1] * math.prod(t.block_shape(grid)) * itemsize
    if isinstance(t, TensorType):
        itemsize = np.dtype(tensor_dtype(t)).itemsize  # pyright: ignore[reportUnknownArgumentType]
        return math.prod(t.get_shape()) * itemsize
    return 0


def _tensor_bytes(t: Attribute) -> int:
    if not isinstance(t, TensorType):
        return 0
    return math.prod(t.get_shape()) * np.dtype(tensor_dtype(t)).itemsize  # pyright: ignore[reportUnknownArgumentType]


def functional_bytes(program: mesh.ProgramOp) -> HostBytes:
    """A lower bound of the host memory a functional run of `program` needs."""
    grid = program.grid_shape
    block = program.body.block
    host = sum(_tensor_bytes(a.type) for a in block.args)
    ret = block.last_op
    if isinstance(ret, mesh.ReturnOp):
        host += sum(_tensor_bytes(v.type) for v in ret.values)
    largest, name = 0, ""
    for op in block.ops:
        if not isinstance(op, mesh.SpmdOp):
            continue
        size = sum(_value_bytes(v, grid) for v in (*op.inputs, *op.outputs))
        if size > largest:
            largest = size
            name = (op.outputs[0].name_hint or "") if op.outputs else ""
    return HostBytes(host, largest, name)


def available_bytes() -> int:
    """The memory this process can still allocate (MemAvailable; else physical memory)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 1 << 62


def _gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB"


def check_host_memory(
    program: mesh.ProgramOp, mode: str, available: int | None = None
) -> None:
    """Raises a PlmrError if a functional run of `program` cannot fit in host memory."""
    if mode != "functional":
        return
    need = functional_bytes(program)
    have = available_bytes() if available is None else available
    if need.total <= have:
        return
    where = f" and {_gib(need.spmd)} for the grid-wide arrays of the largest mesh.spmd" + (
        f" (%{need.spmd_name})" if need.spmd_name else ""
    )
    raise PlmrError(
        f"a functional run of @{program.sym_name.data} needs at least "
        f"{need.total:,} B ({_gib(need.total)}) of host memory: {_gib(need.inputs)} for "
        f"the inputs and outputs{where}; {_gib(have)} are available. Use --mode timing "
        "(shapes only, any size) or smaller sizes"
    )


def check_function_memory(fn: func.FuncOp, available: int | None = None) -> None:
    """
    Raises a PlmrError if a reference run of `fn` cannot fit in host memory: its
    arguments (drawn in float64 first), its results and its largest intermediate tensor
    are a lower bound of what the run holds at once.
    """
    args = sum(_tensor_bytes(t) for t in fn.function_type.inputs.data)
    drawn = max((8 * _elements(t) for t in fn.function_type.inputs.data), default=0)
    results = sum(_tensor_bytes(t) for t in fn.function_type.outputs.data)
    largest = max(
        (_tensor_bytes(r.type) for op in fn.walk() for r in op.results), default=0
    )
    need = args + drawn + results + largest
    have = available_bytes() if available is None else available
    if need <= have:
        return
    raise PlmrError(
        f"a run of @{fn.sym_name.data} needs at least {need:,} B ({_gib(need)}) of host "
        f"memory: {_gib(args + drawn)} for the arguments, {_gib(results)} for the results "
        f"and {_gib(largest)} for its largest tensor; {_gib(have)} are available. Use "
        "smaller sizes, or compile it and run the mesh program with --mode timing"
    )


def _elements(t: Attribute) -> int:
    return math.prod(t.get_shape()) if isinstance(t, TensorType) else 0


__all__ = [
    "HostBytes",
    "available_bytes",
    "check_function_memory",
    "check_host_memory",
    "functional_bytes",
]
