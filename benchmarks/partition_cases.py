"""
The kernel cases of `benchmarks/partition.py` (WaferLLM's partitioning kernels): the
sizes, grids and algorithms it runs, the paper's figures it sets them against, and the
runs themselves (`plmr.tools.bench.kernel_report`, in `--jobs` processes).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from plmr.errors import PlmrError
from plmr.lowering.kernels import gemm, gemv
from plmr.tools.bench import kernel_report

DEVICE = "wse2"
FREE_RELAY = f"{DEVICE}:relay_cycles=0"

GEMM_SIZES = (2048, 8192)
GEMM_GRIDS = (360, 480, 600, 720)
GEMM_ALGORITHMS = ("meshgemm", "cannon", "summa")
SUMMA_FREE_RELAY_GRIDS = (360, 720)

GEMV_SIZES = (16384, 32768)
GEMV_GRID = 420
GEMV_ALGORITHMS = ("ktree", "pipeline", "ring")
GEMV_SWEEP_GRIDS = (360, 420, 540, 660, 720)

QUICK_GEMM_SIZE = 2048
QUICK_GEMM_GRID = 360
QUICK_GEMV_SIZE = 16384
QUICK_GEMV_GRID = 120

KV_RUNS = (("llama3-8b", 360), ("llama2-13b", 360), ("llama2-13b", 375))

# WaferLLM (OSDI'25) and its USENIX ;login: article.
PAPER_KV = {"llama3-8b": (382, 137_548, 360), "llama2-13b": (16, 6_168, 385)}
PAPER_GEMV_US = {16384: 1.2, 32768: 2.03}


@dataclass(frozen=True)
class Job:
    """One kernel run: a square `grid`×`grid` mesh and a square problem of `size`."""

    kind: str
    algorithm: str
    size: int
    grid: int
    device: str = DEVICE
    relay: bool = False


@dataclass(frozen=True)
class Outcome:
    """The `plmr bench --json` report of a run, or why the kernel was rejected."""

    report: dict[str, Any] | None
    error: str | None = None


def measure(job: Job) -> Outcome:
    """Builds and runs one kernel; a PlmrError (rejected shape, SRAM, routes) is kept."""
    grid = (job.grid, job.grid)
    try:
        if job.kind == "gemm":
            kernel = gemm(job.algorithm, job.size, job.size, job.size, grid, job.device)
        else:
            kernel = gemv(job.algorithm, job.size, job.size, grid, job.device)
        return Outcome(kernel_report(kernel, device=job.device, relay=job.relay))
    except PlmrError as e:
        return Outcome(None, str(e).splitlines()[0])


def _weight(job: Job) -> float:
    """A rough simulation cost, to start the slowest runs first."""
    factor = {"summa": 5.0, "ring": 25.0, "ktree": 0.03, "pipeline": 0.1}
    return job.grid**3 * factor.get(job.algorithm, 1.0)


def run_all(jobs: Sequence[Job], workers: int) -> dict[Job, Outcome]:
    """Runs every job (longest first), in `workers` processes if more than one."""
    order = sorted(set(jobs), key=_weight, reverse=True)
    results: dict[Job, Outcome] = {}

    def progress(job: Job, outcome: Outcome, status: str) -> None:
        status = "rejected" if outcome.report is None else status
        name = f"{job.kind} {job.algorithm} {job.size} on {job.grid}x{job.grid}"
        relay = " (relay)" if job.relay else ""
        device = "" if job.device == DEVICE else f" [{job.device}]"
        print(
            f"[{len(results)}/{len(order)}] {name}{relay}{device}: {status}",
            file=sys.stderr,
            flush=True,
        )

    if workers <= 1:
        for job in order:
            start = time.perf_counter()
            results[job] = measure(job)
            progress(job, results[job], f"{time.perf_counter() - start:.1f} s")
        return results
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(measure, job): job for job in order}
        for future in as_completed(futures):
            job = futures[future]
            results[job] = future.result()
            progress(job, results[job], f"done at {time.perf_counter() - start:.0f} s")
    return results


def gemm_jobs(quick: bool) -> list[Job]:
    sizes = (QUICK_GEMM_SIZE,) if quick else GEMM_SIZES
    grids = (QUICK_GEMM_GRID,) if quick else GEMM_GRIDS
    jobs = [
        Job("gemm", a, s, p, relay=a == "summa")
        for s in sizes
        for p in grids
        for a in GEMM_ALGORITHMS
    ]
    if not quick:
        jobs += [
            Job("gemm", "summa", s, p, FREE_RELAY, relay=True)
            for s in sizes
            for p in SUMMA_FREE_RELAY_GRIDS
        ]
    return jobs


def gemv_jobs(quick: bool) -> list[Job]:
    if quick:
        return [Job("gemv", a, QUICK_GEMV_SIZE, QUICK_GEMV_GRID) for a in GEMV_ALGORITHMS]
    jobs = [Job("gemv", a, s, GEMV_GRID) for s in GEMV_SIZES for a in GEMV_ALGORITHMS]
    jobs += [
        Job("gemv", a, s, p)
        for s in GEMV_SIZES
        for p in GEMV_SWEEP_GRIDS
        for a in ("ktree", "pipeline")
    ]
    return jobs
