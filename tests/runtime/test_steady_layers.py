"""
Whole models in the mesh runtime (runtime/layer_repeat.py, `LayerRepeat`): the two-layer
program with its second layer run again for every further layer times the same as the
model compiled with all its layers; repeating layers are extrapolated to the stepped
result; windows that are not a layer, and functional runs, are refused.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects import mesh
from plmr.dialects.context import make_context, parse_module
from plmr.dialects.graph import static_shape
from plmr.errors import PlmrError
from plmr.models.bench import bench_config, default_options, default_tokens
from plmr.models.llama import ProgramBuilder, get_config
from plmr.models.nests import layer_window, program_signatures
from plmr.passes.pipeline import compile_module
from plmr.runtime import layer_repeat, steady
from plmr.runtime.mesh_machine import find_program, run_mesh
from plmr.runtime.report import Report

REL = 1e-9
LAYERS = 6
GRID = (4, 4)


def zeros_for(module: ModuleOp) -> list[Any]:
    program = find_program(module, None)
    return [
        np.broadcast_to(np.float32(0), static_shape(a, "input"))
        for a in program.body.block.args
    ]


@pytest.fixture(scope="module", params=["decode", "prefill"])
def programs(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The one-, two- and all-layer programs of a 6-layer tiny model on 4x4 PEs."""
    kind: str = request.param
    base = dataclasses.replace(get_config("tiny"), n_layers=LAYERS)
    config = bench_config(base, GRID, default_tokens(kind, base))
    options = default_options(base, GRID, "wse2", kind)
    builder = ProgramBuilder(config, None)

    def build(layers: list[int]) -> ModuleOp:
        text = (
            builder.decode(layers=layers, head=True)
            if kind == "decode"
            else builder.prefill(config.max_seq, layers=layers, head=True)
        )
        return compile_module(make_context(), parse_module(text), options)

    one, two = build([0]), build([0, 1])
    window = layer_window(program_signatures(one), program_signatures(two))
    return {
        "kind": kind,
        "two": two,
        "all": build(list(range(LAYERS))),
        "plan": layer_repeat.layer_repeat(find_program(two, None), window, LAYERS - 1),
    }


def run(module: ModuleOp, **kw: Any) -> Report:
    return run_mesh(module, zeros_for(module), mode="timing", **kw)[1]


def test_repeated_layers_time_the_whole_compiled_model(programs: dict[str, Any]):
    whole = run(programs["all"])
    repeated = run(programs["two"], layers=programs["plan"], exact=True)
    assert repeated.extrapolated_layers == 0
    assert repeated.simulated_layers == LAYERS - 1
    assert repeated.cycles == pytest.approx(whole.cycles, rel=REL)
    assert repeated.bytes_moved == whole.bytes_moved
    assert repeated.compute_cycles == pytest.approx(whole.compute_cycles, rel=REL)


def test_repeating_layers_are_extrapolated_to_the_stepped_result(
    programs: dict[str, Any],
):
    stepped = run(programs["two"], layers=programs["plan"], exact=True)
    fast = run(programs["two"], layers=programs["plan"])
    assert fast.extrapolated_layers > 0
    assert fast.simulated_layers + fast.extrapolated_layers == LAYERS - 1
    assert fast.cycles == pytest.approx(stepped.cycles, rel=REL)
    assert fast.bytes_moved == stepped.bytes_moved
    assert fast.hop_bytes == stepped.hop_bytes
    assert [(o.name, o.count) for o in fast.ops] == [(o.name, o.count) for o in stepped.ops]
    assert fast.finish is not None
    assert stepped.finish is not None
    np.testing.assert_allclose(fast.finish, stepped.finish, rtol=REL)
    assert "layers" in "\n".join(fast.summary())


def test_a_window_that_is_not_a_layer_is_refused(programs: dict[str, Any]):
    program = find_program(programs["two"], None)
    nests = [op for op in program.body.block.ops if isinstance(op, mesh.SpmdOp)]
    with pytest.raises(PlmrError, match="not a layer"):
        layer_repeat.layer_repeat(program, range(0, 2), 4)
    with pytest.raises(PlmrError, match="not a layer"):
        layer_repeat.layer_repeat(program, range(len(nests), len(nests) + 3), 4)


def test_layers_are_repeated_in_timing_mode_only(programs: dict[str, Any]):
    module = programs["two"]
    with pytest.raises(PlmrError, match="timing mode only"):
        run_mesh(module, zeros_for(module), mode="functional", layers=programs["plan"])


class _Clocks:
    def __init__(self, grid: tuple[int, int]):
        self.ce_free = np.zeros(grid)
        self.finish = np.zeros(grid)
        self.comm_busy = np.zeros(grid)
        self.compute = 0.0


class _Traffic:
    bytes = 0.0
    hop_bytes = 0.0
    messages = 0


class _Runtime:
    """The part of MeshRuntime a LoopWatch reads."""

    def __init__(self, grid: tuple[int, int]):
        self.grid = grid
        self.clocks = _Clocks(grid)
        self.traffic = _Traffic()
        self.op_times: dict[str, Any] = {}
        self.track_busy = False
        self.jumps: list[steady.Extrapolated] = []

    def pending_messages(self) -> list[list[Any]]:
        return []

    def log_extrapolation(self, jump: steady.Extrapolated) -> None:
        self.jumps.append(jump)


def layer_jump(increments: list[list[float]]) -> int | None:
    """Per-layer increments of two PEs' clocks; the layer after which layers jump."""
    rt: Any = _Runtime((1, 2))
    watch = steady.LoopWatch(
        rt, [], 0.0, what=steady.LAYERS, window=layer_repeat.LAYER_WINDOW
    )
    clock = np.array([[100.0, 100.0]])
    for i, inc in enumerate(increments):
        watch.begin_iteration()
        clock = clock + np.array([inc])
        rt.clocks.ce_free = clock.copy()
        if watch.end_iteration([clock.copy()], [], remaining=10) is not None:
            assert rt.jumps[-1].what == steady.LAYERS
            return i
    return None


def test_layers_jump_after_equal_uniform_periods_only():
    assert layer_jump([[9, 9], [5, 5], [5, 5], [5, 5]]) == 2
    # Layers whose periods differ from PE to PE, or change, are stepped.
    assert layer_jump([[5, 6]] * 6) is None
    assert layer_jump([[5, 5], [6, 6], [5, 5], [6, 6], [5, 5]]) is None
