"""
`plmr compile` (a program or ONNX model down to the mesh level, or any level on the way);
registered by `plmr.tools.cli`.

Bad input is one `error:` message and a non-zero exit status, never a traceback, and no
half-written output file is left behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from plmr.errors import PlmrError
from plmr.files import check_output_dir, check_output_path, write_text_atomically
from plmr.tools.options import COUNT, NON_NEGATIVE, SEED, TOLERANCE
from plmr.tools.schedule_options import (
    check_database,
    check_schedule_conflicts,
    load_schedule,
)
from plmr.tools.state_option import state_options, state_text
from plmr.tools.weights_option import weights_option

if TYPE_CHECKING:
    from plmr.passes.pipeline import CompileOptions

# ---------------------------------------------------------------------------------------
# plmr compile
# ---------------------------------------------------------------------------------------


@click.command("compile")
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
    type=click.Choice(["ktree", "pipeline", "ring", "auto"]),
    default=None,
    help="The allreduce algorithm (decode GEMVs, row reductions); auto: each "
    "allreduce's K-tree groups timed on its line (default: auto on grids of more than "
    "64 PEs, else ktree; ktree when --k is given).",
)
@click.option("--k", "k", type=COUNT, default=2, show_default=True, help="K-tree phases.")
@click.option(
    "--tile-sizes",
    default=None,
    help="P,R blocks of convert-loop-to-tile (default: chosen for the grid).",
)
@click.option(
    "--fit-tiles",
    is_flag=True,
    help="Where a dimension's blocks do not divide over the grid, shrink them and "
    "pad the last PEs' share (uneven blocks) instead of refusing the nest: how a "
    "user's export of full width compiles on a large grid (plmr bench pads its own "
    "models instead).",
)
@click.option(
    "--no-outline-layers",
    is_flag=True,
    help="Compile every layer of a model whose layers repeat (by default a repeated "
    "layer is compiled once and run once per layer with its weights).",
)
@click.option(
    "--layers",
    type=int,
    default=0,
    show_default=True,
    help="The number of repeated layers the model must hold (0: whatever repeats); "
    "an error if it does not hold them.",
)
@click.option("--no-substitute", is_flag=True, help="Skip the TASO graph substitutions.")
@click.option(
    "--no-defer-norm-scale",
    is_flag=True,
    help="Keep each RMSNorm's scale before the matmul that reads it "
    "(skip graph-defer-norm-scale).",
)
@click.option(
    "--no-fold-rotate-half",
    is_flag=True,
    help="Keep RoPE's rotate_half as a product at run time (skip graph-fold-rotate-half).",
)
@click.option(
    "--no-fold-repeat-kv",
    is_flag=True,
    help="Keep GQA's repeat_kv of K and V before the attention's matmuls "
    "(skip graph-fold-repeat-kv).",
)
@click.option(
    "--no-fold-heads",
    is_flag=True,
    help="Keep a one-row projection flat before its split into heads "
    "(skip graph-fold-heads).",
)
@click.option(
    "--no-merge-matmuls",
    is_flag=True,
    help="Keep one matmul per projection of an input (skip graph-merge-matmuls).",
)
@click.option(
    "--no-pack",
    is_flag=True,
    help="Keep one allreduce per nest (skip mesh-pack-allreduces).",
)
@click.option(
    "--budget",
    type=NON_NEGATIVE,
    default=100,
    show_default=True,
    help="TASO search budget.",
)
@click.option(
    "--engine",
    type=click.Choice(["backtrack", "eqsat"]),
    default="eqsat",
    show_default=True,
    help="Graph substitution search: TASO's backtracking or equality saturation.",
)
@click.option(
    "--saturation-nodes",
    type=click.IntRange(min=1),
    default=20_000,
    show_default=True,
    help="eqsat: e-nodes at which a stage's equality saturation stops (at least 20 "
    "per op; --profile says when the limit stopped the search).",
)
@click.option(
    "--extraction-nodes",
    type=click.IntRange(min=0),
    default=1_000,
    show_default=True,
    help="eqsat: branch-and-bound nodes of each ILP extraction (0: greedy extraction only).",
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
@click.option(
    "--profile",
    is_flag=True,
    help="Print where the compile spent its time on standard error: wall and CPU "
    "seconds per pass and per phase of the blocking search (also when the program is "
    "refused).",
)
@click.option("--check-seed", type=SEED, default=0, show_default=True, help="Inputs' seed.")
@click.option(
    "--check-tol",
    type=TOLERANCE,
    default=1e-4,
    show_default=True,
    help="Relative tolerance.",
)
@weights_option
@state_options
@click.option(
    "--no-state",
    is_flag=True,
    help="Compile a decode step as exported: its KV caches taken from and handed back "
    "to the host every step (by default its past/present pairs are kept on the wafer "
    "as state, graph-kv-state).",
)
@click.option(
    "--check-text",
    is_flag=True,
    help="With --check-each (implied): print the program after every pass and parse "
    "it back before running it, so that what is checked is what a file holds.",
)
def compile_cmd(
    program: Path,
    output: Path | None,
    device: str,
    grid: str,
    gemm: str,
    gemv: str | None,
    k: int,
    tile_sizes: str | None,
    fit_tiles: bool,
    no_outline_layers: bool,
    layers: int,
    no_substitute: bool,
    no_defer_norm_scale: bool,
    no_fold_rotate_half: bool,
    no_fold_repeat_kv: bool,
    no_fold_heads: bool,
    no_merge_matmuls: bool,
    no_pack: bool,
    budget: int,
    engine: str,
    saturation_nodes: int,
    extraction_nodes: int,
    fuse: str,
    relay: bool,
    schedule_path: Path | None,
    db_path: Path | None,
    generic: bool,
    explain: bool,
    check_each: bool,
    check_dir: Path | None,
    profile: bool,
    check_seed: int,
    check_tol: float,
    weights: Path | None,
    state: tuple[str, ...],
    position: str,
    mask: str,
    no_state: bool,
    check_text: bool,
) -> None:
    """
    Compile PROGRAM (.mlir at the graph, loop or tile level, or an .onnx model) to a
    routed mesh program: transpose-elim, graph-defer-norm-scale, taso-substitute,
    convert-graph-to-loop, neptune-fuse, convert-loop-to-tile, convert-tile-to-mesh,
    mesh-route, mesh-check-limits. Run the result with `plmr run`. Weights by reference
    stay references (checked against their files, never read); the output names them
    relative to its own directory. A decode step's KV caches (past/present pairs) are
    kept on the wafer as state (graph-kv-state) unless --no-state."""
    from xdsl.utils.exceptions import DiagnosticException

    from plmr.dialects.context import load_module, make_context, verify_module
    from plmr.dialects.graph_weights import relocate_weights
    from plmr.dialects.printing import module_text
    from plmr.passes.pipeline import (
        CompileOptions,
        check_sizes,
        compile_module,
        keep_state,
    )
    from plmr.runtime.weights import check_weights
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
    if no_state and state:
        raise PlmrError(
            "--state names caches to keep on the wafer, --no-state keeps none: give one"
        )
    opts = CompileOptions(
        grid=parse_grid(grid),
        device=device,
        gemm=gemm,
        gemv=gemv or _default_gemv(parse_grid(grid)),
        k=k,
        tile_sizes=sizes,
        fit_tiles=fit_tiles,
        outline_layers=not no_outline_layers,
        layers=layers,
        substitute=not no_substitute,
        defer_norm_scale=not no_defer_norm_scale,
        fold_rotate_half=not no_fold_rotate_half,
        fold_repeat_kv=not no_fold_repeat_kv,
        fold_heads=not no_fold_heads,
        merge_matmuls=not no_merge_matmuls,
        pack_allreduces=not no_pack,
        budget=budget,
        engine=engine,
        saturation_nodes=saturation_nodes,
        extraction_nodes=extraction_nodes,
        fuse=fuse,
        relay=relay,
        kv_state=not no_state,
        state=state_text(state),
        position=position,
        mask=mask,
    )
    if schedule_path is not None:
        check_schedule_conflicts()
    if output is not None:
        check_output_path(output)
    if db_path is not None:
        check_database(db_path)
    if check_dir is not None:
        check_output_dir(check_dir, "--check-dir")
    ctx = make_context()
    if program.suffix == ".onnx":
        from plmr.frontend.onnx import import_onnx_file

        if weights is not None:
            raise PlmrError(
                "--weights applies to .mlir programs; an .onnx model's external data is "
                "read from next to the model"
            )
        module = import_onnx_file(str(program))
    else:
        module = load_module(program, ctx, weights)
    check_weights(module)
    check_sizes(module)
    if opts.kv_state and (schedule_path is not None or check_each or check_text):
        # These run the passes one by one: the caches become state first.
        keep_state(module, opts)
    source_text = module_text(module)
    schedule_json = _schedule_of_options(opts)
    plans: list[Any] = []
    if schedule_path is not None:
        from plmr.schedule.trials import compile_schedule

        schedule = load_schedule(schedule_path)
        schedule_json = schedule.bind({}).to_json()
        module = compile_schedule(source_text, schedule.bind({}), relay=relay)
    elif check_each or check_text:
        from plmr.tools.fuzz_cli import compile_with_checks

        compile_with_checks(
            ctx, module, opts, plans, check_dir, check_seed, check_tol, check_text
        )
    elif profile:
        from plmr.passes.timing import Timing, timing

        # The table also when a pass refuses the program: where the time went before it.
        spent: Timing | None = None
        try:
            with timing() as spent:
                compile_module(ctx, module, opts, plans)
        finally:
            if spent is not None:
                click.echo(spent.table(), err=True, nl=False)
    else:
        try:
            compile_module(ctx, module, opts, plans)
        except PlmrError as e:
            # A refusal of a program that verifies names what it refuses and why: it
            # stands (looking for an unverified pass would compile it all again).
            if _verifies(module):
                raise
            _raise_unverified_pass(source_text, opts, e)
            raise
        except Exception as e:
            # A pass may have left a program that does not verify, which a later one
            # tripped over: name that pass. Otherwise the error stands (a bug of the
            # pass that raised it).
            _raise_unverified_pass(source_text, opts, e)
            raise
    if schedule_path is None:
        try:
            module.verify()
        except DiagnosticException as e:
            _raise_unverified_pass(source_text, opts, e)
    verify_module(module, "the compiled program (a compiler error)")
    _echo_state(module)
    if db_path is not None:
        _record_compiled(
            db_path,
            source_text,
            f"{program.name}",
            module,
            schedule_json,
            "manual" if schedule_path is not None else "default",
        )
    if output is not None:
        relocate_weights(module, output.resolve().parent)
    text = module_text(module, generic=generic)
    if explain:
        from plmr.models.explain import explain as explain_nests
        from plmr.models.explain import format_explain
        from plmr.target.device import get_device

        rows = explain_nests(module, plans, get_device(opts.device), relay=relay)
        click.echo(format_explain(rows), nl=False)
    if output is None:
        if not explain:
            click.echo(text, nl=False)
        return
    write_text_atomically(output, text)
    click.echo(f"wrote {output}", err=True)


def _echo_state(module: Any) -> None:
    """Says on standard error which of the program's inputs stay on the wafer."""
    from plmr.dialects import mesh
    from plmr.target.interface import state_args

    for program in module.ops:
        if not isinstance(program, mesh.ProgramOp):
            continue
        kept = [s for s in state_args(program) if s]
        if kept:
            click.echo(
                f"graph-kv-state: @{program.sym_name.data} keeps {len(kept)} KV "
                f"cache(s) on the wafer as state ({', '.join(kept)}); only the other "
                "inputs and outputs cross the host link (--no-state: as exported)",
                err=True,
            )


def _verifies(module: Any) -> bool:
    """Whether `module` (as a pass left it) verifies."""
    try:
        module.verify()
    except Exception:
        return False
    return True


def _raise_unverified_pass(
    source_text: str, opts: CompileOptions, cause: Exception
) -> None:
    """
    Raises the compiler error naming the pass whose output does not verify, found by
    compiling `source_text` again pass by pass with a verify after each (no-op if every
    pass's output verifies).
    """
    from plmr.dialects.context import make_context, parse_module
    from plmr.validate.compile_check import find_unverified_pass

    ctx = make_context()
    error = find_unverified_pass(ctx, parse_module(source_text, "<compiled>", ctx), opts)
    if error is not None:
        raise error from cause


def _default_gemv(grid: tuple[int, int]) -> str:
    """
    `default_gemv` of the grid, unless `--k` was given: a K for every allreduce is the
    K-tree of that K (`auto` would time each line's own).
    """
    from plmr.passes.pipeline import default_gemv

    ctx = click.get_current_context()
    if ctx.get_parameter_source("k") == click.core.ParameterSource.COMMANDLINE:
        return "ktree"
    return default_gemv(grid)


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
    from plmr.runtime.mesh_machine import run_mesh
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
