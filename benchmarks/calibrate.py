"""
Calibrate the `wse3` device model on real WSE-3 cycle counts of WaferLLM's kernels.

The calibration set (fp16, measured on a CS-3): MeshGEMM with M = K = N = t·P on a P×P
grid, and MeshGEMV with one element per PE and K-tree group counts g. The model's
mechanisms — per-hop latency, ramp latency, send/receive/stage software overheads and
the block product's instruction costs — are fitted by a derivative-free search that
minimises the RMS relative error; larger meshes are then predicted, not fitted.

    python benchmarks/calibrate.py            # fit, print the table and the parameters
    python benchmarks/calibrate.py --check    # only evaluate the shipped wse3 preset
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np

from plmr.lowering.kernels import gemm, gemv
from plmr.runtime.device import WSE3, Device
from plmr.runtime.interpreter import run_mesh

# (kernel, P, t or g, measured cycles)
GEMM_POINTS: list[tuple[int, int, float]] = [
    (16, 1, 2637),
    (16, 2, 3464),
    (16, 3, 4390),
    (16, 8, 10818),
    (144, 1, 23319),
    (144, 2, 30196),
    (144, 3, 38466),
    (144, 8, 93940),
    (64, 16, 141351),
]
GEMV_POINTS: list[tuple[int, int, float]] = [
    (80, 8, 417),
    (144, 8, 602),
    (208, 8, 785),
    (80, 2, 597),
    (80, 4, 469),
]

PARAMS = (
    "hop_cycles",
    "send_overhead_cycles",
    "recv_overhead_cycles",
    "step_overhead_cycles",
    "op_overhead_cycles",
    "row_overhead_cycles",
    "dsd_overhead_cycles",
)


def predict_gemm(device: Device, p: int, t: int) -> float:
    kernel = gemm("meshgemm", t * p, t * p, t * p, (p, p), device.name)
    inputs = [np.zeros(s, dtype=np.float32) for s in kernel.inputs]
    _, report = run_mesh(kernel.module, inputs, device=device, mode="timing")
    return report.cycles


def predict_gemv(device: Device, p: int, g: int) -> float:
    kernel = gemv("ktree", p, p, (p, p), device.name, k=2, groups=g)
    inputs = [np.zeros(s, dtype=np.float32) for s in kernel.inputs]
    _, report = run_mesh(kernel.module, inputs, device=device, mode="timing")
    return report.cycles


def evaluate(device: Device) -> list[tuple[str, float, float]]:
    rows: list[tuple[str, float, float]] = []
    for p, t, cycles in GEMM_POINTS:
        rows.append((f"MeshGEMM P={p} t={t}", cycles, predict_gemm(device, p, t)))
    for p, g, cycles in GEMV_POINTS:
        rows.append((f"MeshGEMV P={p} g={g}", cycles, predict_gemv(device, p, g)))
    return rows


def loss(rows: Sequence[tuple[str, float, float]]) -> float:
    return math.sqrt(sum(math.log(pred / real) ** 2 for _, real, pred in rows) / len(rows))


def with_params(base: Device, values: Sequence[float]) -> Device:
    return dataclasses.replace(
        base, **{k: abs(v) for k, v in zip(PARAMS, values, strict=True)}
    )


def nelder_mead(
    f: Callable[[Sequence[float]], float], x0: Sequence[float], steps: int, scale: float
) -> tuple[list[float], float]:
    n = len(x0)
    simplex = [list(x0)]
    for i in range(n):
        x = list(x0)
        x[i] = x[i] * (1 + scale) if x[i] else scale
        simplex.append(x)
    values = [f(x) for x in simplex]
    for _ in range(steps):
        order = sorted(range(n + 1), key=lambda i: values[i])
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        centroid = [sum(x[j] for x in simplex[:-1]) / n for j in range(n)]
        worst = simplex[-1]
        reflect = [c + (c - w) for c, w in zip(centroid, worst, strict=True)]
        fr = f(reflect)
        if fr < values[0]:
            expand = [c + 2 * (c - w) for c, w in zip(centroid, worst, strict=True)]
            fe = f(expand)
            simplex[-1], values[-1] = (expand, fe) if fe < fr else (reflect, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflect, fr
        else:
            contract = [c + 0.5 * (w - c) for c, w in zip(centroid, worst, strict=True)]
            fc = f(contract)
            if fc < values[-1]:
                simplex[-1], values[-1] = contract, fc
            else:
                best = simplex[0]
                simplex = [best] + [
                    [b + 0.5 * (x - b) for b, x in zip(best, xs, strict=True)]
                    for xs in simplex[1:]
                ]
                values = [values[0]] + [f(x) for x in simplex[1:]]
    i = min(range(n + 1), key=lambda i: values[i])
    return simplex[i], values[i]


def print_table(rows: Sequence[tuple[str, float, float]]) -> None:
    print(f"| {'kernel':<22} | {'measured':>9} | {'model':>9} | {'error':>7} |")
    print(f"|{'-' * 24}|{'-' * 11}|{'-' * 11}|{'-' * 9}|")
    for name, real, pred in rows:
        print(
            f"| {name:<22} | {real:>9,.0f} | {pred:>9,.0f} | {100 * (pred / real - 1):>+6.1f}% |"
        )
    errors = [abs(pred / real - 1) for _, real, pred in rows]
    print(
        f"\nmean |error| {100 * sum(errors) / len(errors):.1f}%, "
        f"max |error| {100 * max(errors):.1f}%, RMS log error {loss(rows):.3f}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument(
        "--check", action="store_true", help="evaluate the wse3 preset only"
    )
    parser.add_argument("--steps", type=int, default=150)
    args = parser.parse_args(argv)
    if args.check:
        print_table(evaluate(WSE3))
        return 0
    start = time.perf_counter()
    x0 = [getattr(WSE3, k) for k in PARAMS]
    best, _ = nelder_mead(
        lambda x: loss(evaluate(with_params(WSE3, x))), x0, args.steps, 0.5
    )
    device = with_params(WSE3, best)
    print_table(evaluate(device))
    print(f"\nfitted in {time.perf_counter() - start:.0f} s:")
    for k in PARAMS:
        print(f"  {k} = {getattr(device, k):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
