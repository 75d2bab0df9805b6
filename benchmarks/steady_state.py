"""
Steady-state extrapolation: how long the mesh runtime takes to simulate large kernels in
timing mode with and without it (`run_mesh(..., exact=True)` / `plmr run --exact`), and
the cycles of both, which must agree.

    .venv/bin/python benchmarks/steady_state.py            # the table (about 2 minutes)
    .venv/bin/python benchmarks/steady_state.py --readme   # also rewrite its section of
                                                           # benchmarks/README.md
    .venv/bin/python benchmarks/steady_state.py --quick    # 60² and 120² only (seconds)
    .venv/bin/python benchmarks/steady_state.py --only llm # one of the three tables

Three tables. Rotations: MeshGEMM (`plmr.lowering.kernels.gemm`) and attention —
softmax(Q·Kᵀ)·V compiled by the `plmr compile` pipeline with the rolling update — at 240²
and 480² PEs of wse2 (the compile time is not counted). Kernels: every algorithm of
`benchmarks/partition.py` (loops and chains of identical collective stages
extrapolated). Models: the `plmr bench decode|prefill` programs — one layer with and
without extrapolation, and the whole model with every layer simulated (steady layers
extrapolated), with every layer and loop stepped (`--exact`), and by the two-program
arithmetic (`--layers-extrapolated`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np
from readme_section import write_section
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import make_context, parse_module
from plmr.dialects.graph import static_shape
from plmr.lowering.kernels import gemm
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.mesh_machine import find_program, run_mesh
from plmr.runtime.report import Report


def meshgemm(p: int) -> tuple[str, ModuleOp]:
    size = 17 * p if p < 240 else 8160
    return f"MeshGEMM {size}³", gemm("meshgemm", size, size, size, (p, p), "wse2").module


def ring_attention(p: int) -> tuple[str, ModuleOp]:
    """softmax(Q·Kᵀ)·V on S = 16·P rows of width 64 (rolling update)."""
    s, d = 16 * p, 64

    def t(a: int, b: int) -> str:
        return f"tensor<{a}x{b}xf32>"

    text = f"""
func.func @main(%q: {t(s, d)}, %k: {t(s, d)}, %v: {t(s, d)}) -> {t(s, d)} {{
  %scores = graph.matmul %q, %k transpose_b : ({t(s, d)}, {t(s, d)}) -> {t(s, s)}
  %probs = graph.softmax %scores : {t(s, s)}
  %o = graph.matmul %probs, %v : ({t(s, s)}, {t(s, d)}) -> {t(s, d)}
  func.return %o : {t(s, d)}
}}"""
    options = CompileOptions(
        grid=(p, p),
        substitute=False,
        tile_sizes=(16, 16),
        fit_tiles=True,
        chunks=p,
        fuse="rolling",
    )
    module = compile_module(make_context(), parse_module(text), options)
    return f"attention S={s}, d={d}", module


def simulate(module: ModuleOp, exact: bool, relay: bool = False) -> tuple[Report, float]:
    program = find_program(module, None)
    inputs = [
        np.broadcast_to(np.float32(0), static_shape(a, "input"))
        for a in program.body.block.args
    ]
    # CPU seconds of this process: on a shared machine, wall time measures the load.
    start = time.process_time()
    _, report = run_mesh(module, inputs, mode="timing", exact=exact, relay=relay)
    return report, time.process_time() - start


def rows(grids: Sequence[int]) -> list[str]:
    builders: list[Callable[[int], tuple[str, ModuleOp]]] = [meshgemm, ring_attention]
    out = [
        "| kernel | grid | exact: cycles | CPU time | extrapolated: cycles | CPU time | "
        "iterations extrapolated | speed-up | relative difference |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for build in builders:
        for p in grids:
            name, module = build(p)
            exact, t_exact = simulate(module, exact=True)
            fast, t_fast = simulate(module, exact=False)
            diff = abs(fast.cycles - exact.cycles) / exact.cycles
            same = (
                fast.bytes_moved == exact.bytes_moved
                and fast.max_sram_bytes == exact.max_sram_bytes
                and fast.max_routes == exact.max_routes
            )
            line = (
                f"| {name} | {p}² | {exact.cycles:,.2f} | {t_exact:.2f} s | "
                f"{fast.cycles:,.2f} | {t_fast:.2f} s | {fast.extrapolated_iterations} | "
                f"{t_exact / t_fast:.1f}× | {diff:.1e}{'' if same else ' (bytes differ!)'} |"
            )
            print(line, flush=True)
            out.append(line)
    return out


# ---------------------------------------------------------------------------------------
# The kernels of benchmarks/partition.py
# ---------------------------------------------------------------------------------------

PARTITION_KERNELS: list[tuple[str, str, int, int, bool]] = [
    ("gemm", "meshgemm", 2048, 360, False),
    ("gemm", "meshgemm", 8192, 360, False),
    ("gemm", "cannon", 2048, 360, False),
    ("gemm", "cannon", 8192, 360, False),
    ("gemm", "summa", 2048, 360, True),
    ("gemv", "ktree", 16384, 420, False),
    ("gemv", "ktree", 32768, 420, False),
    ("gemv", "pipeline", 16384, 420, False),
    ("gemv", "pipeline", 32768, 420, False),
    ("gemv", "ring", 16384, 420, False),
    ("gemv", "ring", 32768, 420, False),
]
"""(kind, algorithm, size, grid, relay): every algorithm of `benchmarks/partition.py` at
its sizes on one of its grids (SUMMA relayed, as there)."""


def partition_rows() -> list[str]:
    from plmr.lowering.kernels import gemv

    out = [
        "| kernel | grid | exact: cycles | CPU time | extrapolated: cycles | CPU time | "
        "iterations / stages extrapolated | speed-up | relative difference |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for kind, algo, size, p, relay in PARTITION_KERNELS:
        grid = (p, p)
        if kind == "gemm":
            module = gemm(algo, size, size, size, grid, "wse2").module
            name = f"{algo} GEMM {size}³" + (" (relayed)" if relay else "")
        else:
            module = gemv(algo, size, size, grid, "wse2").module
            name = f"{algo} GEMV {size}"
        exact, t_exact = simulate(module, exact=True, relay=relay)
        fast, t_fast = simulate(module, exact=False, relay=relay)
        diff = abs(fast.cycles - exact.cycles) / exact.cycles
        line = (
            f"| {name} | {p}² | {exact.cycles:,.2f} | {t_exact:.2f} s | "
            f"{fast.cycles:,.2f} | {t_fast:.2f} s | {fast.extrapolated_iterations} / "
            f"{fast.extrapolated_stages} | {t_exact / t_fast:.1f}× | {diff:.1e} |"
        )
        print(line, flush=True)
        out.append(line)
    return out


# ---------------------------------------------------------------------------------------
# Whole models (plmr bench decode|prefill)
# ---------------------------------------------------------------------------------------

LLM_RUNS: list[tuple[str, str, int, str, bool]] = [
    ("tiny", "decode", 4, "heads", True),
    ("tiny", "prefill", 4, "heads", True),
    ("llama3-8b", "decode", 420, "heads", True),
    ("llama3-8b", "prefill", 480, "per-head", False),
]
"""(model, kind, grid, form, also --exact): the `plmr bench` programs."""


def llm_rows() -> list[str]:
    from plmr.models.bench import (
        _compile,  # pyright: ignore[reportPrivateUsage]
        _simulate,  # pyright: ignore[reportPrivateUsage]
        bench_config,
        default_options,
        default_tokens,
        resolve_model,
        simulate_whole_model,
    )
    from plmr.models.llama import ProgramBuilder
    from plmr.target.device import get_device

    dev = get_device("wse2")
    out = [
        "| model | grid | layers | one layer: exact cycles | extrapolated | time exact / "
        "extrapolated | whole model: every layer simulated | layers stepped / "
        "extrapolated | time | --exact (every layer and loop stepped) | time | "
        "--layers-extrapolated: T(1) + (L−1)(T(2)−T(1)) | relative difference |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for model, kind, p, form, with_exact in LLM_RUNS:
        grid = (p, p)
        base = resolve_model(model)
        config = bench_config(base, grid, default_tokens(kind, base))
        options = default_options(base, grid, "wse2", kind)
        builder = ProgramBuilder(config, None, form)

        def program(layers: list[int]) -> str:
            if kind == "decode":
                return builder.decode(layers=layers, head=True)
            return builder.prefill(config.max_seq, layers=layers, head=True)

        one, two = _compile(program([0]), options), _compile(program([0, 1]), options)
        single_exact = _simulate(one, options, dev, True)
        single_fast = _simulate(one, options, dev, False)
        t1 = float(single_fast.report.cycles)
        t2 = float(_simulate(two, options, dev, False).report.cycles)
        by_layers = t1 + (base.n_layers - 1) * (t2 - t1)
        whole = simulate_whole_model(one, two, base.n_layers, options, dev)
        stepped = whole.report.simulated_layers + 1
        exact_cells = "— | —"
        if with_exact:
            full = simulate_whole_model(one, two, base.n_layers, options, dev, exact=True)
            exact_cells = f"{full.report.cycles:,.2f} | {full.seconds:.1f} s"
        cycles = float(whole.report.cycles)
        line = (
            f"| {model} {kind} ({form}) | {p}² | {base.n_layers} | "
            f"{single_exact.report.cycles:,.2f} | {t1:,.2f} | "
            f"{single_exact.simulate_seconds:.1f} / {single_fast.simulate_seconds:.1f} s | "
            f"{cycles:,.2f} | {stepped} / {whole.report.extrapolated_layers} | "
            f"{whole.seconds:.1f} s | {exact_cells} | {by_layers:,.2f} | "
            f"{abs(by_layers - cycles) / cycles:.1e} |"
        )
        print(line, flush=True)
        out.append(line)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="60² and 120² only.")
    parser.add_argument(
        "--only",
        choices=["rotations", "partition", "llm"],
        default=None,
        help="One table only (with --readme, only its section is rewritten).",
    )
    parser.add_argument(
        "--readme", action="store_true", help="Rewrite the section of benchmarks/README.md."
    )
    args = parser.parse_args(argv)
    grids = [60, 120] if args.quick else [240, 480]
    simulate(gemm("meshgemm", 64, 64, 64, (8, 8), "wse2").module, exact=True)  # warm-up
    tables: list[tuple[str, Callable[[], list[str]]]] = [
        ("steady", lambda: rows(grids)),
        ("steady-partition", partition_rows),
        ("steady-llm", llm_rows),
    ]
    chosen = {"rotations": "steady", "partition": "steady-partition", "llm": "steady-llm"}
    for key, build in tables:
        if args.only is not None and chosen[args.only] != key:
            continue
        started, cpu = time.perf_counter(), time.process_time()
        table = build()
        text = (
            "\n".join(table)
            + f"\n\nWall time of this table: {time.perf_counter() - started:.0f} s "
            + f"(CPU: {time.process_time() - cpu:.0f} s).\n"
        )
        if args.readme and not write_section(key, "steady_state.py", text):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
