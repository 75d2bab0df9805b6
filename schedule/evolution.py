"""
The `evolutionary` sampler: a population of feasible schedules, bred by mutation and
crossover, ranked by a learned cost model before anything is measured.

Each round generates a few hundred children of the best measured schedules — a child
changes one or a few knobs of a parent (a neighbouring value of an ordered knob more
often than a far one) or takes each task's knobs from one of two parents — and keeps
only those that satisfy the schedule's constraints (`Compound.check` on the nests of the
child's own front, so a per-nest block that does not divide its loop, or a nest that
TASO's substitutions do not make, is never proposed) and that are not known to fail
(an earlier candidate with the same blocks that did not fit SRAM), nor equivalent to a
measured one: a knob whose change alone has left the measured cycles exactly unchanged
(an algorithm of a GEMM the program does not have, a substitution that finds nothing)
and never changed them is inert, and candidates that differ only in inert knobs are
one candidate (a plateau of equals is measured once). Before a chosen candidate is
measured it is lowered (`Space.lowered`): one whose mesh-level program was measured
already is skipped without spending a trial (the next candidate in the model's order
takes its place), and one that does not compile is learnt from the same way. The cost
model (`CostModel` on `features`), retrained on every measured trial plus the trials of
similar programs in the database, ranks the children; the round measures the best few
and one random child (exploration). The first round measures the start points (the
planner's pick and its refinement, the analytic generator's blocks, the database's
best) and random feasible candidates, ranked by the transferred model when there is one.

Tasks (after Ansor's task scheduler): the knobs of each nest with per-nest blocks form a
task, the other knobs (fusion, algorithms, global blocks) the `global` task. Every task
gets a round first, heaviest nest first; then each round goes to the task with the
largest expected gain — its share of the simulated time (the planner's per-nest estimate
of the default schedule) times its last round's relative improvement, or an optimistic
bonus while it has had few rounds — and its children mutate only that task's knobs
(most of them; a quarter mutate anything). The gain of each round is credited to its
task (`TaskReport`).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from plmr.errors import PlmrError
from plmr.schedule.cost_model import CostModel, spearman
from plmr.schedule.features import NestInfo, choices_of, features
from plmr.schedule.transforms import Compound, Knob, ProgramInfo

Json = Any
Values = dict[str, Json]

BATCH = 4
"""Candidates measured per round (fixed, so runs do not depend on the worker count)."""
POPULATION = 8
CHILDREN = 256
GLOBAL = "global"


class Outcome(Protocol):
    @property
    def status(self) -> str: ...

    @property
    def cycles(self) -> float | None: ...

    @property
    def reason(self) -> str: ...


Front = Callable[[Compound], tuple[ProgramInfo, list[NestInfo]]]
"""The nests a bound schedule compiles (constraints' view, features' table)."""

Measure = Callable[[list[Values], str], list[Outcome]]
"""Measures candidates (knob values) recorded as `source`; results in order."""

Lowered = Callable[[Compound], str]
"""A key of the lowered (mesh-level) program of a bound schedule: equal keys, equal
programs, equal cycles. Raises `PlmrError` if the schedule does not compile."""

LOWERINGS = 4
"""Candidates lowered per measured slot at most (duplicates are skipped, not measured)."""


def key_of(values: Mapping[str, Json]) -> str:
    return json.dumps(values, sort_keys=True)


@dataclass
class TaskReport:
    """What one task got and gave."""

    name: str
    share: float
    """Its share of the default schedule's time (the planner's estimate)."""
    knobs: list[str]
    rounds: int = 0
    trials: int = 0
    gain: float = 0.0
    """Cycles the best schedule lost during the task's rounds."""


@dataclass
class Space:
    """A schedule's knobs, their constraints and features."""

    schedule: Compound
    front: Front
    sram: int
    baseline: float
    """The default schedule's cycles (targets are log cycles relative to it)."""
    lowered: Lowered | None = None
    """A key of the program a bound schedule compiles to (None: candidates are told
    apart by their knobs only)."""
    knobs: dict[str, Knob] = field(init=False)
    _bad_blocks: set[str] = field(default_factory=lambda: set[str](), init=False)

    def __post_init__(self) -> None:
        self.knobs = self.schedule.knobs()

    def reason(self, values: Values) -> str | None:
        """Why a candidate breaks a constraint or is known to fail, else None."""
        try:
            bound = self.schedule.bind(values)
            info, _ = self.front(bound)
        except PlmrError as e:
            return str(e)
        reason = bound.check(info)
        if reason:
            return reason
        if self._bad_blocks and (
            self._blocks(values) in self._bad_blocks
            or any(b in self._bad_blocks for b in self._nest_blocks(values))
        ):
            return "the same blocks did not fit before"
        return None

    def _blocks(self, values: Values) -> str:
        full = self.full(values)
        return key_of(
            {k: v for k, v in full.items() if k.startswith(("tile.", "partition"))}
        )

    def _nest_blocks(self, values: Values) -> list[str]:
        full = self.full(values)
        return [
            key_of({k: v for k, v in full.items() if k in paths})
            for task, paths in tasks_of(self.knobs).items()
            if task != GLOBAL
        ]

    def program(self, values: Values) -> str | None:
        """The key of the program `values` lowers to (None without `lowered`)."""
        if self.lowered is None:
            return None
        return self.lowered(self.schedule.bind(values))

    def full(self, values: Mapping[str, Json]) -> Values:
        return {k: values.get(k, knob.initial) for k, knob in self.knobs.items()}

    def failed(self, values: Values, reason: str) -> None:
        """Learns from a candidate that did not compile (blocks too large for SRAM)."""
        if "SRAM" not in reason and "fit" not in reason:
            return
        full = self.full(values)
        for task, paths in tasks_of(self.knobs).items():
            # A nest named by the error: its own blocks are what did not fit.
            if task != GLOBAL and f"%{task[len('nest:') :]} " in reason + " ":
                self._bad_blocks.add(key_of({k: v for k, v in full.items() if k in paths}))
                return
        self._bad_blocks.add(self._blocks(values))

    def vector(self, values: Values) -> np.ndarray:
        """The program-independent features, then the knobs themselves (`encode`)."""
        bound = self.schedule.bind(values)
        _, table = self.front(bound)
        generic = features(table, choices_of(bound.to_json(), self.sram))
        return np.concatenate([generic, self.encode(values)])

    def encode(self, values: Values) -> np.ndarray:
        """Each knob as a number: log2 of a size, else its index in the domain."""
        full = self.full(values)
        out: list[float] = []
        for path, knob in self.knobs.items():
            v = full[path]
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                out.append(math.log2(v))
            else:
                out.append(float(knob.domain().index(v)))
        return np.array(out)


def tasks_of(knobs: Mapping[str, Knob]) -> dict[str, list[str]]:
    """Knob paths by task: `nest:NAME` for per-nest blocks, `global` for the rest."""
    out: dict[str, list[str]] = {}
    for path in knobs:
        if path.startswith("tile.nests."):
            name = path[len("tile.nests.") :].rsplit(".", 1)[0]
            out.setdefault(f"nest:{name}", []).append(path)
        else:
            out.setdefault(GLOBAL, []).append(path)
    return out


class TaskScheduler:
    """Allocates rounds to tasks by expected gain (warm-up: one round each)."""

    def __init__(
        self,
        tasks: Mapping[str, list[str]],
        shares: Mapping[str, float],
        rng: random.Random,
    ) -> None:
        nest_shares = {t: shares.get(t[len("nest:") :], 0.0) for t in tasks if t != GLOBAL}
        total = sum(nest_shares.values())
        if total > 0:
            nest_shares = {t: s / total for t, s in nest_shares.items()}
        elif nest_shares:
            nest_shares = dict.fromkeys(nest_shares, 1.0 / len(nest_shares))
        self.reports: dict[str, TaskReport] = {}
        for t, knobs in tasks.items():
            share = nest_shares.get(t, max(nest_shares.values(), default=1.0))
            self.reports[t] = TaskReport(t, share if t != GLOBAL else 1.0, list(knobs))
        if GLOBAL in self.reports and nest_shares:
            self.reports[GLOBAL].share = max(nest_shares.values())
        self._last: dict[str, float] = dict.fromkeys(tasks, 0.0)
        self._rng = rng

    def pick(self) -> str:
        order = sorted(self.reports.values(), key=lambda r: (-r.share, r.name))
        for r in order:
            if r.rounds == 0:
                return r.name
        if self._rng.random() < 0.05:
            return self._rng.choice([r.name for r in order])

        def score(r: TaskReport) -> float:
            return r.share * max(self._last[r.name], 0.02 / (1 + r.rounds))

        return max(order, key=score).name

    def update(self, task: str, before: float, after: float, trials: int) -> None:
        r = self.reports[task]
        r.rounds += 1
        r.trials += trials
        if math.isfinite(before) and math.isfinite(after):
            r.gain += max(0.0, before - after)
            self._last[task] = max(0.0, (before - after) / before)


@dataclass
class Transfer:
    """Trials of other programs (or earlier runs): features, targets, weights."""

    x: np.ndarray
    y: np.ndarray
    w: np.ndarray

    @staticmethod
    def empty(width: int) -> Transfer:
        return Transfer(np.zeros((0, width)), np.zeros(0), np.zeros(0))


@dataclass
class Search:
    """One evolutionary search (see the module's docstring)."""

    space: Space
    seed: int = 0
    shares: Mapping[str, float] = field(default_factory=lambda: dict[str, float]())
    transfer: Transfer | None = None
    batch: int = BATCH
    children: int = CHILDREN
    model: CostModel = field(default_factory=CostModel)
    predicted: list[tuple[float, float]] = field(default_factory=lambda: [])
    """(prediction before measuring, measured target) of every feasible trial the model
    ranked while trained: its rank correlation on trials it had not seen."""
    infeasible: int = 0
    duplicates: int = 0
    """Candidates not measured: their lowered program was measured already."""
    rejected: int = 0
    """Candidates not measured: they did not compile (e.g. blocks too large for SRAM)."""
    equivalent: dict[str, str] = field(default_factory=lambda: dict[str, str]())
    """A skipped duplicate's key (`key_of`) -> the key of the candidate measured for it."""
    scheduler: TaskScheduler | None = None

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._seen: set[str] = set()
        self._inert: set[str] = set()
        self._active: set[str] = set()
        self._measured: list[tuple[Values, float]] = []
        self._classes: set[str] = set()
        self._ok: list[tuple[Values, float, np.ndarray]] = []
        self._tasks = tasks_of(self.space.knobs)
        self.scheduler = TaskScheduler(self._tasks, self.shares, self._rng)
        self._used_transfer = False
        self._programs: dict[str, str] = {}
        self._program_of: dict[str, str] = {}
        self._cycles: dict[str, float] = {}
        self._pending: dict[str, float] = {}

    @property
    def used_transfer(self) -> bool:
        """Whether the model was trained on transferred trials at least once."""
        return self._used_transfer

    # -- equivalent candidates ----------------------------------------------------------

    @property
    def inert(self) -> set[str]:
        """Knobs seen to leave the cycles unchanged and never to change them."""
        return set(self._inert)

    def _class(self, values: Values) -> str:
        """The key of `values` without its inert knobs (equivalent candidates share it)."""
        return key_of({k: v for k, v in values.items() if k not in self._inert})

    def _known(self, values: Values) -> bool:
        """Whether `values` or a candidate equivalent to it was proposed already."""
        return key_of(values) in self._seen or self._class(values) in self._classes

    def _learn(self, values: Values, cycles: float) -> None:
        """Marks knobs inert or active from pairs that differ in one (non-inert) knob."""
        changed = False
        for other, c in self._measured:
            diff = [k for k in values if values[k] != other.get(k) and k not in self._inert]
            if len(diff) != 1:
                continue
            knob = diff[0]
            if math.isclose(c, cycles, rel_tol=1e-9, abs_tol=1e-6):
                if knob not in self._active:
                    self._inert.add(knob)
                    changed = True
            elif knob not in self._active:
                self._active.add(knob)
                self._inert.discard(knob)
                changed = True
        self._measured.append((values, cycles))
        if changed:
            self._classes = {self._class(v) for v, _ in self._measured}
        else:
            self._classes.add(self._class(values))

    # -- generation -------------------------------------------------------------------

    def _random_value(self, knob: Knob) -> Json:
        return self._rng.choice(knob.domain())

    def _neighbour(self, knob: Knob, value: Json) -> Json:
        domain = knob.domain()
        ordered = all(isinstance(v, int) and not isinstance(v, bool) for v in domain)
        if ordered and value in domain and self._rng.random() < 0.7:
            order = sorted(domain)
            i = order.index(value) + self._rng.choice((-1, 1))
            return order[min(max(i, 0), len(order) - 1)]
        return self._random_value(knob)

    def random_feasible(self, tries: int = 64) -> Values | None:
        """A uniform candidate satisfying the constraints (rejection, then repair)."""
        values: Values = {n: self._random_value(k) for n, k in self.space.knobs.items()}
        for _ in range(tries):
            reason = self.space.reason(values)
            if reason is None:
                return values
            # Resample one task's knobs: the one a block constraint names, else any.
            task = self._task_named(reason)
            for path in self._tasks[task]:
                values[path] = self._random_value(self.space.knobs[path])
        return None

    def _task_named(self, reason: str) -> str:
        for t in self._tasks:
            if t.startswith("nest:") and f"%{t[5:]}" in reason:
                return t
        return self._rng.choice(sorted(self._tasks))

    def _mutate(self, parent: Values, paths: Sequence[str]) -> Values:
        child = dict(parent)
        n = 1 + (self._rng.random() < 0.3) + (self._rng.random() < 0.1)
        for path in self._rng.sample(list(paths), min(n, len(paths))):
            child[path] = self._neighbour(self.space.knobs[path], child[path])
        return child

    def _crossover(self, a: Values, b: Values) -> Values:
        child = dict(a)
        for paths in self._tasks.values():
            if self._rng.random() < 0.5:
                for p in paths:
                    child[p] = b[p]
        return child

    def _children(self, task: str) -> list[Values]:
        # The best schedules of distinct cycles (a plateau of equals is one parent).
        parents: list[Values] = []
        levels: set[float] = set()
        for v, y, _ in sorted(self._ok, key=lambda t: t[1]):
            if round(y, 9) not in levels and len(parents) < POPULATION:
                levels.add(round(y, 9))
                parents.append(v)
        # The better a parent, the more children it has (rank weights 1/(1+rank)).
        weights = [1.0 / (1 + i) for i in range(len(parents))]
        own = self._tasks.get(task, list(self.space.knobs))
        every = list(self.space.knobs)
        out: list[Values] = []
        keys: set[str] = set()
        for _ in range(self.children * 4):
            if len(out) >= self.children:
                break
            r = self._rng.random()
            if r < 0.3 or not parents:
                child = self.random_feasible(8)
                if child is None:
                    continue
            elif r < 0.5 and len(parents) > 1:
                a, b = self._rng.sample(parents, 2)
                child = (
                    self._mutate(self._crossover(a, b), every)
                    if r < 0.4
                    else (self._crossover(a, b))
                )
            else:
                parent = self._rng.choices(parents, weights)[0]
                child = self._mutate(parent, own if self._rng.random() < 0.5 else every)
            k = self._class(child)
            if self._known(child) or k in keys or self.space.reason(child) is not None:
                continue
            keys.add(k)
            out.append(child)
        return out

    # -- the model --------------------------------------------------------------------

    def _train(self) -> bool:
        xs = [x for _, _, x in self._ok]
        ys = [y for _, y, _ in self._ok]
        ws = [1.0] * len(ys)
        t = self.transfer
        if t is not None and t.y.size:
            self._used_transfer = True
            # Transferred trials have no values for this schedule's knobs: -1.
            width = t.x.shape[1] + len(self.space.knobs)
            pad = np.full((t.y.size, len(self.space.knobs)), -1.0)
            x = np.vstack([np.array(xs).reshape(-1, width), np.hstack([t.x, pad])])
            y = np.concatenate([np.array(ys), t.y])
            w = np.concatenate([np.array(ws), t.w])
        else:
            x, y, w = np.array(xs), np.array(ys), np.array(ws)
        if y.size < 4:
            return False
        self.model = CostModel().fit(x, y, w)
        return self.model.trained

    def _rank(self, candidates: list[Values], n: int) -> list[Values]:
        """
        `candidates` in the order to measure them: the `n - 1` best by the model (of
        distinct predictions), one random candidate (exploration), then the rest by the
        model (a pick that turns out a duplicate is replaced by the next one).
        """
        if len(candidates) <= 1:
            return candidates
        trained = self._train()
        if not trained:
            return self._rng.sample(candidates, len(candidates))
        x = np.array([self.space.vector(c) for c in candidates])
        pred = self.model.predict(x)
        order = [int(i) for i in np.argsort(pred, kind="stable")]
        # Distinct predictions: children the model cannot tell apart (they differ in
        # knobs it found irrelevant) would measure the same plateau again.
        take: list[int] = []
        said: set[float] = set()
        for i in order:
            if len(take) >= max(1, n - 1):
                break
            p = round(float(pred[i]), 9)
            if p not in said:
                said.add(p)
                take.append(i)
        for i in order:  # too few distinct: fill up in order
            if len(take) >= max(1, n - 1):
                break
            if i not in take:
                take.append(i)
        # Exploration: one candidate the model did not choose.
        chosen = set(take)
        rest = [i for i in range(len(candidates)) if i not in chosen]
        if n > 1 and rest:
            take.append(self._rng.choice(rest))
        chosen = set(take)
        take += [i for i in order if i not in chosen]
        self._pending = {key_of(candidates[i]): float(pred[i]) for i in take}
        return [candidates[i] for i in take]

    def _admit(self, values: Values) -> bool:
        """
        Whether to measure `values`: not proposed before, and (with `Space.lowered`) it
        compiles to a program not measured before. A candidate that does not compile is
        learnt from (`Space.failed`); a duplicate maps to the candidate measured for its
        program, and its knobs that differ are evidence of inert knobs.
        """
        k = key_of(values)
        if k in self._seen:
            return False
        self._seen.add(k)
        try:
            program = self.space.program(values)
        except PlmrError as e:
            self.rejected += 1
            self.space.failed(values, str(e))
            return False
        if program is None:
            return True
        first = self._programs.setdefault(program, k)
        if first == k:
            self._program_of[k] = program
            return True
        self.duplicates += 1
        self.equivalent[k] = first
        cycles = self._cycles.get(program)
        if cycles is not None:
            self._learn(values, cycles)
        return False

    def _select(self, ordered: Sequence[Values], n: int) -> list[Values]:
        """The first `n` of `ordered` that `_admit` lets through (`LOWERINGS`·n tried)."""
        out: list[Values] = []
        tried = 0
        for v in ordered:
            if len(out) >= n or tried >= LOWERINGS * max(n, 1):
                break
            if key_of(v) in self._seen:
                continue
            tried += 1
            if self._admit(v):
                out.append(v)
        return out

    # -- the search -------------------------------------------------------------------

    def run(
        self, trials: int, measure: Measure, starts: Sequence[tuple[Values, str]] = ()
    ) -> list[Outcome]:
        """Measures `trials` candidates (start points first); returns them in order."""
        out: list[Outcome] = []
        best = math.inf
        queue = [
            (self.space.full(v), src)
            for v, src in starts
            if self.space.reason(self.space.full(v)) is None
        ]
        first = True
        idle = 0
        while len(out) < trials:
            # The first round is twice as large: a diverse sample before any model.
            n = min(self.batch * (2 if first else 1), trials - len(out))
            self._pending = {}
            task = GLOBAL
            batch: list[tuple[Values, str]] = []
            while queue and len(batch) < n:
                v, src = queue.pop(0)
                if self._admit(v):
                    batch.append((v, src))
            if first or len(self._ok) < 4:
                pool: list[Values] = []
                keys: set[str] = set()
                for _ in range(self.children):
                    c = self.random_feasible()
                    if c is not None and not self._known(c) and self._class(c) not in keys:
                        keys.add(self._class(c))
                        pool.append(c)
                candidates = pool
                first = False
            else:
                assert self.scheduler is not None
                task = self.scheduler.pick()
                candidates = self._children(task)
            want = n - len(batch)
            if want > 0:
                ranked = self._rank(candidates, want)
                batch += [(v, "tuned") for v in self._select(ranked, want)]
            if not batch:
                # Every candidate tried was a duplicate: the next round knows more.
                idle += 1
                if not candidates or idle > 16:
                    break  # the feasible space is exhausted
                if self.scheduler is not None and task in self.scheduler.reports:
                    self.scheduler.update(task, best, best, 0)
                continue
            idle = 0
            results: list[Outcome] = []
            for src in dict.fromkeys(s for _, s in batch):
                group = [v for v, s in batch if s == src]
                results += measure(group, src)
            ordered = [
                v
                for src in dict.fromkeys(s for _, s in batch)
                for v, s in batch
                if s == src
            ]
            before = best
            for v, m in zip(ordered, results, strict=True):
                out.append(m)
                if m.status != "ok" or m.cycles is None:
                    self.infeasible += 1
                    self.space.failed(v, m.reason)
                    continue
                y = math.log(m.cycles / self.space.baseline)
                k = key_of(v)
                if k in self._pending:
                    self.predicted.append((self._pending[k], y))
                if k in self._program_of:
                    self._cycles[self._program_of[k]] = m.cycles
                self._ok.append((v, y, self.space.vector(v)))
                self._learn(v, m.cycles)
                best = min(best, m.cycles)
            if self.scheduler is not None and task in self.scheduler.reports:
                self.scheduler.update(task, before, best, len(batch))
        return out

    def rank_correlation(self) -> float:
        """Spearman's rho of the model's predictions against the measured trials."""
        if len(self.predicted) < 3:
            return float("nan")
        p, y = zip(*self.predicted, strict=True)
        return spearman(np.array(p), np.array(y))

    def task_reports(self) -> list[TaskReport]:
        assert self.scheduler is not None
        return sorted(self.scheduler.reports.values(), key=lambda r: (-r.share, r.name))


__all__ = [
    "BATCH",
    "Search",
    "Space",
    "TaskReport",
    "TaskScheduler",
    "Transfer",
    "key_of",
    "tasks_of",
]
