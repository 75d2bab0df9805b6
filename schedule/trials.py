"""
One trial of the tuner: compiling a program under a bound schedule and timing it (or
pricing it with the planner), with the per-process caches trials share. These functions
are picklable and run in the executors' worker processes; `plmr.schedule.tuner` searches
over them.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from plmr.errors import PlmrError
from plmr.schedule.db import program_hash
from plmr.schedule.features import NestInfo, nest_table
from plmr.schedule.transforms import Compound, ProgramInfo

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
    nests: dict[str, float] = field(default_factory=lambda: dict[str, float]())
    """The planner's cycles per nest name (the nests' shares of the time)."""


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


def compile_schedule(
    text: str, schedule: Compound, relay: bool = False, plans: list[Any] | None = None
) -> Any:
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
    return from_loop_level(ctx, module, opts, plans=plans)


def front_key(opts: Any) -> str:
    """What the nests of a program depend on among the compile options."""
    return json.dumps(
        [
            opts.substitute,
            opts.alpha,
            opts.budget,
            opts.eliminate_transposes,
            opts.fuse,
            opts.chunks,
        ]
    )


_FRONTS: dict[str, tuple[ProgramInfo, list[NestInfo]]] = {}
_BY_PROGRAM: dict[str, dict[str, list[NestInfo]]] = {}
"""The nest tables computed so far by program hash and `front_key`."""


def nest_tables(phash: str) -> dict[str, list[NestInfo]]:
    """The nest tables this process has computed for a program, by `front_key`."""
    return _BY_PROGRAM.get(phash, {})


def front(text: str, schedule: Compound) -> tuple[ProgramInfo, list[NestInfo]]:
    """The loop nests a bound schedule compiles: the constraints' and features' view."""
    from plmr.dialects.context import make_context, parse_module
    from plmr.passes.pipeline import loop_nests

    opts = schedule.compile_options()
    key = _front_key(text, opts)
    known = _FRONTS.get(key)
    if known is None:
        ctx = make_context()
        module = parse_module(_loop_level(text, opts), ctx=ctx)
        table = nest_table(module)
        # Unnamed nests get the global blocks too: the constraints check them by index.
        unnamed = {
            f"#{i}": (n.parallel, n.reduction) for i, n in enumerate(table) if not n.name
        }
        known = (ProgramInfo({**unnamed, **loop_nests(module)}), table)
        _FRONTS[key] = known
        _BY_PROGRAM.setdefault(program_hash(text), {})[front_key(opts)] = known[1]
    return known


def _zeros(module: Any) -> list[np.ndarray]:
    from plmr.dialects import mesh
    from plmr.dialects.graph import static_shape

    program = next(op for op in module.ops if isinstance(op, mesh.ProgramOp))
    return [np.zeros(static_shape(a, "input"), np.float32) for a in program.body.block.args]


_LOWERED: dict[str, tuple[Any, list[Any]]] = {}
"""The last few modules `lowered_key` compiled, by program and bound schedule: evaluating
the same candidate in this process takes its module instead of compiling it again."""


def _bound_key(text: str, schedule_json: Mapping[str, Json]) -> str:
    return hashlib.sha256(
        (text + json.dumps(schedule_json, sort_keys=True)).encode()
    ).hexdigest()


def lowered_key(text: str, schedule: Compound) -> str:
    """
    A hash of the mesh-level program `text` compiles to under a bound schedule: two
    schedules with the same key run the same program (the same cycles). Raises
    `PlmrError` if it does not compile; a candidate that fails otherwise gets a key of
    its own (its measurement records the failure).
    """
    from plmr.dialects.printing import module_text

    plans: list[Any] = []
    try:
        module = compile_schedule(text, schedule, plans=plans)
    except PlmrError:
        raise
    except Exception:  # a candidate must never stop the search
        return "failed:" + _bound_key(text, schedule.to_json())
    _LOWERED[_bound_key(text, schedule.to_json())] = (module, plans)
    while len(_LOWERED) > 8:
        del _LOWERED[next(iter(_LOWERED))]
    return hashlib.sha256(module_text(module).encode()).hexdigest()


def evaluate(
    text: str, schedule_json: dict[str, Json], values: dict[str, Json]
) -> Measurement:
    """Binds `values`, compiles and times one candidate (picklable, for worker processes)."""
    from plmr.runtime.mesh_machine import run_mesh

    try:
        bound = Compound.from_json(schedule_json).bind(values)
    except PlmrError as e:
        return Measurement(values, schedule_json, "infeasible", reason=str(e))
    as_json = bound.to_json()
    plans: list[Any] = []
    try:
        known = _LOWERED.pop(_bound_key(text, as_json), None)
        if known is not None:
            module, plans = known
        else:
            module = compile_schedule(text, bound, plans=plans)
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
        nests=_nest_estimates(plans),
    )


def estimate(text: str, schedule_json: dict[str, Json], values: dict[str, Json]) -> float:
    """
    The planner's cycles of one candidate (the sum of its nests' estimates, what `plmr
    compile` minimises over its blocks): compiled, not simulated; inf if it does not
    compile. Picklable, for worker processes.
    """
    plans: list[Any] = []
    try:
        bound = Compound.from_json(schedule_json).bind(values)
        compile_schedule(text, bound, plans=plans)
    except PlmrError:
        return math.inf
    except Exception:  # a candidate must never stop the search
        return math.inf
    return sum(_nest_estimates(plans).values())


def _nest_estimates(plans: list[Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for plan in plans:
        name = str(plan.name).lstrip("%")
        out[name] = out.get(name, 0.0) + float(plan.estimate)
    return out


def _one_line(text: str) -> str:
    return " ".join(text.split())


def check_functional(text: str, schedule: Compound, seed: int = 0) -> float:
    """The winner against the source program's reference semantics: max relative error."""
    from plmr.dialects.context import parse_module
    from plmr.runtime.mesh_machine import run_mesh
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
