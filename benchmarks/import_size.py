"""
Weights by reference at full width: `plmr import` and `plmr compile` of a LLaMA3-8B-wide
layer exported as ONNX with external data.

    .venv/bin/python benchmarks/import_size.py [--dir DIR] [--seq 8] [--grid 480x480]
        [--hidden 4096 --heads 32 --kv-heads 8 --ffn 14336 --vocab 2048 --layers 1]

`plmr.models.llama_onnx` writes the graph with `onnx.helper` and its random weights to
`model.onnx.data` (0.94 GB at the default width: hidden 4096, 32/8 heads, FFN 14336,
vocabulary 2048). Then, each in a fresh process, as a user runs them:

- `plmr import model.onnx -o model.mlir` (the weights stay in `model.onnx.data`,
  referenced in place);
- `plmr compile model.mlir --grid G -o model.mesh.mlir` (the references are checked
  against the data file's size, never read; the compile simulates nothing);
- the same two for the layer without the token embedding (input: the embeddings), since
  the compiler lowers the embedding lookup as a product with a one-hot matrix, which does
  not fit a PE's SRAM at this vocabulary.

It prints one table: seconds (wall), peak resident memory of the process (its
`VmHWM`: Python, numpy, onnx and xDSL included; mapped weight pages would count too, but
none is read), and the size of what each step writes.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from export_shape import add_shape_arguments, export_config
from full_size import measured  # the sibling benchmark's fresh-process runner

from plmr.models.llama_onnx import LlamaOnnxConfig, write_llama_onnx

WIDTH = LlamaOnnxConfig(hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=2048)


def _figures(argv: list[str]) -> tuple[float, float, str]:
    """(wall seconds, peak MB, error or '') of `plmr argv...` in a fresh process."""
    step = measured(argv)
    return step.seconds, step.peak_mb, step.error


def mb(path: Path) -> str:
    if not path.exists():
        return "-"
    size = path.stat().st_size
    return f"{size / 1e6:.3f} MB" if size >= 1e5 else f"{size / 1e3:.1f} kB"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument(
        "--dir", type=Path, default=None, help="Where to write (default: a temp dir)."
    )
    p.add_argument("--grid", default="480x480")
    add_shape_arguments(p, WIDTH)
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--no-compile", action="store_true", help="Import only.")
    p.add_argument(
        "--graphs",
        choices=["both", "embedding", "layer"],
        default="both",
        help="The graph with the token embedding, the one from embeddings, or both.",
    )
    args = p.parse_args()
    config = export_config(args, WIDTH, args.layers)
    with tempfile.TemporaryDirectory() as tmp:
        base = args.dir or Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        rows: list[list[str]] = []
        # What starting the tool costs (Python, numpy, onnx, xDSL, the dialects).
        s, peak, err = _figures(["import", "--help"])
        rows.append(
            ["-", "plmr import --help (start-up)", f"{s:.2f}", f"{peak:.0f}", "-", err]
        )
        graphs = [
            ("with embedding", config),
            ("from embeddings", replace(config, embedding=False)),
        ]
        for what, c in graphs:
            if args.graphs != "both" and c.embedding != (args.graphs == "embedding"):
                continue
            d = base / ("embed" if c.embedding else "layer")
            d.mkdir(exist_ok=True)
            model = d / "model.onnx"
            start = time.perf_counter()
            data = write_llama_onnx(model, c)
            made = time.perf_counter() - start
            print(
                f"{what}: wrote {model.name} and {mb(data)} of weights in {made:.1f} s",
                file=sys.stderr,
            )
            ir, mesh = d / "model.mlir", d / "model.mesh.mlir"
            s, peak, err = _figures(["import", str(model), "-o", str(ir)])
            rows.append([what, "plmr import", f"{s:.2f}", f"{peak:.0f}", mb(ir), err])
            if args.no_compile or err:
                continue
            argv = ["compile", str(ir), "--grid", args.grid, "-o", str(mesh)]
            s, peak, err = _figures(argv)
            out = "-" if err else mb(mesh)
            rows.append(
                [
                    what,
                    f"plmr compile --grid {args.grid}",
                    f"{s:.2f}",
                    f"{peak:.0f}",
                    out,
                    err,
                ]
            )
        weights = config.weight_bytes() / 1e9
        print(
            f"LLaMA layer: hidden {config.hidden}, {config.heads}/{config.kv_heads} heads, "
            f"FFN {config.ffn}, vocabulary {config.vocab}, {config.layers} layer(s), "
            f"{config.seq} tokens; {weights:.2f} GB of float32 weights in external data"
        )
        print()
        print("| graph | step | seconds | peak RSS (MB) | output | refused |")
        print("|---|---|---|---|---|---|")
        for row in rows:
            print("| " + " | ".join([*row[:5], row[5] or "-"]) + " |")
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"\n(this script's own peak while writing the weights: {own:.0f} MB)")


if __name__ == "__main__":
    main()
