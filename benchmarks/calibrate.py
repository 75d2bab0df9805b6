"""
Calibrate the `wse3` device model on real WSE-3 cycle counts of WaferLLM's kernels.

The calibration set (fp16, measured on a CS-3): MeshGEMM with M = K = N = t·P on a P×P
grid, and MeshGEMV with one element per PE and K-tree group counts g. The model's
mechanisms — per-hop latency, send/receive/stage software overheads and the block
product's per-op, per-row and per-instruction costs — are fitted by damped Gauss–Newton
on the log errors: the timing model is a max-plus system, piecewise linear in its
parameters, so each step linearises it by finite differences and solves a least-squares
problem. Larger meshes are then predicted, not fitted.

    python benchmarks/calibrate.py            # fit from the preset, print table, values
    python benchmarks/calibrate.py --check    # only evaluate the shipped wse3 preset
    python benchmarks/calibrate.py --loo      # leave-one-out errors of the preset
    python benchmarks/calibrate.py --readme   # the table and the leave-one-out errors
                                              # into benchmarks/README.md
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from collections.abc import Sequence

import numpy as np
from readme_section import write_section

from plmr.lowering.kernels import gemm, gemv
from plmr.runtime.mesh_machine import run_mesh
from plmr.target.device import WSE3, Device

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


def log_errors(device: Device, keep: Sequence[int] | None = None) -> np.ndarray:
    """log(model / measured) of every point (or of the points `keep`)."""
    rows = evaluate(device)
    errors = np.array([math.log(pred / real) for _, real, pred in rows])
    return errors if keep is None else errors[list(keep)]


def jacobian(device: Device, base: np.ndarray) -> np.ndarray:
    """d log(model) / d parameter by forward differences (the model is piecewise linear)."""
    x = np.array([getattr(device, k) for k in PARAMS], dtype=np.float64)
    cols: list[np.ndarray] = []
    for i in range(len(PARAMS)):
        step = max(0.02 * abs(x[i]), 0.05)
        moved = x.copy()
        moved[i] += step
        cols.append((log_errors(with_params(device, moved)) - base) / step)
    return np.stack(cols, axis=1)


def gauss_newton(
    device: Device,
    steps: int,
    keep: Sequence[int] | None = None,
    fixed_jacobian: np.ndarray | None = None,
    verbose: bool = False,
) -> Device:
    """
    Least squares of the log errors by damped Gauss-Newton (Levenberg-Marquardt): each
    step linearises the model (a max-plus system: piecewise linear in its parameters)
    and solves for the parameters; a step that does not lower the loss is retried with
    more damping. `keep`: fit those points only; `fixed_jacobian`: reuse it (one
    simulation per step, for the leave-one-out refits).
    """
    x = np.array([getattr(device, k) for k in PARAMS], dtype=np.float64)
    r = log_errors(device, keep)
    damping = 1e-3
    for step in range(steps):
        if fixed_jacobian is None:
            jac = jacobian(with_params(device, x), log_errors(with_params(device, x)))
        else:
            jac = fixed_jacobian
        if keep is not None:
            jac = jac[list(keep)]
        for _ in range(6):
            lhs = jac.T @ jac + damping * np.diag(np.diag(jac.T @ jac) + 1e-9)
            trial = np.maximum(x - np.linalg.solve(lhs, jac.T @ r), 0.0)
            r_trial = log_errors(with_params(device, trial), keep)
            if float(r_trial @ r_trial) < float(r @ r):
                x, r = trial, r_trial
                damping = max(damping / 3, 1e-6)
                break
            damping *= 10
        else:
            break
        if verbose:
            print(
                f"  step {step + 1}: RMS log error {math.sqrt(float(r @ r) / r.size):.4f}"
            )
    return with_params(device, x)


def table(rows: Sequence[tuple[str, float, float]]) -> list[str]:
    out = [
        f"| {'kernel':<22} | {'measured':>9} | {'model':>9} | {'error':>7} |",
        f"|{'-' * 24}|{'-' * 11}|{'-' * 11}|{'-' * 9}|",
    ]
    for name, real, pred in rows:
        out.append(
            f"| {name:<22} | {real:>9,.0f} | {pred:>9,.0f} | {100 * (pred / real - 1):>+6.1f}% |"
        )
    errors = [abs(pred / real - 1) for _, real, pred in rows]
    out.append(
        f"\nmean |error| {100 * sum(errors) / len(errors):.1f}%, "
        f"max |error| {100 * max(errors):.1f}%, RMS log error {loss(rows):.3f}"
    )
    return out


def print_table(rows: Sequence[tuple[str, float, float]]) -> None:
    print("\n".join(table(rows)))


def leave_one_out(device: Device, steps: int = 3) -> list[tuple[str, float, float]]:
    """
    Each point predicted by the model refitted without it (from `device`'s fit, with
    its Jacobian): the errors of points the fit did not see.
    """
    rows = evaluate(device)
    base = np.array([math.log(pred / real) for _, real, pred in rows])
    jac = jacobian(device, base)
    out: list[tuple[str, float, float]] = []
    for i, (name, real, _) in enumerate(rows):
        keep = [j for j in range(len(rows)) if j != i]
        refit = gauss_newton(device, steps, keep=keep, fixed_jacobian=jac)
        out.append((name, real, evaluate(refit)[i][2]))
        print(f"  without {name}: {100 * (out[-1][2] / real - 1):+.1f}%", flush=True)
    return out


def readme_section(device: Device) -> str:
    fitted = evaluate(device)
    held = leave_one_out(device)
    errors = [abs(pred / real - 1) for _, real, pred in held]
    lines = [
        *table(fitted),
        "",
        "Fitted (the `wse3` preset; WSE-2 shares them and differs in SIMD width): "
        + ", ".join(f"{k.removesuffix('_cycles')} {getattr(device, k):.2f}" for k in PARAMS)
        + " cycles.",
        "",
        "Leave-one-out: each point predicted by the model refitted on the other 13 "
        f"(mean |error| {100 * sum(errors) / len(errors):.1f}%, max "
        f"{100 * max(errors):.1f}%):",
        "",
        "| left out | measured | refitted model | error |",
        "|---|---:|---:|---:|",
    ]
    for name, real, pred in held:
        lines.append(
            f"| {name} | {real:,.0f} | {pred:,.0f} | {100 * (pred / real - 1):+.1f}% |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument(
        "--check", action="store_true", help="evaluate the wse3 preset only"
    )
    parser.add_argument(
        "--loo", action="store_true", help="leave-one-out errors of the wse3 preset"
    )
    parser.add_argument(
        "--readme",
        action="store_true",
        help="rewrite the calibration table of benchmarks/README.md (the wse3 preset, "
        "with the leave-one-out errors)",
    )
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args(argv)
    if args.check:
        print_table(evaluate(WSE3))
        return 0
    if args.loo:
        print_table(leave_one_out(WSE3))
        return 0
    if args.readme:
        text = readme_section(WSE3)
        print(text)
        if not write_section("calibrate", "calibrate.py", text):
            return 1
        return 0
    start = time.perf_counter()
    device = gauss_newton(WSE3, args.steps, verbose=True)
    print_table(evaluate(device))
    print(f"\nfitted in {time.perf_counter() - start:.0f} s:")
    for k in PARAMS:
        print(f"  {k} = {getattr(device, k):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
