"""Writing output files atomically: a failed write never leaves a half-written file."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from plmr.errors import PlmrError


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """Calls `write(tmp)` and renames `tmp` to `path` only if it succeeded."""
    path = path.resolve()
    if not path.parent.is_dir():
        raise PlmrError(f"cannot write {path}: directory {path.parent} does not exist")
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomically(path: Path, text: str) -> None:
    """Writes `text` to `path` atomically (see `write_atomically`)."""

    def write(tmp: Path) -> None:
        tmp.write_text(text)

    write_atomically(path, write)
