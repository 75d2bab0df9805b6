"""
`--check-each`: runs a program before and after every pass of a pipeline with the
reference semantics of its level (graph, loop and tile functions with
`ReferenceEvaluator`, mesh programs with the mesh runtime in functional mode) on the
same random inputs, and stops at the first pass whose results differ.

```
$ plmr-opt prog.mlir -p 'convert-graph-to-loop,neptune-fuse' --check-each --check-dir /tmp/c
check-each: @main on random inputs (seed 0), tolerance 1e-04
  input                           graph                     ok         3 ms
  convert-graph-to-loop           loop    max rel err 0.0e+00    21 ms
  neptune-fuse                    loop    max rel err 2.4e-07    35 ms
```

A failing pass is one `PassMiscompile` (a `PlmrError`) naming the pass, the first result
that differs (where, and both values) and by how much; with a check directory the IR
before and after the pass is written there with the `plmr-opt` command that reproduces
the failure.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from plmr.dialects.context import parse_module
from plmr.dialects.printing import module_text
from plmr.errors import PlmrError
from plmr.runtime.running import entries, random_inputs, run_entry, select_entry
from plmr.target.interface import Entry, result_names
from plmr.values import Array

DEFAULT_TOLERANCE = 1e-4
"""Largest accepted |after - before| / max(1, max |before|) of any result."""

Echo = Callable[[str], None]


@dataclass(frozen=True)
class CheckOptions:
    """What `--check-each` takes: inputs' seed, tolerance, where to write failing IR."""

    seed: int = 0
    tolerance: float = DEFAULT_TOLERANCE
    check_dir: Path | None = None
    entry: str | None = None
    verify_each: bool = True
    """Verify the IR after every pass (else the caller verifies the end result)."""
    through_text: bool = False
    """Print the IR after every pass and parse it back before running it."""
    execute: bool = True
    """Run the program before and after every pass (else only verify, with `verify_each`)."""


@dataclass(frozen=True)
class Stage:
    """One step of a pipeline: its pass spec (as `plmr-opt -p` reads it) and its action."""

    spec: str
    apply: Callable[[Context, ModuleOp], None]

    @staticmethod
    def of_pass(p: ModulePass) -> Stage:
        return Stage(str(p.pipeline_pass_spec()), p.apply)

    @property
    def name(self) -> str:
        return self.spec.split("{", 1)[0]


@dataclass(frozen=True)
class PassCheck:
    """One line of the report: a pass, the level it produced, its error and its time."""

    spec: str
    level: str
    error: float | None
    """Max relative error against the results before the pass; None: not executable."""
    seconds: float
    """Time of the pass itself."""
    run_seconds: float
    """Time of running the program after it."""

    def line(self) -> str:
        name = self.spec if len(self.spec) <= 44 else self.spec[:41] + "..."
        err = "not executable" if self.error is None else f"max rel err {self.error:.1e}"
        return (
            f"  {name:<44}  {self.level:<5}  {err:<22} "
            f"{self.seconds * 1e3:7.0f} ms  (run {self.run_seconds * 1e3:.0f} ms)"
        )


@dataclass(frozen=True)
class Difference:
    """Where two sets of results differ most."""

    error: float
    result: int
    name: str
    index: tuple[int, ...] | None
    got: Any
    want: Any

    def describe(self) -> str:
        if self.index is None:
            return f"result {self.result} ({self.name}): {self.got} instead of {self.want}"
        where = ", ".join(map(str, self.index))
        return (
            f"result {self.result} ({self.name}) at [{where}]: {_fmt(self.got)} instead "
            f"of {_fmt(self.want)}"
        )


class PassMiscompile(PlmrError):
    """A pass changed the results of the program beyond the tolerance."""

    def __init__(
        self,
        message: str,
        spec: str,
        difference: Difference,
        repro: str | None,
        before: str = "",
    ):
        super().__init__(message)
        self.spec = spec
        self.difference = difference
        self.repro = repro
        self.before = before
        """The IR the pass started from."""


class PassFailed(PlmrError):
    """A pass (or running its output) raised; `before` is the IR the pass started from."""

    def __init__(self, spec: str, cause: BaseException, before: str):
        super().__init__(f"{spec}: {cause}")
        self.spec = spec
        self.cause = cause
        self.before = before


def _fmt(v: Any) -> str:
    if isinstance(v, float | np.floating):
        return f"{float(cast(float, v)):.6g}"
    return str(v)


def level_of(module: ModuleOp) -> str:
    """The lowest level present: mesh, tile, loop, graph, else the first dialect seen."""
    seen: set[str] = set()
    for op in module.walk():
        seen.add(op.name.split(".", 1)[0])
    for level in ("mesh", "tile", "loop", "graph"):
        if level in seen:
            return level
    rest = sorted(seen - {"builtin", "func", "arith", "math"})
    return rest[0] if rest else "func"


def max_relative_error(got: Array, want: Array) -> tuple[float, tuple[int, ...] | None]:
    """
    max |got - want| / max(1, max |want|) and where; equal infinities and NaN in both
    count as equal, a shape mismatch as an infinite error (no position).
    """
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape:
        return float("inf"), None
    if g.size == 0:
        return 0.0, None
    gf, wf = g.astype(np.float64), w.astype(np.float64)
    same = (gf == wf) | (np.isnan(gf) & np.isnan(wf))
    if bool(same.all()):
        return 0.0, None
    finite = wf[np.isfinite(wf)]
    scale = max(1.0, float(np.max(np.abs(finite)))) if finite.size else 1.0
    with np.errstate(invalid="ignore"):
        diff = np.where(same, 0.0, np.abs(gf - wf))
    diff = np.where(np.isnan(diff), np.inf, diff)
    flat = int(np.argmax(diff))
    index = tuple(int(i) for i in np.unravel_index(flat, g.shape))
    return float(diff.reshape(-1)[flat]) / scale, index


def compare(
    got: Sequence[Array], want: Sequence[Array], names: Sequence[str]
) -> Difference:
    """The largest difference over all results (the first one on ties)."""
    if len(got) != len(want):
        return Difference(float("inf"), 0, "?", None, f"{len(got)} results", len(want))
    worst = Difference(0.0, 0, names[0] if names else "?", None, None, None)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        err, index = max_relative_error(g, w)
        if err > worst.error:
            name = names[i] if i < len(names) else f"out{i}"
            if index is None:
                worst = Difference(err, i, name, None, np.asarray(g).shape, w.shape)
            else:
                worst = Difference(
                    err, i, name, index, np.asarray(g)[index], np.asarray(w)[index]
                )
    return worst


@dataclass
class Checker:
    """
    Runs a module after each stage and compares with the results before it. Call
    `start(module)` once, then `apply(stage, ctx, module)` for every stage.
    """

    options: CheckOptions = field(default_factory=CheckOptions)
    echo: Echo | None = None
    checks: list[PassCheck] = field(default_factory=list[PassCheck])
    inputs: list[Array] | None = None
    results: list[Array] | None = None
    names: list[str] = field(default_factory=list[str])
    entry_name: str | None = None
    index: int = 0
    current: str = ""
    """The spec of the stage being applied (or last applied)."""

    def _say(self, line: str) -> None:
        if self.echo is not None:
            self.echo(line)

    def _entry(self, module: ModuleOp) -> Entry | None:
        candidates = entries(module)
        if not candidates:
            return None
        if self.entry_name is not None:
            for e in candidates:
                if e.sym_name.data == self.entry_name:
                    return e
        return select_entry(module, self.entry_name)

    def _run(self, module: ModuleOp) -> list[Array] | None:
        """The results of the entry on the inputs; None when the level cannot run."""
        if not self.options.execute:
            return None
        fn = self._entry(module)
        if fn is None or self.inputs is None:
            return None
        if isinstance(fn, func.FuncOp) and not _executable(fn):
            return None
        # Colors are mesh-check-limits's business: relaying in software changes timing,
        # never values, so a program that needs more routes than the device has still
        # runs here (and the pass that has to refuse it is checked by its own error).
        results, _ = run_entry(module, fn, self.inputs, relay=True)
        return [np.asarray(r) for r in results]

    def start(self, module: ModuleOp) -> None:
        """Chooses the entry, makes the inputs and runs the input program."""
        fn = select_entry(module, self.options.entry)
        self.entry_name = fn.sym_name.data
        self.inputs = random_inputs(fn, self.options.seed) if self.options.execute else None
        self.names = result_names(fn)
        self._say(
            f"check-each: @{self.entry_name} on random inputs (seed {self.options.seed}), "
            f"tolerance {self.options.tolerance:.0e}"
        )
        started = time.perf_counter()
        self.results = self._run(module)
        took = time.perf_counter() - started
        state = "ok" if self.results is not None else "not executable"
        self._say(
            f"  {'input':<44}  {level_of(module):<5}  {state:<22} {'':>7}     "
            f"  (run {took * 1e3:.0f} ms)"
        )

    def apply(self, stage: Stage, ctx: Context, module: ModuleOp) -> PassCheck:
        """Applies `stage` to `module` in place and checks it kept the results."""
        self.index += 1
        self.current = stage.spec
        before = module.clone()
        started = time.perf_counter()
        try:
            stage.apply(ctx, module)
            if self.options.verify_each:
                module.verify()
        except PlmrError:
            raise
        except DiagnosticException as e:
            raise PassFailed(stage.spec, e, module_text(before)) from e
        except Exception as e:
            raise PassFailed(stage.spec, e, module_text(before)) from e
        took = time.perf_counter() - started
        if self.options.through_text:
            try:
                read_back_in_place(ctx, module)
            except PlmrError as e:
                raise PassFailed(
                    stage.spec,
                    PlmrError(f"the program it produced does not read back from text: {e}"),
                    module_text(before),
                ) from e
        started = time.perf_counter()
        try:
            results = self._run(module)
        except PlmrError as e:
            raise PassFailed(
                stage.spec,
                PlmrError(f"the program it produced does not run: {e}"),
                module_text(before),
            ) from e
        except Exception as e:
            raise PassFailed(stage.spec, e, module_text(before)) from e
        ran = time.perf_counter() - started
        error: float | None = None
        if results is not None and self.results is not None:
            diff = compare(results, self.results, self.names)
            error = diff.error
            if not diff.error <= self.options.tolerance:
                check = PassCheck(stage.spec, level_of(module), error, took, ran)
                self.checks.append(check)
                self._say(check.line())
                raise self._miscompile(stage, diff, before, module)
        if results is not None:
            self.results = results
        check = PassCheck(stage.spec, level_of(module), error, took, ran)
        self.checks.append(check)
        self._say(check.line())
        return check

    def _miscompile(
        self, stage: Stage, diff: Difference, before: ModuleOp, after: ModuleOp
    ) -> PassMiscompile:
        message = (
            f"check-each: pass {stage.spec} changed the results: {diff.describe()} "
            f"(max relative error {diff.error:.2e} > tolerance "
            f"{self.options.tolerance:.0e}, random inputs seed {self.options.seed})"
        )
        repro: str | None = None
        before_text = module_text(before)
        out = self.options.check_dir
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            stem = f"{self.index:02d}-{stage.name}"
            before_path = out / f"{stem}-before.mlir"
            after_path = out / f"{stem}-after.mlir"
            before_path.write_text(before_text)
            after_path.write_text(module_text(after))
            repro = repro_command(before_path, stage.spec, self.options)
            message += (
                f"\n  IR before: {before_path}\n  IR after:  {after_path}"
                f"\n  reproduce: {repro}"
            )
        return PassMiscompile(message, stage.spec, diff, repro, before_text)


def read_back_in_place(ctx: Context, module: ModuleOp) -> None:
    """
    Prints `module`, parses the text and puts what was read in place of its body, so
    that what runs next is what a file holds. A printer and parser that disagree (the
    text of what was read differs from the text printed) are one `PlmrError`.
    """

    text = module_text(module)
    read = parse_module(text, "<printed program>", ctx)
    again = module_text(read)
    if again != text:
        for n, (a, b) in enumerate(
            zip(text.splitlines(), again.splitlines(), strict=False)
        ):
            if a != b:
                raise PlmrError(
                    f"line {n + 1} prints as `{a.strip()}` but reads back as `{b.strip()}`"
                )
        raise PlmrError("the program reads back with a different number of lines")
    block = read.body.block
    read.body.detach_block(block)
    old = module.body.block
    module.body.detach_block(old)
    old.erase(safe_erase=False)
    module.body.add_block(block)
    module.attributes = dict(read.attributes)


def _executable(fn: func.FuncOp) -> bool:
    """
    Whether the reference evaluator has semantics for every top-level op of `fn` (the
    bodies of nests, loops and maps are run by their parent op's semantics).
    """
    from plmr.runtime.reference import ReferenceEvaluator

    evaluator = ReferenceEvaluator()
    for op in fn.body.block.ops:
        if isinstance(op, func.ReturnOp | func.CallOp):
            continue
        if not evaluator.implements(type(op)):
            return False
    return True


def repro_command(before: Path, spec: str, options: CheckOptions) -> str:
    """The `plmr-opt` command that re-runs one pass under `--check-each`."""
    extra = ""
    if options.seed != 0:
        extra += f" --check-seed {options.seed}"
    if options.tolerance != DEFAULT_TOLERANCE:
        extra += f" --check-tol {options.tolerance:g}"
    if options.entry is not None:
        extra += f" --check-entry {options.entry}"
    quoted = spec.replace("'", "'\\''")
    return f"plmr-opt {before} -p '{quoted}' --check-each{extra}"


def check_passes(
    ctx: Context,
    module: ModuleOp,
    passes: Sequence[ModulePass],
    options: CheckOptions,
    echo: Echo | None = None,
) -> list[PassCheck]:
    """Applies `passes` to `module` in place, checking the results after every one."""
    checker = Checker(options, echo)
    checker.start(module)
    for p in passes:
        checker.apply(Stage.of_pass(p), ctx, module)
    return checker.checks
