"""
Where a compile spends its time (`plmr compile --profile`): the pipeline and the
blocking search time their steps with `step(name)`, and while a `Timing` is active
(`timing()`) each step's wall and CPU seconds and its number of runs are added up
under its name. With no active timing, `step` costs a dictionary lookup.

Names nest with ` / `: `blocking search / convert-loop-to-tile` is the part of the
blocking search spent in that pass, over all trials.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Step:
    wall: float = 0.0
    cpu: float = 0.0
    runs: int = 0


@dataclass
class Timing:
    """The steps timed while active, in the order they first ran."""

    steps: dict[str, Step] = field(default_factory=lambda: {})
    counters: dict[str, int] = field(default_factory=lambda: {})
    notes: list[str] = field(default_factory=lambda: [])
    """What the reader of the figures should know (a search stopped at a time limit)."""
    wall: float = 0.0
    cpu: float = 0.0

    def table(self) -> str:
        """The steps as an aligned table, then the counters."""
        width = max([len("total"), *(len(n) for n in self.steps)]) + 2
        lines = [f"{'step':<{width}}{'wall s':>9}{'CPU s':>9}{'runs':>7}"]
        for name, s in self.steps.items():
            depth = name.count(" / ")
            label = "  " * depth + name.rsplit(" / ", 1)[-1]
            lines.append(f"{label:<{width}}{s.wall:>9.3f}{s.cpu:>9.3f}{s.runs:>7}")
        lines.append(f"{'total':<{width}}{self.wall:>9.3f}{self.cpu:>9.3f}{1:>7}")
        lines += [f"{name}: {value}" for name, value in self.counters.items()]
        lines += self.notes
        return "\n".join(lines) + "\n"


_ACTIVE: list[Timing] = []
_PREFIX: list[str] = []


@contextmanager
def timing() -> Generator[Timing]:
    """Times the steps run inside the block (and the whole block)."""
    t = Timing()
    _ACTIVE.append(t)
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield t
    finally:
        t.wall = time.perf_counter() - wall
        t.cpu = time.process_time() - cpu
        _ACTIVE.pop()


@contextmanager
def step(name: str) -> Generator[None]:
    """Adds the time of the block to the step `name` (under the enclosing step)."""
    if not _ACTIVE:
        yield
        return
    full = " / ".join([*_PREFIX, name])
    s = _ACTIVE[-1].steps.setdefault(full, Step())
    _PREFIX.append(name)
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        s.wall += time.perf_counter() - wall
        s.cpu += time.process_time() - cpu
        s.runs += 1
        _PREFIX.pop()


def count(name: str, value: int) -> None:
    """Sets a counter printed under the table (e.g. the memo's hits)."""
    if _ACTIVE:
        _ACTIVE[-1].counters[name] = value


def note(text: str) -> None:
    """Adds a line printed after the counters (once, however often it is noted)."""
    if _ACTIVE and text not in _ACTIVE[-1].notes:
        _ACTIVE[-1].notes.append(text)


__all__ = ["Timing", "count", "note", "step", "timing"]
