"""
`plmr generate`: greedy generation with a user's prefill and decode-step exports, the
KV caches kept on the modelled wafer (`graph-kv-state`); registered by `plmr.tools.cli`.

Bad input is one `error:` message and a non-zero exit status, never a traceback.
"""

from __future__ import annotations

from pathlib import Path

import click
from xdsl.dialects.builtin import ModuleOp

from plmr.errors import PlmrError
from plmr.tools.options import COUNT
from plmr.tools.state_option import state_options, state_text

PROMPT_ARRAYS = ("prompt", "input_ids")
"""The arrays of an --expect file that hold the prompt, in order of preference."""


def _load(path: Path) -> ModuleOp:
    from plmr.dialects.context import load_module
    from plmr.frontend.onnx import import_onnx_file

    if not path.exists():
        raise PlmrError(f"{path}: no such file")
    if path.suffix == ".onnx":
        return import_onnx_file(str(path))
    return load_module(path)


def _prompt(text: str) -> list[int]:
    try:
        return [int(t) for t in text.replace(" ", "").split(",") if t]
    except ValueError as e:
        raise PlmrError(
            f"bad --prompt '{text}': expected token ids separated by commas, e.g. 3,14,15,9"
        ) from e


@click.command("generate")
@click.argument("prefill", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("decode", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--prompt",
    default=None,
    help="Token ids, comma-separated (default: the `prompt` or `input_ids` of --expect).",
)
@click.option(
    "--steps", type=COUNT, default=16, show_default=True, help="Decode steps to run."
)
@click.option(
    "--grid",
    default="2x2",
    show_default=True,
    help="PxQ grid to compile for, or 'graph' for the reference semantics.",
)
@click.option("--device", default="wse2", show_default=True, help="Device to model.")
@click.option(
    "--no-substitute",
    is_flag=True,
    help="Compile both programs without the TASO graph substitutions (faster).",
)
@state_options
@click.option(
    "--expect",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="An .npz with the reference `tokens` (and the prompt, `prompt` or "
    "`input_ids`): the tokens must equal them.",
)
def generate_cmd(
    prefill: Path,
    decode: Path,
    prompt: str | None,
    steps: int,
    grid: str,
    device: str,
    no_substitute: bool,
    state: tuple[str, ...],
    position: str,
    mask: str,
    expect: Path | None,
) -> None:
    """
    Run PREFILL on the prompt, then STEPS decode steps of DECODE (ONNX exports or
    graph-level .mlir), each fed the last token's argmax, with the KV caches kept on
    the wafer; print the tokens and the bytes that crossed the host link per step."""
    import numpy as np

    from plmr.models.export_decode import ExportDecoder
    from plmr.passes.kv_state import parse_state_pairs
    from plmr.passes.pipeline import CompileOptions, default_gemv
    from plmr.tools.bench import parse_grid

    reference: dict[str, list[int]] = {}
    if expect is not None:
        try:
            with np.load(expect) as data:
                reference = {k: [int(v) for v in data[k].reshape(-1)] for k in data.files}
        except (OSError, ValueError) as e:
            raise PlmrError(f"{expect}: not a readable .npz ({e})") from e
        if "tokens" not in reference:
            raise PlmrError(
                f"{expect}: has no array 'tokens' (it has {', '.join(reference)})"
            )
    stored = next((k for k in PROMPT_ARRAYS if k in reference), None)
    if prompt is not None:
        ids = _prompt(prompt)
        if stored is not None and ids != reference[stored]:
            raise PlmrError(
                f"--prompt differs from the prompt '{stored}' of {expect} "
                f"({','.join(str(t) for t in reference[stored])}): its tokens continue "
                "that prompt; leave --prompt out"
            )
    elif stored is not None:
        ids = reference[stored]
    elif expect is not None:
        raise PlmrError(
            f"{expect}: has no prompt (an array 'prompt' or 'input_ids'); give --prompt"
        )
    else:
        raise PlmrError("give --prompt (or --expect with a `prompt` array)")
    if expect is not None and len(reference["tokens"]) < steps + 1:
        raise PlmrError(
            f"{expect} holds {len(reference['tokens'])} tokens, {steps} steps generate "
            f"{steps + 1}; run at most --steps {len(reference['tokens']) - 1}"
        )
    text = state_text(state)
    pairs = parse_state_pairs(text) if text else None
    options = (
        None
        if grid == "graph"
        else CompileOptions(
            grid=parse_grid(grid),
            device=device,
            substitute=not no_substitute,
            gemv=default_gemv(parse_grid(grid)),
        )
    )
    model = ExportDecoder(_load(prefill), _load(decode), pairs, options, position, mask)
    where = "the graph level (host-held state)" if options is None else f"{device} {grid}"
    click.echo(
        f"{prefill.name} + {decode.name} on {where}: prompt of {len(ids)} tokens, KV "
        f"cache of {model.capacity} rows as state"
    )
    result = model.generate(ids, steps)
    click.echo(f"tokens      {' '.join(str(t) for t in result.tokens)}")
    if options is not None:
        click.echo("step        cycles      host in   host out   state on wafer")
        for i, s in enumerate(result.steps):
            r = s.report
            assert r is not None
            label = "prefill" if s.kind == "prefill" else f"decode {i}"
            click.echo(
                # In: the host inputs and the embedding rows the host looks up.
                f"{label:<10} {r.cycles:>8,.0f} "
                f"{r.host_in_bytes + r.host_lookup_bytes:>10,.0f} B "
                f"{r.host_out_bytes:>8,.0f} B {r.resident_bytes:>12,} B"
                + (
                    f"  ({r.state_moved_bytes:,.0f} B re-placed)"
                    if r.state_moved_bytes
                    else ""
                )
            )
    if expect is not None:
        want = reference["tokens"][: len(result.tokens)]
        bad = [
            i for i, (a, b) in enumerate(zip(result.tokens, want, strict=True)) if a != b
        ]
        if bad:
            raise PlmrError(
                f"token {bad[0]} is {result.tokens[bad[0]]}, {expect} has {want[bad[0]]} "
                f"({len(bad)} of {len(want)} differ)"
            )
        click.echo(f"reference   all {len(want)} tokens equal {expect}")
