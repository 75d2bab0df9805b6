"""
A fuzz run: programs `0, 1, 2, ...` of a seed through the checked compile on worker
processes until the time or the program count runs out, then every crash and miscompile
minimised and written as an `.mlir` file that says how to reproduce it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from plmr.dialects.narrow import expect
from plmr.validate.fuzz.driver import (
    FUZZ_TOLERANCE,
    Case,
    Outcome,
    Task,
    case_task,
    make_case,
    run_tasks,
    warm_up,
)
from plmr.validate.fuzz.minimize import minimize_task

KINDS = ("ok", "refused", "crash", "miscompile", "timeout", "invalid")
FAILURES = ("crash", "miscompile", "timeout", "invalid")


@dataclass
class Failure:
    case: Case
    outcome: Outcome
    path: Path | None = None
    minimized: str | None = None


@dataclass
class Summary:
    seed: int
    seconds: float = 0.0
    counts: Counter[str] = field(default_factory=Counter[str])
    refusals: Counter[str] = field(default_factory=Counter[str])
    failures: list[Failure] = field(default_factory=list[Failure])
    stage_seconds: float = 0.0
    through_text: int = 0
    """Programs printed after every pass and parsed back before they ran."""
    warm_up_seconds: float = 0.0
    """
    Loading TASO's rules in this process before the workers start (not in `seconds`):
    the minimizer's; each spawned worker loads its own.
    """

    @property
    def programs(self) -> int:
        return sum(self.counts.values())

    def line(self) -> str:
        parts = ", ".join(f"{k} {self.counts.get(k, 0)}" for k in KINDS)
        rate = self.programs / self.seconds if self.seconds else 0.0
        return f"{self.programs} programs in {self.seconds:.0f} s ({rate:.2f}/s): {parts}"

    def report(self) -> list[str]:
        lines = [
            f"plmr fuzz --seed {self.seed}: {self.line()} "
            f"(after {self.warm_up_seconds:.0f} s loading TASO's rules)",
            f"through text after every pass: {self.through_text} of {self.programs} "
            "programs",
        ]
        if self.refusals:
            total = sum(self.refusals.values())
            lines.append(f"refusals ({total}), by pass and message:")
            for key, n in self.refusals.most_common():
                lines.append(f"  {n:5d}  {key}")
        for f in self.failures:
            where = f" -> {f.path}" if f.path is not None else ""
            lines.append(
                f"{f.outcome.kind}: program {f.case.index} in {f.outcome.stage or '-'}: "
                f"{_first_line(f.outcome.message)}{where}"
            )
        return lines


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 200 else line[:197] + "..."


Progress = Callable[[Summary, float], None]


def fuzz(
    seed: int,
    seconds: float | None = None,
    count: int | None = None,
    jobs: int = 1,
    out: Path | None = None,
    level: str = "graph",
    tolerance: float = FUZZ_TOLERANCE,
    timeout: float = 120.0,
    minimize_budget: float = 90.0,
    progress: Progress | None = None,
    text_share: float = 0.5,
) -> Summary:
    """Runs programs of `seed` for `seconds` and/or `count` programs (see module doc)."""
    summary = Summary(seed)
    summary.warm_up_seconds = warm_up()
    started = time.monotonic()
    deadline = None if seconds is None else started + seconds

    def tasks() -> Iterator[tuple[Task, object]]:
        i = 0
        while count is None or i < count:
            yield (case_task, (seed, i, level, tolerance, text_share)), i
            i += 1

    for tag, result in run_tasks(tasks(), jobs, timeout, deadline):
        if result is None:
            case = make_case(seed, expect(tag, int, "a fuzz task's tag"), level, text_share)
            outcome = Outcome("timeout", "", f"more than {timeout:.0f} s")
        elif isinstance(result, tuple):
            got = cast(tuple[object, object], result)
            case = expect(got[0], Case, "a fuzz worker's case")
            outcome = expect(got[1], Outcome, "a fuzz worker's outcome")
        else:
            case = make_case(seed, expect(tag, int, "a fuzz task's tag"), level, text_share)
            outcome = Outcome("crash", "worker", str(result))
        summary.counts[outcome.kind] += 1
        summary.through_text += case.config.through_text
        summary.stage_seconds += outcome.seconds
        if outcome.kind == "refused":
            summary.refusals[outcome.key] += 1
        elif outcome.kind in FAILURES:
            summary.failures.append(Failure(case, outcome))
        summary.seconds = time.monotonic() - started
        if progress is not None:
            progress(summary, summary.seconds)
    summary.seconds = time.monotonic() - started
    if out is not None and summary.failures:
        _minimize_and_write(summary, out, jobs, tolerance, minimize_budget)
    return summary


def _minimize_and_write(
    summary: Summary, out: Path, jobs: int, tolerance: float, budget: float
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    # Minimise at most 3 cases per kind of failure; the others are written as generated.
    per_key: Counter[str] = Counter()
    todo: list[Failure] = []
    for f in summary.failures:
        key = f"{f.outcome.kind} {f.outcome.key}"
        per_key[key] += 1
        if per_key[key] <= 3 and f.outcome.kind in ("crash", "miscompile"):
            todo.append(f)

    def tasks() -> Iterator[tuple[Task, object]]:
        for i, f in enumerate(todo):
            yield (minimize_task, (f.case, f.outcome, tolerance, budget)), i

    for tag, result in run_tasks(tasks(), jobs, budget * 2 + 60, None):
        index = expect(tag, int, "a minimizer task's tag")
        if isinstance(result, tuple):
            got = cast(tuple[object, object], result)
            todo[index].minimized = expect(got[0], str, "a minimized program")
            todo[index].outcome = expect(got[1], Outcome, "a minimizer's outcome")
    for n, f in enumerate(summary.failures):
        f.path = out / f"{f.outcome.kind}-{summary.seed}-{f.case.index:05d}.mlir"
        f.path.write_text(case_file(f, summary.seed))
        if f.outcome.before:
            before = f.path.with_suffix(".before.mlir")
            before.write_text(f.outcome.before)
        del n


def case_file(f: Failure, seed: int) -> str:
    """The program with comments saying what failed and how to reproduce it."""
    text = f.minimized if f.minimized is not None else f.case.text
    path = f"{f.outcome.kind}-{seed}-{f.case.index:05d}.mlir"
    lines = [
        f"// plmr fuzz --seed {seed}: program {f.case.index}"
        + (" (minimised)" if f.minimized is not None else ""),
        f"// {f.outcome.kind} in {f.outcome.stage or '-'}:",
        *(f"//   {line}" for line in f.outcome.message.strip().splitlines()[:12]),
        f"// reproduce: plmr compile {path} {f.case.config.flags()} --check-each "
        f"--check-tol {FUZZ_TOLERANCE:g}",
    ]
    if f.outcome.before:
        lines.append(
            f"// the failing pass alone: plmr-opt {Path(path).with_suffix('.before.mlir')} "
            f"-p '{f.outcome.stage}' --check-each --check-tol {FUZZ_TOLERANCE:g}"
        )
    return "\n".join(lines) + "\n" + text


__all__ = ["Summary", "fuzz"]
