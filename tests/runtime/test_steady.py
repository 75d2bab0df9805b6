"""
Steady-state extrapolation (runtime/steady.py): in timing mode a loop that reached a
periodic regime jumps its remaining iterations; the report must not change.

Tolerance. Clocks are float64 and a jump adds `m × increment` where the stepped run
adds the increment `m` times, so the two round differently: each of the `m` steps
rounds to 2⁻⁵² of the clock, and the detector accepts increments equal within 2⁻⁴⁰ of
the largest clock. Both bound the difference by about `iterations × 2⁻⁴⁰` relative,
below 1e-9 for the loops here (≤ 1,000 iterations): REL = 1e-9. Integer quantities
(bytes, messages, op counts, SRAM and route peaks) must be equal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects import mesh, tile
from plmr.dialects.context import make_context, parse_module
from plmr.dialects.graph import static_shape
from plmr.lowering.kernels import Kernel, gemm, gemv
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime import layer_repeat, steady
from plmr.runtime.mesh_machine import MeshRuntime, find_program, run_mesh
from plmr.runtime.report import Report
from plmr.runtime.trace import TraceRecorder
from plmr.target.device import get_device

REL = 1e-9

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def zeros_for(module: ModuleOp) -> list[Any]:
    program = find_program(module, None)
    return [np.zeros(static_shape(a, "input"), np.float32) for a in program.body.block.args]


def both(module: ModuleOp, **kw: Any) -> tuple[Report, Report]:
    inputs = zeros_for(module)
    _, fast = run_mesh(module, inputs, mode="timing", **kw)
    _, exact = run_mesh(module, inputs, mode="timing", exact=True, **kw)
    return fast, exact


def assert_same_report(fast: Report, exact: Report) -> None:
    assert exact.extrapolated_iterations == 0
    assert exact.exact
    assert not fast.exact
    assert fast.cycles == pytest.approx(exact.cycles, rel=REL)
    for name in ("compute_cycles", "comm_cycles", "idle_cycles", "comm_busy_cycles"):
        assert getattr(fast, name) == pytest.approx(
            getattr(exact, name), rel=REL, abs=REL * exact.cycles
        ), name
    assert fast.mean_compute_cycles == pytest.approx(exact.mean_compute_cycles, rel=REL)
    # A ring's messages carry 1/n of a block: fractional bytes, summed in another order.
    assert fast.bytes_moved == pytest.approx(exact.bytes_moved, rel=1e-12)
    assert fast.hop_bytes == pytest.approx(exact.hop_bytes, rel=1e-12)
    assert fast.max_sram_bytes == exact.max_sram_bytes
    assert fast.max_routes == exact.max_routes
    assert fast.critical_pe == exact.critical_pe or fast.cycles == pytest.approx(
        float(np.max(exact.finish)) if exact.finish is not None else 0.0, rel=REL
    )
    assert [(o.name, o.count) for o in fast.ops] == [(o.name, o.count) for o in exact.ops]
    for a, b in zip(fast.ops, exact.ops, strict=True):
        assert a.cycles == pytest.approx(b.cycles, rel=REL, abs=REL * exact.cycles)
    assert fast.finish is not None
    assert exact.finish is not None
    np.testing.assert_allclose(fast.finish, exact.finish, rtol=REL, atol=REL * exact.cycles)


# ---------------------------------------------------------------------------------------
# Kernels: rotation GEMMs, allreduces, odd and non-square grids
# ---------------------------------------------------------------------------------------

PERIODIC: dict[str, Any] = {
    "meshgemm-7x7": lambda: gemm("meshgemm", 56, 56, 56, (7, 7), "wse2"),
    "meshgemm-24x24-compute-bound": lambda: gemm(
        "meshgemm", 768, 768, 768, (24, 24), "wse2"
    ),
    "meshgemm-6x9": lambda: gemm("meshgemm", 96, 576, 96, (6, 9), "wse2"),
    "cannon-9x9": lambda: gemm("cannon", 36, 36, 36, (9, 9), "wse2"),
    "cannon-5x8": lambda: gemm("cannon", 80, 480, 80, (5, 8), "wse2"),
    "gemm_t-11x11": lambda: gemm("gemm_t", 44, 44, 44, (11, 11), "wse2"),
}
"""Kernels whose rotation loop reaches a steady state (they are extrapolated)."""

STEPPED: dict[str, Any] = {
    "summa-6x9": lambda: gemm("summa", 36, 54, 27, (6, 9), "wse2"),
    "summa-16x16": lambda: gemm("summa", 256, 256, 256, (16, 16), "wse2"),
    "gemv-ktree-13x7": lambda: gemv("ktree", 91, 52, (13, 7), "wse2", k=2),
    "gemv-pipeline-9x4": lambda: gemv("pipeline", 36, 36, (9, 4), "wse2"),
    "meshgemm-4x4-short": lambda: gemm("meshgemm", 32, 32, 32, (4, 4), "wse2"),
    "meshgemm-6x9-drifting": lambda: gemm("meshgemm", 36, 54, 27, (6, 9), "wse2"),
    "cannon-5x8-drifting": lambda: gemm("cannon", 40, 80, 24, (5, 8), "wse2"),
}
"""Kernels with no loop to extrapolate: SUMMA's owner changes every step, the
allreduces are straight-line code, a 4×4 MeshGEMM has too few steps; with tiny blocks
on non-square grids the rotation is communication-bound and its PEs advance at
different rates (a link of 2 hops against one of 1) for longer than the loop runs."""


@pytest.mark.parametrize("name", PERIODIC)
def test_periodic_kernels_extrapolate_to_the_exact_report(name: str):
    kernel: Kernel = PERIODIC[name]()
    fast, exact = both(kernel.module)
    assert fast.extrapolated_iterations > 0
    assert fast.extrapolated_loops >= 1
    assert_same_report(fast, exact)


@pytest.mark.parametrize("name", STEPPED)
def test_kernels_without_a_steady_loop_are_stepped(name: str):
    kernel: Kernel = STEPPED[name]()
    fast, exact = both(kernel.module, relay=True)
    assert fast.extrapolated_iterations == 0
    # Nothing extrapolated: the very same computation.
    assert fast.cycles == exact.cycles
    assert fast.bytes_moved == exact.bytes_moved


# ---------------------------------------------------------------------------------------
# Chains of identical collective stages
# ---------------------------------------------------------------------------------------

RINGS: dict[str, Any] = {
    "gemv-ring-11x5": lambda: gemv("ring", 55, 44, (11, 5), "wse2"),
    "gemv-ring-6x13": lambda: gemv("ring", 78, 52, (6, 13), "wse2"),
    "gemv-ring-16x16": lambda: gemv("ring", 256, 64, (16, 16), "wse2"),
}
"""Ring allreduces: reduce-scatter and allgather are chains of identical stages."""


@pytest.mark.parametrize("name", RINGS)
def test_ring_allreduce_chains_extrapolate_to_the_exact_report(name: str):
    kernel: Kernel = RINGS[name]()
    fast, exact = both(kernel.module)
    assert fast.extrapolated_stages > 0
    assert exact.extrapolated_stages == 0
    assert "collective stage(s) extrapolated" in "\n".join(fast.summary())
    assert_same_report(fast, exact)


def test_functional_mode_steps_every_stage():
    kernel = gemv("ring", 55, 44, (11, 5), "wse2")
    rng = np.random.default_rng(0)
    x = [rng.standard_normal(s).astype(np.float32) for s in kernel.inputs]
    (y,), report = run_mesh(kernel.module, x, mode="functional")
    assert report.extrapolated_stages == 0
    np.testing.assert_allclose(y, x[0] @ x[1], rtol=1e-4, atol=1e-4)


def step_chain(
    now: Any, src_of: Any, delay_of: Any, add: float, m: int, pos_axis: int
) -> Any:
    """The chain stepped one stage at a time, as the runtime steps it."""
    d = delay_of if pos_axis == 1 else delay_of[:, None]
    for _ in range(m):
        now = np.maximum(now, np.take(now, src_of, axis=pos_axis) + d) + add
    return now


@pytest.mark.parametrize("pos_axis", [0, 1])
@pytest.mark.parametrize("m", [1, 2, 3, 7, 8, 13, 40])
def test_chain_power_is_the_stepped_chain(m: int, pos_axis: int):
    rng = np.random.default_rng(m * 2 + pos_axis)
    n, lines = 9, 5
    shape = (lines, n) if pos_axis == 1 else (n, lines)
    for _ in range(20):
        now = rng.uniform(0, 100, shape)
        src_of = rng.integers(0, n, n)  # any function: rings, chains, self-loops
        delay_of = rng.uniform(0, 10, n)
        delay_of[rng.random(n) < 0.2] = -np.inf  # nothing arrives
        add = float(rng.choice([0.0, 2.5]))
        got = layer_repeat.chain_power(now, src_of, delay_of, add, m, pos_axis)
        want = step_chain(now, src_of, delay_of, add, m, pos_axis)
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_only_runs_of_the_same_uniform_stage_are_chained():
    kernel = gemv("ring", 55, 44, (11, 5), "wse2")
    (allreduce,) = [op for op in kernel.module.walk() if isinstance(op, mesh.AllreduceOp)]
    from plmr.target.collective_stages import stage_arrays
    from plmr.target.route_plan import plan_of

    stages = stage_arrays(plan_of(allreduce, (11, 5), None))
    n = 11 if allreduce.axis.data == "y" else 5
    assert len(stages) == 2 * (n - 1)
    assert layer_repeat.chain_run(stages, 0) == 1  # the first stage pays no step overhead
    assert layer_repeat.chain_run(stages, 1) == n - 2  # the rest of the reduce-scatter
    assert layer_repeat.chain_run(stages, n - 1) == n - 1  # the allgather
    pipeline = gemv("pipeline", 36, 36, (9, 4), "wse2")
    (chain,) = [op for op in pipeline.module.walk() if isinstance(op, mesh.AllreduceOp)]
    stages = stage_arrays(plan_of(chain, (9, 4), None))
    # A pipeline's chain moves one link further each stage: no two stages are the same.
    assert all(layer_repeat.chain_run(stages, i) == 1 for i in range(len(stages)))


def test_extrapolation_skips_most_of_a_long_rotation():
    kernel = gemm("meshgemm", 960, 960, 960, (60, 60), "wse2")
    fast, exact = both(kernel.module)
    # 59 loop steps: a few to see the regime, the rest in one jump.
    assert fast.extrapolated_iterations >= 50
    assert_same_report(fast, exact)


def test_functional_mode_never_extrapolates():
    kernel = gemm("meshgemm", 56, 56, 56, (7, 7), "wse2")
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in kernel.inputs)
    (c,), report = run_mesh(kernel.module, [a, b])
    assert report.exact
    assert report.extrapolated_iterations == 0
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    _, timed = run_mesh(kernel.module, [a, b], mode="timing", exact=True)
    assert report.cycles == timed.cycles


# ---------------------------------------------------------------------------------------
# Compiled programs: ring attention and the tiny LLaMA
# ---------------------------------------------------------------------------------------


def compiled_matmuls(p: int, s: int) -> ModuleOp:
    """(A·B)·C compiled by the pipeline for a P×P grid: MeshGEMM rotations."""

    def t(a: int, b: int) -> str:
        return f"tensor<{a}x{b}xf32>"

    text = f"""
func.func @main(%a: {t(s, s)}, %b: {t(s, s)}, %c: {t(s, s)}) -> {t(s, s)} {{
  %ab = graph.matmul %a, %b : ({t(s, s)}, {t(s, s)}) -> {t(s, s)}
  %abc = graph.matmul %ab, %c : ({t(s, s)}, {t(s, s)}) -> {t(s, s)}
  func.return %abc : {t(s, s)}
}}"""
    options = CompileOptions(
        grid=(p, p), substitute=False, tile_sizes=(16, 16), fit_tiles=True
    )
    return compile_module(make_context(), parse_module(text), options)


def test_compiled_rotations_extrapolate_to_the_exact_report():
    module = compiled_matmuls(12, 12 * 32)
    shifts = [op for op in module.walk() if isinstance(op, mesh.ShiftOp)]
    assert shifts, "the blocks should rotate"
    fast, exact = both(module)
    assert fast.extrapolated_iterations > 0
    assert_same_report(fast, exact)


@pytest.fixture(scope="module")
def tiny_llama(compile_cache: Any) -> dict[str, ModuleOp]:
    """The tiny LLaMA's programs for 4x4, compiled once a session (test_sram's too)."""
    options = CompileOptions(grid=(4, 4), tile_sizes=(8, 8))
    out: dict[str, ModuleOp] = {}
    for kind in ("prefill", "decode"):
        text = (EXAMPLES / "llama" / f"tiny_{kind}.mlir").read_text()
        out[kind] = compile_cache.compile(make_context(), parse_module(text), options)
    return out


@pytest.mark.parametrize("kind", ["prefill", "decode"])
def test_tiny_llama_programs_give_the_exact_report(
    tiny_llama: dict[str, ModuleOp], kind: str
):
    module = tiny_llama[kind]
    loops = [op for op in module.walk() if isinstance(op, tile.ForOp)]
    assert loops
    fast, exact = both(module)
    assert_same_report(fast, exact)


def test_tiny_llama_prefill_has_extrapolated_loops(tiny_llama: dict[str, ModuleOp]):
    fast, _ = both(tiny_llama["prefill"])
    assert fast.extrapolated_iterations > 0


# ---------------------------------------------------------------------------------------
# Loops that must not be extrapolated
# ---------------------------------------------------------------------------------------


def test_a_loop_whose_timing_depends_on_the_step_is_refused_statically():
    """SUMMA broadcasts from the step's owner: the root is computed from the step."""
    kernel = gemm("summa", 256, 256, 256, (16, 16), "wse2")
    (loop,) = [op for op in kernel.module.walk() if isinstance(op, tile.ForOp)]
    assert not steady.iteration_invariant(loop)
    meshgemm = gemm("meshgemm", 256, 256, 256, (16, 16), "wse2")
    (rotation,) = [op for op in meshgemm.module.walk() if isinstance(op, tile.ForOp)]
    assert steady.iteration_invariant(rotation)


def test_non_periodic_increments_are_not_extrapolated(monkeypatch: pytest.MonkeyPatch):
    """
    Without the static guard, SUMMA's moving owner makes each PE's increments change
    from step to step (its distance to the owner changes): the detector must see it.
    """
    monkeypatch.setattr(MeshRuntime, "loop_invariant", lambda self, op: True)  # pyright: ignore[reportUnknownLambdaType]
    kernel = gemm("summa", 32, 32, 32, (32, 32), "wse2")
    fast, exact = both(kernel.module, relay=True)
    assert fast.extrapolated_iterations == 0
    assert fast.cycles == exact.cycles


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


def watch_increments(increments: list[list[float]], constants: float = 0.0) -> int | None:
    """Feeds per-iteration increments of two PEs' clocks; the iteration of a jump."""
    rt: Any = _Runtime((1, 2))
    watch = steady.LoopWatch(rt, [], constants)
    clock = np.array([[100.0, 100.0]])
    for i, inc in enumerate(increments):
        watch.begin_iteration()
        clock = clock + np.array([inc])
        rt.clocks.ce_free = clock.copy()
        if watch.end_iteration([clock.copy()], [], remaining=10) is not None:
            return i
    return None


def test_the_detector_needs_equal_uniform_increments():
    assert watch_increments([[5, 5], [7, 7], [7, 7], [7, 7], [7, 7]]) == 3
    # Periodic per PE but not uniform (PEs drifting apart may later swap who waits).
    assert watch_increments([[5, 7]] * 8) is None
    # Uniform but changing (a ring's increments walk round the link delays).
    assert watch_increments([[5, 5], [7, 7], [5, 5], [7, 7], [5, 5], [7, 7]]) is None
    # Periodic, but a constant from before the loop is still ahead of the clocks.
    assert watch_increments([[7, 7]] * 6, constants=1e6) is None


def watch_grid(increments: list[Any], grid: tuple[int, int]) -> tuple[int | None, Any]:
    """Feeds per-iteration increments of a grid's clock; (the jump's iteration, watch)."""
    rt: Any = _Runtime(grid)
    watch = steady.LoopWatch(rt, [], 0.0)
    clock = np.full(grid, 100.0)
    for i, inc in enumerate(increments):
        watch.begin_iteration()
        clock = clock + inc
        rt.clocks.ce_free = clock.copy()
        if watch.end_iteration([clock.copy()], [], remaining=10) is not None:
            return i, watch
    return None, watch


@pytest.mark.parametrize("where", [(0, 17), (33, 40), (63, 63)])
def test_increments_are_compared_at_samples_then_everywhere(where: tuple[int, int]):
    """
    Steps are compared at sampled PEs first (rows and columns 0 and the middle, and a
    spread mesh); a difference elsewhere is still found. (33, 40) is off the samples
    of a 64x64 grid.
    """
    grid = (64, 64)
    index = steady._sample_index(grid)  # pyright: ignore[reportPrivateUsage]
    sampled = set(zip(index[0].tolist(), index[1].tolist(), strict=True))
    assert (33, 40) not in sampled
    assert (0, 17) in sampled
    step = np.full(grid, 7.0)
    bumped = step.copy()
    bumped[where] = 8.0
    # The increment changes at one PE every other iteration: never periodic.
    assert watch_grid([step, bumped] * 4, grid)[0] is None
    assert watch_grid([step] * 6, grid)[0] == 3
    # A disagreement at a sample is settled without the whole increments.
    _, watch = watch_grid([step, step, bumped], grid)
    assert watch.step is not None
    assert (watch.step._clocks is None) == (where in sampled)  # pyright: ignore[reportPrivateUsage]


# ---------------------------------------------------------------------------------------
# Reports, traces and the command line
# ---------------------------------------------------------------------------------------


def test_the_report_and_the_trace_mark_extrapolated_iterations(tmp_path: Path):
    kernel = gemm("meshgemm", 96, 96, 96, (12, 12), "wse2")
    recorder = TraceRecorder([(0, 0), (5, 7)], get_device("wse2").clock_hz)
    _, report = run_mesh(
        kernel.module, zeros_for(kernel.module), mode="timing", recorder=recorder
    )
    n = report.extrapolated_iterations
    assert n > 0
    assert report.extrapolated_loops == 1
    data = report.to_json()
    assert data["extrapolated_iterations"] == n
    assert data["exact"] is False
    assert any(f"{n:,} loop iteration(s)" in line for line in report.summary())
    path = tmp_path / "trace.json"
    recorder.write(path)
    events = json.loads(path.read_text())["traceEvents"]
    marked = [e for e in events if e.get("cat") == "extrapolated"]
    assert len(marked) == 2  # one slice per traced PE
    assert all(e["name"] == f"×{n} extrapolated" for e in marked)
    assert all(e["args"]["iterations"] == n and e["dur"] > 0 for e in marked)
    # The slice spans the skipped iterations: it ends where the next event starts.
    ends = [e["args"]["end_cycle"] for e in marked]
    later = [e for e in events if e.get("ph") == "X" and e.get("cat") != "extrapolated"]
    assert max(e["args"]["start_cycle"] for e in later) >= min(ends)


def test_plmr_run_exact_from_the_command_line(tmp_path: Path):
    from plmr.tools.cli import cli

    program = tmp_path / "mg.mlir"
    program.write_text(str(gemm("meshgemm", 96, 96, 96, (12, 12), "wse2").module))
    reports = {}
    for flag in ([], ["--exact"]):
        out = tmp_path / f"report{len(flag)}.json"
        result = CliRunner().invoke(
            cli, ["run", str(program), "--mode", "timing", "--report", str(out), *flag]
        )
        assert result.exit_code == 0, result.output
        assert ("extrapolated" in result.output) == (not flag)
        reports[bool(flag)] = json.loads(out.read_text())
    assert reports[True]["extrapolated_iterations"] == 0
    assert reports[False]["extrapolated_iterations"] > 0
    assert reports[False]["cycles"] == pytest.approx(reports[True]["cycles"], rel=REL)
    bad = CliRunner().invoke(cli, ["run", str(EXAMPLES / "onnx" / "mlp.mlir"), "--exact"])
    assert bad.exit_code != 0
    assert "mesh.program entries only" in bad.output
