"""
Memory traffic of attention, unfused vs fused by `neptune-fuse` (Neptune).

Builds plain attention (one head, sequence 4096, head dimension 128, f32) at the graph
level, lowers it to tile programs twice — `convert-graph-to-loop,convert-loop-to-tile`
(unfused) and `convert-graph-to-loop,neptune-fuse,convert-loop-to-tile` (fused) — and
counts the bytes moved between global memory and a core's SRAM from the trip counts of
the tile loops (`plmr.runtime.traffic.static_traffic`; executing at this size in the
interpreter would take too long). For each program the tile sizes are the ones, among a
few candidates, that move the fewest bytes with a working set that fits the SRAM (48 KiB,
estimated by liveness). The FlashAttention bounds for comparison: standard attention
Θ(Nd + N²), FlashAttention Θ(N²d²/M) elements (M = SRAM in elements). A decode row (one
query, the same KV length) shows split-K. Small versions of both programs are run and
checked against the graph-level reference first.

Run it from the repository root:

    .venv/bin/python benchmarks/neptune.py
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "attention"))

from build_examples import Variant, attention_mlir  # noqa: E402

from plmr.dialects.context import parse_module  # noqa: E402
from plmr.dialects.loop import NestOp  # noqa: E402
from plmr.lowering.graph_to_loop import ConvertGraphToLoopPass  # noqa: E402
from plmr.lowering.loop_to_tile import ConvertLoopToTilePass  # noqa: E402
from plmr.passes.neptune.fuse import NeptuneFusePass  # noqa: E402
from plmr.passes.neptune.repair import clear_cache as repair_cache_clear  # noqa: E402
from plmr.runtime.reference import evaluate_function, run_tile_function  # noqa: E402
from plmr.runtime.running import random_inputs, select_function  # noqa: E402
from plmr.runtime.traffic import Traffic, static_traffic  # noqa: E402

SEQ = 4096
DIM = 128
SRAM = 48 * 1024
ELT = 4
CANDIDATES = (8, 16, 32, 64)


def program(variant: Variant) -> ModuleOp:
    return parse_module(attention_mlir(variant), variant.name)


def nests(module: ModuleOp) -> int:
    fn = select_function(module, None)
    return sum(1 for op in fn.body.block.ops if isinstance(op, NestOp))


def lower(
    module: ModuleOp, fused: bool, sizes: tuple[int, int], chunks: int = 8
) -> tuple[ModuleOp, int, float]:
    """The tile program, its number of top-level nests at the loop level, fuse time."""
    m = module.clone()
    ConvertGraphToLoopPass().apply(Context(), m)
    seconds = 0.0
    if fused:
        repair_cache_clear()  # time the sympy derivations and proofs too
        start = time.perf_counter()
        NeptuneFusePass(chunks=chunks, remarks=False).apply(Context(), m)
        seconds = time.perf_counter() - start
    count = nests(m)
    ConvertLoopToTilePass(tile_sizes=sizes).apply(Context(), m)
    return m, count, seconds


def best(
    module: ModuleOp, fused: bool, chunks: int = 8
) -> tuple[tuple[int, int], Traffic, int, float]:
    """The tile sizes moving the fewest bytes within the SRAM, and their traffic."""
    found: tuple[tuple[int, int], Traffic, int, float] | None = None
    for p, r in itertools.product(CANDIDATES, CANDIDATES):
        tiled, count, seconds = lower(module, fused, (p, r), chunks)
        t = static_traffic(tiled, "main")
        if t.sram_peak > SRAM:
            continue
        if found is None or t.bytes_moved < found[1].bytes_moved:
            found = ((p, r), t, count, seconds)
    if found is None:
        raise SystemExit("no candidate tile sizes fit the SRAM")
    return found


def check(variant: Variant, fused: bool) -> float:
    """Relative error of the tile program against the graph reference (small size)."""
    module = program(variant)
    args = random_inputs(select_function(module, None), 0)
    (ref,) = evaluate_function(module, "main", args)
    tiled, _, _ = lower(module, fused, (16, 16), chunks=4)
    (out,), _ = run_tile_function(tiled, "main", args)
    return float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))


def row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def main(out: Callable[[str], None] = print) -> None:
    for fused in (False, True):
        err = check(Variant("check", 1, 1, 128, 128, 32), fused)
        out(
            f"check at seq 128, d 32 ({'fused' if fused else 'unfused'}): rel err {err:.1e}"
        )
    prefill = program(Variant("prefill", 1, 1, SEQ, SEQ, DIM))
    decode = program(Variant("decode", 1, 1, 1, SEQ, DIM))
    m = SRAM // ELT
    standard = (SEQ * DIM + SEQ * SEQ) * ELT
    flash = SEQ * SEQ * DIM * DIM // m * ELT
    out("")
    out(
        f"attention, 1 head, seq {SEQ}, head dim {DIM}, f32; SRAM {SRAM // 1024} KiB "
        f"(M = {m} elements); bytes from static trip counts"
    )
    out("")
    out(
        row(
            [
                "program",
                "loop nests",
                "tile sizes P,R",
                "loaded",
                "stored",
                "total",
                "SRAM peak",
                "neptune-fuse",
            ]
        )
    )
    out(row(["---"] * 8))
    results: dict[str, int] = {}
    fused_rows: list[int] = []
    for label, module, fused in (
        ("prefill, unfused", prefill, False),
        ("prefill, fused (rolling)", prefill, True),
        ("decode, unfused", decode, False),
        ("decode, fused (split-K, 8 chunks)", decode, True),
    ):
        sizes, t, count, seconds = best(module, fused)
        results[label] = t.bytes_moved
        if label.startswith("prefill, fused"):
            fused_rows.append(sizes[0])
        out(
            row(
                [
                    label,
                    str(count),
                    f"{sizes[0]},{sizes[1]}",
                    f"{t.bytes_loaded / 1e6:.1f} MB",
                    f"{t.bytes_stored / 1e6:.1f} MB",
                    f"{t.bytes_moved / 1e6:.1f} MB",
                    f"{t.sram_peak / 1024:.1f} KiB",
                    f"{seconds * 1e3:.0f} ms" if fused else "-",
                ]
            )
        )
    out("")
    ratio = results["prefill, unfused"] / results["prefill, fused (rolling)"]
    out(f"prefill: fused moves {ratio:.2f}x fewer bytes than unfused")
    rows = fused_rows[0]
    fa2 = (2 * SEQ * DIM + SEQ + 2 * SEQ * SEQ * DIM // rows) * ELT
    out(f"FlashAttention-2 count 2Nd + N + 2N²d/B_r at B_r = {rows}: {fa2 / 1e6:.1f} MB")
    out(f"standard attention, Θ(Nd + N²): {standard / 1e6:.1f} MB")
    out(f"FlashAttention, Θ(N²d²/M): {flash / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
