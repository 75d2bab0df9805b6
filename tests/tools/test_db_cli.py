"""`plmr db list | best | export`: tables, JSON, files, and one clean error per bad input."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from plmr.schedule.db import PerfDB, Record, program_hash
from plmr.tools.cli import PlmrGroup
from plmr.tools.db_cli import db

MAIN = program_hash("func.func @main() {}")
MAIN2 = program_hash("func.func @main2() {}")
OTHER = program_hash("func.func @other() {}")


@click.group(cls=PlmrGroup)
def root() -> None:
    """A bare `plmr` group holding only `db`."""


root.add_command(db)


def run(*args: str) -> Result:
    return CliRunner().invoke(root, ["db", *args])


def trial(
    h: str,
    name: str,
    cycles: float | None,
    status: str = "ok",
    *,
    device: str = "wse2",
    grid: tuple[int, int] = (4, 4),
) -> Record:
    return Record(
        program_hash=h,
        program=name,
        device=device,
        grid=grid,
        schedule={"tile": [int(cycles or 0), 4], "gemm": "summa"},
        source="tuned",
        status=status,
        cycles=cycles,
        seconds=None if cycles is None else cycles * 1e-9,
        sram_peak=None if cycles is None else 20_480,
        routes_peak=None if cycles is None else 5,
        reason="" if status == "ok" else "needs 60 KiB of SRAM per PE",
    )


@pytest.fixture
def perf(tmp_path: Path) -> Path:
    path = tmp_path / "perf.db"
    with PerfDB(path) as d:
        d.add(trial(MAIN, "model.mlir:@main", 300.0))
        d.add(trial(MAIN, "model.mlir:@main", 120.0))
        d.add(trial(MAIN, "model.mlir:@main", None, "infeasible"))
        d.add(trial(MAIN, "model.mlir:@main", 90.0, device="wse3"))
        d.add(trial(MAIN, "model.mlir:@main", 100.0, grid=(8, 8)))
        d.add(trial(MAIN2, "model.mlir:@main2", 50.0))
        d.add(trial(OTHER, "other.mlir:@main", None, "failed"))
    return path


def one_error(result: Result, *fragments: str) -> None:
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), result.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


def test_list_prints_a_table(perf: Path):
    result = run("list", "--db", str(perf))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "id", "program", "hash", "device", "grid", "source", "status", "cycles",
        "seconds", "sram", "KiB", "routes", "created", "reason",
    ]  # fmt: skip
    assert len(lines) == 8
    assert MAIN[:12] in lines[1]
    assert MAIN[:13] not in lines[1]
    assert "300" in lines[1]
    assert "20.0" in lines[1]
    assert "4x4" in lines[1]
    assert "infeasible" in lines[3]
    assert "needs 60 KiB" in lines[3]
    only = run("list", "--db", str(perf), "--program", "other", "--device", "wse2")
    assert only.exit_code == 0
    assert len(only.stdout.splitlines()) == 2
    assert "failed" in only.stdout


def test_list_json_is_one_list(perf: Path):
    result = run("list", "--db", str(perf), "--program", "model.mlir:@main", "--json")
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)  # exactly one JSON document
    assert [r["id"] for r in records] == [1, 2, 3, 4, 5]  # the exact name wins
    assert records[1]["schedule"] == {"gemm": "summa", "tile": [120, 4]}
    assert records[4]["grid"] == [8, 8]
    by_hash = json.loads(
        run("list", "--db", str(perf), "--program", MAIN2[:6], "--json").stdout
    )
    assert [r["program"] for r in by_hash] == ["model.mlir:@main2"]


def test_list_of_an_empty_database(tmp_path: Path):
    path = tmp_path / "empty.db"
    PerfDB(path).close()
    result = run("list", "--db", str(path))
    assert result.exit_code == 0
    assert result.stdout == f"no trials in {path}\n"
    assert json.loads(run("list", "--db", str(path), "--json").stdout) == []


def test_best_prints_the_best_schedule(perf: Path):
    result = run("best", "--db", str(perf), "--program", "model.mlir:@main")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"gemm": "summa", "tile": [90, 4]}
    assert result.stdout.startswith('{\n  "gemm"')  # indent 2
    summary = result.stderr.splitlines()
    assert len(summary) == 1
    assert "90 cycles" in summary[0]
    assert "source tuned" in summary[0]
    assert "id 4" in summary[0]
    on_wse2 = run("best", "--db", str(perf), "--program", MAIN[:8], "--device", "wse2")
    assert json.loads(on_wse2.stdout)["tile"] == [100, 4]
    on_4x4 = run(
        "best", "--db", str(perf), "--program", MAIN, "--device", "wse2", "--grid", "4x4"
    )
    assert json.loads(on_4x4.stdout)["tile"] == [120, 4]


def test_best_of_the_only_program(tmp_path: Path):
    path = tmp_path / "one.db"
    with PerfDB(path) as d:
        d.add(trial(OTHER, "other.mlir:@main", 7.0))
    result = run("best", "--db", str(path))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["tile"] == [7, 4]


def test_export_to_files(perf: Path, tmp_path: Path):
    out = tmp_path / "trials.json"
    result = run("export", "--db", str(perf), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert "wrote 7 trials" in result.stderr
    records = json.loads(out.read_text())
    assert len(records) == 7
    assert records[5]["program"] == "model.mlir:@main2"
    out_csv = tmp_path / "trials.csv"
    result = run("export", "--db", str(perf), "--format", "csv", "-o", str(out_csv))
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(out_csv.read_text())))
    assert len(rows) == 7
    assert json.loads(rows[1]["schedule"]) == records[1]["schedule"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    to_stdout = run("export", "--db", str(perf))
    assert json.loads(to_stdout.stdout) == records


def test_errors_are_one_line(perf: Path, tmp_path: Path):
    missing = tmp_path / "nope.db"
    for cmd in ("list", "best", "export"):
        one_error(run(cmd, "--db", str(missing)), f"no such database {missing}")
    assert not missing.exists()
    one_error(
        run("best", "--db", str(perf), "--program", "model"),
        "'model' matches 2 programs",
        "model.mlir:@main (",
        "model.mlir:@main2 (",
    )
    one_error(run("best", "--db", str(perf)), "holds 3 programs")
    one_error(
        run("best", "--db", str(perf), "--program", "other"),
        "no ok trial of other.mlir:@main",
        "1 failed",
    )
    one_error(
        run("best", "--db", str(perf), "--program", MAIN, "--device", "wse9"),
        "no ok trial",
        "on wse9",
    )
    one_error(
        run("list", "--db", str(perf), "--program", "zzz"), "no program matching 'zzz'"
    )
    one_error(run("best", "--db", str(perf), "--grid", "4by4"), "bad grid '4by4'")
    out = tmp_path / "out.xml"
    one_error(
        run("export", "--db", str(perf), "--format", "xml", "-o", str(out)),
        "unknown export format 'xml'",
    )
    assert not out.exists()
    junk = tmp_path / "junk.db"
    junk.write_text("not sqlite " * 100)
    one_error(run("list", "--db", str(junk)), "not a plmr performance database")
