"""
`plmr db`: look into the performance database (every measured schedule of a program).

- `plmr db list --db FILE [--program PREFIX] [--device D] [--json]` prints the trials as
  a table (or, with `--json`, as exactly one JSON list on standard output);
- `plmr db best --db FILE [--program PREFIX] [--device D] [--grid PxQ]` prints the
  schedule of the fastest `ok` trial as JSON, and a one-line summary on standard error;
- `plmr db export --db FILE [--format json|csv] [-o OUT]` writes every trial.

`--program` takes a program name (e.g. `model.mlir:@main`) or hash, or a prefix of one;
an exact name or hash wins over prefixes. The database must exist; these commands never
create one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from plmr.errors import PlmrError

if TYPE_CHECKING:
    from plmr.schedule.db import PerfDB, Record

F = TypeVar("F", bound=Callable[..., Any])

SHORT_HASH = 12
"""How many hex digits of a program hash the tables and messages show."""

MAX_LISTED = 8
"""How many programs an ambiguity error names before `and N more`."""

Program = tuple[str, str, int]
"""(hash, name, number of trials), as `PerfDB.programs` returns them."""


def db_option(fn: F) -> F:
    """The `--db FILE` option (an existing database)."""
    option = click.option(
        "--db",
        "db_path",
        required=True,
        type=click.Path(path_type=Path),
        help="The performance database (an SQLite file written by plmr).",
    )
    return option(fn)


def open_existing(path: Path) -> PerfDB:
    """Opens the database at `path`, which must already exist."""
    from plmr.schedule.db import PerfDB

    if not path.exists():
        raise PlmrError(f"no such database {path}")
    return PerfDB(path)


def describe_program(program: Program) -> str:
    """`name (hash prefix, N trials)`."""
    h, name, n = program
    return f"{name} ({h[:SHORT_HASH]}, {n} trial{'s' if n != 1 else ''})"


def describe_programs(programs: Sequence[Program]) -> str:
    """The programs on one line, at most `MAX_LISTED` of them."""
    shown = "; ".join(describe_program(p) for p in programs[:MAX_LISTED])
    rest = len(programs) - MAX_LISTED
    return shown + (f"; and {rest} more" if rest > 0 else "")


def match_programs(db: PerfDB, prefix: str | None) -> list[Program]:
    """
    The programs `prefix` names: all of them without a prefix; those whose name or hash
    is exactly `prefix` if any; else those whose name or hash starts with it. No match
    is an error.
    """
    programs = db.programs()
    if prefix is None:
        return programs
    exact = [p for p in programs if prefix in (p[0], p[1])]
    if exact:
        return exact
    matches = [
        p for p in programs if p[0].startswith(prefix.lower()) or p[1].startswith(prefix)
    ]
    if not matches:
        known = describe_programs(programs) if programs else "none"
        raise PlmrError(f"no program matching '{prefix}' in {db.path}; programs: {known}")
    return matches


def _cycles(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def _seconds(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def _kib(v: int | None) -> str:
    return "-" if v is None else f"{v / 1024:.1f}"


def _int(v: int | None) -> str:
    return "-" if v is None else str(v)


TABLE_COLUMNS = (
    ("id", ">"),
    ("program", "<"),
    ("hash", "<"),
    ("device", "<"),
    ("grid", "<"),
    ("source", "<"),
    ("status", "<"),
    ("cycles", ">"),
    ("seconds", ">"),
    ("sram KiB", ">"),
    ("routes", ">"),
    ("created", "<"),
    ("reason", "<"),
)


def trial_table(records: Sequence[Record]) -> list[str]:
    """The records as an aligned text table (header first); the reason comes last."""
    rows = [[name for name, _ in TABLE_COLUMNS]]
    for r in records:
        rows.append(
            [
                _int(r.id),
                r.program,
                r.program_hash[:SHORT_HASH],
                r.device,
                f"{r.grid[0]}x{r.grid[1]}",
                r.source,
                r.status,
                _cycles(r.cycles),
                _seconds(r.seconds),
                _kib(r.sram_peak),
                _int(r.routes_peak),
                r.created,
                r.reason,
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE_COLUMNS))]
    lines: list[str] = []
    for row in rows:
        cells = [
            f"{cell:{align}{width}}"
            for cell, (_, align), width in zip(row, TABLE_COLUMNS, widths, strict=True)
        ]
        cells[-1] = row[-1]  # no padding after the last column
        lines.append("  ".join(cells).rstrip())
    return lines


@click.group("db")
def db() -> None:
    """Look into the performance database: list trials, get the best schedule, export."""


@db.command("list")
@db_option
@click.option("--program", default=None, help="Program name or hash (or a prefix).")
@click.option("--device", default=None, help="Only trials on this device, e.g. wse2.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list of trials.")
def list_cmd(db_path: Path, program: str | None, device: str | None, as_json: bool) -> None:
    """List the trials (all programs unless --program), in the order they were added."""
    with open_existing(db_path) as perf:
        records: list[Record] = []
        for h, _, _ in match_programs(perf, program):
            records.extend(perf.trials(program_hash=h, device=device))
        empty = not perf.programs()
    records.sort(key=lambda r: r.id or 0)
    if as_json:
        click.echo(json.dumps([r.as_dict() for r in records], indent=2))
        return
    if not records:
        if empty:
            click.echo(f"no trials in {db_path}")
        else:
            wanted = [f"--program {program}"] if program is not None else []
            wanted += [f"--device {device}"] if device is not None else []
            click.echo(f"no trials in {db_path} match {' '.join(wanted)}")
        return
    for line in trial_table(records):
        click.echo(line)


@db.command("best")
@db_option
@click.option("--program", default=None, help="Program name or hash (or a prefix).")
@click.option("--device", default=None, help="Only trials on this device, e.g. wse2.")
@click.option("--grid", default=None, help="Only trials on this grid, ROWSxCOLS.")
def best_cmd(
    db_path: Path, program: str | None, device: str | None, grid: str | None
) -> None:
    """
    Print the schedule (JSON) of the program's `ok` trial with the fewest cycles; a
    summary goes to standard error.
    """
    from plmr.tools.bench import parse_grid

    shape = None if grid is None else parse_grid(grid)
    with open_existing(db_path) as perf:
        matches = match_programs(perf, program)
        if not matches:
            raise PlmrError(f"no trials in {db_path}")
        if len(matches) > 1:
            what = (
                f"'{program}' matches {len(matches)} programs"
                if program is not None
                else f"{db_path} holds {len(matches)} programs"
            )
            raise PlmrError(
                f"{what}: {describe_programs(matches)}; choose one with --program "
                "(a longer name or a hash prefix)"
            )
        h, name, _ = matches[0]
        best = perf.best(h, device=device, grid=shape)
        candidates = perf.trials(program_hash=h, device=device, grid=shape)
    where = "".join(
        [
            f" on {device}" if device is not None else "",
            f" on grid {shape[0]}x{shape[1]}" if shape is not None else "",
        ]
    )
    if best is None:
        counts: dict[str, int] = {}
        for r in candidates:
            counts[r.status] = counts.get(r.status, 0) + 1
        tally = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        raise PlmrError(
            f"no ok trial of {name} ({h[:SHORT_HASH]}){where} in {db_path}"
            + (f" ({tally})" if tally else " (no trials)")
        )
    n_ok = sum(r.status == "ok" and r.cycles is not None for r in candidates)
    click.echo(json.dumps(best.schedule, indent=2, sort_keys=True))
    click.echo(
        f"best of {n_ok} ok trial{'s' if n_ok != 1 else ''} of {name} "
        f"({h[:SHORT_HASH]}){where}: {_cycles(best.cycles)} cycles on {best.device} "
        f"{best.grid[0]}x{best.grid[1]}, source {best.source}, id {best.id}",
        err=True,
    )


@db.command("export")
@db_option
@click.option(
    "--format",
    "fmt",
    default="json",
    show_default=True,
    help="json (a list of trials) or csv (a header and one row per trial).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write here (default: standard output).",
)
def export_cmd(db_path: Path, fmt: str, output: Path | None) -> None:
    """Write every trial as JSON or CSV."""
    from plmr.files import check_output_path, write_text_atomically

    if output is not None:
        check_output_path(output)
    with open_existing(db_path) as perf:
        text = perf.export(fmt)
        n = len(perf.trials())
    if output is None:
        click.echo(text, nl=False)
        return
    write_text_atomically(output, text)
    click.echo(f"wrote {n} trial{'s' if n != 1 else ''} to {output}", err=True)
