"""
Repeated layers compiled once: `plmr compile` of a LLaMA export of 1, 2, 4 and 8 layers,
with the layers outlined (the default) and with every layer compiled
(`--no-outline-layers`).

    .venv/bin/python benchmarks/layer_dedup.py [--layers 1,2,4,8] [--grid 2x2]
        [--hidden 32 --heads 4 --kv-heads 2 --ffn 64 --vocab 64 --seq 8]
        [--modes once,every] [--bench] [-- COMPILE FLAGS]

`plmr.models.llama_onnx` writes each export (random weights in external data), `plmr
import` imports it, and `plmr compile` runs in a fresh process per row, so no memo of one
compile serves another. The table: compile seconds (wall, and CPU: what the compile
costs on a shared machine), the mesh IR's bytes, its `mesh.program`s and `mesh.run`s,
and the cycles of one step on the modelled wafer (`plmr run --mode timing`).

`--modes once` leaves out the compile of every layer (at 32 layers it is the slow one).
`--bench` adds the same step as `plmr bench prefill --config` extrapolates it for the
same configuration (`--layers-extrapolated`, run once: its first layer, with the
embedding and the LM head, plus N-1 times its steady-state layer), and the export's step
over the bench's.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
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


def bench_layers(config: LlamaOnnxConfig, grid: str, tmp: Path) -> tuple[float, float]:
    """`plmr bench prefill --config` of `config`: its first layer's and one layer's cycles."""
    path = tmp / "config.json"
    path.write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_size": config.hidden,
                "num_attention_heads": config.heads,
                "num_key_value_heads": config.kv_heads,
                "intermediate_size": config.ffn,
                "num_hidden_layers": max(config.layers, 2),
                "vocab_size": config.vocab,
                "rms_norm_eps": config.eps,
                "max_position_embeddings": max(8192, config.seq),
            }
        )
    )
    out = json.loads(
        _plmr(
            "bench",
            "prefill",
            "--config",
            str(path),
            "--grid",
            grid,
            "--tokens",
            str(config.seq),
            "--layers-extrapolated",
            "--no-reference",
            "--json",
        )
    )
    return float(out["first_cycles"]), float(out["layer_cycles"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default="1,2,4,8")
    parser.add_argument("--grid", default="2x2")
    add_shape_arguments(parser, WIDTH)
    parser.add_argument("--modes", default="once,every")
    parser.add_argument("--bench", action="store_true")
    parser.add_argument("flags", nargs="*", help="more `plmr compile` flags (after --)")
    args = parser.parse_args()
    print(
        f"LLaMA export: hidden {args.hidden}, {args.heads}/{args.kv_heads} heads, FFN "
        f"{args.ffn}, vocabulary {args.vocab}, {args.seq} tokens; plmr compile --grid "
        f"{args.grid} {' '.join(args.flags)}"
    )
    depths = [int(n) for n in args.layers.split(",")]
    modes = args.modes.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        first = per_layer = 0.0
        if args.bench:
            config = export_config(args, WIDTH, max(depths))
            first, per_layer = bench_layers(config, args.grid, Path(tmp))
            print(
                f"plmr bench prefill --config (same sizes, --layers-extrapolated): first "
                f"layer {first:,.0f} cycles, each further layer {per_layer:,.0f}"
            )
        print(
            f"{'layers':>6}  {'mode':<9} {'compile s wall / CPU':>20}  {'IR bytes':>9}  "
            f"{'programs':>8}  {'runs':>4}  {'cycles':>11}"
            + (f"  {'bench':>11}  {'/ bench':>7}" if args.bench else "")
        )
        for layers in depths:
            config = export_config(args, WIDTH, layers)
            onnx_path = Path(tmp) / f"llama{layers}.onnx"
            write_llama_onnx(onnx_path, config)
            mlir = Path(tmp) / f"llama{layers}.mlir"
            _plmr("import", str(onnx_path), "-o", str(mlir))
            for mode, extra in (("once", []), ("every", ["--no-outline-layers"])):
                if mode not in modes:
                    continue
                out = Path(tmp) / f"llama{layers}.{mode}.mesh.mlir"
                start = time.perf_counter()
                cpu = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
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
                cpu = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - cpu
                text = out.read_text()
                report = _plmr("run", str(out), "--mode", "timing")
                found = re.search(r"time\s+([\d,]+) cycles", report)
                cycles = int(found.group(1).replace(",", "")) if found else 0
                row = (
                    f"{layers:>6}  {mode:<9} {f'{seconds:.1f} / {cpu:.1f}':>20}  "
                    f"{len(text.encode()):>9,}  "
                    f"{text.count('mesh.program @'):>8}  {text.count('mesh.run @'):>4}  "
                    f"{f'{cycles:,}' if cycles else '-':>11}"
                )
                if args.bench:
                    model = first + (layers - 1) * per_layer
                    ratio = f"{cycles / model:.4f}" if cycles else "-"
                    row += f"  {model:>11,.0f}  {ratio:>7}"
                print(row, flush=True)


if __name__ == "__main__":
    main()
