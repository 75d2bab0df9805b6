"""
`plmr`: the command-line front end: the group, `plmr import`, the bundled demo and
`main`. The other subcommands live in their own modules (`compile_cli`: compile;
`tune_cli`: tune, sharing `schedule_options` with compile; `run_cli`: run; `bench`,
`fuzz_cli`, `rules_cli`, `db_cli`) and are registered here.

Every command reports bad input as one `error:` message (what, where, how to fix) and a
non-zero exit status; it never shows a traceback for it, and never leaves a half-written
output file behind.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from plmr import __version__
from plmr.errors import PlmrError
from plmr.files import check_output_dir, check_output_path, write_text_atomically
from plmr.tools.options import COUNT, NON_NEGATIVE, SEED, check_weights_out

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
@click.option(
    "--inline-limit",
    type=NON_NEGATIVE,
    default=1024,
    show_default=True,
    help="Initializers of at most this many bytes stay inline (graph.constant); larger "
    "ones are weights by reference (graph.weight).",
)
@click.option(
    "--weights-out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The safetensors file for weights the model does not keep as external data "
    "(default with -o OUT.mlir: OUT.safetensors beside it; without -o they stay inline).",
)
def import_cmd(
    model: Path,
    output: Path | None,
    func_name: str,
    generic: bool,
    inline_limit: int,
    weights_out: Path | None,
) -> None:
    """
    Import an ONNX MODEL (static shapes) into the `graph` dialect. Models older than
    opset 13 are converted to 13 first (a note on stderr says so). Initializers above
    --inline-limit bytes are weights by reference: those in the model's external data
    stay there (file and offset), the others go to a safetensors file; the IR names
    the files relative to its own directory.
    """
    from plmr.dialects.graph_weights import relocate_weights
    from plmr.dialects.printing import module_text
    from plmr.frontend.onnx import WeightsOptions, import_onnx_file

    def notify(message: str) -> None:
        click.echo(message, err=True)

    if output is not None:
        check_output_path(output)
    if weights_out is None and output is not None:
        weights_out = output.with_suffix(".safetensors")
    check_weights_out(weights_out, output)
    options = WeightsOptions(inline_limit=inline_limit, out=weights_out)
    module = import_onnx_file(
        str(model), func_name=func_name, notify=notify, weights=options
    )
    if output is None:
        click.echo(module_text(module, generic=generic), nl=False)
        return
    relocate_weights(module, output.resolve().parent)
    write_text_atomically(output, module_text(module, generic=generic))
    click.echo(f"wrote {output}", err=True)


# ---------------------------------------------------------------------------------------
# plmr demo
# ---------------------------------------------------------------------------------------


@cli.command("demo")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the inputs.")
@click.option("--grid", default="4x4", show_default=True, help="PEs as ROWSxCOLS.")
@click.option(
    "--steps", type=COUNT, default=16, show_default=True, help="Tokens to generate."
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
    from plmr.models.demo import run_demo, run_llm_demo
    from plmr.tools.bench import parse_grid

    rows_cols = parse_grid(grid)
    if not 1 <= steps <= 24:
        raise PlmrError(
            f"--steps must be between 1 and 24 (the cache holds 32), got {steps}"
        )
    if not no_llm:
        check_output_dir(out_dir, "--out")
    ok = True
    if not no_llm:
        ok = run_llm_demo(seed, rows_cols, steps, out_dir, click.echo)
        click.echo("")
    ok = run_demo(seed, click.echo) and ok
    if not ok:
        raise PlmrError("the demo found a mismatch (see above)")


def _register_subcommands() -> None:
    from plmr.tools.bench import bench
    from plmr.tools.compile_cli import compile_cmd
    from plmr.tools.db_cli import db
    from plmr.tools.fuzz_cli import fuzz
    from plmr.tools.generate_cli import generate_cmd
    from plmr.tools.rules_cli import rules
    from plmr.tools.run_cli import run_cmd
    from plmr.tools.tune_cli import tune_cmd

    cli.add_command(compile_cmd)
    cli.add_command(tune_cmd)
    cli.add_command(run_cmd)
    cli.add_command(generate_cmd)
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
