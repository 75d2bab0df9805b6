"""
The tuner: searches a schedule's knobs against the runtime's timing mode, records every
trial in the performance database, and checks the winner in functional mode.

Samplers: `random` (uniform over each knob's domain, without repeats), `grid` (every
combination in order, truncated to the trial budget), `tpe` (Optuna's TPE, an optional
extra) and `evolutionary` (`plmr.schedule.evolution`: a population bred by mutation and
crossover, ranked by a learned cost model, only proposing candidates that satisfy the
constraints, started from the analytic generator's blocks, with per-nest tasks). A
candidate whose constraints fail (`Transform.check`) or that does not compile (e.g. its
blocks do not fit SRAM) is skipped with its reason and recorded as infeasible; it never
stops the search. Candidates run on an executor (`plmr.schedule.executors`: `--workers`
processes, or Ray tasks); results are taken in submission order and the database is
written by this process only, so a run with a fixed seed is reproducible whatever runs
the candidates. With a `cache` database, a bound schedule measured before (same
program, device and grid) is taken from it instead of being measured again.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from plmr.errors import PlmrError
from plmr.schedule.db import PerfDB, Record, program_hash
from plmr.schedule.evolution import Search, Space, TaskReport, Transfer, key_of
from plmr.schedule.executors import Executor, ProcessExecutor
from plmr.schedule.features import (
    FEATURE_COUNT,
    NestInfo,
    choices_of,
    features,
    program_vector,
    similarity,
)
from plmr.schedule.transforms import Compound
from plmr.schedule.trials import (
    Measurement,
    estimate,
    evaluate,
    front,
    front_key,
    lowered_key,
    nest_tables,
)

SAMPLERS = ("random", "grid", "tpe", "evolutionary")

Json = Any


_PLANNED: dict[str, dict[str, Json] | None] = {}
"""The planner's pick by program, schedule and grid (runs of one process share it)."""


def planner_pick(run: _Run, schedule: Compound, space: Space) -> dict[str, Json] | None:
    """
    The uniform blocking (`analytic.uniform_blocks`) the planner estimates fastest: the
    blocks `plmr compile` would choose among the knobs' values. None if none compiles.
    """
    from plmr.schedule.analytic import uniform_blocks

    key = json.dumps([run.phash, run.schedule_json, list(run.opts.grid)], sort_keys=True)
    if key in _PLANNED:
        return _PLANNED[key]
    candidates = [
        space.full(v)
        for v in uniform_blocks(schedule)
        if space.reason(space.full(v)) is None
    ]
    costs = list(
        run.executor.run(estimate, [(run.text, run.schedule_json, v) for v in candidates])
    )
    best: dict[str, Json] | None = None
    lowest = math.inf
    for v, c in zip(candidates, costs, strict=True):
        if c < lowest * 0.999:
            best, lowest = v, c
    _PLANNED[key] = best
    return best


_REFINED: dict[str, dict[str, Json] | None] = {}
"""The planner's refined pick by program, schedule and grid."""


def planner_refine(
    run: _Run, space: Space, start: dict[str, Json]
) -> dict[str, Json] | None:
    """
    The planner's pick refined one block knob at a time (coordinate descent on the
    planner's estimate, one sweep over `tile.*` knobs in order): each knob takes the
    value of its domain the planner estimates fastest, the others fixed. Blocks are what
    the planner chooses when it compiles; a per-nest block can differ from the global
    one, which a uniform blocking cannot express. None if nothing improves on `start`.
    """
    key = json.dumps(
        [run.phash, run.schedule_json, list(run.opts.grid), start], sort_keys=True
    )
    if key in _REFINED:
        return _REFINED[key]
    values = space.full(start)
    lowest = next(iter(run.executor.run(estimate, [(run.text, run.schedule_json, values)])))
    changed = False
    for path, knob in space.knobs.items():
        if not path.startswith("tile."):
            continue
        options = [
            dict(values, **{path: v}) for v in knob.domain() if v != values.get(path)
        ]
        options = [o for o in options if space.reason(o) is None]
        costs = run.executor.run(
            estimate, [(run.text, run.schedule_json, o) for o in options]
        )
        for o, c in zip(options, costs, strict=True):
            if c < lowest * 0.999:
                values, lowest, changed = o, c, True
    _REFINED[key] = values if changed else None
    return _REFINED[key]


# ---------------------------------------------------------------------------------------
# Samplers
# ---------------------------------------------------------------------------------------


def _random_candidates(schedule: Compound, seed: int) -> Iterator[dict[str, Json]]:
    knobs = schedule.knobs()
    rng = random.Random(seed)
    total = 1
    for k in knobs.values():
        total *= len(k.domain())
    seen: set[str] = set()
    misses = 0
    while len(seen) < total and misses < 1000:
        values = {name: rng.choice(k.domain()) for name, k in knobs.items()}
        key = json.dumps(values, sort_keys=True)
        if key in seen:
            misses += 1
            continue
        misses = 0
        seen.add(key)
        yield values


@dataclass
class TuneResult:
    """What a tuning run found."""

    default: Measurement
    best: Measurement
    trials: list[Measurement] = field(default_factory=lambda: [])
    check_error: float | None = None
    tasks: list[TaskReport] = field(default_factory=lambda: [])
    """Per-task trials and gains (the evolutionary sampler)."""
    rank_correlation: float | None = None
    """The cost model's Spearman rho on trials it ranked before they were measured."""
    generated: Measurement | None = None
    """The analytic generator's schedule, measured as a start point."""
    planned: Measurement | None = None
    """The planner's pick among uniform blockings, measured as the first start point."""
    refined: Measurement | None = None
    """The planner's pick refined per block knob (`planner_refine`), the second start."""
    transferred: int = 0
    """Trials of the database the cost model started from."""

    @property
    def speedup(self) -> float | None:
        if self.default.cycles is None or self.best.cycles is None:
            return None
        return self.default.cycles / self.best.cycles


@dataclass
class _Run:
    """The driver's side of a run: evaluates through the executor, cache and DB."""

    text: str
    name: str
    phash: str
    opts: Any
    schedule_json: dict[str, Json]
    executor: Executor
    db: PerfDB | None
    cache: PerfDB | None
    progress: Callable[[Measurement], None] | None

    def measure(
        self, candidates: list[dict[str, Json]], source: str, schedule_json: Any = None
    ) -> list[Measurement]:
        sj = self.schedule_json if schedule_json is None else schedule_json
        found: dict[int, Measurement] = {}
        if self.cache is not None:
            for i, values in enumerate(candidates):
                hit = self._cached(sj, values)
                if hit is not None:
                    found[i] = hit
        todo = [i for i in range(len(candidates)) if i not in found]
        fresh = self.executor.run(evaluate, [(self.text, sj, candidates[i]) for i in todo])
        out: list[Measurement] = []
        for i in range(len(candidates)):
            m = found[i] if i in found else next(fresh)
            _record(self.db, self.phash, self.name, self.opts, m, source)
            if i not in found and self.cache is not None and self.cache is not self.db:
                _record(self.cache, self.phash, self.name, self.opts, m, source)
            if self.progress:
                self.progress(m)
            out.append(m)
        return out

    def _cached(self, sj: Any, values: dict[str, Json]) -> Measurement | None:
        assert self.cache is not None
        try:
            bound = Compound.from_json(sj).bind(values).to_json()
        except PlmrError:
            return None
        grid = _grid_of(bound, self.opts.grid)
        device = _device_of(bound, self.opts.device)
        r = self.cache.lookup(self.phash, device, grid, bound)
        if r is None:
            return None
        return Measurement(
            values,
            bound,
            r.status,
            cycles=r.cycles,
            seconds=r.seconds,
            sram_peak=r.sram_peak,
            routes_peak=r.routes_peak,
            reason=r.reason,
        )


def tune(
    text: str,
    name: str,
    schedule: Compound,
    *,
    trials: int,
    db: PerfDB | None = None,
    sampler: str = "random",
    seed: int = 0,
    workers: int = 1,
    resume: bool = False,
    progress: Callable[[Measurement], None] | None = None,
    default: Compound | None = None,
    executor: Executor | None = None,
    cache: PerfDB | None = None,
    transfer: bool = True,
) -> TuneResult:
    """
    Measures the default schedule (`default`, else the schedule's knobs at their initial
    values), then `trials` candidates; returns the best (which is never worse than the
    default). With `resume`, the best schedule of this program on this device and grid
    in `db` is measured first. `executor` runs the candidates (default: `workers`
    processes); `cache` is a database of earlier measurements to reuse. The evolutionary
    sampler also measures the analytic generator's schedule first (recorded as
    `generated`) and, with `transfer`, starts its cost model from the trials `db` holds
    of this and similar programs.
    """
    if trials < 0:
        raise PlmrError(f"--trials must be >= 0, got {trials}")
    if workers < 1:
        raise PlmrError(f"--workers must be >= 1, got {workers}")
    if sampler not in SAMPLERS:
        raise PlmrError(f"unknown sampler '{sampler}' ({', '.join(SAMPLERS)})")
    base = default if default is not None else schedule.bind({})
    opts = base.compile_options()
    phash = program_hash(text)
    owned = executor is None
    run = _Run(
        text,
        name,
        phash,
        opts,
        schedule.to_json(),
        executor if executor is not None else ProcessExecutor(workers),
        db,
        cache,
        progress,
    )
    try:
        start = run.measure([{}], "default", base.to_json())[0]
        if start.nests and start.cycles is not None:
            # Measured afresh: keep the nests' shares for runs that take it from a cache.
            _, table = front(text, base)
            known = _stored_features(run)
            feats = {**known, "baseline": start.cycles}
            feats["shares"] = nest_shares(table, start.nests)
            for store in {id(s): s for s in (db, cache) if s is not None}.values():
                store.set_features(phash, opts.device, opts.grid, feats)
        measured: list[Measurement] = []
        if resume and db is not None:
            known = db.best(phash, opts.device, opts.grid)
            if known is not None:
                measured += run.measure([{}], "tuned", known.schedule)
        result = TuneResult(start, start)
        if sampler == "tpe":
            measured += _tpe(run, schedule, trials, seed)
        elif sampler == "evolutionary":
            measured += _evolve(run, schedule, base, start, trials, seed, transfer, result)
        else:
            source = (
                schedule.assignments()
                if sampler == "grid"
                else _random_candidates(schedule, seed)
            )
            candidates: list[dict[str, Json]] = []
            for values in source:
                if len(candidates) >= trials:
                    break
                candidates.append(values)
            measured += run.measure(candidates, "tuned")
    finally:
        if owned:
            run.executor.close()
    ok = [m for m in [start, *measured] if m.status == "ok" and m.cycles is not None]
    if not ok:
        reason = start.reason or "no candidate compiled"
        raise PlmrError(f"no schedule of {name} could be measured: {reason}")
    best = min(ok, key=lambda m: m.cycles if m.cycles is not None else float("inf"))
    result.best = best
    result.trials = measured
    return result


def _evolve(
    run: _Run,
    schedule: Compound,
    base: Compound,
    start: Measurement,
    trials: int,
    seed: int,
    transfer: bool,
    result: TuneResult,
) -> list[Measurement]:
    from plmr.schedule.analytic import generate
    from plmr.target.device import get_device

    if start.cycles is None:
        raise PlmrError(
            f"the default schedule of {run.name} could not be measured: {start.reason}"
        )
    sram = get_device(run.opts.device).sram_bytes
    grid = tuple(run.opts.grid)
    _, table = front(run.text, base)
    known = _stored_features(run)
    shares = (
        nest_shares(table, start.nests)
        if start.nests
        else cast(dict[str, float], known.get("shares", {}))
    )
    if not shares:
        # The default came from a cache that lacks its nests' shares: measure it again.
        fresh = evaluate(run.text, base.to_json(), {})
        shares = nest_shares(table, fresh.nests)
    space = Space(
        schedule,
        lambda b: front(run.text, b),
        sram,
        float(start.cycles),
        lambda b: lowered_key(run.text, b),
    )
    data = _transfer_data(run, table, grid) if transfer else None
    search = Search(space, seed, shares, data)
    result.transferred = 0 if data is None else int(data.y.size)
    generated = generate(schedule, table, (grid[0], grid[1]), sram)
    measured: list[Measurement] = []

    def measure(values: list[dict[str, Json]], source: str) -> list[Any]:
        out = run.measure(values, source)
        measured.extend(out)
        return list(out)

    # The planner's pick first: the compiler's own cost model on uniform blockings.
    planned = planner_pick(run, schedule, space)
    starts = [(planned, "tuned")] if planned is not None else []
    refined = planner_refine(run, space, planned) if planned is not None else None
    if refined is not None:
        starts.append((refined, "tuned"))
    if generated:
        starts.append((generated, "generated"))
    # The knobs at their initial values (the schedule's own defaults) is the next start.
    starts.append(({}, "tuned"))
    search.run(trials, measure, starts)

    def measured_as(values: dict[str, Json]) -> Measurement | None:
        # A start that lowers to a program measured before is that measurement.
        k = key_of(space.full(values))
        k = search.equivalent.get(k, k)
        return next((m for m in measured if key_of(space.full(m.values)) == k), None)

    result.planned = measured_as(planned) if planned is not None else None
    result.refined = measured_as(refined) if refined is not None else None
    result.generated = measured_as(generated) if generated else None
    result.tasks = search.task_reports()
    rho = search.rank_correlation()
    result.rank_correlation = None if math.isnan(rho) else rho
    _store_features(run, space, shares, known)
    return measured


def _transfer_data(run: _Run, table: list[NestInfo], grid: tuple[int, ...]) -> Transfer:
    """
    The ok trials `run.db` holds of this program (earlier runs, weight 1) and of other
    programs or grids (weight ½ × similarity of their program vectors), as features and
    log cycles relative to each one's default.
    """
    empty = Transfer.empty(FEATURE_COUNT)
    if run.db is None:
        return empty
    from plmr.target.device import get_device

    here = program_vector(table, (grid[0], grid[1]))
    xs: list[np.ndarray] = []
    ys: list[float] = []
    ws: list[float] = []
    for h, device, g, feats in run.db.features():
        d = cast(dict[str, Json], feats)
        fronts = cast(dict[str, list[Json]], d.get("fronts", {}))
        baseline = d.get("baseline")
        if not fronts or not isinstance(baseline, int | float) or baseline <= 0:
            continue
        tables = {k: [NestInfo.from_json(n) for n in v] for k, v in fronts.items()}
        same = h == run.phash and device == run.opts.device and g == run.opts.grid
        if same:
            weight = 1.0
        else:
            first = next(iter(tables.values()))
            weight = 0.5 * similarity(here, program_vector(first, g))
        if weight < 0.05:
            continue
        sram = get_device(device).sram_bytes
        for r in run.db.trials(h, device, g, "ok"):
            if r.cycles is None or r.cycles <= 0:
                continue
            try:
                key = front_key(Compound.from_json(r.schedule).compile_options())
            except PlmrError:
                continue
            nests = tables.get(key)
            if nests is None:
                continue
            xs.append(features(nests, choices_of(r.schedule, sram)))
            ys.append(math.log(r.cycles / float(baseline)))
            ws.append(weight)
    if not ys:
        return empty
    return Transfer(np.array(xs), np.array(ys), np.array(ws))


def nest_shares(table: list[NestInfo], estimates: Mapping[str, float]) -> dict[str, float]:
    """
    Each loop nest's share of the time: the planner's estimate of the tile-level nest
    it became. A nest merged into a later one (a product and the addition after it)
    has no estimate of its own and takes the one of the next nest that has.
    """
    total = sum(estimates.values())
    if total <= 0:
        return {}
    out: dict[str, float] = {}
    pending: list[str] = []
    for n in table:
        if n.name in estimates:
            for name in [*pending, n.name]:
                out[name] = out.get(name, 0.0) + estimates[n.name] / total
            pending = []
        elif n.name:
            pending.append(n.name)
    return out


def _stored_features(run: _Run) -> dict[str, Json]:
    for store in (run.cache, run.db):
        if store is None:
            continue
        for h, device, grid, feats in store.features():
            if h == run.phash and device == run.opts.device and grid == run.opts.grid:
                return cast(dict[str, Json], feats)
    return {}


def _store_features(
    run: _Run, space: Space, shares: Mapping[str, float], known: dict[str, Json]
) -> None:
    fronts = dict(cast(dict[str, Json], known.get("fronts", {})))
    for key, table in nest_tables(run.phash).items():
        fronts[key] = [n.to_json() for n in table]
    feats = {
        "baseline": space.baseline,
        "shares": dict(shares),
        "fronts": fronts,
    }
    for store in {id(s): s for s in (run.db, run.cache) if s is not None}.values():
        store.set_features(run.phash, run.opts.device, run.opts.grid, feats)


def _tpe(run: _Run, schedule: Compound, trials: int, seed: int) -> list[Measurement]:
    try:
        import optuna  # pyright: ignore[reportMissingImports]
    except ImportError as e:
        raise PlmrError(
            "the tpe sampler needs Optuna: .venv/bin/pip install -e '.[tune]'"
        ) from e
    optuna_any: Any = optuna
    optuna_any.logging.set_verbosity(optuna_any.logging.WARNING)
    knobs = schedule.knobs()
    study = optuna_any.create_study(
        direction="minimize", sampler=optuna_any.samplers.TPESampler(seed=seed)
    )
    out: list[Measurement] = []
    for _ in range(trials):
        trial = study.ask()
        values = {
            n: k.domain()[trial.suggest_categorical(n, list(range(len(k.domain()))))]
            for n, k in knobs.items()
        }
        m = run.measure([values], "tuned")[0]
        out.append(m)
        if m.cycles is None:
            study.tell(trial, state=optuna_any.trial.TrialState.FAIL)
        else:
            study.tell(trial, m.cycles)
    return out


def _record(
    db: PerfDB | None, phash: str, name: str, opts: Any, m: Measurement, source: str
) -> None:
    if db is None:
        return
    grid = _grid_of(m.schedule, opts.grid)
    device = _device_of(m.schedule, opts.device)
    db.add(
        Record(
            program_hash=phash,
            program=name,
            device=device,
            grid=grid,
            schedule=m.schedule,
            source=source,
            status=m.status,
            cycles=m.cycles,
            seconds=m.seconds,
            sram_peak=m.sram_peak,
            routes_peak=m.routes_peak,
            reason=m.reason,
        )
    )


def _partition_of(schedule: Mapping[str, Json]) -> Mapping[str, Json]:
    steps: list[Json] = schedule.get("steps", [])
    for step in steps:
        if isinstance(step, dict):
            d = cast(dict[str, Json], step)
            if d.get("transform") == "partition":
                return d
    return {}


def _grid_of(schedule: Mapping[str, Json], fallback: tuple[int, int]) -> tuple[int, int]:
    g = _partition_of(schedule).get("grid")
    if isinstance(g, list) and len(g) == 2 and all(isinstance(v, int) for v in g):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        return (int(g[0]), int(g[1]))  # pyright: ignore[reportUnknownArgumentType]
    return fallback


def _device_of(schedule: Mapping[str, Json], fallback: str) -> str:
    d = _partition_of(schedule).get("device")
    return d if isinstance(d, str) else fallback


def write_schedule(path: Path, schedule: Compound) -> None:
    from plmr.files import write_text_atomically

    write_text_atomically(path, schedule.dumps())


__all__ = [
    "SAMPLERS",
    "TuneResult",
    "tune",
    "write_schedule",
]
