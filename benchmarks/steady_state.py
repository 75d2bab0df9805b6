"""
Steady-state extrapolation: how long the mesh runtime takes to simulate large kernels in
timing mode with and without it (`run_mesh(..., exact=True)` / `plmr run --exact`), and
the cycles of both, which must agree.

    .venv/bin/python benchmarks/steady_state.py            # the table (about 2 minutes)
    .venv/bin/python benchmarks/steady_state.py --readme   # also rewrite its section of
                                                           # benchmarks/README.md
    .venv/bin/python benchmarks/steady_state.py --quick    # 60² and 120² only (seconds)

Rows: MeshGEMM (`plmr.lowering.kernels.gemm`) and ring attention — softmax(Q·Kᵀ)·V
compiled by the `plmr compile` pipeline with the rolling update, K and V circulating
along y in one chunk per PE — at 240² and 480² PEs of wse2. The compile time of ring
attention is not counted.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import make_context, parse_module
from plmr.dialects.graph import static_shape
from plmr.lowering.kernels import gemm
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.interpreter import find_program, run_mesh
from plmr.runtime.report import Report

README = Path(__file__).resolve().parent / "README.md"
BEGIN = "<!-- steady:begin (benchmarks/steady_state.py --readme writes this section) -->"
END = "<!-- steady:end -->"


def meshgemm(p: int) -> tuple[str, ModuleOp]:
    size = 17 * p if p < 240 else 8160
    return f"MeshGEMM {size}³", gemm("meshgemm", size, size, size, (p, p), "wse2").module


def ring_attention(p: int) -> tuple[str, ModuleOp]:
    """softmax(Q·Kᵀ)·V on S = 16·P rows of width 64: K and V do not fit replicated."""
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
    return f"ring attention S={s}, d={d}", module


def simulate(module: ModuleOp, exact: bool) -> tuple[Report, float]:
    program = find_program(module, None)
    inputs = [
        np.zeros(static_shape(a, "input"), np.float32) for a in program.body.block.args
    ]
    start = time.perf_counter()
    _, report = run_mesh(module, inputs, mode="timing", exact=exact)
    return report, time.perf_counter() - start


def rows(grids: Sequence[int]) -> list[str]:
    builders: list[Callable[[int], tuple[str, ModuleOp]]] = [meshgemm, ring_attention]
    out = [
        "| kernel | grid | exact: cycles | time | extrapolated: cycles | time | "
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="60² and 120² only.")
    parser.add_argument(
        "--readme", action="store_true", help="Rewrite the section of benchmarks/README.md."
    )
    args = parser.parse_args(argv)
    grids = [60, 120] if args.quick else [240, 480]
    started = time.perf_counter()
    simulate(gemm("meshgemm", 64, 64, 64, (8, 8), "wse2").module, exact=True)  # warm-up
    table = rows(grids)
    text = (
        "\n".join(table)
        + f"\n\nWall time of the whole run: {time.perf_counter() - started:.0f} s.\n"
    )
    if args.readme:
        readme = README.read_text()
        pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
        if not pattern.search(readme):
            print(f"no section {BEGIN} ... {END} in {README}", file=sys.stderr)
            return 1
        README.write_text(pattern.sub(lambda _: f"{BEGIN}\n{text}{END}", readme))
    return 0


if __name__ == "__main__":
    sys.exit(main())
