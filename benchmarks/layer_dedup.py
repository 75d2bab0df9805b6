"""
Repeated layers compiled once: `plmr compile` of a LLaMA export of 1, 2, 4 and 8 layers,
with the layers outlined (the default) and with every layer compiled
(`--no-outline-layers`).

    .venv/bin/python benchmarks/layer_dedup.py [--layers 1,2,4,8] [--grid 2x2]
        [--hidden 32 --heads 4 --kv-heads 2 --ffn 64 --vocab 64 --seq 8] [-- COMPILE FLAGS]

`plmr.models.llama_onnx` writes each export (random weights in external data), `plmr
import` imports it, and `plmr compile` runs in a fresh process per row, so no memo of one
compile serves another. The table: compile seconds (wall), the mesh IR's bytes, its
`mesh.program`s and `mesh.run`s, and the cycles of one step on the modelled wafer
(`plmr run --mode timing`).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from export_shape import add_shape_arguments, export_config

from plmr.models.llama_onnx import LlamaOnnxConfig, write_llama_onnx

BIN = Path(sys.executable).parent
WIDTH = LlamaOnnxConfig(hidden=32, heads=4, kv_heads=2, ffn=64, vocab=64)


def _plmr(*args: str) -> str:
    done = subprocess.run(
        [str(BIN / "plmr"), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"plmr {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default="1,2,4,8")
    parser.add_argument("--grid", default="2x2")
    add_shape_arguments(parser, WIDTH)
    parser.add_argument("flags", nargs="*", help="more `plmr compile` flags (after --)")
    args = parser.parse_args()
    print(
        f"LLaMA export: hidden {args.hidden}, {args.heads}/{args.kv_heads} heads, FFN "
        f"{args.ffn}, vocabulary {args.vocab}, {args.seq} tokens; plmr compile --grid "
        f"{args.grid} {' '.join(args.flags)}"
    )
    print(
        f"{'layers':>6}  {'mode':<9} {'compile s':>9}  {'IR bytes':>9}  {'programs':>8}  "
        f"{'runs':>4}  {'cycles':>9}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for layers in (int(n) for n in args.layers.split(",")):
            config = export_config(args, WIDTH, layers)
            onnx_path = Path(tmp) / f"llama{layers}.onnx"
            write_llama_onnx(onnx_path, config)
            mlir = Path(tmp) / f"llama{layers}.mlir"
            _plmr("import", str(onnx_path), "-o", str(mlir))
            for mode, extra in (("once", []), ("every", ["--no-outline-layers"])):
                out = Path(tmp) / f"llama{layers}.{mode}.mesh.mlir"
                start = time.perf_counter()
                _plmr(
                    "compile",
                    str(mlir),
                    "--grid",
                    args.grid,
                    "-o",
                    str(out),
                    *extra,
                    *args.flags,
                )
                seconds = time.perf_counter() - start
                text = out.read_text()
                report = _plmr("run", str(out), "--mode", "timing")
                cycles = re.search(r"time\s+([\d,]+) cycles", report)
                print(
                    f"{layers:>6}  {mode:<9} {seconds:>9.1f}  {len(text.encode()):>9,}  "
                    f"{text.count('mesh.program @'):>8}  {text.count('mesh.run @'):>4}  "
                    f"{cycles.group(1) if cycles else '-':>9}"
                )


if __name__ == "__main__":
    main()
