"""
`plmr`: the command-line front end (import models, run programs, the bundled demo).

Every command reports bad input as one `error:` message (what, where, how to fix) and a
non-zero exit status; it never shows a traceback for it, and never leaves a half-written
output file behind.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from plmr import __version__
from plmr.errors import PlmrError
from plmr.files import write_atomically, write_text_atomically

F = TypeVar("F", bound=Callable[..., Any])


class PlmrGroup(click.Group):
    """A click group that turns `PlmrError`s into one-line errors with exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PlmrError as e:
            click.echo(f"error: {e}", err=True)
            ctx.exit(1)
        except BrokenPipeError:
            # The reader went away (e.g. `plmr rules list | head`): stop quietly.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            ctx.exit(0)
        except OSError as e:
            name = e.filename if e.filename is not None else ""
            click.echo(f"error: {name}: {e.strerror or e}", err=True)
            ctx.exit(1)


@click.group(cls=PlmrGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="plmr")
def cli() -> None:
    """plmr: a multi-level compiler for wafer-scale AI chips, built on xDSL."""


# ---------------------------------------------------------------------------------------
# plmr import
# ---------------------------------------------------------------------------------------


@cli.command("import")
@click.argument("model", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the MLIR here (default: standard output).",
)
@click.option(
    "--func-name", default="main", show_default=True, help="Name of the function."
)
@click.option("--generic", is_flag=True, help="Print the generic MLIR form.")
def import_cmd(model: Path, output: Path | None, func_name: str, generic: bool) -> None:
    """
    Import an ONNX MODEL (static shapes) into the `graph` dialect. Models older than
    opset 13 are converted to 13 first (a note on stderr says so).
    """
    from plmr.dialects.printing import module_text
    from plmr.frontend.onnx import import_onnx_file

    def notify(message: str) -> None:
        click.echo(message, err=True)

    module = import_onnx_file(str(model), func_name=func_name, notify=notify)
    text = module_text(module, generic=generic)
    if output is None:
        click.echo(text, nl=False)
        return
    write_text_atomically(output, text)
    click.echo(f"wrote {output}", err=True)


# ---------------------------------------------------------------------------------------
# plmr compile
# ---------------------------------------------------------------------------------------


@cli.command("compile")
@click.argument("program", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the mesh program here (default: standard output).",
)
@click.option(
    "--device", default="wse2", show_default=True, help="Device, e.g. wse2, wse3:colors=16."
)
@click.option("--grid", default="4x4", show_default=True, help="PEs as ROWSxCOLS.")
@click.option(
    "--gemm",
    type=click.Choice(["meshgemm", "cannon", "summa"]),
    default="meshgemm",
    show_default=True,
    help="How reductions over operands circulate (prefill GEMMs).",
)
@click.option(
    "--gemv",
    type=click.Choice(["ktree", "pipeline", "ring"]),
    default="ktree",
    show_default=True,
    help="The allreduce algorithm (decode GEMVs, row reductions).",
)
@click.option("--k", "k", type=int, default=2, show_default=True, help="K-tree phases.")
@click.option(
    "--tile-sizes",
    default=None,
    help="P,R blocks of convert-loop-to-tile (default: chosen for the grid).",
)
@click.option("--no-substitute", is_flag=True, help="Skip the TASO graph substitutions.")
@click.option(
    "--budget", type=int, default=100, show_default=True, help="TASO search budget."
)
@click.option(
    "--engine",
    type=click.Choice(["backtrack", "eqsat"]),
    default="backtrack",
    show_default=True,
    help="Graph substitution search: TASO's backtracking or equality saturation.",
)
@click.option(
    "--fuse",
    type=click.Choice(["auto", "rolling", "split-k"]),
    default="auto",
    show_default=True,
    help="neptune-fuse strategy.",
)
@click.option(
    "--relay", is_flag=True, help="Accept routes beyond the colors (relayed in software)."
)
@click.option(
    "--schedule",
    "schedule_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A schedule (JSON) to compile with; its settings replace the options above.",
)
@click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also time the result and record it in this performance database (SQLite).",
)
@click.option("--generic", is_flag=True, help="Print the generic MLIR form.")
@click.option(
    "--explain",
    is_flag=True,
    help="Print, per nest, the mapping chosen, its collectives and the planner's "
    "estimate against the simulated cycles (timing mode) instead of the program "
    "(with -o, the program is still written).",
)
@click.option(
    "--check-each",
    is_flag=True,
    help="Run the program before and after every pass with the reference semantics "
    "of its level on the same random inputs (one line per pass on stderr); stop at "
    "the first pass that changes the results.",
)
@click.option(
    "--check-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="With --check-each: write the IR before and after a failing pass here.",
)
@click.option("--check-seed", type=int, default=0, show_default=True, help="Inputs' seed.")
@click.option(
    "--check-tol", type=float, default=1e-4, show_default=True, help="Relative tolerance."
)
def compile_cmd(
    program: Path,
    output: Path | None,
    device: str,
    grid: str,
    gemm: str,
    gemv: str,
    k: int,
    tile_sizes: str | None,
    no_substitute: bool,
    budget: int,
    engine: str,
    fuse: str,
    relay: bool,
    schedule_path: Path | None,
    db_path: Path | None,
    generic: bool,
    explain: bool,
    check_each: bool,
    check_dir: Path | None,
    check_seed: int,
    check_tol: float,
) -> None:
    """
    Compile PROGRAM (.mlir at the graph, loop or tile level, or an .onnx model) to a
    routed mesh program: transpose-elim, taso-substitute, convert-graph-to-loop,
    neptune-fuse, convert-loop-to-tile, convert-tile-to-mesh, mesh-route,
    mesh-verify-plmr. Run the result with `plmr run`."""
    from plmr.dialects.context import load_module, make_context
    from plmr.dialects.printing import module_text
    from plmr.passes.pipeline import CompileOptions, compile_module
    from plmr.tools.bench import parse_grid

    sizes: tuple[int, int] | None = None
    if tile_sizes is not None:
        try:
            parts = [int(t) for t in tile_sizes.split(",")]
        except ValueError as e:
            raise PlmrError(
                f"bad --tile-sizes '{tile_sizes}': expected P,R e.g. 8,4"
            ) from e
        if len(parts) not in (1, 2) or any(p <= 0 for p in parts):
            raise PlmrError(f"bad --tile-sizes '{tile_sizes}': expected P,R e.g. 8,4")
        sizes = (parts[0], parts[-1])
    opts = CompileOptions(
        grid=parse_grid(grid),
        device=device,
        gemm=gemm,
        gemv=gemv,
        k=k,
        tile_sizes=sizes,
        substitute=not no_substitute,
        budget=budget,
        engine=engine,
        fuse=fuse,
        relay=relay,
    )
    if output is not None and not output.resolve().parent.is_dir():
        raise PlmrError(
            f"cannot write {output}: directory {output.resolve().parent} does not exist"
        )
    ctx = make_context()
    if program.suffix == ".onnx":
        from plmr.frontend.onnx import import_onnx_file

        module = import_onnx_file(str(program))
    else:
        module = load_module(program, ctx)
    source_text = module_text(module)
    schedule_json = _schedule_of_options(opts)
    plans: list[Any] = []
    if schedule_path is not None:
        from plmr.schedule.tuner import compile_schedule

        schedule = _load_schedule(schedule_path)
        schedule_json = schedule.bind({}).to_json()
        module = compile_schedule(source_text, schedule.bind({}), relay=relay)
    elif check_each:
        from plmr.tools.fuzz_cli import compile_with_checks

        compile_with_checks(ctx, module, opts, plans, check_dir, check_seed, check_tol)
    else:
        compile_module(ctx, module, opts, plans)
    if db_path is not None:
        _record_compiled(
            db_path,
            source_text,
            f"{program.name}",
            module,
            schedule_json,
            "manual" if schedule_path is not None else "default",
        )
    text = module_text(module, generic=generic)
    if explain:
        from plmr.models.explain import explain as explain_nests
        from plmr.models.explain import format_explain
        from plmr.runtime.device import get_device

        rows = explain_nests(module, plans, get_device(opts.device), relay=relay)
        click.echo(format_explain(rows), nl=False)
    if output is None:
        if not explain:
            click.echo(text, nl=False)
        return
    write_text_atomically(output, text)
    click.echo(f"wrote {output}", err=True)


def _load_schedule(path: Path) -> Any:
    from plmr.schedule.transforms import Compound

    try:
        text = path.read_text()
    except OSError as e:
        raise PlmrError(f"cannot read schedule {path}: {e.strerror or e}") from e
    return Compound.loads(text, str(path))


def _schedule_of_options(opts: Any) -> dict[str, Any]:
    """The schedule (JSON) equivalent to compile options."""
    from plmr.schedule.transforms import (
        Compound,
        EliminateTransposes,
        Fuse,
        Partition,
        Substitute,
        Tile,
    )

    tile = (
        Tile()
        if opts.tile_sizes is None
        else Tile(parallel=opts.tile_sizes[0], reduction=opts.tile_sizes[1])
    )
    steps = [
        EliminateTransposes(enabled=opts.eliminate_transposes),
        Substitute(enabled=opts.substitute, alpha=opts.alpha, budget=opts.budget),
        Fuse(opts.fuse, chunks=opts.chunks),
        tile,
        Partition(
            grid=list(opts.grid),
            device=opts.device,
            gemm=opts.gemm,
            gemv=opts.gemv,
            k=opts.k,
            groups=opts.groups,
        ),
    ]
    return Compound(steps).to_json()


def _record_compiled(
    db_path: Path,
    source_text: str,
    name: str,
    module: Any,
    schedule_json: dict[str, Any],
    source: str,
) -> None:
    """Times a compiled program and records it in the performance database."""
    from plmr.dialects import mesh
    from plmr.runtime.interpreter import run_mesh
    from plmr.runtime.running import zero_inputs
    from plmr.schedule.db import PerfDB, Record, program_hash

    program = next(op for op in module.ops if isinstance(op, mesh.ProgramOp))
    _, report = run_mesh(module, zero_inputs(program), mode="timing")
    with PerfDB(db_path) as db:
        rid = db.add(
            Record(
                program_hash=program_hash(source_text),
                program=name,
                device=program.device.spec.data,
                grid=program.grid_shape,
                schedule=schedule_json,
                source=source,
                status="ok",
                cycles=float(report.cycles),
                seconds=float(report.seconds),
                sram_peak=int(report.max_sram_bytes),
                routes_peak=int(report.max_routes),
            )
        )
    click.echo(
        f"recorded trial {rid} in {db_path}: {report.cycles:,.0f} cycles ({source})",
        err=True,
    )


# ---------------------------------------------------------------------------------------
# plmr tune
# ---------------------------------------------------------------------------------------


def _nest_names(program: Path, no_substitute: bool, limit: int = 6) -> list[str]:
    """The named loop nests of PROGRAM with a reduction (the default pipeline's front)."""
    from plmr.dialects.context import load_module, make_context
    from plmr.passes.pipeline import CompileOptions, loop_nests, to_loop_level

    ctx = make_context()
    module = load_module(program, ctx)
    to_loop_level(ctx, module, CompileOptions(substitute=not no_substitute))
    named = [(n, e) for n, e in loop_nests(module).items() if e[1]]
    named.sort(key=lambda item: -(max(item[1][0], default=1) * max(item[1][1])))
    return [n for n, _ in named[:limit]]


@cli.command("tune")
@click.argument("program", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--device", default="wse2", show_default=True, help="Device of the default.")
@click.option("--grid", default="4x4", show_default=True, help="Grid of the default.")
@click.option(
    "--schedule",
    "schedule_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The schedule with knobs to search (default: blocking, GEMM/GEMV algorithms, k).",
)
@click.option("--trials", type=int, default=20, show_default=True, help="Candidates.")
@click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The performance database (SQLite; created if missing).",
)
@click.option(
    "--sampler",
    type=click.Choice(["random", "grid", "tpe", "evolutionary"]),
    default="random",
    show_default=True,
    help="tpe needs Optuna (pip install -e '.[tune]'); evolutionary: population, "
    "learned cost model, constraint-aware, analytic start, per-nest tasks.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Sampler seed.")
@click.option("--workers", type=int, default=1, show_default=True, help="Processes.")
@click.option(
    "--executor",
    type=click.Choice(["process", "ray"]),
    default="process",
    show_default=True,
    help="Where candidates run; ray needs pip install -e '.[ray]'.",
)
@click.option("--address", default=None, help="A Ray cluster's address (--executor ray).")
@click.option("--resume", is_flag=True, help="Also measure the best schedule in the DB.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the best schedule here (default: PROGRAM.tuned.json next to PROGRAM).",
)
@click.option("--no-substitute", is_flag=True, help="Default schedule without TASO.")
@click.option("--no-progress", is_flag=True, help="Do not show the progress bar.")
def tune_cmd(
    program: Path,
    device: str,
    grid: str,
    schedule_path: Path | None,
    trials: int,
    db_path: Path,
    sampler: str,
    seed: int,
    workers: int,
    executor: str,
    address: str | None,
    resume: bool,
    output: Path | None,
    no_substitute: bool,
    no_progress: bool,
) -> None:
    """
    Search the knobs of a schedule for PROGRAM against the runtime's timing mode; record
    every trial in the database, check the winner in functional mode, print it and its
    speedup over the default schedule, and write it as JSON."""
    from plmr.dialects.context import load_module
    from plmr.dialects.printing import module_text
    from plmr.schedule.db import PerfDB
    from plmr.schedule.executors import make_executor
    from plmr.schedule.transforms import Substitute, default_schedule, tunable_schedule
    from plmr.schedule.tuner import Measurement, check_functional, tune, write_schedule
    from plmr.tools.bench import parse_grid

    rows_cols = parse_grid(grid)
    default = default_schedule(rows_cols, device)
    if schedule_path is not None:
        schedule = _load_schedule(schedule_path)
        default = None
    else:
        schedule = tunable_schedule(rows_cols, device, _nest_names(program, no_substitute))
    if no_substitute:
        schedule = schedule.replace(Substitute(enabled=False))
        if default is not None:
            default = default.replace(Substitute(enabled=False))
    text = module_text(load_module(program))
    out = output if output is not None else program.with_suffix(".tuned.json")
    if not out.resolve().parent.is_dir():
        raise PlmrError(
            f"cannot write {out}: directory {out.resolve().parent} does not exist"
        )
    knobs = schedule.knobs()
    click.echo(
        f"tuning {program.name}: {len(knobs)} knob(s) "
        f"({', '.join(knobs) or 'none'}), {trials} trial(s), {sampler} sampler, "
        f"{workers} worker(s) ({executor})",
        err=True,
    )
    runner = make_executor(executor, workers, address)
    with (
        PerfDB(db_path) as db,
        click.progressbar(
            length=trials + 1 + (1 if resume else 0),
            label="trials",
            file=sys.stderr if not no_progress else io.StringIO(),
        ) as bar,
    ):

        def progress(m: Measurement) -> None:
            del m
            bar.update(1)

        result = tune(
            text,
            program.name,
            schedule,
            trials=trials,
            db=db,
            sampler=sampler,
            seed=seed,
            workers=workers,
            resume=resume,
            progress=progress,
            default=default,
            executor=runner,
        )
    runner.close()
    from plmr.schedule.transforms import Compound

    best = Compound.from_json(result.best.schedule)
    error = check_functional(text, best, seed)
    if error > 1e-3:
        raise PlmrError(
            f"the best schedule computes wrong results (max relative error {error:.2e})"
        )
    infeasible = [m for m in result.trials if m.status != "ok"]
    click.echo(
        f"default: {result.default.cycles or float('nan'):,.0f} cycles; best: "
        f"{result.best.cycles or float('nan'):,.0f} cycles "
        f"({result.speedup or float('nan'):.2f}x) after {len(result.trials)} trial(s), "
        f"{len(infeasible)} infeasible; functional check: max error {error:.1e}"
    )
    for m in infeasible[:5]:
        click.echo(f"  skipped {json.dumps(m.values, sort_keys=True)}: {m.reason}")
    if result.generated is not None:
        click.echo(
            f"analytic start: {result.generated.cycles or float('nan'):,.0f} cycles "
            f"({result.generated.status})"
        )
    if result.rank_correlation is not None:
        click.echo(
            f"cost model: rank correlation {result.rank_correlation:.2f} on trials it "
            f"ranked before measuring; {result.transferred} trial(s) transferred from the DB"
        )
    for t in result.tasks:
        click.echo(
            f"  task {t.name}: {t.share:.0%} of the time, {t.rounds} round(s), "
            f"{t.trials} trial(s), gained {t.gain:,.0f} cycles"
        )
    if result.best.values:
        click.echo(f"best knobs: {json.dumps(result.best.values, sort_keys=True)}")
    click.echo(best.dumps(), nl=False)
    write_schedule(out, best)
    click.echo(f"wrote {out}", err=True)


# ---------------------------------------------------------------------------------------
# plmr run
# ---------------------------------------------------------------------------------------


@cli.command("run")
@click.argument("program", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--entry",
    default=None,
    help="Function or mesh.program to run (default: @main or the only one).",
)
@click.option(
    "--inputs",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="An .npz file with one array per argument (keyed by name, else arg0, arg1, ...).",
)
@click.option(
    "--random",
    "seed",
    type=int,
    default=None,
    help="Run on random inputs from this seed (the default, with seed 0, without --inputs).",
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Save the results to this .npz (keyed by result name, else out0, out1, ...).",
)
@click.option(
    "--device",
    default=None,
    help="mesh programs: override the program's device (e.g. wse3).",
)
@click.option(
    "--mode",
    type=click.Choice(["functional", "timing"]),
    default="functional",
    show_default=True,
    help="mesh programs: functional (data) or timing (shapes only).",
)
@click.option(
    "--relay",
    is_flag=True,
    help="mesh programs: relay through software when colors run out.",
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="mesh programs: write the report as JSON.",
)
@click.option(
    "--trace",
    "trace_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="mesh programs: write a Chrome trace.",
)
@click.option("--trace-pes", default=None, help="mesh programs: PEs to trace as 'y,x;y,x'.")
@click.option(
    "--heatmap",
    "heatmap_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="mesh programs: write a per-PE heatmap PNG.",
)
@click.option(
    "--exact",
    is_flag=True,
    help="mesh programs, timing mode: step every loop iteration instead of "
    "extrapolating loops that reached a steady state.",
)
def run_cmd(
    program: Path,
    entry: str | None,
    inputs: Path | None,
    seed: int | None,
    output: Path | None,
    device: str | None,
    mode: str,
    relay: bool,
    report_path: Path | None,
    trace_path: Path | None,
    trace_pes: str | None,
    heatmap_path: Path | None,
    exact: bool,
) -> None:
    """
    Run PROGRAM (an .mlir file at any level) with plmr's reference semantics; a
    mesh.program runs on the modelled wafer and prints its report."""
    from plmr.dialects.context import load_module
    from plmr.runtime.running import (
        MeshEntry,
        load_inputs,
        random_inputs,
        result_names,
        run_entry,
        select_entry,
        summarize,
    )

    if inputs is not None and seed is not None:
        raise PlmrError("give either --inputs or --random, not both")
    module = load_module(program)
    fn = select_entry(module, entry)
    if inputs is not None:
        args = load_inputs(fn, inputs)
        origin = f"inputs from {inputs}"
    else:
        seed = 0 if seed is None else seed
        args = random_inputs(fn, seed)
        origin = f"random inputs (seed {seed})"
    if not isinstance(fn, MeshEntry) and (
        device
        or relay
        or report_path
        or trace_path
        or heatmap_path
        or exact
        or mode != "functional"
    ):
        raise PlmrError(
            "--device, --mode, --relay, --report, --trace, --heatmap and --exact apply to "
            "mesh.program entries only"
        )
    results, report = run_entry(
        module,
        fn,
        args,
        device=device,
        mode=mode,
        relay=relay,
        trace_path=trace_path,
        trace_pes=trace_pes,
        heatmap_path=heatmap_path,
        exact=exact,
    )
    names = result_names(fn)
    if report is not None and report_path is not None:
        write_text_atomically(report_path, report.dumps())
    if output is not None:
        arrays = dict(zip(names, results, strict=True))
        write_atomically(output, lambda tmp: _save_npz(tmp, arrays))
        click.echo(f"wrote {len(results)} result(s) of @{fn.sym_name.data} to {output}")
    else:
        click.echo(f"@{fn.sym_name.data} on {origin}:")
        if mode == "timing":
            click.echo("  (timing mode: results are placeholders)")
        for line in summarize(names, results):
            click.echo(line)
    if report is not None:
        for line in report.summary():
            click.echo(line)
        for label, path in (
            ("report", report_path),
            ("trace", trace_path),
            ("heatmap", heatmap_path),
        ):
            if path is not None:
                click.echo(f"  {label:<11} written to {path}")


def _save_npz(path: Path, arrays: dict[str, Any]) -> None:
    import numpy as np

    with path.open("wb") as f:
        np.savez(f, **arrays)


# ---------------------------------------------------------------------------------------
# plmr demo
# ---------------------------------------------------------------------------------------


@cli.command("demo")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the inputs.")
@click.option("--grid", default="4x4", show_default=True, help="PEs as ROWSxCOLS.")
@click.option(
    "--steps", type=int, default=16, show_default=True, help="Tokens to generate."
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("plmr-demo"),
    show_default=True,
    help="Where the trace and the heatmap go.",
)
@click.option("--no-llm", is_flag=True, help="Only the ONNX check.")
def demo_cmd(seed: int, grid: str, steps: int, out_dir: Path, no_llm: bool) -> None:
    """
    The main job: a tiny LLaMA-style model compiled and run on the modelled wafer and
    checked against numpy; then the bundled ONNX models against ONNX's evaluator."""
    from plmr.tools.bench import parse_grid
    from plmr.tools.demo import run_demo, run_llm_demo

    rows_cols = parse_grid(grid)
    if not 1 <= steps <= 24:
        raise PlmrError(
            f"--steps must be between 1 and 24 (the cache holds 32), got {steps}"
        )
    ok = True
    if not no_llm:
        ok = run_llm_demo(seed, rows_cols, steps, out_dir, click.echo)
        click.echo("")
    ok = run_demo(seed, click.echo) and ok
    if not ok:
        raise PlmrError("the demo found a mismatch (see above)")


def _register_subcommands() -> None:
    from plmr.tools.bench import bench
    from plmr.tools.db_cli import db
    from plmr.tools.fuzz_cli import fuzz
    from plmr.tools.rules_cli import rules

    cli.add_command(fuzz)
    cli.add_command(bench)
    cli.add_command(rules)
    cli.add_command(db)


_register_subcommands()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        rv = cli.main(args=argv, prog_name="plmr", standalone_mode=False)
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.Abort:
        click.echo("aborted", err=True)
        return 1
    except click.ClickException as e:
        e.show()
        return e.exit_code
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    sys.exit(main())
