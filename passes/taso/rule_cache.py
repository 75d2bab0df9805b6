"""
The parsed rule sets of `taso-substitute`, kept on disk so a process loads them in
milliseconds instead of parsing and checking the MLIR of `rules.mlir` (1,302 rules)
again.

A rule set is stored as a pickle named by the SHA-256 of the rule file's text (and of
`FORMAT`, bumped when `Rule` changes shape), in the user's cache directory
(`platformdirs.user_cache_dir("plmr")`, or `$PLMR_CACHE_DIR`): editing the file changes
its hash, so a stale entry is never read. A cache directory that cannot be written
(a read-only home, a sandbox) only costs the parse: the rules are parsed and nothing is
stored. `PLMR_CACHE_DIR=off` turns the cache off.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

FORMAT = "plmr-rules-1"
"""Part of every key: bump it when the pickled rule classes change."""

T = TypeVar("T")


def cache_dir() -> Path | None:
    """Where rule sets are cached (None: caching is off)."""
    env = os.environ.get("PLMR_CACHE_DIR")
    if env == "off":
        return None
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("plmr"))


def cache_path(text: str) -> Path | None:
    """The cache file of a rule file with this text (None: caching is off)."""
    root = cache_dir()
    if root is None:
        return None
    digest = hashlib.sha256((FORMAT + "\n" + text).encode()).hexdigest()
    return root / f"rules-{digest}.pickle"


def cached(text: str, parse: Callable[[str], T]) -> T:
    """`parse(text)`, read from the cache when it holds this text's result."""
    path = cache_path(text)
    if path is not None:
        try:
            with path.open("rb") as f:
                return pickle.load(f)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            pass
    result = parse(text)
    if path is not None:
        _store(path, result)
    return result


def _store(path: Path, value: object) -> None:
    """Writes `value` to `path` atomically; an unwritable cache is skipped."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".rules-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return


__all__ = ["cache_dir", "cache_path", "cached"]
