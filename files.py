"""
Reading input files and writing output files with one precise error each.

Outputs are written atomically (a failed write never leaves a half-written file) with
the mode a plain `open(path, "w")` gives: a new file gets `0o666` less the umask, an
existing file keeps its mode. `check_output_path` and `check_output_dir` report a path's
real problem (missing directory, not a directory, not writable) before any work is done.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from plmr.errors import PlmrError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _writable_dir_problem(directory: Path) -> str | None:
    """Why files cannot be created in `directory`, or None if they can."""
    if not directory.exists():
        missing = directory
        while not missing.parent.exists() and missing.parent != missing:
            missing = missing.parent
        return f"directory {missing} does not exist (create it first)"
    if not directory.is_dir():
        return f"{directory} is not a directory"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"directory {directory} is not writable"
    return None


def check_output_path(path: Path, what: str = "output") -> None:
    """Raises a `PlmrError` if the file `path` cannot be written (before any work)."""
    resolved = path.resolve()
    if resolved.is_dir():
        raise PlmrError(f"cannot write {what} {path}: it is a directory; give a file name")
    problem = _writable_dir_problem(resolved.parent)
    if problem is not None:
        raise PlmrError(f"cannot write {what} {path}: {problem}")
    if resolved.exists() and not os.access(resolved, os.W_OK):
        raise PlmrError(f"cannot write {what} {path}: the file is not writable")


def check_output_dir(path: Path, what: str = "output directory") -> None:
    """Raises a `PlmrError` if the directory `path` can neither be used nor created."""
    resolved = path.resolve()
    if resolved.exists():
        if not resolved.is_dir():
            raise PlmrError(f"cannot use {what} {path}: it is not a directory")
        if not os.access(resolved, os.W_OK | os.X_OK):
            raise PlmrError(f"cannot use {what} {path}: it is not writable")
        return
    parent = resolved.parent
    while not parent.exists() and parent.parent != parent:
        parent = parent.parent
    if not parent.is_dir():
        raise PlmrError(f"cannot create {what} {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PlmrError(f"cannot create {what} {path}: directory {parent} is not writable")


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """
    Calls `write(tmp)` and renames `tmp` to `path` only if it succeeded; the file gets
    the mode `open(path, "w")` would give it.
    """
    shown = path
    path = path.resolve()
    check_output_path(shown)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        mode = 0o666 & ~_umask()
    try:
        fd, tmp_name = tempfile.mkstemp(
            dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
        )
    except OSError as e:
        raise PlmrError(f"cannot write {shown}: {e.strerror or e}") from e
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        os.chmod(tmp, mode)
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise PlmrError(f"cannot write {shown}: {e.strerror or e}") from e
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomically(path: Path, text: str) -> None:
    """Writes `text` to `path` atomically (see `write_atomically`)."""

    def write(tmp: Path) -> None:
        tmp.write_text(text)

    write_atomically(path, write)


def read_text_file(path: Path, what: str = "file", hint: str = "") -> str:
    """
    The text of `path`, or one `PlmrError` with its real problem: missing, a directory,
    unreadable, empty, or not text (`hint` says what was expected, e.g. "an .mlir file").
    """
    expected = f" (expected {hint})" if hint else ""
    try:
        data = path.read_bytes()
    except FileNotFoundError as e:
        raise PlmrError(f"no such file: {path} (the {what})") from e
    except IsADirectoryError as e:
        raise PlmrError(f"{what} {path} is a directory{expected}") from e
    except OSError as e:
        raise PlmrError(f"cannot read {what} {path}: {e.strerror or e}") from e
    if not data.strip():
        raise PlmrError(f"{what} {path} is empty{expected}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PlmrError(
            f"{what} {path} is not a text file (byte {e.start} is not UTF-8){expected}"
        ) from e
