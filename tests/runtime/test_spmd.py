"""
The SPMD evaluator's clocks (runtime/spmd.py): the engines' clock never goes back, so
the arrays it once was are numbered (their generation) and a maximum with one of them
is skipped or taken as the latest. A maximum involves no rounding, so the reports must
equal those of a runtime that takes every maximum, to the last bit.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import make_context, parse_module
from plmr.dialects.graph import static_shape
from plmr.lowering.kernels import gemm, gemv
from plmr.models.bench import bench_config, default_options
from plmr.models.llama import ProgramBuilder, get_config
from plmr.passes.pipeline import compile_module
from plmr.runtime.mesh_machine import find_program, run_mesh
from plmr.runtime.report import Report
from plmr.runtime.spmd import BEHIND, Clocks


def test_engine_clocks_are_numbered_as_they_come():
    clocks = Clocks.zeros((2, 3))
    first = clocks.engine_mark(clocks.ce_free)
    assert first is not None
    assert first != BEHIND
    later = clocks.ce_free + 1.0
    same = later.copy()
    clocks.set_engine(later, same)
    assert clocks.ce_free is later
    assert clocks.engine_mark(later) == clocks.engine_mark(same) == first + 1
    issue = later + 0.5
    clocks.mark_behind(issue)
    assert clocks.engine_mark(issue) == BEHIND
    # An engines' clock keeps its generation.
    clocks.mark_behind(later)
    assert clocks.engine_mark(later) == first + 1
    # Equal values are not the same clock; floats are never marked.
    assert clocks.engine_mark(later.copy()) is None
    assert clocks.engine_mark(1.0) is None


def test_marks_do_not_keep_arrays_alive():
    clocks = Clocks.zeros((2, 2))
    value = np.ones((2, 2))
    clocks.set_engine(value)
    ref = weakref.ref(value)
    marked = len(clocks._marks)  # pyright: ignore[reportPrivateUsage]
    clocks.set_engine(np.full((2, 2), 2.0))
    del value
    gc.collect()
    assert ref() is None
    assert len(clocks._marks) == marked  # pyright: ignore[reportPrivateUsage]


def _zeros(module: ModuleOp) -> list[Any]:
    program = find_program(module, None)
    return [np.zeros(static_shape(a, "input"), np.float32) for a in program.body.block.args]


def _tiny_prefill() -> ModuleOp:
    base = get_config("tiny")
    grid = (4, 4)
    config = bench_config(base, grid, 8)
    text = ProgramBuilder(config, None).prefill(config.max_seq, layers=[0, 1], head=True)
    return compile_module(
        make_context(), parse_module(text), default_options(base, grid, "wse2")
    )


PROGRAMS = {
    "meshgemm": lambda: gemm("meshgemm", 256, 256, 256, (16, 16), "wse2").module,
    "cannon": lambda: gemm("cannon", 96, 96, 96, (12, 12), "wse2").module,
    "ring gemv": lambda: gemv("ring", 512, 512, (8, 8), "wse2").module,
    "ktree gemv": lambda: gemv("ktree", 512, 512, (8, 16), "wse2").module,
    "tiny prefill": _tiny_prefill,
}


def _assert_identical(a: Report, b: Report) -> None:
    assert a.cycles == b.cycles
    assert a.compute_cycles == b.compute_cycles
    assert a.comm_cycles == b.comm_cycles
    assert a.bytes_moved == b.bytes_moved
    assert a.extrapolated_iterations == b.extrapolated_iterations
    assert a.extrapolated_stages == b.extrapolated_stages
    assert [(o.name, o.count, o.cycles) for o in a.ops] == [
        (o.name, o.count, o.cycles) for o in b.ops
    ]
    assert a.finish is not None
    assert b.finish is not None
    np.testing.assert_array_equal(a.finish, b.finish)


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("exact", [False, True])
def test_skipped_maxima_change_no_bit(
    name: str, exact: bool, monkeypatch: pytest.MonkeyPatch
):
    module = PROGRAMS[name]()
    inputs = _zeros(module)
    _, marked = run_mesh(module, inputs, mode="timing", exact=exact)
    monkeypatch.setattr(Clocks, "engine_mark", lambda self, value: None)  # pyright: ignore[reportUnknownLambdaType]
    _, plain = run_mesh(module, inputs, mode="timing", exact=exact)
    if not exact and name in ("meshgemm", "ring gemv"):
        assert marked.extrapolated_iterations + marked.extrapolated_stages > 0
    _assert_identical(marked, plain)


def test_functional_results_are_unchanged():
    module = gemm("meshgemm", 64, 64, 64, (8, 8), "wse2").module
    rng = np.random.default_rng(0)
    program = find_program(module, None)
    inputs = [
        rng.standard_normal(static_shape(a, "input")).astype(np.float32)
        for a in program.body.block.args
    ]
    (out,), report = run_mesh(module, inputs, mode="functional")
    np.testing.assert_allclose(out, inputs[0] @ inputs[1], rtol=1e-4, atol=1e-4)
    assert report.cycles > 0
