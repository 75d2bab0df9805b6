"""
`plmr fuzz` (random programs through the checked compiler) and the checked compile of
`plmr compile --check-each`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from plmr.errors import PlmrError
from plmr.files import check_output_dir
from plmr.tools.options import COUNT, SECONDS, SEED, TOLERANCE


def compile_with_checks(
    ctx: Any,
    module: Any,
    opts: Any,
    plans: list[Any],
    check_dir: Path | None,
    seed: int,
    tolerance: float,
    through_text: bool = False,
) -> None:
    """`plmr compile --check-each`: the pipeline pass by pass, one line each on stderr."""
    from plmr.validate.check_each import Checker, CheckOptions
    from plmr.validate.compile_check import compile_checked

    def echo(line: str) -> None:
        click.echo(line, err=True)

    options = CheckOptions(
        seed=seed, tolerance=tolerance, check_dir=check_dir, through_text=through_text
    )
    compile_checked(ctx, module, opts, Checker(options, echo), plans)


@click.command("fuzz")
@click.option(
    "--seconds", type=SECONDS, default=None, help="Stop starting programs after this long."
)
@click.option("--count", type=COUNT, default=None, help="Stop after this many programs.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the run.")
@click.option("--jobs", type=COUNT, default=1, show_default=True, help="Worker processes.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("plmr-fuzz"),
    show_default=True,
    help="Where crashes and miscompiles are written (minimised .mlir files).",
)
@click.option(
    "--level",
    type=click.Choice(["graph", "loop", "tile", "mixed"]),
    default="graph",
    show_default=True,
    help="Generate graph programs, loop nests, tile programs (blocked loop nests), or all.",
)
@click.option(
    "--timeout",
    type=SECONDS,
    default=120.0,
    show_default=True,
    help="Seconds one program may take (a slower one counts as a timeout).",
)
@click.option("--tol", type=TOLERANCE, default=1e-3, show_default=True, help="Tolerance.")
@click.option(
    "--text-share",
    type=click.FloatRange(0.0, 1.0),
    default=0.5,
    show_default=True,
    help="Share of the programs that are printed after every pass and parsed back "
    "before they run (1: all of them, 0: none).",
)
@click.option("--no-progress", is_flag=True, help="Do not show the progress bar.")
def fuzz(
    seconds: float | None,
    count: int | None,
    seed: int,
    jobs: int,
    out_dir: Path,
    level: str,
    timeout: float,
    tol: float,
    text_share: float,
    no_progress: bool,
) -> None:
    """
    Generate random valid programs (graph DAGs over every graph op, or loop nests) and
    random configurations (grids, devices with less SRAM and fewer colors, blockings,
    algorithms), compile each with every pass checked against the reference
    semantics, and count the outcomes: ok, refused (a clean error, tabled by message),
    crash, miscompile. Crashes and miscompiles are minimised and written to --out with
    the command that reproduces them. Exit status 1 if any was found."""
    from plmr.validate.fuzz.run import Summary
    from plmr.validate.fuzz.run import fuzz as run_fuzz

    if seconds is None and count is None:
        raise PlmrError("plmr fuzz: give --seconds, --count or both")
    if jobs < 1:
        raise PlmrError(f"plmr fuzz: --jobs must be >= 1, got {jobs}")
    if not 0.0 <= text_share <= 1.0:
        raise PlmrError(
            f"plmr fuzz: --text-share must be between 0 and 1, got {text_share}"
        )
    check_output_dir(out_dir, "--out")
    width = 30
    shown = not no_progress and sys.stderr.isatty()

    def progress(summary: Summary, elapsed: float) -> None:
        if no_progress:
            return
        if seconds is not None:
            done = min(1.0, elapsed / seconds)
        else:
            done = summary.programs / max(1, count or 1)
        bar = "#" * int(done * width)
        line = f"[{bar:<{width}}] {summary.line()}"
        if shown:
            click.echo("\r" + line, nl=False, err=True)
        elif summary.programs % 50 == 0:
            click.echo(line, err=True)

    summary = run_fuzz(
        seed,
        seconds=seconds,
        count=count,
        jobs=jobs,
        out=out_dir,
        level=level,
        tolerance=tol,
        timeout=timeout,
        text_share=text_share,
        progress=progress,
    )
    if shown:
        click.echo("", err=True)
    for line in summary.report():
        click.echo(line)
    bad = sum(
        summary.counts.get(k, 0) for k in ("crash", "miscompile", "timeout", "invalid")
    )
    if bad:
        click.echo(f"wrote {len(summary.failures)} failing program(s) to {out_dir}")
        click.get_current_context().exit(1)
