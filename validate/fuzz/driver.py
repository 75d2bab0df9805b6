"""
Running fuzz programs: a random compile configuration per program, the compile with
every pass checked, the outcome, and a pool of worker processes with a time limit per
program.

Outcomes:

- `ok`: compiled, and every pass kept the results;
- `refused`: a clean `PlmrError` (counted per message kind, numbers and names elided);
- `crash`: any other exception, or a pass whose output does not run;
- `miscompile`: a pass changed the results (`PassMiscompile`);
- `timeout`: the program took longer than the time limit;
- `invalid`: the generated program does not run at its own level (a generator bug).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import random
import re
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import make_context, parse_module
from plmr.dialects.printing import module_text
from plmr.errors import PlmrError
from plmr.passes.pipeline import CompileOptions
from plmr.validate.check_each import Checker, CheckOptions, PassFailed, PassMiscompile
from plmr.validate.compile_check import compile_checked

GRIDS = (
    (1, 1),
    (1, 2),
    (2, 1),
    (2, 2),
    (2, 3),
    (3, 2),
    (3, 3),
    (1, 4),
    (4, 1),
    (1, 3),
    (4, 4),
)
"""Square, odd, non-square and 1xN grids."""

FUZZ_TOLERANCE = 1e-3

SPECIAL_SHARE = 0.5
"""Share of the programs with special values (infinities, NaN, -0.0, masks)."""


@dataclass(frozen=True)
class Config:
    """A compile configuration that `plmr compile` flags can express."""

    grid: tuple[int, int] = (2, 2)
    device: str = "wse2"
    gemm: str = "meshgemm"
    gemv: str = "ktree"
    k: int = 2
    tile_sizes: tuple[int, int] | None = (4, 4)
    substitute: bool = False
    budget: int = 100
    fuse: str = "auto"
    relay: bool = False
    fit_tiles: bool = False
    """Blocks that do not divide a dimension shrink or pad (`--fit-tiles`)."""
    through_text: bool = False
    """Print the program after every pass and parse it back before running it."""

    def options(self) -> CompileOptions:
        return CompileOptions(
            grid=self.grid,
            device=self.device,
            gemm=self.gemm,
            gemv=self.gemv,
            k=self.k,
            tile_sizes=self.tile_sizes,
            substitute=self.substitute,
            budget=self.budget,
            fuse=self.fuse,
            relay=self.relay,
            fit_tiles=self.fit_tiles,
        )

    def flags(self) -> str:
        """The `plmr compile` flags of this configuration."""
        parts = [f"--grid {self.grid[0]}x{self.grid[1]}", f"--device {self.device}"]
        if self.gemm != "meshgemm":
            parts.append(f"--gemm {self.gemm}")
        if self.gemv != "ktree":
            parts.append(f"--gemv {self.gemv}")
        if self.k != 2:
            parts.append(f"--k {self.k}")
        if self.tile_sizes is not None:
            parts.append(f"--tile-sizes {self.tile_sizes[0]},{self.tile_sizes[1]}")
        if not self.substitute:
            parts.append("--no-substitute")
        elif self.budget != 100:
            parts.append(f"--budget {self.budget}")
        if self.fuse != "auto":
            parts.append(f"--fuse {self.fuse}")
        if self.relay:
            parts.append("--relay")
        if self.fit_tiles:
            parts.append("--fit-tiles")
        if self.through_text:
            parts.append("--check-text")
        return " ".join(parts)


def random_config(rng: random.Random) -> Config:
    """Random grid, device (shrunken SRAM, fewer colors), algorithms and schedule."""
    overrides: list[str] = []
    if rng.random() < 0.4:
        overrides.append(f"sram_kib={rng.choice((4, 8, 16))}")
    if rng.random() < 0.3:
        overrides.append(f"colors={rng.choice((6, 8, 12))}")
    base = rng.choice(("wse2", "wse2", "wse3"))
    device = base + (":" + ",".join(overrides) if overrides else "")
    sizes = (rng.choice((1, 2, 2, 4, 4, 4, 8)), rng.choice((1, 2, 4, 4, 4, 8)))
    return Config(
        grid=rng.choice(GRIDS),
        device=device,
        gemm=rng.choice(("meshgemm", "cannon", "summa")),
        gemv=rng.choice(("ktree", "pipeline", "ring")),
        k=rng.choice((1, 2, 3)),
        tile_sizes=None if rng.random() < 0.05 else sizes,
        substitute=rng.random() < 0.25,
        budget=rng.choice((1, 4, 10)),
        fuse=rng.choice(("auto", "auto", "rolling", "split-k")),
        relay=rng.random() < 0.2,
        # From the state, not a draw of it: the draws after the configuration (a
        # program's) stay those that a seed gave before the option existed.
        fit_tiles=random.Random(hash(rng.getstate())).random() < 0.5,
    )


@dataclass(frozen=True)
class Outcome:
    kind: str
    """ok, refused, crash, miscompile, timeout or invalid."""
    stage: str = ""
    """The pass (spec) that refused, crashed or miscompiled."""
    message: str = ""
    seconds: float = 0.0
    before: str = ""
    """Crash and miscompile: the IR the failing pass started from."""

    @property
    def key(self) -> str:
        """The kind of message: the pass and the message with numbers and names elided."""
        return f"{self.stage.split('{', 1)[0] or '-'}: {message_kind(self.message)}"

    def same_failure(self, other: Outcome) -> bool:
        """Whether `other` is the same failure (for minimising)."""
        if other.kind != self.kind or other.stage.split("{")[0] != self.stage.split("{")[0]:
            return False
        if self.kind == "crash":
            return self.message.split(":", 1)[0] == other.message.split(":", 1)[0]
        return True


_ELIDE = (
    (re.compile(r"tensor<[^>]*>"), "tensor<…>"),
    (re.compile(r"%[\w.$-]+"), "%v"),
    (re.compile(r"@[\w.$-]+"), "@f"),
    (re.compile(r"\[[-\d, ]*\]"), "[…]"),
    (re.compile(r"\(\d[\d, ]*\)"), "(…)"),
    (re.compile(r"\d+(\.\d+)?(e[-+]?\d+)?"), "N"),
    (re.compile(r"\s+"), " "),
)


def message_kind(message: str) -> str:
    """`message`'s first line with shapes, names and numbers elided."""
    line = message.strip().splitlines()[0] if message.strip() else ""
    for pattern, repl in _ELIDE:
        line = pattern.sub(repl, line)
    return line[:300]


@dataclass(frozen=True)
class Case:
    """One generated program with its configuration."""

    index: int
    seed: int
    text: str
    config: Config


def program_seed(run_seed: int, index: int) -> int:
    return run_seed * 1_000_003 + index


def make_case(
    run_seed: int, index: int, level: str = "graph", text_share: float = 0.5
) -> Case:
    """
    Program `index` of the run with seed `run_seed` (reproducible); a share
    `text_share` of the programs is checked through text.
    """
    from plmr.validate.fuzz.graph_gen import GraphGenerator

    seed = program_seed(run_seed, index)
    rng = random.Random(seed)
    kind = level
    if level == "mixed":
        kind = rng.choice(("graph", "graph", "graph", "graph", "loop", "tile"))
    program_bits = rng.getrandbits(32)
    config = random_config(rng)
    config = replace(config, through_text=rng.random() < text_share)
    special = rng.random() < SPECIAL_SHARE
    if kind == "loop":
        from plmr.validate.fuzz.loop_gen import generate_loop

        module = generate_loop(program_bits, special=special)
    elif kind == "tile":
        from plmr.validate.fuzz.loop_gen import generate_tile

        module = generate_tile(program_bits, special=special)
    else:
        module = GraphGenerator(random.Random(program_bits), special=special).generate()
    return Case(index, seed, module_text(module), config)


def run_case(
    text: str, config: Config, tolerance: float = FUZZ_TOLERANCE, check_dir: str = ""
) -> Outcome:
    """Compiles `text` with every pass checked and classifies the result."""
    from pathlib import Path

    started = time.perf_counter()
    ctx = make_context()
    module = parse_module(text, "<fuzz>", ctx)
    checker = Checker(
        CheckOptions(
            tolerance=tolerance,
            check_dir=Path(check_dir) if check_dir else None,
            verify_each=False,
            through_text=config.through_text,
        )
    )
    outcome: Outcome
    try:
        compile_checked(ctx, module, config.options(), checker)
        try:
            module.verify()
            outcome = Outcome("ok")
        except Exception as e:
            # Which pass broke the IR: `plmr compile --check-each` verifies each one.
            outcome = Outcome(
                "crash", "(end)", f"the compiled program does not verify: {e}"
            )
    except PassMiscompile as e:
        outcome = Outcome("miscompile", e.spec, str(e), before=e.before)
    except PassFailed as e:
        cause = e.cause
        message = f"{type(cause).__name__}: {cause}"
        if not isinstance(cause, PlmrError):
            message += "\n" + "".join(traceback.format_tb(cause.__traceback__)[-4:])
        outcome = Outcome("crash", e.spec, message, before=e.before)
    except PlmrError as e:
        if checker.results is None and checker.index == 0:
            outcome = Outcome("invalid", "input", str(e))
        else:
            outcome = Outcome("refused", checker.current, str(e))
    except Exception as e:
        message = f"{type(e).__name__}: {e}\n" + "".join(
            traceback.format_tb(e.__traceback__)[-4:]
        )
        stage = checker.current if checker.index else "input"
        outcome = Outcome("crash", stage, message)
    return replace(outcome, seconds=time.perf_counter() - started)


# ---------------------------------------------------------------------------------------
# Worker processes with a time limit per task
# ---------------------------------------------------------------------------------------


Task = tuple[Callable[..., object], tuple[object, ...]]
"""A module-level function (picklable by reference) and its arguments."""


def _worker(conn: multiprocessing.connection.Connection) -> None:
    warm_up()
    while True:
        try:
            task: Task | None = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        fn, args = task
        try:
            result = fn(*args)
        except BaseException as e:  # reported to the parent, which decides
            result = ("error", f"{type(e).__name__}: {e}")
        conn.send(result)


def warm_up() -> float:
    """
    Loads what every worker needs (TASO's rule set, parsed once per process); returns
    the seconds it took. Workers call it when they start.
    """
    from plmr.passes.taso.rules import load_rules

    started = time.perf_counter()
    load_rules()
    return time.perf_counter() - started


def case_task(
    run_seed: int, index: int, level: str, tolerance: float, text_share: float = 0.5
) -> object:
    """Generates program `index` of the run and compiles it (a worker task)."""
    case = make_case(run_seed, index, level, text_share)
    try:
        return case, run_case(case.text, case.config, tolerance)
    except Exception as e:
        return case, Outcome("invalid", "input", f"{type(e).__name__}: {e}")


class Worker:
    """One child process running tasks; killed and replaced when a task overruns."""

    def __init__(self) -> None:
        # Spawned, not forked: egglog (the eqsat engine) runs a thread from its import
        # on, and a child forked from a process with that thread deadlocks in egglog.
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_worker, args=(child,), daemon=True)
        self.process.start()
        child.close()
        self.started = 0.0
        self.task: object = None

    def submit(self, task: Task, tag: object) -> None:
        self.conn.send(task)
        self.started = time.monotonic()
        self.task = tag

    def kill(self) -> None:
        self.process.kill()
        self.process.join()
        self.conn.close()

    def close(self) -> None:
        try:
            self.conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
        self.conn.close()


def run_tasks(
    tasks: Iterator[tuple[Task, object]],
    jobs: int,
    timeout: float,
    deadline: float | None,
) -> Iterator[tuple[object, object | None]]:
    """
    Runs tasks on `jobs` worker processes; yields (tag, result), result None for a task
    that overran `timeout` seconds (its worker is replaced). Stops taking new tasks at
    `deadline` (time.monotonic()).
    """
    workers = [Worker() for _ in range(max(1, jobs))]
    idle = list(workers)
    busy: list[Worker] = []
    exhausted = False
    try:
        while True:
            while idle and not exhausted:
                if deadline is not None and time.monotonic() >= deadline:
                    exhausted = True
                    break
                nxt = next(tasks, None)
                if nxt is None:
                    exhausted = True
                    break
                w = idle.pop()
                w.submit(*nxt)
                busy.append(w)
            if not busy:
                return
            ready = multiprocessing.connection.wait([w.conn for w in busy], timeout=0.2)
            now = time.monotonic()
            for w in list(busy):
                if w.conn in ready:
                    try:
                        result = w.conn.recv()
                    except EOFError:
                        result = None
                    busy.remove(w)
                    if result is None:
                        w.kill()
                        w = Worker()
                        workers.append(w)
                    idle.append(w)
                    yield w.task, result
                elif now - w.started > timeout:
                    busy.remove(w)
                    tag = w.task
                    w.kill()
                    workers.remove(w)
                    fresh = Worker()
                    workers.append(fresh)
                    idle.append(fresh)
                    yield tag, None
    finally:
        for w in workers:
            if w.process.is_alive():
                w.close()


def check_module(module: ModuleOp, config: Config, tolerance: float) -> Outcome:
    """`run_case` on a module (printed and parsed again, as the fuzzer does)."""
    return run_case(module_text(module), config, tolerance)
