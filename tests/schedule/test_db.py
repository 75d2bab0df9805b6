"""The performance database: round trips, best(), filters, export, errors, concurrency."""

from __future__ import annotations

import csv
import io
import json
import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from plmr import __version__
from plmr.errors import PlmrError
from plmr.schedule.db import COLUMNS, PerfDB, Record, program_hash

PROGRAM = "func.func @main() {\n  return\n}\n"
H = program_hash(PROGRAM)
OTHER = program_hash("func.func @other() {\n  return\n}\n")


def rec(
    cycles: float | None = 100.0,
    status: str = "ok",
    *,
    h: str = H,
    name: str = "main.mlir:@main",
    device: str = "wse2",
    grid: tuple[int, int] = (4, 4),
    source: str = "tuned",
    tile: int = 8,
) -> Record:
    return Record(
        program_hash=h,
        program=name,
        device=device,
        grid=grid,
        schedule={"tile": [tile, 4], "gemm": "summa", "nested": {"b": 1, "a": None}},
        source=source,
        status=status,
        cycles=cycles,
        seconds=None if cycles is None else cycles * 1e-9,
        sram_peak=None if cycles is None else 12_345,
        routes_peak=None if cycles is None else 7,
        reason="" if status == "ok" else f"{status}: out of SRAM",
    )


def test_round_trip_keeps_every_field(tmp_path: Path):
    full = Record(
        program_hash=H,
        program="main.mlir:@main",
        device="wse2:sram_kib=24",
        grid=(3, 5),
        schedule={"z": 1, "a": [1, 2.5, "x"], "m": {"k": True}},
        source="manual",
        status="ok",
        cycles=1234.5,
        seconds=2.5e-6,
        sram_peak=40_000,
        routes_peak=12,
        reason="",
        created="2024-05-01T12:00:00+00:00",
        version="9.9.9",
    )
    path = tmp_path / "perf.db"
    with PerfDB(path) as db:
        new_id = db.add(full)
        bare_id = db.add(rec())
    with PerfDB(path) as db:
        got, bare = db.trials()
    assert got == Record(**{**full.__dict__, "id": new_id})
    assert isinstance(got.grid, tuple)
    assert got.schedule == full.schedule
    assert bare.id == bare_id == new_id + 1
    assert bare.version == __version__
    assert bare.created.endswith("+00:00")
    assert bare.created[:4].isdigit()
    assert bare.cycles == 100.0
    assert bare.seconds == pytest.approx(1e-7)


def test_schema_is_as_documented(tmp_path: Path):
    path = tmp_path / "perf.db"
    PerfDB(path).close()
    conn = sqlite3.connect(path)
    cols = [r[1] for r in conn.execute("PRAGMA table_info(trials)")]
    assert tuple(cols) == COLUMNS
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
        "1",
    )
    indexes = [r[1] for r in conn.execute("PRAGMA index_list(trials)")]
    assert "trials_program_device" in indexes
    conn.close()


def test_best_takes_the_fewest_ok_cycles(tmp_path: Path):
    with PerfDB(tmp_path / "perf.db") as db:
        assert db.best(H) is None
        db.add(rec(None, "infeasible"))
        assert db.best(H) is None
        db.add(rec(300.0, tile=1))
        first_200 = db.add(rec(200.0, tile=2))
        db.add(rec(200.0, tile=3))  # a tie: the earlier one wins
        db.add(rec(50.0, "failed", tile=4))  # not ok: never the best
        db.add(rec(10.0, device="wse3", tile=5))
        db.add(rec(20.0, grid=(8, 8), tile=6))
        db.add(rec(1.0, h=OTHER, name="o.mlir:@other"))
        assert db.best(H) == db.trials(device="wse3")[0]
        wse2 = db.best(H, device="wse2", grid=(4, 4))
        assert wse2 is not None
        assert wse2.id == first_200
        assert wse2.schedule["tile"] == [2, 4]
        on_8x8 = db.best(H, grid=(8, 8))
        assert on_8x8 is not None
        assert on_8x8.cycles == 20.0
        assert db.best(H, device="wse9") is None


def test_filters_and_programs(tmp_path: Path):
    with PerfDB(tmp_path / "perf.db") as db:
        assert db.trials() == []
        assert db.programs() == []
        db.add(rec(1.0))
        db.add(rec(2.0, h=OTHER, name="o.mlir:@other", device="wse3"))
        db.add(rec(None, "failed"))
        db.add(rec(3.0, grid=(2, 8)))
        assert [r.cycles for r in db.trials(program_hash=H)] == [1.0, None, 3.0]
        assert [r.program_hash for r in db.trials(device="wse3")] == [OTHER]
        assert [r.cycles for r in db.trials(grid=(2, 8))] == [3.0]
        assert [r.status for r in db.trials(status="failed")] == ["failed"]
        assert db.trials(program_hash=H, device="wse2", grid=(4, 4), status="ok")[0].id == 1
        assert [r.id for r in db.trials()] == [1, 2, 3, 4]
        assert db.programs() == [(H, "main.mlir:@main", 3), (OTHER, "o.mlir:@other", 1)]


def test_add_rejects_bad_records(tmp_path: Path):
    with PerfDB(tmp_path / "perf.db") as db:
        with pytest.raises(PlmrError, match="bad trial status 'great'"):
            db.add(rec(status="great"))
        with pytest.raises(PlmrError, match="bad trial source"):
            db.add(rec(source="guess"))
        with pytest.raises(PlmrError, match="not plain JSON"):
            db.add(Record(H, "p", "wse2", (1, 1), {"x": {1, 2}}, "manual", "ok"))
        assert db.trials() == []


def test_export_json_and_csv_parse_back(tmp_path: Path):
    with PerfDB(tmp_path / "perf.db") as db:
        db.add(rec(100.0))
        db.add(rec(None, "infeasible", name='odd, "quoted" name'))
        records = db.trials()
        as_json = json.loads(db.export("json"))
        as_csv = list(csv.DictReader(io.StringIO(db.export("csv"))))
        with pytest.raises(PlmrError, match="unknown export format 'xml'"):
            db.export("xml")
    assert [Record(**{**d, "grid": tuple(d["grid"])}) for d in as_json] == records
    assert list(as_csv[0]) == list(COLUMNS)
    assert len(as_csv) == 2
    for row, r in zip(as_csv, records, strict=True):
        assert int(row["id"]) == r.id
        assert row["program"] == r.program
        assert (int(row["grid_rows"]), int(row["grid_cols"])) == r.grid
        assert json.loads(row["schedule"]) == r.schedule
        assert (float(row["cycles"]) if row["cycles"] else None) == r.cycles
        assert row["reason"] == r.reason
    assert as_csv[1]["sram_peak"] == ""


def test_program_hash_ignores_layout_only():
    text = "func.func @main() {\n  %0 = foo\n  return\n}\n"
    messy = "\nfunc.func @main() {   \n\n  %0 = foo\t\n  return\n}\n\n\n"
    assert program_hash(text) == program_hash(messy)
    assert program_hash(text) == program_hash(text.replace("\n", "\r\n"))
    assert program_hash(text) != program_hash(text.replace("foo", "bar"))
    assert program_hash(text) != program_hash(text.replace("  %0", "%0"))  # indentation
    assert len(program_hash(text)) == 64
    assert int(program_hash(text), 16) >= 0


def test_files_that_are_not_plmr_databases(tmp_path: Path):
    text = tmp_path / "notes.txt"
    text.write_text("hello, this is not a database at all\n" * 10)
    with pytest.raises(PlmrError, match="not a plmr performance database"):
        PerfDB(text)
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(PlmrError, match="not a plmr performance database"):
        PerfDB(other)
    with pytest.raises(PlmrError, match="does not exist"):
        PerfDB(tmp_path / "missing" / "perf.db")
    with pytest.raises(PlmrError, match="is a directory"):
        PerfDB(tmp_path)
    newer = tmp_path / "newer.db"
    PerfDB(newer).close()
    conn = sqlite3.connect(newer)
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(PlmrError, match="schema version 2"):
        PerfDB(newer)


def test_a_locked_database_is_a_clear_error(tmp_path: Path):
    path = tmp_path / "perf.db"
    PerfDB(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another writer: reading still works
        with PerfDB(path, timeout=0.05) as db:
            assert db.trials() == []
            with pytest.raises(PlmrError, match="is locked by another process"):
                db.add(rec())
        holder.execute("ROLLBACK")
        holder.execute("BEGIN EXCLUSIVE")  # nothing can even read it
        with pytest.raises(PlmrError, match="is locked by another process"):
            PerfDB(path, timeout=0.05)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def _append(path: str, worker: int, n: int) -> None:
    with PerfDB(path) as db:
        for i in range(n):
            db.add(rec(float(worker * 1000 + i), tile=worker))


def test_concurrent_writers_all_land(tmp_path: Path):
    path = str(tmp_path / "perf.db")  # created by the racing workers themselves
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_append, args=(path, w, 25)) for w in range(4)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(60)
        assert p.exitcode == 0
    with PerfDB(path) as db:
        records = db.trials()
    assert len(records) == 100
    assert len({r.id for r in records}) == 100
    assert sorted(r.cycles or 0 for r in records) == sorted(
        float(w * 1000 + i) for w in range(4) for i in range(25)
    )
