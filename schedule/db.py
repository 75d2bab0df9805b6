"""
The performance database: every measured schedule of a program, in one SQLite file.

Each trial records which program (by the hash of its text), on which device and grid,
under which schedule, and how it went: its cycles, wall time, SRAM and route peaks, or
why it was infeasible or failed. Results of different runs can then be compared, and a
later tuning run can start from the best known schedule (`PerfDB.best`).

Several processes may append to the same file at once (e.g. parallel tuner workers, each
with its own `PerfDB`): every write is one short immediate transaction, and a busy file is
waited for (`timeout` seconds) rather than reported as an error.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import sqlite3
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from plmr.errors import PlmrError

SCHEMA_VERSION = 1
"""The layout of the tables; stored in `meta` as `schema_version`."""

SOURCES = ("default", "manual", "tuned", "generated")
"""Where a schedule came from: the compiler's default, written by hand, a tuner, or the
analytic generator (`plmr.schedule.analytic`)."""

STATUSES = ("ok", "infeasible", "failed")
"""How a trial went: measured, rejected (does not fit the device), or crashed."""

EXPORT_FORMATS = ("json", "csv")

# The columns of `trials`, in order (the export's CSV header).
COLUMNS = (
    "id",
    "program_hash",
    "program",
    "device",
    "grid_rows",
    "grid_cols",
    "schedule",
    "source",
    "status",
    "cycles",
    "seconds",
    "sram_peak",
    "routes_peak",
    "reason",
    "created",
    "version",
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS trials (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    program_hash TEXT NOT NULL,
    program TEXT NOT NULL,
    device TEXT NOT NULL,
    grid_rows INTEGER NOT NULL,
    grid_cols INTEGER NOT NULL,
    schedule TEXT NOT NULL,
    source TEXT NOT NULL,
    status TEXT NOT NULL,
    cycles REAL,
    seconds REAL,
    sram_peak INTEGER,
    routes_peak INTEGER,
    reason TEXT NOT NULL DEFAULT '',
    created TEXT NOT NULL,
    version TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS trials_program_device ON trials (program_hash, device);
"""

# Added after version 1 without changing it: older files get the table when opened.
_PROGRAMS = """
CREATE TABLE IF NOT EXISTS programs (
    program_hash TEXT NOT NULL,
    device TEXT NOT NULL,
    grid_rows INTEGER NOT NULL,
    grid_cols INTEGER NOT NULL,
    features TEXT NOT NULL,
    PRIMARY KEY (program_hash, device, grid_rows, grid_cols)
)
"""


@dataclass(frozen=True)
class Record:
    """One trial: a schedule of a program measured (or rejected) on a device and grid."""

    program_hash: str
    """The sha256 hex digest of the program text (see `program_hash`)."""
    program: str
    """A readable name, e.g. `transformer_block.mlir:@main`."""
    device: str
    """The device spec, e.g. `wse2` or `wse2:sram_kib=24`."""
    grid: tuple[int, int]
    """PEs as (rows, columns)."""
    schedule: dict[str, Any]
    """The schedule as its JSON object."""
    source: str
    """One of `SOURCES`: `default`, `manual` or `tuned`."""
    status: str
    """One of `STATUSES`: `ok`, `infeasible` or `failed`."""
    cycles: float | None = None
    seconds: float | None = None
    sram_peak: int | None = None
    """Peak SRAM use in bytes per PE."""
    routes_peak: int | None = None
    """Peak number of colors used by one router."""
    reason: str = ""
    """Why the trial was infeasible or failed (one line)."""
    created: str = ""
    """An ISO-8601 UTC timestamp; `PerfDB.add` fills it in if empty."""
    version: str = ""
    """The plmr version that measured it; `PerfDB.add` fills it in if empty."""
    id: int | None = None
    """The row id, set on records read back from the database."""

    def as_dict(self) -> dict[str, Any]:
        """The record as a JSON object (`grid` as a two-element list)."""
        d = asdict(self)
        d["grid"] = list(self.grid)
        return d


def program_hash(text: str) -> str:
    """
    The sha256 hex digest of a program text, ignoring trailing whitespace on each line
    and blank lines (so reformatting the file's layout does not make a new program).
    """
    lines = (line.rstrip() for line in text.splitlines())
    normalized = "\n".join(line for line in lines if line)
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()


def _row_to_record(row: sqlite3.Row) -> Record:
    schedule: dict[str, Any] = json.loads(row["schedule"])
    return Record(
        program_hash=row["program_hash"],
        program=row["program"],
        device=row["device"],
        grid=(int(row["grid_rows"]), int(row["grid_cols"])),
        schedule=schedule,
        source=row["source"],
        status=row["status"],
        cycles=row["cycles"],
        seconds=row["seconds"],
        sram_peak=row["sram_peak"],
        routes_peak=row["routes_peak"],
        reason=row["reason"],
        created=row["created"],
        version=row["version"],
        id=row["id"],
    )


def _check_record(record: Record) -> str:
    """Checks `record` before it is stored; returns its schedule as JSON text."""
    if record.source not in SOURCES:
        raise PlmrError(
            f"bad trial source '{record.source}': expected one of {', '.join(SOURCES)}"
        )
    if record.status not in STATUSES:
        raise PlmrError(
            f"bad trial status '{record.status}': expected one of {', '.join(STATUSES)}"
        )
    rows, cols = record.grid
    if rows <= 0 or cols <= 0:
        raise PlmrError(f"bad trial grid {rows}x{cols}: both sizes must be positive")
    if not record.program_hash:
        raise PlmrError("a trial needs a program hash (see plmr.schedule.db.program_hash)")
    try:
        return json.dumps(record.schedule, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise PlmrError(f"the schedule of a trial is not plain JSON: {e}") from e


class PerfDB:
    """
    A performance database file: the `trials` of every program, device and grid.

    Opening creates the file and its tables if needed. Use it as a context manager, or
    call `close` when done.
    """

    def __init__(self, path: str | Path, *, timeout: float = 30.0) -> None:
        self.path = Path(path)
        self._timeout = timeout
        if self.path.is_dir():
            raise PlmrError(f"cannot open database {self.path}: it is a directory")
        parent = self.path.resolve().parent
        if not parent.is_dir():
            raise PlmrError(
                f"cannot open database {self.path}: directory {parent} does not exist"
            )
        try:
            self._conn = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
        except sqlite3.Error as e:
            raise PlmrError(f"cannot open database {self.path}: {e}") from e
        self._conn.row_factory = sqlite3.Row
        try:
            self._open_schema()
        except BaseException:
            self._conn.close()
            raise

    # -- setup ------------------------------------------------------------------------

    def _tables(self) -> set[str]:
        rows = self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {str(r[0]) for r in rows}

    def _open_schema(self) -> None:
        with self._errors("open"):
            tables = self._tables()
            if not tables:
                with self._write():
                    if not self._tables():  # another process may have just made it
                        # (executescript would commit; run the statements one by one)
                        for statement in _SCHEMA.split(";"):
                            if statement.strip():
                                self._conn.execute(statement)
                        self._conn.execute(
                            "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)",
                            ("schema_version", str(SCHEMA_VERSION)),
                        )
                tables = self._tables()
        if "meta" not in tables or "trials" not in tables:
            raise PlmrError(
                f"{self.path} is not a plmr performance database "
                "(an SQLite file without the trials and meta tables); give a new file name"
            )
        with self._errors("open"):
            row = self._conn.execute(
                "SELECT value FROM meta WHERE key = 'schema_version'"
            ).fetchone()
        if row is None:
            raise PlmrError(
                f"{self.path} is not a plmr performance database (no schema_version)"
            )
        if str(row[0]) != str(SCHEMA_VERSION):
            raise PlmrError(
                f"{self.path} has schema version {row[0]}; this plmr reads version "
                f"{SCHEMA_VERSION}"
            )
        if "programs" not in tables:
            with self._errors("open"), self._write():
                self._conn.execute(_PROGRAMS)

    @contextmanager
    def _errors(self, what: str) -> Generator[None, None, None]:
        """Turns SQLite errors into one-line `PlmrError`s."""
        try:
            yield
        except sqlite3.OperationalError as e:
            message = str(e)
            if "locked" in message or "busy" in message:
                raise PlmrError(
                    f"database {self.path} is locked by another process "
                    f"(waited {self._timeout:g} s); try again later"
                ) from e
            raise PlmrError(f"cannot {what} database {self.path}: {message}") from e
        except sqlite3.DatabaseError as e:
            message = str(e)
            if "not a database" in message or "malformed" in message:
                raise PlmrError(
                    f"{self.path} is not a plmr performance database "
                    f"(not an SQLite file: {message})"
                ) from e
            raise PlmrError(f"cannot {what} database {self.path}: {message}") from e

    @contextmanager
    def _write(self) -> Generator[None, None, None]:
        """One immediate write transaction: waits for other writers, commits or rolls back."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    # -- writing ----------------------------------------------------------------------

    def add(self, record: Record) -> int:
        """
        Appends `record` (filling in `created` and `version` if empty), commits, and
        returns its new id. The record's own `id` is ignored.
        """
        from plmr import __version__

        schedule_text = _check_record(record)
        if not record.created:
            record = replace(
                record, created=datetime.now(UTC).isoformat(timespec="seconds")
            )
        if not record.version:
            record = replace(record, version=__version__)
        values = (
            record.program_hash,
            record.program,
            record.device,
            record.grid[0],
            record.grid[1],
            schedule_text,
            record.source,
            record.status,
            record.cycles,
            record.seconds,
            record.sram_peak,
            record.routes_peak,
            record.reason,
            record.created,
            record.version,
        )
        names = ", ".join(COLUMNS[1:])
        marks = ", ".join("?" * len(values))
        with self._errors("write to"), self._write():
            cursor = self._conn.execute(
                f"INSERT INTO trials ({names}) VALUES ({marks})", values
            )
            new_id = cursor.lastrowid
        assert new_id is not None
        return new_id

    # -- reading ----------------------------------------------------------------------

    def _select(self, where: list[str], args: list[Any], order: str) -> list[Record]:
        sql = "SELECT * FROM trials"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY {order}"
        with self._errors("read"):
            rows = self._conn.execute(sql, args).fetchall()
        return [_row_to_record(r) for r in rows]

    @staticmethod
    def _filters(
        program_hash: str | None,
        device: str | None,
        grid: tuple[int, int] | None,
        status: str | None,
    ) -> tuple[list[str], list[Any]]:
        where: list[str] = []
        args: list[Any] = []
        if program_hash is not None:
            where.append("program_hash = ?")
            args.append(program_hash)
        if device is not None:
            where.append("device = ?")
            args.append(device)
        if grid is not None:
            where.append("grid_rows = ? AND grid_cols = ?")
            args.extend(grid)
        if status is not None:
            where.append("status = ?")
            args.append(status)
        return where, args

    def trials(
        self,
        program_hash: str | None = None,
        device: str | None = None,
        grid: tuple[int, int] | None = None,
        status: str | None = None,
    ) -> list[Record]:
        """The trials matching every given filter, in the order they were added."""
        where, args = self._filters(program_hash, device, grid, status)
        return self._select(where, args, "id")

    def best(
        self,
        program_hash: str,
        device: str | None = None,
        grid: tuple[int, int] | None = None,
    ) -> Record | None:
        """
        The `ok` trial of a program with the fewest cycles (the earliest of equals), or
        None if it has none; infeasible and failed trials never count.
        """
        where, args = self._filters(program_hash, device, grid, "ok")
        where.append("cycles IS NOT NULL")
        sql = "SELECT * FROM trials WHERE " + " AND ".join(where)
        sql += " ORDER BY cycles, id LIMIT 1"
        with self._errors("read"):
            row = self._conn.execute(sql, args).fetchone()
        return None if row is None else _row_to_record(row)

    def lookup(
        self,
        program_hash: str,
        device: str,
        grid: tuple[int, int],
        schedule: dict[str, Any],
    ) -> Record | None:
        """
        The latest trial of exactly this bound schedule of a program on a device and grid
        (a measurement cache: the simulator is deterministic), or None.
        """
        try:
            text = json.dumps(schedule, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise PlmrError(f"the schedule of a trial is not plain JSON: {e}") from e
        where, args = self._filters(program_hash, device, grid, None)
        where.append("schedule = ?")
        args.append(text)
        sql = "SELECT * FROM trials WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC LIMIT 1"
        with self._errors("read"):
            row = self._conn.execute(sql, args).fetchone()
        return None if row is None else _row_to_record(row)

    def set_features(
        self, program_hash: str, device: str, grid: tuple[int, int], features: Any
    ) -> None:
        """Stores what the tuner knows of a program on a device and grid (plain JSON)."""
        try:
            text = json.dumps(features, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise PlmrError(f"program features are not plain JSON: {e}") from e
        with self._errors("write to"), self._write():
            self._conn.execute(
                "INSERT OR REPLACE INTO programs VALUES (?, ?, ?, ?, ?)",
                (program_hash, device, grid[0], grid[1], text),
            )

    def features(self) -> list[tuple[str, str, tuple[int, int], Any]]:
        """Every stored program description: (hash, device, grid, features)."""
        with self._errors("read"):
            rows = self._conn.execute(
                "SELECT * FROM programs ORDER BY program_hash, device, grid_rows, grid_cols"
            ).fetchall()
        return [
            (
                str(r["program_hash"]),
                str(r["device"]),
                (int(r["grid_rows"]), int(r["grid_cols"])),
                json.loads(r["features"]),
            )
            for r in rows
        ]

    def programs(self) -> list[tuple[str, str, int]]:
        """
        Every program with trials: (hash, name, number of trials), in order of first
        appearance; the name is the one its first trial was stored under.
        """
        sql = """
            SELECT t.program_hash, t.program, g.n
            FROM (SELECT program_hash, MIN(id) AS first, COUNT(*) AS n
                  FROM trials GROUP BY program_hash) AS g
            JOIN trials AS t ON t.id = g.first
            ORDER BY g.first
        """
        with self._errors("read"):
            rows = self._conn.execute(sql).fetchall()
        return [(str(r[0]), str(r[1]), int(r[2])) for r in rows]

    def export(self, fmt: str = "json") -> str:
        """
        Every trial as text: `json` is a list of records (schedules as objects, grids as
        [rows, cols]); `csv` is a header (`COLUMNS`) and one row per trial (schedules as
        JSON text).
        """
        if fmt not in EXPORT_FORMATS:
            raise PlmrError(
                f"unknown export format '{fmt}': expected {' or '.join(EXPORT_FORMATS)}"
            )
        records = self.trials()
        if fmt == "json":
            return json.dumps([r.as_dict() for r in records], indent=2) + "\n"
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(COLUMNS)
        for r in records:
            writer.writerow(
                [
                    r.id,
                    r.program_hash,
                    r.program,
                    r.device,
                    r.grid[0],
                    r.grid[1],
                    json.dumps(r.schedule, sort_keys=True),
                    r.source,
                    r.status,
                    "" if r.cycles is None else repr(r.cycles),
                    "" if r.seconds is None else repr(r.seconds),
                    "" if r.sram_peak is None else r.sram_peak,
                    "" if r.routes_peak is None else r.routes_peak,
                    r.reason,
                    r.created,
                    r.version,
                ]
            )
        return out.getvalue()

    # -- lifetime ---------------------------------------------------------------------

    def close(self) -> None:
        """Closes the file (idempotent)."""
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
