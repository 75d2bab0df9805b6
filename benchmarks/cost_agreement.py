"""
Does the substitution cost model rank graphs as the wafer does?

For every example graph (`examples/onnx`, `examples/graph`), this builds variants: the
graph itself, every graph one rule application away (each match of each rule direction
whose concatenations fold into constants, as `plmr compile` requires), and the results of
`taso-substitute` with both engines. Each variant is priced by `plmr.passes.taso.cost`
and compiled without substitutions (`plmr compile --no-substitute` on a grid) and
simulated in timing mode. The table gives Spearman's rank correlation of model cost and
simulated cycles per graph and over all variants, and how often a variant the model
calls cheaper than the input is cheaper on the wafer.

    .venv/bin/python benchmarks/cost_agreement.py [--grid 4x4] [--per-graph 12] [--readme]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from readme_section import write_section
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import load_module
from plmr.dialects.printing import module_text
from plmr.errors import PlmrError
from plmr.models.bench import timed
from plmr.passes.pipeline import CompileOptions
from plmr.passes.taso.cost import CostModel
from plmr.passes.taso.dag import Dag, DagContext, export_function, import_function
from plmr.passes.taso.matcher import apply_match, directions, find_matches
from plmr.passes.taso.rules import load_rules
from plmr.passes.taso.search import folded_concats_only
from plmr.passes.taso.substitute import cleanup, substitute_module
from plmr.target.device import get_device

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Variant:
    graph: str
    label: str
    model: float
    cycles: float


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation (average ranks for ties)."""

    def ranks(x: list[float]) -> np.ndarray:
        order = np.argsort(x, kind="stable")
        r = np.empty(len(x))
        xs = np.asarray(x)[order]
        i = 0
        while i < len(x):
            j = i
            while j + 1 < len(x) and xs[j + 1] == xs[i]:
                j += 1
            r[order[i : j + 1]] = (i + j) / 2
            i = j + 1
        return r

    if len(a) < 3:
        return float("nan")
    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def main_function(module: ModuleOp) -> func.FuncOp:
    return next(op for op in module.ops if isinstance(op, func.FuncOp))


def variants_of(module: ModuleOp, per_graph: int) -> list[tuple[str, Dag]]:
    """The input, its one-rewrite neighbours (folded concats only), deduplicated."""
    dag = import_function(main_function(module), DagContext())
    assert dag is not None
    out: list[tuple[str, Dag]] = [("input", dag)]
    seen = {dag.graph_hash()}
    for d in directions(load_rules("default")):
        for m in find_matches(dag, d):
            new = apply_match(dag, m)
            if new is None:
                continue
            new.graph_hash()
            new = new.simplify()
            h = new.graph_hash()
            if h in seen or not folded_concats_only(new):
                continue
            seen.add(h)
            out.append((d.label, new))
            if len(out) > per_graph:
                return out
    return out


CACHE: dict[str, float] = {}
"""Simulated cycles by program text, grid and device (`--cache` keeps them in a file)."""


def simulate(module: ModuleOp, grid: tuple[int, int], device: str) -> float:
    text = module_text(module)
    key = hashlib.sha256(f"{grid} {device}\n{text}".encode()).hexdigest()
    found = CACHE.get(key)
    if found is None:
        opts = CompileOptions(grid=grid, device=device, substitute=False)
        found = float(timed(text, opts, get_device(device)).report.cycles)
        CACHE[key] = found
    return found


def measure(
    name: str, path: Path, grid: tuple[int, int], device: str, per_graph: int
) -> list[Variant]:
    base = load_module(path)
    model = CostModel(get_device(device), grid)
    out: list[Variant] = []
    built: list[tuple[str, ModuleOp, Dag]] = []
    for label, dag in variants_of(base, per_graph):
        module = base.clone()
        export_function(dag, main_function(module))
        cleanup(module)
        built.append((label, module, dag))
    for engine in ("backtrack", "eqsat"):
        module = base.clone()
        substitute_module(
            module,
            budget=100,
            device=device,
            concats="constant",
            engine=engine,
            grid=grid,
            guard="none",
        )
        dag = import_function(main_function(module), DagContext())
        assert dag is not None
        built.append((f"taso-substitute ({engine})", module, dag))
    for label, module, _ in built:
        # Priced as compiled: after the clean-up (constants folded, concats flattened).
        compiled = import_function(main_function(module), DagContext())
        assert compiled is not None
        cost = model.graph_cost(compiled)
        try:
            cycles = simulate(module, grid, device)
        except PlmrError as e:
            print(
                f"  {name} {label}: does not compile ({str(e).splitlines()[0]})", flush=True
            )
            continue
        out.append(Variant(name, label, cost, cycles))
        print(f"  {name} {label}: model {cost:.0f} wafer {cycles:.0f}", flush=True)
    return out


def report(rows: list[Variant], grid: tuple[int, int], device: str) -> str:
    graphs = sorted({r.graph for r in rows})
    lines = [
        f"`benchmarks/cost_agreement.py` (device {device}, grid {grid[0]}x{grid[1]}): "
        f"{len(rows)} variants of {len(graphs)} graphs (the graph, its one-rewrite "
        "neighbours whose concatenations fold, and both engines' results without the "
        "mesh guard), priced by "
        "`plmr.passes.taso.cost` on the grid and compiled with `plmr compile --no-substitute`, "
        "simulated in timing mode.",
        "",
        "| graph | variants | Spearman (model vs wafer) | model: cheaper than input | "
        "of those, cheaper on the wafer |",
        "|---|---|---|---|---|",
    ]
    agree_total = cheaper_total = 0
    for gname in graphs:
        rs = [r for r in rows if r.graph == gname]
        rho = spearman([r.model for r in rs], [r.cycles for r in rs])
        base = next((r for r in rs if r.label == "input"), None)
        cheaper = agree = 0
        if base is not None:
            for r in rs:
                if r is not base and r.model < base.model - 1e-9:
                    cheaper += 1
                    agree += r.cycles < base.cycles
        agree_total += agree
        cheaper_total += cheaper
        lines.append(f"| {gname} | {len(rs)} | {rho:.2f} | {cheaper} | {agree} |")
    pooled = spearman([r.model for r in rows], [r.cycles for r in rows])
    lines.append(f"| all | {len(rows)} | {pooled:.2f} | {cheaper_total} | {agree_total} |")
    return "\n".join(lines) + "\n"


NOTES = """
The model prices a graph on the grid it is compiled for (`CostModel(device, grid)`,
`taso-substitute{grid=4x4}`, which `plmr compile` passes). A matmul is priced as the mesh
lowering runs it: `convert-loop-to-tile` cuts the output into 16 x 16 blocks (its first
parallel tile) and the reduction into chunks, `convert-tile-to-mesh` spreads the blocks of
one dimension over each grid axis, a PE runs its blocks one after the other, each block
product at the runtime's PE dot cycles (`plmr.target.op_cost`: a row overhead per block
row, an instruction per scalar of the left block streaming a row of the right one), and
a reduction split over an axis pays the partitioner's allreduce (`2·log2(p)` messages).
So a merged matmul is no faster than its parts once every PE holds a block, and a
matmul too small to spread runs on few PEs at the dot's real rate (the level of whole
graphs: `mlp`, `attention`). Node costs are cached by the node's content (they were
cached by node id, which graphs imported separately share: variants were priced with
other graphs' nodes). Pooled agreement: 0.76 before, 0.91 now.

The block is the one free choice: over these variants 4, 8, 16 and 32 give 0.56, 0.84,
0.91 and 0.84. Chosen on the same data, so held out by graph: picking the block on five
graphs and ranking the sixth picks 16 five times out of six (8 when `softmax_attention`
is held out, where 8 and 16 tie at 0.88 on the other five). Nothing else is fitted; the
per-op prices are the device's constants.

What it still misses: `convert-loop-to-tile` picks one block size per program (4 on
`rnn_cell`, where 4 columns per PE spread its 16-column matmuls over the grid's columns),
so on `rnn_cell` the model still calls merged gates cheaper (-0.90 there): blocks of 16
make one merged 2x32 matmul two blocks on two PEs, the parts one block each; with blocks
of 4 the merged matmul is twice the work per PE. `plmr compile` does not rely on the
model for that: `taso-substitute{grid=...}` lowers the input and the rewritten program
to the mesh partitioner's estimate and keeps the input unless the rewrite is strictly
faster (the guard, see "Graph substitutions").
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--grid", default="4x4")
    parser.add_argument("--device", default="wse2")
    parser.add_argument("--per-graph", type=int, default=12)
    parser.add_argument("--only", default=None, help="Only graphs whose path has this.")
    parser.add_argument("--readme", action="store_true", help="Rewrite its README section.")
    parser.add_argument(
        "--cache", type=Path, default=None, help="A JSON file of simulated cycles to reuse."
    )
    args = parser.parse_args(argv)
    if args.cache is not None and args.cache.exists():
        CACHE.update(json.loads(args.cache.read_text()))
    rows_cols = tuple(int(v) for v in args.grid.split("x"))
    grid = (rows_cols[0], rows_cols[1])
    paths = sorted((ROOT / "examples" / "onnx").glob("*.mlir")) + sorted(
        (ROOT / "examples" / "graph").glob("*.mlir")
    )
    rows: list[Variant] = []
    start = time.perf_counter()
    for path in paths:
        rel = str(path.relative_to(ROOT))
        if args.only and args.only not in rel:
            continue
        rows.extend(measure(rel, path, grid, args.device, args.per_graph))
    if args.cache is not None:
        args.cache.write_text(json.dumps(CACHE))
    text = report(rows, grid, args.device)
    print(text)
    print(f"({time.perf_counter() - start:.0f} s)")
    if args.readme:
        section = f"## Substitution cost model against the wafer\n\n{text}{NOTES}"
        write_section("cost-agreement", "cost_agreement.py", section, append=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
