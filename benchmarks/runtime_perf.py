"""
Simulation speed of the mesh runtime (how long plmr takes to simulate, not the device).

    python benchmarks/runtime_perf.py          # the full table (about a minute)
    python benchmarks/runtime_perf.py --quick  # small grids only

Rows: MeshGEMM M=K=N=8192 in timing mode on growing grids up to 720×720, K-tree GEMV
on the full 994×750 WSE-2 wafer, and a functional 1024³ MeshGEMM on 32×32 checked
against numpy. Timing rows run twice: every iteration stepped (`exact=True`, `plmr run
--exact`) and with steady loops extrapolated (the default); both times, their speed-up
and the relative difference of the cycles are printed. Times are CPU seconds of the
process (`time.process_time`): on a shared machine, wall time measures the load. The
µs per PE·step column divides the stepped time by the number of PEs × steps, to show
how time grows with the grid.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import numpy as np

from plmr.lowering.kernels import gemm, gemv
from plmr.runtime.mesh_machine import run_mesh


def timed_gemm(
    p: int, size: int, mode: str, exact: bool = False
) -> tuple[float, float, float]:
    kernel = gemm("meshgemm", size, size, size, (p, p), "wse2")
    rng = np.random.default_rng(0)
    if mode == "functional":
        inputs = [rng.standard_normal(s).astype(np.float32) for s in kernel.inputs]
    else:
        inputs = [np.zeros(s, dtype=np.float32) for s in kernel.inputs]
    start = time.process_time()
    (c,), report = run_mesh(kernel.module, inputs, mode=mode, exact=exact)
    elapsed = time.process_time() - start
    err = 0.0
    if mode == "functional":
        want = inputs[0].astype(np.float64) @ inputs[1].astype(np.float64)
        err = float(np.abs(c - want).max() / np.abs(want).max())
    return elapsed, report.cycles, err


def timed_gemv(exact: bool) -> tuple[float, float]:
    kernel = gemv("ktree", 16384, 16384, (994, 750), "wse2")
    inputs = [np.zeros(s, dtype=np.float32) for s in kernel.inputs]
    start = time.process_time()
    _, report = run_mesh(kernel.module, inputs, mode="timing", exact=exact)
    return time.process_time() - start, report.cycles


def row(
    run: str, grid: str, exact: tuple[float, float], fast: tuple[float, float], per: str
) -> str:
    """A timing row: (seconds, cycles) stepped and extrapolated."""
    (t_exact, c_exact), (t_fast, c_fast) = exact, fast
    diff = abs(c_fast - c_exact) / max(abs(c_exact), 1.0)
    return (
        f"| {run} | {grid} | {c_exact:,.0f} | {t_exact:.2f} s | {t_fast:.2f} s | "
        f"{t_exact / t_fast:.1f}× | {diff:.1e} | {per} |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    grids = [90, 180, 360] if args.quick else [90, 180, 360, 540, 720]
    print(
        "| run | grid | simulated cycles | stepped (exact) | extrapolated | speed-up "
        "| relative difference | µs per PE·step (stepped) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for p in grids:
        size = 8192 if p >= 180 else 4096
        t_exact, c_exact, _ = timed_gemm(p, size, "timing", exact=True)
        t_fast, c_fast, _ = timed_gemm(p, size, "timing")
        per = f"{t_exact / (p * p * p) * 1e6:.4f}"
        print(
            row(
                f"MeshGEMM {size}³ timing",
                f"{p}×{p}",
                (t_exact, c_exact),
                (t_fast, c_fast),
                per,
            ),
            flush=True,
        )
    exact, fast = timed_gemv(True), timed_gemv(False)
    print(
        row("GEMV 16K K-tree timing", "994×750 (full wafer)", exact, fast, "-"), flush=True
    )
    elapsed, cycles, err = timed_gemm(32, 1024, "functional")
    print(
        f"| MeshGEMM 1024³ functional | 32×32 | {cycles:,.0f} | {elapsed:.2f} s "
        f"(max rel. error vs numpy {err:.1e}) | - | - | - | - |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
