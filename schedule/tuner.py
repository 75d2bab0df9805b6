"""
The tuner: searches a schedule's knobs against the runtime's timing mode, records every
trial in the performance database, and checks the winner in functional mode.

Samplers: `random` (uniform over each knob's domain, without repeats), `grid` (every
combination in order, truncated to the trial budget) and `tpe` (Optuna's TPE, an optional
extra). A candidate whose constraints fail (`Transform.check`) or that does not compile
(e.g. its blocks do not fit SRAM) is skipped with its reason and recorded as infeasible;
it never stops the search. Candidates run in `--workers` processes; results are taken in
submission order, so a run with a fixed seed is reproducible whatever the worker count.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from plmr.errors import PlmrError
from plmr.schedule.db import PerfDB, Record, program_hash
from plmr.schedule.transforms import Compound, ProgramInfo

SAMPLERS = ("random", "grid", "tpe")

Json = Any


@dataclass(frozen=True)
class Measurement:
    """One candidate's outcome."""

    values: dict[str, Json]
    schedule: dict[str, Json]
    status: str
    """`ok`, `infeasible` (constraints or compile errors) or `failed` (simulation)."""
    cycles: float | None = None
    seconds: float | None = None
    sram_peak: int | None = None
    routes_peak: int | None = None
    reason: str = ""


# ---------------------------------------------------------------------------------------
# Evaluation (runs in worker processes)
# ---------------------------------------------------------------------------------------

_LOOP_CACHE: dict[str, str] = {}
"""Loop-level program text by (program, graph-level options): the front of the pipeline
(TASO, transpose elimination, fusion) depends only on those, so trials share it."""


def _front_key(text: str, opts: Any) -> str:
    front = (
        opts.substitute,
        opts.alpha,
        opts.budget,
        opts.device,
        opts.eliminate_transposes,
        opts.fuse,
        opts.chunks,
    )
    return hashlib.sha256((text + repr(front)).encode()).hexdigest()


def _loop_level(text: str, opts: Any) -> str:
    from plmr.dialects.context import make_context, parse_module
    from plmr.dialects.printing import module_text
    from plmr.passes.pipeline import to_loop_level

    key = _front_key(text, opts)
    cached = _LOOP_CACHE.get(key)
    if cached is None:
        ctx = make_context()
        module = parse_module(text, ctx=ctx)
        to_loop_level(ctx, module, opts)
        cached = module_text(module)
        _LOOP_CACHE[key] = cached
    return cached


def compile_schedule(text: str, schedule: Compound, relay: bool = False) -> Any:
    """Compiles program `text` under a bound schedule; checks constraints first."""
    import dataclasses

    from plmr.dialects.context import make_context, parse_module
    from plmr.passes.pipeline import from_loop_level, loop_nests

    opts = dataclasses.replace(schedule.compile_options(), relay=relay)
    ctx = make_context()
    module = parse_module(_loop_level(text, opts), ctx=ctx)
    reason = schedule.check(ProgramInfo(loop_nests(module)))
    if reason:
        raise PlmrError(reason)
    return from_loop_level(ctx, module, opts)


def _zeros(module: Any) -> list[np.ndarray]:
    from plmr.dialects import mesh
    from plmr.dialects.graph import static_shape

    program = next(op for op in module.ops if isinstance(op, mesh.ProgramOp))
    return [np.zeros(static_shape(a, "input"), np.float32) for a in program.body.block.args]


def evaluate(
    text: str, schedule_json: dict[str, Json], values: dict[str, Json]
) -> Measurement:
    """Binds `values`, compiles and times one candidate (picklable, for worker processes)."""
    from plmr.runtime.interpreter import run_mesh

    try:
        bound = Compound.from_json(schedule_json).bind(values)
    except PlmrError as e:
        return Measurement(values, schedule_json, "infeasible", reason=str(e))
    as_json = bound.to_json()
    try:
        module = compile_schedule(text, bound)
    except PlmrError as e:
        return Measurement(values, as_json, "infeasible", reason=_one_line(str(e)))
    except Exception as e:  # a candidate must never stop the search
        reason = f"{type(e).__name__}: {e}"
        return Measurement(values, as_json, "failed", reason=_one_line(reason))
    try:
        _, report = run_mesh(module, _zeros(module), mode="timing")
    except Exception as e:
        return Measurement(values, as_json, "failed", reason=_one_line(str(e)))
    return Measurement(
        values,
        as_json,
        "ok",
        cycles=float(report.cycles),
        seconds=float(report.seconds),
        sram_peak=int(report.max_sram_bytes),
        routes_peak=int(report.max_routes),
    )


def _one_line(text: str) -> str:
    return " ".join(text.split())


def check_functional(text: str, schedule: Compound, seed: int = 0) -> float:
    """The winner against the source program's reference semantics: max relative error."""
    from plmr.dialects.context import parse_module
    from plmr.runtime.interpreter import run_mesh
    from plmr.runtime.running import random_inputs, run_function, select_function

    source = parse_module(text)
    fn = select_function(source, None)
    inputs = random_inputs(fn, seed)
    want = run_function(source, fn, inputs)
    module = compile_schedule(text, schedule)
    got, _ = run_mesh(module, inputs, mode="functional")
    worst = 0.0
    for w, g in zip(want, got, strict=True):
        scale = max(1.0, float(np.max(np.abs(w))))
        worst = max(worst, float(np.max(np.abs(np.asarray(g) - w))) / scale)
    return worst


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

    @property
    def speedup(self) -> float | None:
        if self.default.cycles is None or self.best.cycles is None:
            return None
        return self.default.cycles / self.best.cycles


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
) -> TuneResult:
    """
    Measures the default schedule (`default`, else the schedule's knobs at their initial
    values), then `trials` candidates; returns the best (which is never worse than the
    default). With `resume`, the best schedule of this program on this device and grid
    in `db` is measured first.
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
    start = evaluate(text, base.to_json(), {})
    _record(db, phash, name, opts, start, "default")
    if progress:
        progress(start)
    measured: list[Measurement] = []
    if resume and db is not None:
        known = db.best(phash, opts.device, opts.grid)
        if known is not None:
            m = evaluate(text, known.schedule, {})
            measured.append(m)
            _record(db, phash, name, opts, m, "tuned")
            if progress:
                progress(m)
    schedule_json = schedule.to_json()
    if sampler == "tpe":
        measured += _tpe(
            text, schedule, schedule_json, trials, seed, db, phash, name, progress
        )
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
        for m in _run_all(text, schedule_json, candidates, workers):
            measured.append(m)
            _record(db, phash, name, opts, m, "tuned")
            if progress:
                progress(m)
    ok = [m for m in [start, *measured] if m.status == "ok" and m.cycles is not None]
    if not ok:
        reason = start.reason or "no candidate compiled"
        raise PlmrError(f"no schedule of {name} could be measured: {reason}")
    best = min(ok, key=lambda m: m.cycles if m.cycles is not None else float("inf"))
    return TuneResult(start, best, measured)


def _run_all(
    text: str,
    schedule_json: dict[str, Json],
    candidates: list[dict[str, Json]],
    workers: int,
) -> Iterator[Measurement]:
    if workers == 1 or len(candidates) <= 1:
        for values in candidates:
            yield evaluate(text, schedule_json, values)
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(evaluate, text, schedule_json, v) for v in candidates]
        for f in futures:
            yield f.result()


def _tpe(
    text: str,
    schedule: Compound,
    schedule_json: dict[str, Json],
    trials: int,
    seed: int,
    db: PerfDB | None,
    phash: str,
    name: str,
    progress: Callable[[Measurement], None] | None,
) -> list[Measurement]:
    try:
        import optuna  # pyright: ignore[reportMissingImports]
    except ImportError as e:
        raise PlmrError(
            "the tpe sampler needs Optuna: .venv/bin/pip install -e '.[tune]'"
        ) from e
    optuna_any: Any = optuna
    optuna_any.logging.set_verbosity(optuna_any.logging.WARNING)
    knobs = schedule.knobs()
    opts = schedule.bind({}).compile_options()
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
        m = evaluate(text, schedule_json, values)
        out.append(m)
        _record(db, phash, name, opts, m, "tuned")
        if progress:
            progress(m)
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
    "Measurement",
    "TuneResult",
    "check_functional",
    "compile_schedule",
    "evaluate",
    "tune",
    "write_schedule",
]
