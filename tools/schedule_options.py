"""
What `plmr compile` and `plmr tune` share about schedules: the options a `--schedule`
replaces, reading a schedule file, and opening a performance database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from plmr.errors import PlmrError
from plmr.files import check_output_path

SCHEDULE_REPLACES = (
    "device",
    "grid",
    "gemm",
    "gemv",
    "k",
    "tile_sizes",
    "fit_tiles",
    "no_substitute",
    "no_defer_norm_scale",
    "no_fold_rotate_half",
    "no_fold_repeat_kv",
    "no_fold_heads",
    "no_merge_matmuls",
    "no_pack",
    "budget",
    "engine",
    "fuse",
    "check_each",
)
"""The options of `plmr compile` that a `--schedule` replaces (or, --check-each, skips)."""


def check_schedule_conflicts(names: tuple[str, ...] = SCHEDULE_REPLACES) -> None:
    """An option given next to `--schedule`, which would ignore it, is an error."""
    ctx = click.get_current_context()
    given = [
        name
        for name in names
        if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
    ]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise PlmrError(
            f"{flags} cannot be combined with --schedule: the schedule's settings "
            "replace them; set them in the schedule (its partition, tile, fuse and "
            "substitute steps) or leave out --schedule"
        )


def check_database(path: Path) -> None:
    """A database that exists must open (before any work); a new one must be creatable."""
    from plmr.schedule.db import PerfDB

    check_output_path(path, "database")
    if path.exists():
        with PerfDB(path):
            pass


def load_schedule(path: Path) -> Any:
    from plmr.schedule.transforms import Compound

    try:
        text = path.read_text()
    except OSError as e:
        raise PlmrError(f"cannot read schedule {path}: {e.strerror or e}") from e
    return Compound.loads(text, str(path))
