"""
Full-size LLaMA exports as users write them: import, compile and a timing run, next to
`plmr bench` of the same configuration.

    .venv/bin/python benchmarks/full_size.py [--cases prefill,decode,deep] [--dir DIR]
                                             [--small] [--readme]

`plmr.models.llama_onnx` writes each export with `onnx.helper`, its random float32
weights in `model.onnx.data` as `torch.onnx.export(..., external_data=True)` writes them:

- `prefill`: LLaMA3-8B's layer width (hidden 4096, 32/8 heads, FFN 14336, vocabulary
  2048) and a 4,096-token prompt, 1 and 2 layers, compiled for 480x480;
- `decode`: the same width, one new token over a KV cache of 4,095 positions (the caches
  are inputs and outputs of the step, the position and the attention mask inputs, as
  Hugging Face exports it), 1 and 2 layers, for 420x420; `plmr compile` keeps the
  caches on the wafer as state (`graph-kv-state`), so only the token, the position and
  the logits cross the host link;
- `deep`: a reduced width (hidden 1024, 8/2 heads, FFN 3584), a 256-token prompt, 2 and
  32 layers, for 256x256 (a grid that divides every size: the bench runs them unpadded).

Each step runs in a fresh process, as a user runs it: `plmr import model.onnx`,
`plmr compile model.mlir --grid G --fit-tiles` and the program's timing-mode run (the
runtime's report and each nest's critical-path cycles, `plmr.models.nests`). Seconds are
wall and CPU (the machine is shared: CPU seconds are what the step costs); peak memory is
the process's own resident high-water mark (`VmHWM`). Cycles per layer are the two-layer
program's minus the one-layer program's, or, where the two-layer export is compiled
once per layer (a sequence of program runs), the layer program's own run (its input
already where the previous layer leaves it: the hand-off's move between runs, if any,
is not in it); the bench's
are `plmr bench decode|prefill --config` of the same sizes (`--layers-extrapolated`: the
same difference of its own programs, whose sizes it pads to a multiple of lcm(P, Q)). Where the export's layer is
slower than the bench's, the table below it lists both layers' slowest nests. Nests
(`mesh.spmd`) and allreduces per layer are counted the same way for both.

`--small` runs every case at a width that takes seconds (to check the script), `--readme`
rewrites the blocks of the cases run in this benchmark's section of benchmarks/README.md
(the other cases' blocks are kept).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from readme_section import read_section, write_section

from plmr.models.llama_onnx import LLAMA3_8B_LAYER, LlamaOnnxConfig, write_llama_onnx

PLMR = str(Path(sys.executable).parent / "plmr")

_MEASURE = """
import resource, runpy, sys, time
start = time.perf_counter()
sys.argv = sys.argv[1:]
code = 0
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as e:
    code = e.code if isinstance(e.code, int) else 1
seconds = time.perf_counter() - start
use = resource.getrusage(resource.RUSAGE_SELF)
with open("/proc/self/status") as f:
    peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
print(f"@@ {seconds} {use.ru_utime + use.ru_stime} {peak} {code}", file=sys.stderr)
"""

_SIMULATE = """
import json, sys
import numpy as np
from xdsl.dialects import func
from plmr.dialects import mesh
from plmr.dialects.context import load_module
from plmr.dialects.graph import static_shape
from plmr.models.nests import count_ops, program_signatures, run_nests
from plmr.runtime.sequence import run_sequence
from plmr.runtime.state import WaferState
from plmr.target.device import get_device
from plmr.target.interface import state_args
module = load_module(sys.argv[1])
sequence = next(
    (f for f in module.ops if isinstance(f, func.FuncOp) and mesh.runs_programs(f)), None
)
def zeros(args):
    return [np.broadcast_to(np.float32(0), static_shape(a, "input")) for a in args]
counts = count_ops(module)
def host_args(program):
    # The KV caches and hand-offs kept on the wafer (state) are not host inputs.
    return [
        a for a, s in zip(program.body.block.args, state_args(program), strict=True)
        if s is None
    ]
layer_cycles = layer_counts = None
if sequence is not None:
    # Layers compiled once: the step is the programs' sequence; the layer program (the
    # one run most often) alone gives the cycles of a layer and its nests.
    _, report = run_sequence(sequence, zeros(sequence.args), device=sys.argv[2], mode="timing")
    callees = [op.callee.string_value() for op in sequence.body.block.ops
               if isinstance(op, mesh.RunOp)]
    body = max(sorted(set(callees)), key=callees.count)
    layer = next(p for p in module.ops if isinstance(p, mesh.ProgramOp)
                 and p.sym_name.data == body)
    layer_report, nests = run_nests(
        module, zeros(host_args(layer)), get_device(sys.argv[2]),
        runtime_options={"state": WaferState()}, program_name=body,
    )
    layer_cycles = layer_report.cycles
    layer_ops = [op.name for op in layer.walk()]
    layer_counts = [layer_ops.count("mesh.spmd"), layer_ops.count("mesh.allreduce")]
    signatures = []
else:
    program = next(op for op in module.ops if isinstance(op, mesh.ProgramOp))
    report, nests = run_nests(
        module, zeros(host_args(program)), get_device(sys.argv[2]),
        runtime_options={"state": WaferState()},
    )
    signatures = [list(s) for s in program_signatures(module)]
print(json.dumps({
    "cycles": report.cycles,
    "layer_cycles": layer_cycles,
    "layer_counts": layer_counts,
    "sram": report.max_sram_bytes,
    "seconds": report.simulation_seconds,
    "nests": [n.to_json() for n in nests],
    "signatures": signatures,
    "spmds": counts.spmds,
    "allreduces": counts.allreduces,
    "host_bytes": report.host_in_bytes + report.host_lookup_bytes + report.host_out_bytes,
    "resident_bytes": report.resident_bytes,
}))
"""


@dataclass
class Step:
    """One step in a fresh process."""

    seconds: float
    cpu: float
    peak_mb: float
    error: str


def measured(argv: list[str]) -> Step:
    """`plmr argv...` in a fresh process: wall and CPU seconds, peak MB, error."""
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, PLMR, *argv], capture_output=True, text=True
    )
    lines = proc.stderr.strip().splitlines()
    tail = [line for line in lines if line.startswith("@@ ")]
    if not tail:
        return Step(float("nan"), float("nan"), float("nan"), proc.stderr.strip()[-300:])
    seconds, cpu, peak_kb, code = tail[-1].split()[1:]
    errors = [line for line in lines if line.startswith("error:")]
    error = "" if code == "0" else (errors[-1] if errors else f"exit status {code}")
    return Step(float(seconds), float(cpu), int(peak_kb) / 1024, error)


@dataclass
class Case:
    """Exports of one width at two depths, and the bench's run of the same sizes."""

    name: str
    kind: str
    """`prefill` or `decode` (the bench's command)."""
    config: LlamaOnnxConfig
    depths: tuple[int, int]
    grid: str
    tokens: int
    """The bench's `--tokens`: the prompt, or the cache's length."""


def cases(small: bool) -> list[Case]:
    wide = replace(LLAMA3_8B_LAYER, seq=4096)
    narrow = LlamaOnnxConfig(
        hidden=1024, heads=8, kv_heads=2, ffn=3584, vocab=2048, seq=256
    )
    # The deep case's grid divides all its sizes, so the bench runs the same sizes
    # (on 480x480 it pads hidden 1024 to 1,440 and the prompt to 480 tokens).
    grids = ("480x480", "420x420", "256x256")
    if small:
        wide = LlamaOnnxConfig(hidden=256, heads=2, kv_heads=1, ffn=512, vocab=256, seq=64)
        narrow = replace(wide, seq=32)
        grids = ("16x16", "14x14", "16x16")
    return [
        Case("prefill", "prefill", wide, (1, 2), grids[0], wide.seq),
        Case(
            "decode",
            "decode",
            replace(wide, seq=1, past=wide.seq - 1, position_inputs=True),
            (1, 2),
            grids[1],
            wide.seq,
        ),
        Case("deep", "prefill", narrow, (2, 32), grids[2], narrow.seq),
    ]


def size(path: Path) -> str:
    if not path.exists():
        return "-"
    n = path.stat().st_size
    return f"{n / 1e6:.2f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


@dataclass
class Depth:
    layers: int
    weights: str
    imported: Step
    ir: str
    compiled: Step | None = None
    sim: dict[str, Any] | None = None
    sim_error: str = ""


def run_depth(case: Case, layers: int, base: Path) -> Depth:
    d = base / f"{case.name}-{layers}"
    d.mkdir(parents=True, exist_ok=True)
    model = d / "model.onnx"
    data = write_llama_onnx(model, replace(case.config, layers=layers))
    ir, out = d / "model.mlir", d / "model.mesh.mlir"
    got = Depth(
        layers, size(data), measured(["import", str(model), "-o", str(ir)]), size(ir)
    )
    print(f"{case.name}, {layers} layer(s): import {got.imported}", file=sys.stderr)
    if got.imported.error:
        return got
    argv = ["compile", str(ir), "--grid", case.grid, "--fit-tiles", "-o", str(out)]
    got.compiled = measured(argv)
    print(f"{case.name}, {layers} layer(s): compile {got.compiled}", file=sys.stderr)
    if got.compiled.error:
        return got
    proc = subprocess.run(
        [sys.executable, "-c", _SIMULATE, str(out), "wse2"], capture_output=True, text=True
    )
    if proc.returncode:
        got.sim_error = (proc.stderr.strip().splitlines() or ["simulation failed"])[-1]
    else:
        got.sim = json.loads(proc.stdout)
    # The weights are the largest files: keep only the small ones.
    data.unlink()
    return got


def bench(case: Case, layers: int, base: Path) -> dict[str, Any] | None:
    c = case.config
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": c.hidden,
        "num_attention_heads": c.heads,
        "num_key_value_heads": c.kv_heads,
        "intermediate_size": c.ffn,
        "num_hidden_layers": layers,
        "vocab_size": c.vocab,
        "rms_norm_eps": c.eps,
        "max_position_embeddings": max(8192, case.tokens),
    }
    path = base / f"{case.name}-config.json"
    path.write_text(json.dumps(config))
    argv = [PLMR, "bench", case.kind, "--config", str(path), "--grid", case.grid]
    argv += ["--tokens", str(case.tokens), "--layers-extrapolated", "--no-reference"]
    proc = subprocess.run([*argv, "--json"], capture_output=True, text=True)
    if proc.returncode:
        print(f"{case.name}: bench failed: {proc.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    return json.loads(proc.stdout)


def layer_nests(one: dict[str, Any], two: dict[str, Any]) -> list[dict[str, Any]]:
    """The two-layer program's nests of its second layer (`plmr.models.nests`)."""
    from plmr.models.nests import layer_window

    sig1 = [tuple(s) for s in one["signatures"]]
    sig2 = [tuple(s) for s in two["signatures"]]
    window = layer_window(sig1, sig2)
    return two["nests"][window.start : window.stop]


def fmt_step(s: Step | None) -> tuple[str, str]:
    if s is None:
        return "-", "-"
    return f"{s.seconds:.1f} / {s.cpu:.1f}", f"{s.peak_mb:.0f}"


def slowest(nests: list[dict[str, Any]], n: int = 6) -> list[str]:
    top = sorted(nests, key=lambda x: -x["cycles"])[:n]
    return [f"`%{x['name']}` {x['cycles']:,.0f} ({x['what']})" for x in top]


def report(case: Case, depths: list[Depth], b: dict[str, Any] | None) -> list[str]:
    c = case.config
    what = (
        f"{case.kind}, hidden {c.hidden}, {c.heads}/{c.kv_heads} heads, FFN {c.ffn}, "
        f"vocabulary {c.vocab}, "
        + (f"{c.seq} tokens" if not c.past else f"1 token over {c.past} cached")
        + f", `--grid {case.grid}`"
    )
    lines = [
        f"**{case.name}**: {what}",
        "",
        "| layers | weights | import s (wall / CPU) | import MB | IR | "
        "compile s (wall / CPU) | compile MB | cycles | refused |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for d in depths:
        si, mi = fmt_step(d.imported)
        sc, mc = fmt_step(d.compiled)
        cycles = f"{d.sim['cycles']:,.0f}" if d.sim else "-"
        error = d.imported.error or (d.compiled.error if d.compiled else "") or d.sim_error
        error = error.replace("|", "/")
        lines.append(
            f"| {d.layers} | {d.weights} | {si} | {mi} | {d.ir} | {sc} | {mc} | {cycles} "
            f"| {error or '-'} |"
        )
    one, two = depths
    lines.append("")
    if one.sim and two.sim:
        per = (two.sim["cycles"] - one.sim["cycles"]) / (two.layers - one.layers)
        mine = layer_nests(one.sim, two.sim) if two.layers - one.layers == 1 else []
        outlined = two.sim.get("layer_cycles")
        if outlined is not None:
            # Layers compiled once: a layer is the layer program's run (the one-layer
            # export, whole, has no layer program of its own to subtract).
            lines.append(
                f"The {two.layers}-layer export runs one layer program per layer: "
                f"{outlined:,.0f} cycles a layer ({two.layers} layers minus 1: {per:,.0f})."
            )
            per, mine = outlined, two.sim["nests"]
        if two.layers - one.layers == 1 or outlined is not None:
            spmds = two.sim["spmds"] - one.sim["spmds"]
            allreduces = two.sim["allreduces"] - one.sim["allreduces"]
            if outlined is not None:
                spmds, allreduces = two.sim["layer_counts"]
            theirs = (
                f"{b['spmds_per_layer']} / {b['allreduces_per_layer']}"
                if b is not None
                else "-"
            )
            lines.append(
                f"Per layer: export {spmds} nests / {allreduces} allreduces, the bench's "
                f"{theirs}."
            )
        if c.past:
            lines.append(
                f"Host bytes per step: {one.sim['host_bytes']:,.0f} ({one.layers} layer), "
                f"{two.sim['host_bytes']:,.0f} ({two.layers}); KV caches on the wafer "
                f"{two.sim['resident_bytes']:,} B."
            )
        if b is not None:
            ratio = per / b["layer_cycles"]
            lines.append(
                f"Cycles per layer: export {per:,.0f}, `plmr bench {case.kind} --config` "
                f"{b['layer_cycles']:,.0f} (its sizes padded to {b['padded']}); "
                f"export / bench = {ratio:.3f}; the bench compiled in "
                f"{b['compile_seconds']:.1f} s."
            )
            if ratio > 1.0 and mine:
                lines += ["", "The layer's slowest nests, export and bench (cycles):", ""]
                lines += ["| export | bench |", "|---|---|"]
                theirs = slowest(b["layer_nests"])
                for a, z in zip(slowest(mine), theirs, strict=False):
                    lines.append(f"| {a} | {z} |")
                lines.append("")
        else:
            lines.append(f"Cycles per layer: export {per:,.0f}; the bench did not run.")
        if b is not None and two.layers > 2:
            ratio = two.sim["cycles"] / b["model_cycles"]
            lines.append(
                f"The {two.layers}-layer step: export {two.sim['cycles']:,.0f} cycles, the "
                f"bench's extrapolation {b['model_cycles']:,.0f}: {ratio:.4f}."
            )
    if one.compiled and two.compiled and not (one.compiled.error or two.compiled.error):
        lines.append(
            f"Compile CPU seconds: {one.compiled.cpu:.1f} ({one.layers} layer(s)), "
            f"{two.compiled.cpu:.1f} ({two.layers}); {two.layers} layers / {one.layers}: "
            f"{two.compiled.cpu / one.compiled.cpu:.2f}."
        )
    else:
        lines.append("Cycles per layer: not measured (a program did not compile or run).")
    lines.append("")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1] if __doc__ else "")
    p.add_argument("--cases", default="prefill,decode,deep")
    p.add_argument("--dir", type=Path, default=None, help="Where to write (default: temp).")
    p.add_argument("--small", action="store_true", help="Every case at a small width.")
    p.add_argument("--readme", action="store_true", help="Rewrite the README's section.")
    args = p.parse_args(argv)
    wanted = args.cases.split(",")
    blocks: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = args.dir or Path(tmp)
        for case in cases(args.small):
            if case.name not in wanted:
                continue
            depths = [run_depth(case, n, base) for n in case.depths]
            b = bench(case, case.depths[1], base)
            lines = report(case, depths, b)
            print("\n".join(lines), flush=True)
            blocks[case.name] = lines
    if args.readme:
        section = read_section("full-size", "full_size.py")
        if section is None:
            return 1
        for name, lines in blocks.items():
            section = replace_block(section, name, "\n".join(lines))
        if not write_section("full-size", "full_size.py", section):
            return 1
    return 0


def replace_block(section: str, name: str, text: str) -> str:
    """The README section with case `name`'s block replaced by `text` (or appended)."""
    begin, end = f"<!-- full-size:{name} -->", f"<!-- full-size:{name}:end -->"
    block = f"{begin}\n{text}\n{end}\n"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end) + "\n?", re.S)
    if pattern.search(section):
        return pattern.sub(lambda _: block, section)
    return section + block


if __name__ == "__main__":
    sys.exit(main())
