"""
`plmr demo`: the bundled end-to-end job.

1. A LLaMA-style model (the `tiny` preset, seeded random weights) is compiled by
   `plmr compile` — prefill and decode step — for a grid of the modelled wafer, generates
   tokens there (functional mode) with the KV cache kept on the wafer by WaferLLM's shift
   program, and is checked token for token against a plain numpy implementation; the
   runtime's report gives tokens/s on the simulated device, the time split, SRAM and
   route peaks, and a Chrome trace and heatmap of a decode step.
2. Every ONNX model under `examples/onnx/` is imported into the `graph` dialect, run with
   plmr's reference semantics and compared with ONNX's own `ReferenceEvaluator`; so is a
   real Hugging Face export, `examples/hf/llama.onnx` (`transformers`' LlamaForCausalLM
   written by `torch.onnx.export(..., dynamo=True)`), compared with the logits torch
   computed for its stored inputs (`examples/hf/llama.npz`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np

from plmr.values import Array

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "onnx"
HF_EXPORT = EXAMPLES.parent / "hf" / "llama.onnx"
"""The Hugging Face export the demo runs; its inputs and torch's outputs are in `.npz`."""

RTOL = 1e-4


def example_models() -> list[Path]:
    return sorted(EXAMPLES.glob("*.onnx"))


def max_relative_error(got: Array, want: Array) -> float:
    """max |got - want| / max(|want|, 1): a relative error that tolerates zeros."""
    if got.shape != want.shape:
        return float("inf")
    if got.size == 0:
        return 0.0
    g, w = got.astype(np.float64), want.astype(np.float64)
    return float(np.max(np.abs(g - w) / np.maximum(np.abs(w), 1.0)))


def onnx_outputs(path: Path, feeds: dict[str, Array]) -> list[Array]:
    import onnx
    from onnx.reference import ReferenceEvaluator

    load = cast(Callable[[str], Any], getattr(onnx, "load"))
    evaluator = ReferenceEvaluator(load(str(path)))
    run = cast(Callable[[None, dict[str, Array]], list[Any]], getattr(evaluator, "run"))
    return [np.asarray(o) for o in run(None, feeds)]


def torch_outputs(path: Path) -> dict[str, Array]:
    """The stored inputs and torch's outputs of a Hugging Face export, by ONNX name."""
    with np.load(path.with_suffix(".npz"), allow_pickle=False) as data:
        return {k: np.asarray(data[k]) for k in data.files}


def run_llm_demo(
    seed: int,
    grid: tuple[int, int],
    steps: int,
    out_dir: Path,
    echo: Callable[[str], None],
) -> bool:
    """The tiny LLaMA-style model end to end; True when its tokens equal numpy's."""
    from plmr.models.generate import MeshLlama
    from plmr.models.llama import NumpyLlama, get_config, random_weights
    from plmr.passes.pipeline import CompileOptions
    from plmr.target.device import get_device

    config = get_config("tiny")
    device = get_device("wse2")
    weights = random_weights(config, seed)
    prompt = [int(t) for t in np.random.default_rng(seed).integers(0, config.vocab, 8)]
    echo(
        f"plmr demo: a LLaMA-style model ({config.name}: dim {config.dim}, "
        f"{config.n_layers} layers, {config.n_heads} heads / {config.n_kv_heads} KV heads, "
        f"SwiGLU {config.ffn_dim}, vocab {config.vocab}) on a {grid[0]}x{grid[1]} grid "
        f"of {device.name}"
    )
    start = time.perf_counter()
    # TASO with a small budget: its greedy first steps find the fused projections
    # (one GEMV on concatenated weights, then split); a deeper search costs minutes.
    options = CompileOptions(grid=grid, budget=3, tile_sizes=(16, 16))
    model = MeshLlama(config, weights, len(prompt), options, kv="shift")
    compiled = time.perf_counter() - start
    echo(
        f"  plmr compile (TASO substitutions, transpose elimination, Neptune fusion, "
        f"blocking, 2D partitioning, routing): prefill of {len(prompt)} tokens and the "
        f"decode step in {compiled:.1f} s"
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    trace = out_dir / "decode_trace.json"
    heatmap: Path | None = out_dir / "decode_heatmap.png"
    try:
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            heatmap = None
    except ImportError:
        heatmap = None
    start = time.perf_counter()
    result = model.generate(prompt, steps, trace=trace, heatmap=heatmap)
    ran = time.perf_counter() - start
    want = NumpyLlama(config, weights).generate(prompt, steps)
    ok = result.tokens == want
    echo(f"  prompt {prompt}")
    echo(f"  generated {result.tokens} in {ran:.1f} s of simulation")
    echo(f"  numpy     {want}: {'equal' if ok else 'MISMATCH'}")
    prefill = result.steps[0]
    decode = result.steps[1:]
    per_token = sum(s.cycles + s.kv_cycles for s in decode) / len(decode)
    clock = device.clock_hz
    echo(
        f"  prefill: {prefill.cycles:,.0f} cycles = {prefill.seconds * 1e6:.1f} us "
        f"({len(prompt) / prefill.seconds:,.0f} tokens/s)"
    )
    echo(
        f"  decode: {per_token:,.0f} cycles per token (KV append "
        f"{decode[0].kv_cycles:,.0f}) = {per_token / clock * 1e6:.1f} us per output "
        f"token -> {clock / per_token:,.0f} tokens/s on the simulated wafer"
    )
    d = decode[0]
    total = max(d.cycles, 1.0)
    echo(
        f"  decode step on its critical PE: compute {d.compute_cycles / total:.0%}, "
        f"exposed communication {d.comm_cycles / total:.0%}, idle "
        f"{d.idle_cycles / total:.0%}"
    )
    sram = max(s.max_sram_bytes for s in result.steps)
    routes = max(s.max_routes for s in result.steps)
    echo(
        f"  peaks: SRAM {sram:,} B of {device.sram_bytes:,} B per PE; "
        f"{routes} of {device.usable_colors} colors per router"
    )
    echo(f"  Chrome trace of a decode step: {trace}")
    if heatmap is not None:
        echo(f"  heatmap of its per-PE finishing times: {heatmap}")
    else:
        echo("  heatmap: skipped (needs matplotlib: pip install -e '.[plot]')")
    return ok


def _row(
    name: str, n_ops: int, n_out: int, err: float, elapsed: float, passed: bool, ref: str
) -> str:
    return (
        f"{name:<20} {n_ops:>9} {n_out:>7} {err:>12.2e} {elapsed * 1e3:>6.0f}ms  "
        f"{'ok' if passed else 'MISMATCH'} ({ref})"
    )


def run_demo(seed: int, echo: Callable[[str], None]) -> bool:
    """Runs every bundled ONNX model and the Hugging Face export; True when all match."""
    from plmr.frontend.onnx import import_onnx_file
    from plmr.runtime.running import random_inputs, run_function, select_function
    from plmr.target.interface import arg_names, result_names

    models = example_models()
    if not models:
        echo(f"no ONNX models found in {EXAMPLES}")
        return False
    echo(
        "plmr demo: ONNX -> graph dialect -> reference semantics, vs onnx "
        f"(seed {seed}) and vs torch"
    )
    header = f"{'model':<20} {'graph ops':>9} {'outputs':>7} {'max rel err':>12} {'time':>8}  check"
    echo(header)
    echo("-" * len(header))
    ok = True
    for path in models:
        start = time.perf_counter()
        module = import_onnx_file(str(path))
        fn = select_function(module, None)
        args = random_inputs(fn, seed)
        got = run_function(module, fn, args)
        elapsed = time.perf_counter() - start
        want = onnx_outputs(path, dict(zip(arg_names(fn), args, strict=True)))
        err = max(
            (max_relative_error(g, w) for g, w in zip(got, want, strict=True)), default=0.0
        )
        passed = len(got) == len(want) and err <= RTOL
        ok = ok and passed
        n_ops = sum(1 for op in fn.walk() if op.name.startswith("graph."))
        echo(_row(path.stem, n_ops, len(got), err, elapsed, passed, "onnx"))
    if HF_EXPORT.is_file():
        start = time.perf_counter()
        module = import_onnx_file(str(HF_EXPORT))
        fn = select_function(module, None)
        stored = torch_outputs(HF_EXPORT)
        got = run_function(module, fn, [stored[name] for name in arg_names(fn)])
        elapsed = time.perf_counter() - start
        want = [stored[name] for name in result_names(fn)]
        err = max(
            (max_relative_error(g, w) for g, w in zip(got, want, strict=True)), default=0.0
        )
        hf_ok = len(got) == len(want) and err <= RTOL
        n_ops = sum(1 for op in fn.walk() if op.name.startswith("graph."))
        name = f"hf/{HF_EXPORT.stem}"
        echo(_row(name, n_ops, len(got), err, elapsed, hf_ok, "torch, stored"))
    else:
        echo(f"no Hugging Face export at {HF_EXPORT}")
        hf_ok = False
    echo(f"{'all outputs equal ONNX within' if ok else 'MISMATCH above rtol'} {RTOL:g}")
    echo(
        f"the Hugging Face export ({HF_EXPORT.parent.name}/{HF_EXPORT.name}, transformers' "
        f"LlamaForCausalLM) {'equals torch within' if hf_ok else 'MISMATCH with torch above'} "
        f"{RTOL:g}"
    )
    return ok and hf_ok
