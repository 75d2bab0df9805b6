"""
`plmr tune` (search the schedules of a program on the simulator); registered by
`plmr.tools.cli`.

Bad input is one `error:` message and a non-zero exit status, never a traceback, and no
half-written output file is left behind.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import click

from plmr.errors import PlmrError
from plmr.files import check_output_path
from plmr.tools.options import COUNT, SEED
from plmr.tools.schedule_options import (
    check_database,
    check_schedule_conflicts,
    load_schedule,
)


def _nest_names(program: Path, no_substitute: bool, limit: int = 6) -> list[str]:
    """The named loop nests of PROGRAM with a reduction (the default pipeline's front)."""
    from plmr.dialects.context import load_module, make_context
    from plmr.passes.pipeline import CompileOptions, loop_nests, to_loop_level

    ctx = make_context()
    module = load_module(program, ctx)
    to_loop_level(ctx, module, CompileOptions(substitute=not no_substitute))
    named = [(n, e) for n, e in loop_nests(module).items() if e[1]]
    named.sort(key=lambda item: -(max(item[1][0], default=1) * max(item[1][1])))
    return [n for n, _ in named[:limit]]


@click.command("tune")
@click.argument("program", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--device", default="wse2", show_default=True, help="Device of the default.")
@click.option("--grid", default="4x4", show_default=True, help="Grid of the default.")
@click.option(
    "--schedule",
    "schedule_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The schedule with knobs to search (default: blocking, GEMM/GEMV algorithms, k).",
)
@click.option("--trials", type=COUNT, default=20, show_default=True, help="Candidates.")
@click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The performance database (SQLite; created if missing).",
)
@click.option(
    "--sampler",
    type=click.Choice(["random", "grid", "tpe", "evolutionary"]),
    default="random",
    show_default=True,
    help="tpe needs Optuna (pip install -e '.[tune]'); evolutionary: population, "
    "learned cost model, constraint-aware, analytic start, per-nest tasks.",
)
@click.option("--seed", type=SEED, default=0, show_default=True, help="Sampler seed.")
@click.option("--workers", type=COUNT, default=1, show_default=True, help="Processes.")
@click.option(
    "--executor",
    type=click.Choice(["process", "ray"]),
    default="process",
    show_default=True,
    help="Where candidates run; ray needs pip install -e '.[ray]'.",
)
@click.option("--address", default=None, help="A Ray cluster's address (--executor ray).")
@click.option("--resume", is_flag=True, help="Also measure the best schedule in the DB.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the best schedule here (default: PROGRAM.tuned.json next to PROGRAM).",
)
@click.option("--no-substitute", is_flag=True, help="Default schedule without TASO.")
@click.option("--no-progress", is_flag=True, help="Do not show the progress bar.")
def tune_cmd(
    program: Path,
    device: str,
    grid: str,
    schedule_path: Path | None,
    trials: int,
    db_path: Path,
    sampler: str,
    seed: int,
    workers: int,
    executor: str,
    address: str | None,
    resume: bool,
    output: Path | None,
    no_substitute: bool,
    no_progress: bool,
) -> None:
    """
    Search the knobs of a schedule for PROGRAM against the runtime's timing mode; record
    every trial in the database, check the winner in functional mode, print it and its
    speedup over the default schedule, and write it as JSON."""
    from plmr.dialects.context import load_module
    from plmr.dialects.printing import module_text
    from plmr.schedule.db import PerfDB
    from plmr.schedule.executors import make_executor
    from plmr.schedule.transforms import Substitute, default_schedule, tunable_schedule
    from plmr.schedule.trials import Measurement, check_functional
    from plmr.schedule.tuner import tune, write_schedule
    from plmr.tools.bench import parse_grid

    rows_cols = parse_grid(grid)
    if schedule_path is not None:
        check_schedule_conflicts(("device", "grid"))
    out = output if output is not None else program.with_suffix(".tuned.json")
    check_output_path(out, "schedule")
    check_database(db_path)
    default = default_schedule(rows_cols, device)
    if schedule_path is not None:
        schedule = load_schedule(schedule_path)
        default = None
    else:
        schedule = tunable_schedule(rows_cols, device, _nest_names(program, no_substitute))
    if no_substitute:
        schedule = schedule.replace(Substitute(enabled=False))
        if default is not None:
            default = default.replace(Substitute(enabled=False))
    text = module_text(load_module(program))
    knobs = schedule.knobs()
    click.echo(
        f"tuning {program.name}: {len(knobs)} knob(s) "
        f"({', '.join(knobs) or 'none'}), {trials} trial(s), {sampler} sampler, "
        f"{workers} worker(s) ({executor})",
        err=True,
    )
    runner = make_executor(executor, workers, address)
    with (
        PerfDB(db_path) as db,
        click.progressbar(
            length=trials + 1 + (1 if resume else 0),
            label="trials",
            file=sys.stderr if not no_progress else io.StringIO(),
        ) as bar,
    ):

        def progress(m: Measurement) -> None:
            del m
            bar.update(1)

        result = tune(
            text,
            program.name,
            schedule,
            trials=trials,
            db=db,
            sampler=sampler,
            seed=seed,
            workers=workers,
            resume=resume,
            progress=progress,
            default=default,
            executor=runner,
        )
    runner.close()
    from plmr.schedule.transforms import Compound

    best = Compound.from_json(result.best.schedule)
    error = check_functional(text, best, seed)
    if error > 1e-3:
        raise PlmrError(
            f"the best schedule computes wrong results (max relative error {error:.2e})"
        )
    infeasible = [m for m in result.trials if m.status != "ok"]
    click.echo(
        f"default: {result.default.cycles or float('nan'):,.0f} cycles; best: "
        f"{result.best.cycles or float('nan'):,.0f} cycles "
        f"({result.speedup or float('nan'):.2f}x) after {len(result.trials)} trial(s), "
        f"{len(infeasible)} infeasible; functional check: max error {error:.1e}"
    )
    for m in infeasible[:5]:
        click.echo(f"  skipped {json.dumps(m.values, sort_keys=True)}: {m.reason}")
    for label, start in (
        ("planner's start", result.planned),
        ("planner's refined start", result.refined),
    ):
        if start is not None:
            trial = next(i for i, m in enumerate(result.trials, 1) if m is start)
            click.echo(
                f"{label}: trial {trial} of {len(result.trials)}, "
                f"{start.cycles or float('nan'):,.0f} cycles ({start.status})"
            )
    if result.generated is not None:
        click.echo(
            f"analytic start: {result.generated.cycles or float('nan'):,.0f} cycles "
            f"({result.generated.status})"
        )
    if result.rank_correlation is not None:
        click.echo(
            f"cost model: rank correlation {result.rank_correlation:.2f} on trials it "
            f"ranked before measuring; {result.transferred} trial(s) transferred from the DB"
        )
    for t in result.tasks:
        click.echo(
            f"  task {t.name}: {t.share:.0%} of the time, {t.rounds} round(s), "
            f"{t.trials} trial(s), gained {t.gain:,.0f} cycles"
        )
    if result.best.values:
        click.echo(f"best knobs: {json.dumps(result.best.values, sort_keys=True)}")
    click.echo(best.dumps(), nl=False)
    write_schedule(out, best)
    click.echo(f"wrote {out}", err=True)
