"""
Tuning samplers against each other: best cycles after 10/20/40 measured trials.

    .venv/bin/python benchmarks/tuning.py            # print the table, write tuning.png
    .venv/bin/python benchmarks/tuning.py --readme   # also rewrite benchmarks/README.md's
                                                     # "Tuning" section
    .venv/bin/python benchmarks/tuning.py --quick    # one case, one seed, 12 trials

Each case (a program on a grid) is tuned by every sampler (`random`, `tpe`,
`evolutionary`) with the same trial budget and several seeds, over the same space: the
fusion strategy, TASO on or off, global blocks, per-nest blocks of the four heaviest named
nests, the GEMM and GEMV algorithms and K-tree k. Curves are the best cycles among the
measured trials so far (the default schedule, which every run also measures, is not
counted: it is `plmr compile`'s own blocking search and shown apart). Measurements are
cached in an SQLite performance DB (`--cache`; the simulator is deterministic), so a
rerun only measures new candidates; runs do not see each other's trials otherwise (no
transfer).

The cost model's rank correlation is given twice: online (the evolutionary runs'
predictions of the candidates they chose, before measuring them) and held out (a model
trained on every evolutionary and TPE trial of the case, scored on the random runs'
trials it did not see).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from plmr.dialects.context import load_module
from plmr.dialects.printing import module_text
from plmr.schedule.cost_model import CostModel, spearman
from plmr.schedule.db import PerfDB
from plmr.schedule.evolution import Space
from plmr.schedule.transforms import (
    Compound,
    EliminateTransposes,
    Fuse,
    Partition,
    Substitute,
    Tile,
    choice,
    default_schedule,
    int_range,
)
from plmr.schedule.trials import Measurement, front
from plmr.schedule.tuner import tune
from plmr.target.device import get_device

ROOT = Path(__file__).resolve().parents[1]
PNG = Path(__file__).resolve().parent / "tuning.png"
SAMPLERS = ("random", "tpe", "evolutionary")
CASES = (
    ("transformer block", "examples/onnx/transformer_block.mlir", 4),
    ("transformer block", "examples/onnx/transformer_block.mlir", 8),
    ("tiny LLaMA decode", "examples/llama/tiny_decode.mlir", 4),
    ("tiny LLaMA decode", "examples/llama/tiny_decode.mlir", 8),
)


def space(text: str, grid: tuple[int, int]) -> Compound:
    """The searched knobs (see the module docstring)."""
    _, table = front(text, default_schedule(grid))
    heavy: list[str] = []
    for n in sorted(table, key=lambda n: -n.flops):
        if n.reduction and n.name and n.name not in heavy:
            heavy.append(n.name)
    return Compound(
        [
            EliminateTransposes(),
            Substitute(enabled=choice(True, False)),
            Fuse(choice("auto", "rolling")),
            Tile(
                parallel=choice(16, 1, 2, 4, 8, 32),
                reduction=choice(16, 4, 8, 32),
                nests={n: [choice(2, 4, 8, 16), choice(16, 4, 8)] for n in heavy[:4]},
            ),
            Partition(
                grid=list(grid),
                gemm=choice("meshgemm", "cannon", "summa"),
                gemv=choice("ktree", "pipeline", "ring"),
                k=int_range(2, 4),
            ),
        ]
    )


@dataclass
class Run:
    sampler: str
    seed: int
    curve: list[float]
    infeasible: int
    trials: list[Measurement]
    rho: float | None = None
    tasks: list[tuple[str, float, int, float]] = field(default_factory=lambda: [])
    seconds: float = 0.0


def best_curve(trials: Sequence[Measurement]) -> list[float]:
    best = math.inf
    out: list[float] = []
    for m in trials:
        if m.status == "ok" and m.cycles is not None:
            best = min(best, m.cycles)
        out.append(best)
    return out


def run_case(
    text: str,
    grid: tuple[int, int],
    trials: int,
    seeds: int,
    cache: PerfDB,
    samplers: Sequence[str] = SAMPLERS,
) -> tuple[float, list[Run]]:
    schedule = space(text, grid)
    runs: list[Run] = []
    default_cycles = math.nan
    for sampler in samplers:
        for seed in range(seeds):
            start = time.perf_counter()
            result = tune(
                text,
                "case",
                schedule,
                trials=trials,
                sampler=sampler,
                seed=seed,
                default=default_schedule(grid),
                cache=cache,
                transfer=False,
            )
            default_cycles = result.default.cycles or math.nan
            run = Run(
                sampler,
                seed,
                best_curve(result.trials),
                sum(m.status != "ok" for m in result.trials),
                result.trials,
                result.rank_correlation,
                [(t.name, t.share, t.trials, t.gain) for t in result.tasks],
                time.perf_counter() - start,
            )
            runs.append(run)
            print(
                f"  {sampler:12s} seed {seed}: best {run.curve[-1]:,.0f} "
                f"({run.infeasible} infeasible, {run.seconds:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
    return default_cycles, runs


def held_out_rho(text: str, grid: tuple[int, int], runs: Sequence[Run]) -> float:
    """Trained on evolutionary and TPE trials, scored on random's unseen trials."""
    schedule = space(text, grid)
    sram = get_device("wse2").sram_bytes
    sp = Space(schedule, lambda b: front(text, b), sram, 1.0)
    train: dict[str, tuple[np.ndarray, float]] = {}
    test: dict[str, tuple[np.ndarray, float]] = {}
    for run in runs:
        target = train if run.sampler != "random" else test
        for m in run.trials:
            if m.status != "ok" or m.cycles is None:
                continue
            key = repr(sorted(m.values.items()))
            target[key] = (sp.vector(m.values), math.log(m.cycles))
    test = {k: v for k, v in test.items() if k not in train}
    if len(train) < 4 or len(test) < 3:
        return math.nan
    model = CostModel().fit(
        np.array([x for x, _ in train.values()]), np.array([y for _, y in train.values()])
    )
    pred = model.predict(np.array([x for x, _ in test.values()]))
    return spearman(pred, np.array([y for _, y in test.values()]))


def _mean_spread(values: Sequence[float]) -> str:
    v = np.array(values, dtype=np.float64)
    if v.size == 1:
        return f"{v[0]:,.0f}"
    return f"{v.mean():,.0f} ± {v.std():,.0f}"


def _reach(evo: Run, target: float) -> int | None:
    for i, c in enumerate(evo.curve):
        if c <= target:
            return i + 1
    return None


def section(
    results: Sequence[tuple[str, tuple[int, int], float, list[Run], float]],
    trials: int,
    seeds: int,
) -> list[str]:
    marks = [m for m in (10, 20, 40) if m <= trials] or [trials]
    head = " | ".join(f"best after {m}" for m in marks)
    out = [
        f"Best cycles (mean ± standard deviation over {seeds} seed(s)) after N measured "
        f"trials of each sampler; `default` is `plmr compile`'s own schedule (its "
        "blocking searched over 24 global sizes), measured apart.",
        "",
        f"| case | sampler | {head} | speedup vs default | infeasible | "
        "trials to random's best | model rho |",
        "|---|---|" + "---|" * len(marks) + "---|---|---|---|",
    ]
    for label, grid, default, runs, rho in results:
        by: dict[str, list[Run]] = {
            s: [r for r in runs if r.sampler == s] for s in SAMPLERS
        }
        for s in SAMPLERS:
            rs = by[s]
            cells = [
                _mean_spread([r.curve[min(m, len(r.curve)) - 1] for r in rs]) for m in marks
            ]
            final = [r.curve[-1] for r in rs]
            speed = float(np.mean([default / f for f in final]))
            bad = sum(r.infeasible for r in rs) / max(1, sum(len(r.trials) for r in rs))
            reach = "—"
            model = "—"
            if s == "evolutionary":
                hits = [
                    _reach(r, rr.curve[-1]) for r, rr in zip(rs, by["random"], strict=True)
                ]
                got = [h for h in hits if h is not None]
                reach = (
                    f"{np.mean(got):.1f} of {trials} ({len(got)}/{len(hits)} seeds)"
                    if got
                    else f"never ({len(hits)} seeds)"
                )
                online = [r.rho for r in rs if r.rho is not None]
                model = (
                    f"{np.mean(online):.2f} online, {rho:.2f} held out"
                    if online
                    else f"{rho:.2f} held out"
                )
            seeds_here = "" if len(rs) == seeds else f", {len(rs)} seed(s)"
            out.append(
                f"| {label} {grid[0]}x{grid[1]} (default {default:,.0f}{seeds_here}) | {s} | "
                + " | ".join(cells)
                + f" | {speed:.2f}x | {bad:.0%} | {reach} | {model} |"
            )
    out += [
        "",
        "Per-nest tasks of the evolutionary runs (seed 0): share of the default's "
        "time (planner estimate), trials, cycles gained in the task's rounds.",
        "",
    ]
    for label, grid, _, runs, _ in results:
        evo = next(r for r in runs if r.sampler == "evolutionary")
        tasks = "; ".join(
            f"{n} {share:.0%}: {t} trials, -{g:,.0f}" for n, share, t, g in evo.tasks
        )
        out.append(f"- {label} {grid[0]}x{grid[1]}: {tasks}")
    return out


def plot(
    results: Sequence[tuple[str, tuple[int, int], float, list[Run], float]], path: Path
) -> bool:
    try:
        import matplotlib  # pyright: ignore[reportMissingImports]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # pyright: ignore[reportMissingImports]
    except ImportError:
        return False
    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.4))
    axes = np.atleast_1d(axes)
    for ax, (label, grid, default, runs, _) in zip(axes, results, strict=True):
        for s, color in zip(SAMPLERS, ("tab:gray", "tab:blue", "tab:red"), strict=True):
            curves = np.array([r.curve for r in runs if r.sampler == s])
            # Before a run's first feasible trial its best is undefined.
            curves = np.where(np.isfinite(curves), curves, np.nan)
            x = np.arange(1, curves.shape[1] + 1)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                mean = np.nanmean(curves, 0)
                low, high = np.nanmin(curves, 0), np.nanmax(curves, 0)
            ax.plot(x, mean, color=color, label=s)
            ax.fill_between(x, low, high, color=color, alpha=0.15)
        ax.axhline(default, color="black", ls=":", lw=1, label="default")
        ax.set_title(f"{label} {grid[0]}x{grid[1]}", fontsize=9)
        ax.set_xlabel("measured trials")
        ax.set_ylabel("best cycles")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else ""
    )
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--quick", action="store_true", help="One case, one seed, 12 trials."
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path("/tmp/plmr-tuning-cache.sqlite"),
        help="The measurement cache (an SQLite performance DB).",
    )
    parser.add_argument(
        "--case", type=int, action="append", help="Only these cases (0-3; repeatable)."
    )
    parser.add_argument(
        "--case-seeds",
        action="append",
        default=[],
        metavar="CASE=N",
        help="Fewer seeds for one case (e.g. 3=1: the 8x8 decode step, the costliest).",
    )
    parser.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="CASE=FILE",
        help="Another version of a case's program (e.g. the one a cache was filled with).",
    )
    parser.add_argument(
        "--sampler",
        action="append",
        choices=SAMPLERS,
        help="Only run these samplers (fills the cache; no table). Repeatable.",
    )
    parser.add_argument("--png", type=Path, default=PNG)
    parser.add_argument(
        "--readme", action="store_true", help="Rewrite the section of benchmarks/README.md."
    )
    args = parser.parse_args(argv)
    cases = CASES[:1] if args.quick else CASES
    if args.case:
        cases = tuple(CASES[i] for i in args.case)
    trials, seeds = (12, 1) if args.quick else (args.trials, args.seeds)
    start = time.perf_counter()
    cpu = time.process_time()
    results: list[tuple[str, tuple[int, int], float, list[Run], float]] = []
    fewer = {int(k): int(v) for k, v in (c.split("=") for c in args.case_seeds)}
    with PerfDB(args.cache) as cache:
        for label, path, side in cases:
            index = CASES.index((label, path, side))
            sources = dict(c.split("=", 1) for c in args.source)
            text = module_text(load_module(Path(sources.get(str(index), ROOT / path))))
            grid = (side, side)
            print(f"{label} {side}x{side}", file=sys.stderr, flush=True)
            n = fewer.get(CASES.index((label, path, side)), seeds)
            if args.sampler:
                run_case(text, grid, trials, n, cache, args.sampler)
                continue
            default, runs = run_case(text, grid, trials, n, cache)
            results.append((label, grid, default, runs, held_out_rho(text, grid, runs)))
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu
    if args.sampler:
        return 0
    lines = section(results, trials, seeds)
    plotted = plot(results, args.png)
    lines += [
        "",
        f"{trials} trials per run, {seeds} seed(s), cache {args.cache.name}; this run "
        f"took {wall:,.0f} s wall, {cpu:,.0f} s CPU (one worker, in this process, on a "
        "shared machine; a measurement found in the cache costs nothing).",
    ]
    if plotted:
        lines += ["", f"![convergence of the samplers]({args.png.name})"]
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.readme:
        from readme_section import write_section

        if not write_section("tuning", "tuning.py", text):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
