"""
Running programs: choosing the entry function, reading and checking inputs, making
random (or zero) inputs, executing at any level, and summarising results.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ModuleOp,
    TensorType,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.utils.hints import isa

from plmr.dialects import graph, mesh, tile
from plmr.errors import PlmrError
from plmr.runtime.reference import ReferenceEvaluator
from plmr.runtime.report import Report
from plmr.runtime.state import WaferState
from plmr.target.interface import Entry, arg_names
from plmr.values import Array, tensor_dtype

MeshEntry = mesh.ProgramOp
"""A mesh program as a `plmr run` entry (runs on the modelled wafer)."""

E = TypeVar("E", bound=func.FuncOp | mesh.ProgramOp)


def on_wafer(fn: Entry) -> bool:
    """Whether `fn` runs on the modelled wafer: a mesh program or a sequence of them."""
    return isinstance(fn, mesh.ProgramOp) or mesh.runs_programs(fn)


def functions(module: ModuleOp) -> list[func.FuncOp]:
    return [op for op in module.ops if isinstance(op, func.FuncOp) and op.body.blocks]


def entries(module: ModuleOp) -> list[Entry]:
    out: list[Entry] = []
    for op in module.ops:
        if isinstance(op, mesh.ProgramOp) or (
            isinstance(op, func.FuncOp) and op.body.blocks
        ):
            out.append(op)
    return out


def _select(candidates: Sequence[E], entry: str | None, what: str) -> E:
    """`@entry`, else `@main`, else the only candidate; `what` names them in errors."""
    names = ", ".join(f"@{f.sym_name.data}" for f in candidates) or "none"
    if entry is not None:
        for f in candidates:
            if f.sym_name.data == entry:
                return f
        raise PlmrError(f"no {what} @{entry} in the program ({names})")
    for f in candidates:
        if f.sym_name.data == "main":
            return f
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise PlmrError(f"the program has no {what} to run")
    raise PlmrError(f"the program has several entries ({names}); choose one with --entry")


def select_entry(module: ModuleOp, entry: str | None) -> Entry:
    """`@entry`, else `@main`, else the module's only function or mesh program."""
    return _select(entries(module), entry, "function or mesh.program")


def select_function(module: ModuleOp, entry: str | None) -> func.FuncOp:
    """`@entry`, else `@main`, else the module's only function."""
    return _select(functions(module), entry, "function")


def _tensor(t: Attribute, what: str) -> TensorType[Attribute]:
    if not isa(t, TensorType[Attribute]):
        raise PlmrError(f"{what} has type {t}; plmr run supports tensor arguments only")
    return t


def load_inputs(fn: Entry, path: Path) -> list[Array]:
    """Reads an .npz with one array per argument and checks names, shapes and dtypes."""
    names = arg_names(fn)
    try:
        with path.open("rb") as f:
            head = f.read(4)
    except FileNotFoundError as e:
        raise PlmrError(f"no such file: {path}") from e
    except OSError as e:
        raise PlmrError(f"cannot read {path}: {e.strerror or e}") from e
    if not head:
        raise PlmrError(f"{path} is empty: expected an .npz archive (numpy.savez)")
    if head != b"PK\x03\x04":
        raise PlmrError(
            f"{path} is not an .npz archive (numpy.savez writes a zip file, this one "
            "does not start like one)"
        )
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays: dict[str, Array] = {k: np.asarray(data[k]) for k in data.files}
    except FileNotFoundError as e:
        raise PlmrError(f"no such file: {path}") from e
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise PlmrError(f"cannot read {path} as an .npz archive: {e}") from e
    expected = ", ".join(names) or "none"
    missing = [n for n in names if n not in arrays]
    if missing:
        raise PlmrError(
            f"{path}: missing input(s) {', '.join(missing)} for @{fn.sym_name.data} "
            f"(expected keys: {expected})"
        )
    extra = sorted(set(arrays) - set(names))
    if extra:
        raise PlmrError(
            f"{path}: unexpected key(s) {', '.join(extra)} (expected keys: {expected})"
        )
    args: list[Array] = []
    for name, t in zip(names, fn.function_type.inputs.data, strict=True):
        tt = _tensor(t, f"argument {name}")
        arr = arrays[name]
        if tuple(arr.shape) != tt.get_shape():
            raise PlmrError(
                f"{path}: input {name} has shape {tuple(arr.shape)}, but "
                f"@{fn.sym_name.data} expects {tt}"
            )
        dtype = tensor_dtype(tt)
        if not np.can_cast(arr.dtype, dtype, casting="same_kind"):
            raise PlmrError(
                f"{path}: input {name} has dtype {arr.dtype}, which cannot be converted to "
                f"the element type {tt.element_type} of {tt}"
            )
        args.append(arr.astype(dtype))
    return args


_VALUE_PRESERVING = (
    graph.CastOp,
    graph.ReshapeOp,
    graph.TransposeOp,
    graph.ExpandOp,
    graph.SliceOp,
)
"""Ops whose result holds (some of) their input's values: indices flow through them."""


def _index_bound(value: SSAValue, depth: int = 0) -> int | None:
    """
    The smallest size of a gathered axis that `value` indexes (as the indices of a
    gather or gather_elements, directly or through casts and reshapes), else None.
    """
    bound: int | None = None
    for use in value.uses:
        op = use.operation
        size: int | None = None
        if isinstance(op, graph.GatherOp | graph.GatherElementsOp) and use.index == 1:
            shape = graph.static_shape(op.data, "data")
            size = shape[op.axis.value.data % len(shape)]
        elif isinstance(op, tile.LookupOp) and use.index == 1:
            shape = graph.static_shape(op.table, "table")
            size = shape[op.axis.value.data % len(shape)]
        elif isinstance(op, _VALUE_PRESERVING) and depth < 8:
            size = _index_bound(op.results[0], depth + 1)
        elif isinstance(op, mesh.RunOp | mesh.ScatterOp) and depth < 8:
            # Through a program run (a sequence of programs) to the program's input.
            inner = (
                op.program().body.block.args[use.index]
                if isinstance(op, mesh.RunOp)
                else op.result
            )
            size = _index_bound(inner, depth + 1)
        if size is not None:
            bound = size if bound is None else min(bound, size)
    return bound


def random_inputs(fn: Entry, seed: int) -> list[Array]:
    """Standard-normal floats; integers in range for the ops that use them."""
    rng = np.random.default_rng(seed)
    names = arg_names(fn)
    args: list[Array] = []
    for name, t, value in zip(
        names, fn.function_type.inputs.data, fn.body.block.args, strict=True
    ):
        tt = _tensor(t, f"argument {name}")
        dtype = tensor_dtype(tt)
        shape = tt.get_shape()
        if dtype.kind == "f":
            args.append(rng.standard_normal(shape).astype(dtype))
        elif dtype.kind == "b":
            args.append(rng.integers(0, 2, shape).astype(dtype))
        else:
            high = _index_bound(value)
            top = 8 if high is None else max(1, high)
            args.append(rng.integers(0, top, shape).astype(dtype))
    return args


def check_entry_memory(fn: Entry, mode: str = "functional") -> None:
    """Raises a `PlmrError` if running `fn` in `mode` cannot fit in host memory."""
    from plmr.runtime.memory import check_function_memory, check_host_memory

    if isinstance(fn, func.FuncOp):
        check_function_memory(fn)
    else:
        check_host_memory(fn, mode)


def zero_inputs(fn: Entry, broadcast: bool = False) -> list[Array]:
    """
    Zeros of each argument's shape and element type (e.g. for timing a program);
    `broadcast`: zero-stride views that take no memory whatever the sizes.
    """
    names = arg_names(fn)

    def make(shape: tuple[int, ...], dtype: np.dtype[Any]) -> Array:
        if broadcast:
            return np.broadcast_to(np.zeros((), dtype), shape)
        return np.zeros(shape, dtype)

    return [
        make(tt.get_shape(), tensor_dtype(tt))
        for tt in (
            _tensor(t, f"argument {name}")
            for name, t in zip(names, fn.function_type.inputs.data, strict=True)
        )
    ]


def run_function(module: ModuleOp, fn: func.FuncOp, args: Sequence[Array]) -> list[Array]:
    """Executes `fn` with the reference semantics."""
    evaluator = ReferenceEvaluator(module)
    with np.errstate(all="ignore"):
        return evaluator.run(fn, args)


def run_entry(
    module: ModuleOp,
    fn: Entry,
    args: Sequence[Array],
    *,
    device: str | None = None,
    mode: str = "functional",
    relay: bool = False,
    trace_path: Path | None = None,
    trace_pes: str | None = None,
    heatmap_path: Path | None = None,
    exact: bool = False,
    state: WaferState | None = None,
) -> tuple[list[Array], Report | None]:
    """
    Runs a function (reference semantics) or a mesh program (the mesh runtime; in
    timing mode `exact` steps every loop iteration instead of extrapolating). With
    `state`, a mesh program's named state stays on the wafer (`args`: its host inputs).
    """
    if isinstance(fn, func.FuncOp):
        if mesh.runs_programs(fn):
            from plmr.runtime.sequence import run_sequence

            return run_sequence(
                fn, args, device=device, mode=mode, relay=relay, exact=exact
            )
        return run_function(module, fn, args), None
    from plmr.runtime.mesh_machine import MeshRuntime
    from plmr.runtime.trace import TraceRecorder, default_pes, parse_pes, write_heatmap
    from plmr.target.device import get_device

    dev = get_device(device if device is not None else fn.device.spec.data)
    recorder = None
    if trace_path is not None:
        grid = fn.grid_shape
        pes = parse_pes(trace_pes, grid) if trace_pes else default_pes(grid)
        recorder = TraceRecorder(pes, dev.clock_hz)
    runtime = MeshRuntime(dev, mode, relay, recorder=recorder, exact=exact, state=state)
    with np.errstate(all="ignore"):
        results, report = runtime.run_program(fn, args)
    if recorder is not None and trace_path is not None:
        recorder.write(trace_path)
    if heatmap_path is not None and report.finish is not None:
        write_heatmap(
            report.finish, heatmap_path, f"@{fn.sym_name.data}", "finishing time (cycles)"
        )
    return results, report


def summarize(names: Sequence[str], results: Sequence[Array]) -> list[str]:
    """One line per result: name, shape, dtype, first values, sum and a CRC-32."""
    lines: list[str] = []
    for name, r in zip(names, results, strict=True):
        flat = r.reshape(-1)
        head = ", ".join(_fmt(v) for v in flat[:4]) + (", ..." if flat.size > 4 else "")
        stats = ""
        if flat.size and r.dtype.kind in "fiub":
            as_f = flat.astype(np.float64)
            stats = f"  sum={as_f.sum():.6g} min={as_f.min():.6g} max={as_f.max():.6g}"
        crc = zlib.crc32(np.ascontiguousarray(r).tobytes())
        lines.append(
            f"  {name}: {'x'.join(map(str, r.shape)) or 'scalar'} {r.dtype} "
            f"[{head}]{stats} crc32={crc:08x}"
        )
    return lines


def _fmt(v: Any) -> str:
    if isinstance(v, np.floating):
        return f"{v.item():.6g}"
    return str(v)
