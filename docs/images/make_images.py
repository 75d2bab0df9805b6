# ruff: noqa: INP001
"""
Regenerates the pictures of the README (needs the `plot` extra):

    .venv/bin/python docs/images/make_images.py [--levels-only]

- `levels.png`: one small program (a matmul followed by a relu) at each level of plmr,
  compiled by plmr itself: `graph` → `loop` (convert-graph-to-loop, neptune-fuse) →
  `tile` (convert-loop-to-tile) → `mesh` (plmr compile for a 2x2 grid of wse2). The
  panels quote the printed IR, shortened to its characteristic lines.
- `decode_heatmap.png`: the heatmap `plmr demo` writes (`plmr-demo/decode_heatmap.png`),
  the finishing time of every PE in one decode step of the tiny LLaMA-style model on a
  4x4 grid, made by the same code with the demo's defaults (seed 0, 16 tokens).
"""

from __future__ import annotations

import importlib
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import make_context, parse_module
from plmr.dialects.printing import module_text
from plmr.lowering.graph_to_loop import ConvertGraphToLoopPass
from plmr.lowering.loop_to_tile import ConvertLoopToTilePass
from plmr.passes.neptune.fuse import NeptuneFusePass
from plmr.passes.pipeline import CompileOptions, compile_module

HERE = Path(__file__).resolve().parent

matplotlib: Any = importlib.import_module("matplotlib")
matplotlib.use("Agg")
plt: Any = importlib.import_module("matplotlib.pyplot")
patches: Any = importlib.import_module("matplotlib.patches")

SOURCE = """
func.func @main(%x: tensor<32x64xf32>, %w: tensor<64x32xf32>) -> tensor<32x32xf32> {
  %y = graph.matmul %x, %w : (tensor<32x64xf32>, tensor<64x32xf32>) -> tensor<32x32xf32>
  %z = graph.relu %y : tensor<32x32xf32>
  func.return %z : tensor<32x32xf32>
}
"""

WIDTH = 128
"""Characters kept of each quoted line."""


def _excerpt(text: str, keep: tuple[str, ...], limit: int) -> str:
    """The lines of `text` that hold one of `keep`, shortened; `...` where some are left out."""
    out: list[str] = []
    skipped = False
    for line in text.splitlines():
        if "builtin.module" in line or line.strip() == "}":
            continue
        if any(k in line for k in keep) and len(out) < limit:
            if skipped and out:
                out.append("    ...")
            skipped = False
            line = line[2:]
            out.append(line if len(line) <= WIDTH else line[: WIDTH - 4] + " ...")
        else:
            skipped = True
    return "\n".join(out)


def _levels() -> list[tuple[str, str, str]]:
    """(title, how it was made, IR excerpt) for each level."""
    ctx: Context = make_context()
    graph_module: ModuleOp = parse_module(SOURCE, "matmul_relu", ctx)
    graph_text = module_text(graph_module)
    loop_module = graph_module.clone()
    ConvertGraphToLoopPass().apply(ctx, loop_module)
    NeptuneFusePass().apply(ctx, loop_module)
    loop_text = module_text(loop_module)
    tile_module = loop_module.clone()
    ConvertLoopToTilePass(tile_sizes=(16, 16)).apply(ctx, tile_module)
    tile_text = module_text(tile_module)
    mesh_module = parse_module(SOURCE, "matmul_relu", ctx)
    compile_module(ctx, mesh_module, CompileOptions(grid=(2, 2), tile_sizes=(16, 16)))
    mesh_text = module_text(mesh_module)
    return [
        (
            "graph: ONNX-like ops on tensors",
            "plmr import model.onnx, or hand-written",
            _excerpt(graph_text, ("func.func", "graph.", "func.return"), 6),
        ),
        (
            "loop: nests of scalar arithmetic (where Neptune fuses reductions)",
            "convert-graph-to-loop, neptune-fuse",
            _excerpt(loop_text, ("loop.", "arith.mulf", "arith.addf", "maximumf"), 9),
        ),
        (
            "tile: what one PE runs, on SRAM-sized blocks",
            "convert-loop-to-tile{tile-sizes=16,16}: the relu runs on each finished block",
            _excerpt(
                tile_text, ("tile.for", "tile.load", "tile.dot", "tile.map", "store"), 9
            ),
        ),
        (
            "mesh: one SPMD program for the grid, placed and routed",
            "plmr compile --grid 2x2 (convert-tile-to-mesh, mesh-route, mesh-check-limits)",
            _excerpt(
                mesh_text,
                (
                    "mesh.program",
                    "mesh.scatter",
                    "mesh.spmd",
                    "^bb0",
                    "tile.dot",
                    "mesh.gather",
                ),
                8,
            ),
        ),
    ]


def write_levels(path: Path) -> None:
    levels = _levels()
    line_in, title_in, pad_in, gap_in = 0.125, 0.42, 0.12, 0.34
    heights = [title_in + line_in * (1 + t.count("\n")) + pad_in for _, _, t in levels]
    total = sum(heights) + gap_in * (len(levels) - 1) + 0.1
    fig: Any = plt.figure(figsize=(11, total))
    ax: Any = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    colors = ["#e8f1fb", "#eaf7ea", "#fdf3e3", "#f6e9f5"]
    top = 1.0 - 0.05 / total
    for i, ((title, how, text), h) in enumerate(zip(levels, heights, strict=True)):
        y0 = top - h / total
        ax.add_patch(
            patches.Rectangle(
                (0.01, y0), 0.98, h / total, fc=colors[i], ec="#777777", lw=0.8
            )
        )
        ax.text(0.02, top - 0.08 / total, title, fontsize=11, fontweight="bold", va="top")
        ax.text(
            0.98, top - 0.1 / total, how, fontsize=8, style="italic", va="top", ha="right"
        )
        ax.text(
            0.02, top - title_in / total, text, fontsize=7.2, family="monospace", va="top"
        )
        if i + 1 < len(levels):
            ax.annotate(
                "",
                xy=(0.5, y0 - (gap_in - 0.04) / total),
                xytext=(0.5, y0 - 0.02 / total),
                arrowprops={"arrowstyle": "->", "lw": 1.5, "color": "#444444"},
            )
        top = y0 - gap_in / total
    fig.savefig(str(path), dpi=110)
    plt.close(fig)


def write_heatmap(path: Path) -> None:
    from plmr.models.demo import run_llm_demo

    with tempfile.TemporaryDirectory() as tmp:
        ok = run_llm_demo(seed=0, grid=(4, 4), steps=16, out_dir=Path(tmp), echo=print)
        if not ok:
            sys.exit("the demo's tokens differ from numpy's; no heatmap written")
        shutil.copyfile(Path(tmp) / "decode_heatmap.png", path)


def main() -> None:
    write_levels(HERE / "levels.png")
    print(f"wrote {HERE / 'levels.png'}")
    if "--levels-only" in sys.argv:
        return
    write_heatmap(HERE / "decode_heatmap.png")
    print(f"wrote {HERE / 'decode_heatmap.png'}")


if __name__ == "__main__":
    main()
