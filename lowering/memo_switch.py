"""The on/off switch, hit counts and reset that the lowering memos share."""

from __future__ import annotations

from collections.abc import Generator, MutableMapping, Sequence
from contextlib import contextmanager
from typing import Any


class MemoSwitch:
    """
    Whether a memo is used, how often it answered (`hits`) or not (`misses`), and the
    tables `clear` empties.
    """

    def __init__(self, tables: Sequence[MutableMapping[Any, Any]]):
        self.tables = tuple(tables)
        self.enabled = True
        self.hits = 0
        self.misses = 0

    @contextmanager
    def disabled(self) -> Generator[None]:
        """Lower without the memo (and without filling it) inside the block."""
        before = self.enabled
        self.enabled = False
        try:
            yield
        finally:
            self.enabled = before

    def is_enabled(self) -> bool:
        return self.enabled

    def clear(self) -> None:
        """Forgets every entry and the counts."""
        for table in self.tables:
            table.clear()
        self.hits = self.misses = 0

    def stats(self) -> tuple[int, int]:
        """(hits, misses) since the last `clear`."""
        return self.hits, self.misses
