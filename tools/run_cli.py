"""
`plmr run`: run a program at any level with the reference interpreters or the wafer
simulator; registered by `plmr.tools.cli`.

Bad input is one `error:` message and a non-zero exit status, never a traceback, and no
half-written output file is left behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from plmr.errors import PlmrError
from plmr.files import write_atomically, write_text_atomically
from plmr.tools.options import SEED, check_run_outputs
from plmr.tools.weights_option import weights_option

# ---------------------------------------------------------------------------------------
# plmr run
# ---------------------------------------------------------------------------------------


@click.command("run")
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
    type=SEED,
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
@weights_option
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
    weights: Path | None,
) -> None:
    """
    Run PROGRAM (an .mlir file at any level) with plmr's reference semantics; a
    mesh.program (or a function of mesh.runs, a model compiled with its repeated layers
    once) runs on the modelled wafer and prints its report."""
    from plmr.dialects.context import load_module
    from plmr.runtime.running import (
        check_entry_memory,
        load_inputs,
        on_wafer,
        random_inputs,
        run_entry,
        select_entry,
        summarize,
        zero_inputs,
    )
    from plmr.runtime.weights import check_weights
    from plmr.target.interface import result_names

    if inputs is not None and seed is not None:
        raise PlmrError("give either --inputs or --random, not both")
    check_run_outputs(
        {"--output": output, "--report": report_path, "--trace": trace_path},
        heatmap_path,
    )
    module = load_module(program, weights=weights)
    fn = select_entry(module, entry)
    check_entry_memory(fn, mode)
    if mode != "timing":
        # A timing run moves shapes only: it never opens the weights files.
        check_weights(fn)
    if inputs is not None:
        args = load_inputs(fn, inputs)
        origin = f"inputs from {inputs}"
    elif on_wafer(fn) and mode == "timing":
        # Timing mode carries shapes only: zero-stride inputs, whatever the sizes.
        args = zero_inputs(fn, broadcast=True)
        origin = "shapes only (timing mode)"
    else:
        seed = 0 if seed is None else seed
        args = random_inputs(fn, seed)
        origin = f"random inputs (seed {seed})"
    if not on_wafer(fn) and (
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
            "mesh.program entries only (and functions of mesh.run)"
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
