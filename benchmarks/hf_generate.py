"""
Greedy generation with the Hugging Face decoder exports of `examples/hf/` (LLaMA, Qwen2,
Mistral: a prefill and a decode step each, the KV caches kept on the wafer by
`graph-kv-state`), compiled for a grid and run by the mesh runtime in functional mode:
the tokens against torch's stored greedy tokens, the cycles and the bytes that crossed
the host link per step, and the state that stayed on the wafer.

    .venv/bin/python benchmarks/hf_generate.py                     # llama, 4x4, 64 tokens
    .venv/bin/python benchmarks/hf_generate.py --grid 2x2 --tokens 16 llama qwen2 mistral

Exits non-zero if a token differs from torch's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from plmr.frontend.onnx import import_onnx_file
from plmr.models.export_decode import ExportDecoder
from plmr.passes.pipeline import CompileOptions
from plmr.tools.bench import parse_grid

HF = Path(__file__).resolve().parents[1] / "examples" / "hf"


def _load(name: str) -> ModuleOp:
    return import_onnx_file(str(HF / name))


def run(family: str, grid: str, tokens: int) -> tuple[str, bool]:
    """One table row: generation of `tokens` tokens for `family` on `grid`."""
    with np.load(HF / f"{family}_greedy.npz") as data:
        prompt = [int(t) for t in data["input_ids"].reshape(-1)]
        want = [int(t) for t in data["tokens"]][:tokens]
    if len(want) < tokens:
        raise SystemExit(f"{family}_greedy.npz holds {len(want)} tokens, not {tokens}")
    options = CompileOptions(grid=parse_grid(grid), device="wse2")
    start, cpu = time.perf_counter(), time.process_time()
    model = ExportDecoder(
        _load(f"{family}_prefill.onnx"), _load(f"{family}_decode.onnx"), None, options
    )
    compiled, compiled_cpu = time.perf_counter() - start, time.process_time() - cpu
    result = model.generate(prompt, tokens - 1)
    ran, ran_cpu = time.perf_counter() - start - compiled, time.process_time() - cpu
    equal = result.tokens == want
    decode = [s.report for s in result.steps if s.kind == "decode" and s.report]
    host_in = {r.host_in_bytes + r.host_lookup_bytes for r in decode}
    host_out = {r.host_out_bytes for r in decode}
    resident = {r.resident_bytes for r in decode}
    cycles = float(np.mean([r.cycles for r in decode]))

    def one(values: set[float] | set[int]) -> str:
        return " / ".join(f"{v:,.0f}" for v in sorted(values))

    row = (
        f"| {family} | {grid} | {len(prompt)} | {model.capacity} | {len(result.tokens)} "
        f"| {'yes' if equal else 'NO'} | {cycles:,.0f} | {one(host_in)} | "
        f"{one(host_out)} | {one(resident)} | {compiled:.0f} ({compiled_cpu:.0f}) | "
        f"{ran:.0f} ({ran_cpu:.0f}) |"
    )
    return row, equal


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("families", nargs="*", default=["llama"])
    parser.add_argument("--grid", default="4x4")
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    print(
        "| export | grid | prompt | cache rows | tokens | equal torch's | cycles per "
        "decode step | host in per step (B) | host out per step (B) | state on wafer "
        "(B) | compile wall (cpu) s | generate wall (cpu) s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    ok = True
    for family in args.families:
        row, equal = run(family, args.grid, args.tokens)
        print(row, flush=True)
        ok &= equal
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
