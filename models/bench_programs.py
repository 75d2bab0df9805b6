"""
The programs of `plmr bench decode|prefill`, compiled and simulated in timing mode (shapes
only, any size): one program with each nest timed (`timed`), or a whole model from its
one- and two-layer programs, the second layer repeated (`simulate_whole_model`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects import mesh
from plmr.models.nests import (
    NestTime,
    NestTimer,
    count_ops,
    critical_path,
    describe,
    layer_window,
    nest_name,
    program_signatures,
    run_nests,
)
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.report import Report
from plmr.target.device import Device


@dataclass
class Timed:
    """One compiled and simulated program."""

    report: Report
    nests: list[NestTime]
    signatures: list[tuple[str, ...]]
    spmds: int
    allreduces: int
    compile_seconds: float
    simulate_seconds: float


@dataclass
class Compiled:
    """One compiled program."""

    module: ModuleOp
    signatures: list[tuple[str, ...]]
    spmds: int
    allreduces: int
    seconds: float


def compile_program(text: str, options: CompileOptions) -> Compiled:
    """Compiles one program (`plmr compile`) and counts its nests and allreduces."""
    from plmr.dialects.context import make_context, parse_module

    start = time.perf_counter()
    module = compile_module(make_context(), parse_module(text), options)
    seconds = time.perf_counter() - start
    counts = count_ops(module)
    return Compiled(
        module, program_signatures(module), counts.spmds, counts.allreduces, seconds
    )


def _zero_inputs(module: ModuleOp) -> list[Any]:
    """Zero-stride inputs of the program (timing mode: shapes only, no host memory)."""
    from plmr.dialects import mesh
    from plmr.dialects.graph import static_shape

    program = next(op for op in module.ops if isinstance(op, mesh.ProgramOp))
    return [
        np.broadcast_to(np.float32(0), static_shape(arg, "input"))
        for arg in program.body.block.args
    ]


def simulate_compiled(
    compiled: Compiled, options: CompileOptions, dev: Device, exact: bool
) -> Timed:
    """Simulates (timing mode) a compiled program, timing each nest."""
    start = time.perf_counter()
    report, nests = run_nests(
        compiled.module,
        _zero_inputs(compiled.module),
        dev,
        relay=options.relay,
        runtime_options=runtime_options(exact),
    )
    return Timed(
        report,
        nests,
        compiled.signatures,
        compiled.spmds,
        compiled.allreduces,
        compiled.seconds,
        time.perf_counter() - start,
    )


def timed(text: str, options: CompileOptions, dev: Device, exact: bool = False) -> Timed:
    """Compiles and simulates (timing mode) one program, timing each nest."""
    return simulate_compiled(compile_program(text, options), options, dev, exact)


def runtime_options(exact: bool) -> dict[str, Any]:
    """
    The runtime's options (`MeshRuntime` fields): `exact` simulates every loop iteration
    instead of extrapolating loops that reached their steady state.
    """
    return {"exact": exact}


@dataclass
class LayerTimer(NestTimer):
    """The nest timer of a whole-model run: keeps the nests' ends of the first two layers."""

    first_ends: list[float] | None = None
    """The nests' ends when the layer window is about to run for the third layer."""

    def on_layer(self, layer: int) -> None:
        if layer == 1:
            self.flush()
            self.first_ends = list(self.ends)


@dataclass
class WholeModel:
    """A whole model simulated: the two-layer program with its second layer repeated."""

    report: Report
    nests: list[NestTime]
    """The nests of the two-layer program, timed in the whole model's run."""
    layer_cycles: float
    """Mean cycles of the layers after the first (end of the last layer minus end of
    the first, over their number)."""
    seconds: float


def simulate_whole_model(
    one: Compiled,
    two: Compiled,
    n_layers: int,
    options: CompileOptions,
    dev: Device,
    exact: bool = False,
) -> WholeModel:
    """
    Simulates every layer of an `n_layers` model from its one- and two-layer programs
    (timing mode): the two-layer program runs with its second layer's nests (found by
    `layer_window`) once for each of the layers 2..n (`plmr.runtime.layer_repeat.LayerRepeat`:
    each run reads the run before's outputs, with fresh collectives), then the head.
    Layers that repeat with a uniform period are extrapolated unless `exact`.
    """
    from plmr.runtime.layer_repeat import layer_repeat
    from plmr.runtime.mesh_machine import find_program

    program = find_program(two.module, None)
    window = layer_window(one.signatures, two.signatures)
    plan = layer_repeat(program, window, n_layers - 1)
    start = time.perf_counter()
    timer = LayerTimer(dev, "timing", options.relay, exact=exact, layers=plan)
    _, report = timer.run_program(program, _zero_inputs(two.module))
    nests = [op for op in program.body.block.ops if isinstance(op, mesh.SpmdOp)]
    ends = list(timer.ends)
    if timer.first_ends is not None:
        ends[: window.stop] = timer.first_ends[: window.stop]
    times = [
        NestTime(i, nest_name(nest) or f"nest{i}", describe(nest), cycles, end)
        for i, (nest, cycles, end) in enumerate(
            zip(nests, critical_path(ends), ends, strict=True)
        )
    ]
    marks = timer.extrapolation.layer_ends
    (k0, t0), (k1, t1) = marks[0], marks[-1]
    layer = (t1 - t0) / (k1 - k0) if k1 > k0 else 0.0
    return WholeModel(report, times, layer, time.perf_counter() - start)
