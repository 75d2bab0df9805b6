"""
Running a sequence of mesh programs: a model compiled with its repeated layers outlined
(`mesh.run`, `passes/layer_programs.py`).

The function's ops run in order: a host constant is its value (a weight by reference is
mapped from its file, and a timing run never opens it), a `mesh.run` runs its program on
the modelled wafer with the values of its operands. Each layer runs the one layer
program with its own weights, one after the other, so in functional mode every layer's
results are computed. The programs run one after another, so the step's time is the sum
of their times. In timing mode a program run again on inputs of the same shapes takes
the same time (the wafer model is deterministic and programs do not overlap): the first
run of the layer program is simulated and the later layers reuse its figures, the
steady state of `plmr bench` reached at once.

Values handed from one program to the next stay on the wafer: a program's inputs and
results named as state (`plmr.state_args` / `plmr.state_results`, the hand-offs
`passes/layer_programs.py` names) are kept in a `WaferState` between the runs, where the
next program reads them in place (or re-laid out on the wafer, priced by the machine
model: `runtime/state.py`), and its inputs marked as weights (`plmr.weight_args`) are
placed when the model is loaded. So only the step's own inputs and results cross the
host link, however many layers run. A program's timing depends on the layouts its state
inputs are held in (the first layer reads the embedding, the others the previous layer's
output), so its figures are reused only for runs that find them in the same layouts.

A program split into pipeline stages (`plmr.stages`: layers per region of the wafer)
runs its stages one after another: after the last layer of a stage, what it hands to
the next layer hops to the next stage's region, priced by the machine model
(`plmr.target.stages.hops`), and the step's time adds the hops (the report's
`stage_layers` and `stage_hop_cycles`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType
from xdsl.ir import SSAValue

from plmr.dialects import mesh
from plmr.dialects.graph_weights import weight_ref
from plmr.dialects.narrow import type_of
from plmr.errors import PlmrError
from plmr.runtime.report import OpTime, Report
from plmr.runtime.state import Resident, WaferState
from plmr.runtime.weights import load_weight
from plmr.target.device import Device, get_device
from plmr.target.interface import (
    LAYER_ATTR,
    stage_bytes,
    stage_layers,
    state_args,
    state_results,
)
from plmr.target.stages import hops, place_stages
from plmr.values import Array, dense_to_numpy, tensor_dtype


def _constant(op: arith.ConstantOp, mode: str) -> Array:
    ref = weight_ref(op)
    t = type_of(op.result, TensorType)
    if ref is not None:
        if mode == "timing":
            dtype = tensor_dtype(t)  # pyright: ignore[reportUnknownArgumentType]
            return np.broadcast_to(np.zeros((), dtype), tuple(t.get_shape()))
        return load_weight(ref)
    if not isinstance(op.value, DenseIntOrFPElementsAttr):
        raise PlmrError(f"a host constant of a program sequence must be dense: {op.value}")
    return dense_to_numpy(op.value)


def combine(program: str, runs: Sequence[Report]) -> Report:
    """One report of programs run one after the other (times and bytes add up)."""
    last = runs[0]
    ops: dict[str, OpTime] = {}
    for r in runs:
        for o in r.ops:
            acc = ops.setdefault(o.name, OpTime(o.name))
            acc.count += o.count
            acc.cycles += o.cycles
    peak = max(runs, key=lambda r: r.max_sram_bytes)
    slowest = max(runs, key=lambda r: r.cycles)
    means = [r.mean_comm_cycles for r in runs]
    return dataclasses.replace(
        last,
        program=program,
        cycles=sum(r.cycles for r in runs),
        seconds=sum(r.seconds for r in runs),
        compute_cycles=sum(r.compute_cycles for r in runs),
        comm_cycles=sum(r.comm_cycles for r in runs),
        idle_cycles=sum(r.idle_cycles for r in runs),
        comm_busy_cycles=sum(r.comm_busy_cycles for r in runs),
        mean_compute_cycles=sum(r.mean_compute_cycles for r in runs),
        mean_comm_cycles=None
        if any(m is None for m in means)
        else sum(m or 0.0 for m in means),
        bytes_moved=sum(r.bytes_moved for r in runs),
        hop_bytes=sum(r.hop_bytes for r in runs),
        max_sram_bytes=peak.max_sram_bytes,
        sram_peak_at=peak.sram_peak_at,
        max_routes=max(r.max_routes for r in runs),
        critical_pe=slowest.critical_pe,
        ops=sorted(ops.values(), key=lambda o: -o.cycles),
        simulation_seconds=sum(r.simulation_seconds for r in runs),
        host_lookup_bytes=sum(r.host_lookup_bytes for r in runs),
        host_lookup_cycles=sum(r.host_lookup_cycles for r in runs),
        relayed_collectives=sum(r.relayed_collectives for r in runs),
        exact=all(r.exact for r in runs),
        extrapolated_loops=sum(r.extrapolated_loops for r in runs),
        extrapolated_iterations=sum(r.extrapolated_iterations for r in runs),
        extrapolated_layers=sum(r.extrapolated_layers for r in runs),
        extrapolated_stages=sum(r.extrapolated_stages for r in runs),
        simulated_layers=sum(r.simulated_layers for r in runs),
        host_in_bytes=sum(r.host_in_bytes for r in runs),
        host_out_bytes=sum(r.host_out_bytes for r in runs),
        resident_bytes=max(r.resident_bytes for r in runs),
        state_moved_bytes=sum(r.state_moved_bytes for r in runs),
        finish=None,
        compute=None,
    )


def _boundaries(
    fn: func.FuncOp, layer: mesh.ProgramOp, device: str | None
) -> tuple[tuple[int, ...], Device | None, dict[int, int]]:
    """
    `fn`'s pipeline stages (`plmr.stages`), the device they are placed on, and the stage
    boundaries: the index of a stage's last layer run to the stage it hands over to.
    """
    groups = stage_layers(fn)
    if len(groups) < 2:
        return groups, None, {}
    dev = get_device(device if device is not None else layer.device.spec.data)
    ends: dict[int, int] = {}
    last = -1
    for stage, n in enumerate(groups[:-1]):
        last += n
        ends[last] = stage
    return groups, dev, ends


def _hop(
    run: mesh.RunOp,
    program: mesh.ProgramOp,
    groups: tuple[int, ...],
    dev: Device,
    stage: int,
    what: str,
) -> float:
    """
    Cycles of moving what the last layer run of `stage` hands to the next program run
    (the hidden state) from its region to the next stage's (`plmr.target.stages.hops`).
    """
    elements = 0
    for result in run.results:
        if any(isinstance(use.operation, mesh.RunOp) for use in result.uses):
            shape = type_of(result, TensorType).get_shape()
            elements += math.prod(shape)
    placement = place_stages(groups, program.grid_shape, dev, what=what)
    return hops(placement, dev, elements)[stage].cycles


def run_sequence(
    fn: func.FuncOp,
    args: Sequence[Array],
    *,
    device: str | None = None,
    mode: str = "functional",
    relay: bool = False,
    exact: bool = False,
) -> tuple[list[Array], Report]:
    """
    Runs `fn`, a sequence of `mesh.run`s (see the module docstring): its results and
    the report of the whole step. In timing mode a layer program's later runs reuse the
    figures of its first.
    """
    from plmr.runtime.mesh_machine import MeshRuntime

    inputs = fn.function_type.inputs.data
    if len(args) != len(inputs):
        raise PlmrError(
            f"@{fn.sym_name.data} takes {len(inputs)} arguments, got {len(args)}"
        )
    env: dict[SSAValue, Any] = dict(zip(fn.args, args, strict=True))
    runs: list[Report] = []
    timed: dict[tuple[str, ...], tuple[list[Array], Report, dict[str, Resident]]] = {}
    layers_simulated = layers_reused = 0
    wafer = WaferState()
    holds: dict[str, SSAValue] = {}
    """Which value of `fn` each state on the wafer is."""
    layer_runs = [
        op
        for op in fn.body.block.ops
        if isinstance(op, mesh.RunOp) and LAYER_ATTR in op.attributes
    ]
    groups: tuple[int, ...] = ()
    dev_stages: Device | None = None
    ends: dict[int, int] = {}
    if layer_runs:
        groups, dev_stages, ends = _boundaries(fn, layer_runs[0].program(), device)
        if groups and sum(groups) != len(layer_runs):
            raise PlmrError(
                f"@{fn.sym_name.data} records stages of {'+'.join(map(str, groups))} "
                f"layers but runs {len(layer_runs)} layers; recompile it"
            )
    hop_cycles = 0.0
    layer_index = -1
    for op in fn.body.block.ops:
        if isinstance(op, func.ReturnOp):
            report = combine(fn.sym_name.data, runs)
            report.simulated_layers = layers_simulated
            report.extrapolated_layers += layers_reused
            report.stage_layers = groups
            report.stage_bytes = (stage_bytes(fn) or (0, 0)) if groups else (0, 0)
            report.stage_hop_cycles = hop_cycles
            report.cycles += hop_cycles
            if dev_stages is not None:
                report.seconds += hop_cycles / dev_stages.clock_hz
            return [env[v] for v in op.arguments], report
        if isinstance(op, arith.ConstantOp):
            env[op.result] = _constant(op, mode)
            continue
        if not isinstance(op, mesh.RunOp):
            raise PlmrError(
                f"'{op.name}' in @{fn.sym_name.data}: a program sequence holds host "
                "constants and mesh.run only"
            )
        program = op.program()
        name = program.sym_name.data
        is_layer = LAYER_ATTR in op.attributes
        layer_index += int(is_layer)
        kept_in = state_args(program)
        kept_out = state_results(program)
        for value, state in zip(op.arguments, kept_in, strict=True):
            if state is not None and holds.get(state) is not value:
                raise PlmrError(
                    f"'mesh.run @{name}' reads state '{state}' from the wafer, but the "
                    "wafer does not hold its operand there (a hand-off must be the last "
                    "value its program left under that name)"
                )
        key = (name, *(wafer.held_layout(s) for s in kept_in if s is not None))
        if mode == "timing" and key in timed:
            results, report, left = timed[key]
            for state, resident in left.items():
                wafer.keep(state, resident)
            layers_reused += int(is_layer)
        else:
            dev = get_device(device if device is not None else program.device.spec.data)
            runtime = MeshRuntime(dev, mode, relay, exact=exact, state=wafer)
            host = [env[v] for v, s in zip(op.arguments, kept_in, strict=True) if s is None]
            with np.errstate(all="ignore"):
                results, report = runtime.run_program(program, host)
            left = {s: wafer.values[s] for s in kept_out if s is not None}
            timed[key] = (results, report, left)
            layers_simulated += int(is_layer)
        runs.append(report)
        for value, result, state in zip(op.results, results, kept_out, strict=True):
            env[value] = result
            if state is not None:
                holds[state] = value
        if is_layer and layer_index in ends:
            assert dev_stages is not None
            hop_cycles += _hop(
                op,
                program,
                groups,
                dev_stages,
                ends[layer_index],
                f"plmr run: @{fn.sym_name.data}'s stages",
            )
    raise PlmrError(f"@{fn.sym_name.data} has no func.return")


__all__ = ["combine", "run_sequence"]
