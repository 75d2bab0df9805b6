"""The on/off switch and the hit counts that the lowering memos share."""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class MemoSwitch:
    """Whether a memo is used, and how often it answered (`hits`) or not (`misses`)."""

    enabled: bool = True
    hits: int = 0
    misses: int = 0

    @contextmanager
    def disabled(self) -> Generator[None]:
        """Lower without the memo (and without filling it) inside the block."""
        before = self.enabled
        self.enabled = False
        try:
            yield
        finally:
            self.enabled = before

    def reset(self) -> None:
        self.hits = self.misses = 0
