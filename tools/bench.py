"""
`plmr bench`: build a kernel, run it on the modelled device, print the report.

Every subcommand takes `--device`, `--grid PxQ`, `--mode timing|functional` and
`--json` (stdout is then exactly one JSON object). Functional mode checks the result
against numpy and fails with a non-zero exit status on a mismatch.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from plmr.errors import PlmrError
from plmr.files import write_text_atomically
from plmr.tools.options import COUNT, SEED, check_run_outputs

if TYPE_CHECKING:
    from plmr.lowering.kernels import Kernel

F = TypeVar("F", bound=Callable[..., Any])

CHECK_RTOL = 1e-3


def parse_grid(text: str) -> tuple[int, int]:
    """`"4x8"` -> (4, 8): rows × columns."""
    parts = text.lower().split("x")
    if len(parts) != 2:
        raise PlmrError(f"bad grid '{text}': expected ROWSxCOLS, e.g. 4x4 or 360x360")
    try:
        rows, cols = int(parts[0]), int(parts[1])
    except ValueError as e:
        raise PlmrError(f"bad grid '{text}': expected ROWSxCOLS, e.g. 4x4") from e
    if rows <= 0 or cols <= 0:
        raise PlmrError(f"bad grid '{text}': both sizes must be positive")
    return rows, cols


def run_options(fn: F) -> F:
    """The options shared by every `plmr bench` subcommand (and `plmr run` on meshes)."""
    options = [
        click.option(
            "--device",
            default="wse2",
            show_default=True,
            help="Device preset, e.g. wse2, wse3, wse2:colors=16.",
        ),
        click.option("--grid", default="4x4", show_default=True, help="PEs as ROWSxCOLS."),
        click.option(
            "--mode",
            type=click.Choice(["timing", "functional"]),
            default="timing",
            show_default=True,
            help="timing: shapes only (any size); functional: real data, checked.",
        ),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object."),
        click.option(
            "--relay", is_flag=True, help="Relay through software when colors run out."
        ),
        click.option(
            "--seed", type=SEED, default=0, show_default=True, help="Seed of the inputs."
        ),
        click.option(
            "--report",
            "report_path",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Write the report as JSON.",
        ),
        click.option(
            "--trace",
            "trace_path",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Write a Chrome trace (JSON).",
        ),
        click.option(
            "--trace-pes",
            default=None,
            help="PEs to trace as 'y,x;y,x' (default: first PE of each row).",
        ),
        click.option(
            "--heatmap",
            "heatmap_path",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Write a per-PE heatmap PNG (needs matplotlib).",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def execute(
    kernel: Kernel,
    *,
    device: str,
    mode: str,
    as_json: bool,
    relay: bool,
    seed: int,
    report_path: Path | None,
    trace_path: Path | None,
    trace_pes: str | None,
    heatmap_path: Path | None,
    reference: Callable[[list[Any]], Any] | None,
    extra: dict[str, Any],
    echo: Callable[[str], None],
) -> None:
    """Runs a built kernel and reports; raises PlmrError on a functional mismatch."""
    import numpy as np

    from plmr.runtime.memory import check_host_memory
    from plmr.runtime.mesh_machine import find_program, run_mesh
    from plmr.runtime.trace import TraceRecorder, default_pes, parse_pes, write_heatmap
    from plmr.target.device import get_device

    check_run_outputs({"--report": report_path, "--trace": trace_path}, heatmap_path)
    dev = get_device(device)
    program = find_program(kernel.module, None)
    grid = program.grid_shape
    rng = np.random.default_rng(seed)
    check_host_memory(program, mode)
    if mode == "functional":
        inputs = [rng.standard_normal(s).astype(np.float32) for s in kernel.inputs]
    else:
        # Timing mode carries shapes only: zero-stride inputs, whatever the sizes.
        inputs = [np.broadcast_to(np.float32(0), s) for s in kernel.inputs]
    recorder = None
    if trace_path is not None:
        pes = parse_pes(trace_pes, grid) if trace_pes else default_pes(grid)
        recorder = TraceRecorder(pes, dev.clock_hz)
    outputs, report = run_mesh(
        kernel.module, inputs, device=dev, mode=mode, relay=relay, recorder=recorder
    )
    result: dict[str, Any] = {**extra, **report.to_json()}
    if mode == "functional" and reference is not None:
        want = np.asarray(reference(inputs), dtype=np.float64)
        got = np.asarray(outputs[0], dtype=np.float64)
        scale = max(float(np.abs(want).max()), 1e-30)
        err = float(np.abs(got - want).max()) / scale
        result["check"] = {
            "max_rel_error": err,
            "rtol": CHECK_RTOL,
            "passed": err <= CHECK_RTOL,
        }
        if err > CHECK_RTOL:
            raise PlmrError(
                f"{kernel.description}: result differs from numpy (max relative error "
                f"{err:.3g} > {CHECK_RTOL})"
            )
    if report_path is not None:
        write_text_atomically(report_path, json.dumps(result, indent=2))
    if recorder is not None and trace_path is not None:
        recorder.write(trace_path)
    if heatmap_path is not None and report.finish is not None:
        write_heatmap(
            report.finish, heatmap_path, f"{kernel.description}", "finishing time (cycles)"
        )
    if as_json:
        echo(json.dumps(result))
        return
    echo(kernel.description)
    for line in report.summary():
        echo(line)
    if "check" in result:
        echo(
            f"  check       equal to numpy (max relative error {result['check']['max_rel_error']:.2e})"
        )
    for label, path in (
        ("report", report_path),
        ("trace", trace_path),
        ("heatmap", heatmap_path),
    ):
        if path is not None:
            echo(f"  {label:<11} written to {path}")


def kernel_report(
    kernel: Kernel,
    *,
    device: str = "wse2",
    mode: str = "timing",
    relay: bool = False,
    seed: int = 0,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """
    Runs a built kernel once and returns the JSON object `plmr bench --json` prints
    for it: `extra`'s keys, then the runtime's report (cycles, seconds, compute and
    exposed communication of the critical PE, compute efficiency, traffic, SRAM,
    routes). Raises PlmrError if the kernel does not fit the device.
    """
    lines: list[str] = []
    execute(
        kernel,
        device=device,
        mode=mode,
        as_json=True,
        relay=relay,
        seed=seed,
        report_path=None,
        trace_path=None,
        trace_pes=None,
        heatmap_path=None,
        reference=None,
        extra=dict(extra or {}),
        echo=lines.append,
    )
    result: dict[str, Any] = json.loads(lines[0])
    return result


@click.group("bench")
def bench() -> None:
    """Run a kernel on the modelled wafer and report cycles, traffic, SRAM and routes."""


@bench.command("gemm")
@click.option(
    "--algo",
    type=click.Choice(["meshgemm", "cannon", "summa", "gemm_t"]),
    default="meshgemm",
    show_default=True,
)
@click.option("--m", "m", type=int, default=64, show_default=True)
@click.option("--k", "k", type=int, default=64, show_default=True)
@click.option("--n", "n", type=int, default=64, show_default=True)
@run_options
def gemm_cmd(algo: str, m: int, k: int, n: int, grid: str, **opts: Any) -> None:
    """Distributed GEMM C = A·B (gemm_t: C = A·Bᵀ)."""
    from plmr.lowering.kernels import gemm

    shape = parse_grid(grid)
    kernel = gemm(algo, m, k, n, shape, opts["device"])

    def reference(inputs: list[Any]) -> Any:
        a, b = inputs
        return a.astype("float64") @ (b.T if algo == "gemm_t" else b).astype("float64")

    extra = {"kernel": "gemm", "algorithm": algo, "m": m, "k": k, "n": n}
    execute(kernel, reference=reference, extra=extra, echo=click.echo, **opts)


@bench.command("gemv")
@click.option(
    "--algo",
    type=click.Choice(["ktree", "pipeline", "ring"]),
    default="ktree",
    show_default=True,
)
@click.option(
    "--m", "m", type=int, default=64, show_default=True, help="Vector length (rows of W)."
)
@click.option(
    "--n",
    "n",
    type=int,
    default=64,
    show_default=True,
    help="Output length (columns of W).",
)
@click.option(
    "--groups",
    type=int,
    default=None,
    help="ktree: groups of the first phase (default ≈ √P).",
)
@click.option(
    "--k", "k", type=int, default=2, show_default=True, help="ktree: number of phases K."
)
@run_options
def gemv_cmd(
    algo: str, m: int, n: int, groups: int | None, k: int, grid: str, **opts: Any
) -> None:
    """Distributed GEMV y = x·W with an allreduce along y."""
    from plmr.lowering.kernels import gemv

    shape = parse_grid(grid)
    kernel = gemv(algo, m, n, shape, opts["device"], k=k, groups=groups)

    def reference(inputs: list[Any]) -> Any:
        x, w = inputs
        return x.astype("float64") @ w.astype("float64")

    extra = {"kernel": "gemv", "algorithm": algo, "m": m, "n": n, "k": k, "groups": groups}
    execute(kernel, reference=reference, extra=extra, echo=click.echo, **opts)


@bench.command("kv")
@click.option(
    "--model",
    default="llama3-8b",
    show_default=True,
    help="Model preset: llama3-8b, llama2-13b, qwen2-72b, llama3.1-70b, llama3.1-405b.",
)
@run_options
def kv_cmd(model: str, grid: str, **opts: Any) -> None:
    """
    KV-cache capacity of WaferLLM's shift scheme vs. tail concatenation, the placement
    of its pipeline stages on the wafers, and one shift append (of a layer's K row) run
    on the grid.
    """
    import numpy as np

    from plmr.lowering.kv_cache import kv_append, kv_capacity
    from plmr.models.llama_config import get_config
    from plmr.models.wafers import place_stages
    from plmr.runtime.mesh_machine import run_mesh
    from plmr.target.device import get_device

    cfg = get_config(model.strip().lower()).model_config()
    shape = parse_grid(grid)
    dev = get_device(opts["device"])
    shift = kv_capacity(cfg, shape, dev, "shift")
    concat = kv_capacity(cfg, shape, dev, "concat")
    placement = place_stages(
        shift.stage_layers,
        shape,
        dev,
        shift.stage_bytes_per_pe(shift.max_tokens),
        what=f"{cfg.name} with a {shift.max_tokens}-token cache",
    )
    kernel = kv_append(shape, shift.slots_per_pe, cfg.kv_dim, opts["device"], "shift")
    timing_inputs = [np.broadcast_to(np.float32(0), s) for s in kernel.inputs]
    _, timed = run_mesh(kernel.module, timing_inputs, device=opts["device"], mode="timing")

    def reference(inputs: list[Any]) -> Any:
        cache, new = inputs
        return np.concatenate([cache[1:], new])

    extra: dict[str, Any] = {
        "kernel": "kv",
        "model": cfg.name,
        "max_tokens_shift": shift.max_tokens,
        "max_tokens_concat": concat.max_tokens,
        "ratio": shift.max_tokens / concat.max_tokens,
        "stages": shift.stages,
        "layers_per_stage": shift.layers_per_stage,
        "weight_bytes_per_pe": shift.weight_bytes_per_pe,
        "workspace_bytes_per_pe": shift.workspace_bytes_per_pe,
        "free_bytes_per_pe": shift.free_bytes_per_pe,
        "bytes_per_token_per_pe": shift.bytes_per_token_per_pe,
        "slots_per_pe": shift.slots_per_pe,
        "append_cycles": timed.cycles,
        "wafers": placement.wafers,
        "placement": placement.to_json(),
    }
    if not opts["as_json"]:
        p, q = shape
        click.echo(f"kv cache: {cfg.name} on {p}x{q} PEs ({opts['device']})")
        click.echo(
            f"  stages      {shift.stages} pipeline stage(s), {shift.layers_per_stage} "
            "layers on the fullest"
        )
        click.echo(
            f"  per PE      {shift.weight_bytes_per_pe:,} B weights, "
            f"{shift.workspace_bytes_per_pe:,} B workspace, {shift.free_bytes_per_pe:,} B "
            f"free, {shift.bytes_per_token_per_pe} B per token"
        )
        click.echo(f"  concat      {concat.max_tokens:,} tokens (the last row fills)")
        click.echo(f"  shift       {shift.max_tokens:,} tokens (all {p} rows fill)")
        click.echo(f"  ratio       {extra['ratio']:.1f}x")
        click.echo(f"  append      {timed.cycles:,.0f} cycles per shift append")
        for line in [*placement.summary(), *placement.ascii_map()]:
            click.echo(line)
    execute(kernel, reference=reference, extra=extra, echo=click.echo, **opts)


def _llm_command(kind: str) -> click.Command:
    what = (
        "one decode step (a token over the KV cache)"
        if kind == "decode"
        else "the prefill of a prompt"
    )

    @click.option(
        "--model",
        default=None,
        help="Model preset: tiny (the default), llama3-8b, llama2-13b or qwen2-72b.",
    )
    @click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="A Hugging Face config.json of the model (instead of --model), e.g. "
        "examples/configs/qwen2-72b.json.",
    )
    @click.option("--device", default="wse2", show_default=True, help="wse2 or wse3.")
    @click.option("--grid", default="4x4", show_default=True, help="PEs as ROWSxCOLS.")
    @click.option(
        "--tokens",
        type=COUNT,
        default=None,
        help=(
            "decode: the KV cache's length (context); prefill: the prompt's length "
            "(default: tiny 32 / 8, llama3-8b 4096)."
        ),
    )
    @click.option(
        "--tile-sizes",
        default=None,
        help="Blocks P,R of the compile (default: 16,16 on small grids, else a PE's "
        "share of the width or half of it).",
    )
    @click.option(
        "--exact",
        is_flag=True,
        help="Simulate every loop iteration (no steady-state extrapolation).",
    )
    @click.option(
        "--layers-extrapolated",
        "layers_extrapolated",
        is_flag=True,
        help="Simulate the model cut to one and to two layers only and count T(1) + "
        "(layers - 1) x (T(2) - T(1)) (by default every layer is simulated, the steady "
        "ones extrapolated).",
    )
    @click.option(
        "--form",
        type=click.Choice(["heads", "per-head"]),
        default="heads",
        show_default=True,
        help="How the program is written: heads as a tensor dimension, or one matmul "
        "per head.",
    )
    @click.option(
        "--step-tokens",
        "step_tokens",
        type=COUNT,
        default=1,
        show_default=True,
        help="decode: new tokens per step (k > 1: the verification step of speculative "
        "decoding, k tokens against the cache, the logits of each).",
    )
    @click.option(
        "--no-reference",
        "no_reference",
        is_flag=True,
        help="Leave out the hand-composed reference layer.",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
    def command(
        model: str | None,
        config_path: Path | None,
        device: str,
        grid: str,
        tokens: int | None,
        tile_sizes: str | None,
        exact: bool,
        layers_extrapolated: bool,
        form: str,
        step_tokens: int,
        no_reference: bool,
        as_json: bool,
    ) -> None:
        from plmr.models.bench import bench_llm, default_options
        from plmr.models.hf_config import load_hf_config
        from plmr.models.llama import LlamaConfig

        if model is not None and config_path is not None:
            raise PlmrError("give either --model or --config, not both")
        chosen: str | LlamaConfig = model or "tiny"
        if config_path is not None:
            chosen = load_hf_config(config_path)
        shape = parse_grid(grid)
        options = None
        if tile_sizes is not None:
            try:
                p, _, r = tile_sizes.partition(",")
                sizes = (int(p), int(r or p))
            except ValueError as e:
                raise PlmrError(f"bad --tile-sizes '{tile_sizes}': expected P,R") from e
            base = default_options(chosen, shape, device)
            options = dataclasses.replace(base, tile_sizes=sizes, fit_tiles=True)
        result = bench_llm(
            kind,
            chosen,
            shape,
            device,
            tokens,
            options,
            reference=not no_reference,
            exact=exact,
            form=form,
            layers_extrapolated=layers_extrapolated,
            step_tokens=step_tokens,
        )
        if as_json:
            click.echo(json.dumps(result.to_json()))
            return
        for line in result.summary():
            click.echo(line)
        if result.placement is not None:
            for line in result.placement.ascii_map():
                click.echo(line)

    command.__doc__ = (
        f"Time {what} of a LLaMA-style model on the modelled wafer: the model cut to one "
        "and to two layers (with the LM head) is compiled by plmr compile and every layer "
        "of the model is simulated in timing mode (the second layer's code repeated, "
        "steady layers extrapolated); reports cycles per layer and per step, tokens/s, SRAM, routes, "
        "pipeline stages, the layer's nests and allreduces with their cycles, and the "
        "hand-composed reference layer and compute floor."
    )
    return click.command(kind)(command)


bench.add_command(_llm_command("decode"))
bench.add_command(_llm_command("prefill"))
