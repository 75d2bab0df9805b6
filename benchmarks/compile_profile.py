"""
Where `plmr compile` spends its time on one llama3-8b layer: the program of
`plmr bench decode|prefill` cut to one layer (with the LM head) is compiled with the
bench's options under cProfile, and the functions with the most cumulative and own time
are printed. The table gives the CPU time of a compile without the profiler (wall time
measures the load of a shared machine) and the wall time under cProfile.

    .venv/bin/python benchmarks/compile_profile.py            # every row, top entries
    .venv/bin/python benchmarks/compile_profile.py --readme   # also rewrite its section
                                                              # of benchmarks/README.md
    .venv/bin/python benchmarks/compile_profile.py --only decode --top 30

Rows: llama3-8b decode on 420² PEs (heads form, 4K cache) and prefill on 480² (4K
prompt) in the heads form and the per-head baseline, as the LLM table has them; wse2.

With `--small`, the programs a user compiles by hand are timed too (CPU and wall
seconds; the machine may be shared): every program under `examples/` for 4x4 (the
slowest five printed), the compile of `plmr demo` (the tiny model's prefill of 8 tokens
and decode step, 4x4), and the decode step of a decoder of 1, 2, 4 and 8 tiny layers
(4x4, every layer compiled as `plmr compile --no-outline-layers` does), whose time
should grow at most linearly with the layers; the tiny Hugging Face LLaMA prefill export
and `examples/hf/llama.onnx` get their own rows. One table, each row with its target
(CPU seconds) and whether it is met. `--no-examples` leaves the other examples out.

    .venv/bin/python benchmarks/compile_profile.py --small --only none
    .venv/bin/python benchmarks/compile_profile.py --small --only none --no-examples
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import io
import pstats
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from readme_section import write_section

from plmr.dialects.context import make_context, parse_module
from plmr.models.bench import bench_config, default_options, default_tokens, resolve_model
from plmr.models.llama import ProgramBuilder
from plmr.passes.pipeline import compile_module

NAMED = ("hf/llama_prefill.onnx", "hf/llama.onnx")
"""The exports `--small` names whatever their rank: the tiny LLaMA prefill and model."""


@dataclass(frozen=True)
class Job:
    kind: str
    grid: int
    form: str

    @property
    def name(self) -> str:
        return f"llama3-8b {self.kind} {self.grid}² ({self.form})"


JOBS = (
    Job("decode", 420, "heads"),
    Job("prefill", 480, "heads"),
    Job("prefill", 480, "per-head"),
)


def program(job: Job) -> str:
    base = resolve_model("llama3-8b")
    grid = (job.grid, job.grid)
    config = bench_config(base, grid, default_tokens(job.kind, base))
    builder = ProgramBuilder(config, None, job.form)
    if job.kind == "decode":
        return builder.decode(layers=[0], head=True)
    return builder.prefill(config.max_seq, layers=[0], head=True)


def cpu_seconds(job: Job) -> float:
    """CPU seconds of one compile of the one-layer program, without the profiler."""
    grid = (job.grid, job.grid)
    options = default_options("llama3-8b", grid, "wse2", job.kind)
    text = program(job)
    start = time.process_time()
    compile_module(make_context(), parse_module(text), options)
    return time.process_time() - start


def _timed(work: Callable[[], object]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of `work()`."""
    cpu, wall = time.process_time(), time.perf_counter()
    work()
    return time.process_time() - cpu, time.perf_counter() - wall


def _row(name: str, target: float | None, cpu: float, wall: float) -> str:
    """A row of the targets' table: met when the CPU time is within the target."""
    if target is None:
        return f"| {name} | | {cpu:.2f} s | {wall:.2f} s | |"
    met = "yes" if cpu <= target else "no"
    return f"| {name} | ≤ {target:g} s | {cpu:.2f} s | {wall:.2f} s | {met} |"


def small_tables(examples: bool = True) -> list[str]:
    """
    The targets' table of `--small` (markdown lines; each figure printed as it is
    measured): the slowest five examples, the demo's compile, the Hugging Face exports
    and the decoders of 1, 2, 4 and 8 layers. Without `examples`, only the demo's and
    the Hugging Face exports', the demo's and the decoders' rows.
    """
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from compiled_examples import EXAMPLES, compile_one, example_programs

    from plmr.models.llama import ProgramBuilder, get_config, random_weights
    from plmr.passes.pipeline import CompileOptions

    rows: list[tuple[float, float, str]] = []
    named_only = [EXAMPLES / n for n in NAMED]
    for path in example_programs() if examples else named_only:
        cpu, wall = _timed(lambda: compile_one(path, (4, 4)))
        name = path.relative_to(EXAMPLES).as_posix()
        rows.append((cpu, wall, name))
        print(f"examples/{name} 4x4: {cpu:.2f} s CPU, {wall:.2f} s wall", flush=True)
    out = [
        "| compile (4x4) | target (CPU) | CPU | wall | met |",
        "|---|---:|---:|---:|:-:|",
    ]
    if examples:
        over = sum(1 for cpu, _, _ in rows if cpu > 2.0)
        out.append(
            f"| every program under `examples/`: {len(rows)}, {over} over 2 s | | | | |"
        )
        out += [_row(f"examples/{n}", 2.0, c, w) for c, w, n in sorted(rows)[::-1][:5]]
    named = {n: (c, w) for c, w, n in rows}
    for name in NAMED:
        if name in named:
            out.append(_row(f"examples/{name} (export)", 3.0, *named[name]))
    config = get_config("tiny")
    weights = random_weights(config, 0)
    builder = ProgramBuilder(config, weights)
    demo = CompileOptions(grid=(4, 4), budget=3, tile_sizes=(16, 16))

    def demo_compile() -> None:
        for text in (builder.prefill(8), builder.decode()):
            compile_module(make_context(), parse_module(text), demo)

    cpu, wall = _timed(demo_compile)
    print(f"plmr demo's compile: {cpu:.2f} s CPU, {wall:.2f} s wall", flush=True)
    out.append(
        _row("`plmr demo`'s compile (prefill of 8 tokens + decode step)", 5.0, cpu, wall)
    )
    # Every layer compiled (`plmr compile --no-outline-layers`): the nests grow with
    # the layers, which is what the rows measure (linear: the time per layer stays).
    every_layer = CompileOptions(grid=(4, 4), outline_layers=False)
    first = 0.0
    for layers in (1, 2, 4, 8):
        deep = dataclasses.replace(config, n_layers=layers)
        text = ProgramBuilder(deep, None).decode()
        nests = text.count("graph.matmul")
        cpu, wall = _timed(
            lambda: compile_module(make_context(), parse_module(text), every_layer)
        )
        first = first or cpu
        print(f"{layers} layers: {cpu:.2f} s CPU, {wall:.2f} s wall", flush=True)
        out.append(
            f"| tiny decoder, {layers} layer(s), decode step ({nests} graph matmuls) "
            f"| linear | {cpu:.2f} s | {wall:.2f} s | ×{cpu / first:.1f} of 1 layer |"
        )
    return out


def profile(job: Job, top: int) -> tuple[float, list[str]]:
    """Compiles the one-layer program under cProfile: (seconds, the top entries)."""
    grid = (job.grid, job.grid)
    options = default_options("llama3-8b", grid, "wse2", job.kind)
    text = program(job)
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    compile_module(make_context(), parse_module(text), options)
    profiler.disable()
    seconds = time.perf_counter() - start
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    lines: list[str] = []
    for key, title in (("cumulative", "cumulative"), ("tottime", "own time")):
        out.seek(0)
        out.truncate()
        stats.sort_stats(key).print_stats(top)
        rows = [
            r
            for r in out.getvalue().splitlines()
            if re.match(r"\s*\d", r) and "{built-in method builtins.exec}" not in r
        ]
        lines.append(f"by {title}:")
        lines += ["  " + _short(r) for r in rows[:top]]
    return seconds, lines


def _short(row: str) -> str:
    """A pstats row with the checkout's path cut to the package-relative one."""
    return re.sub(r"\S*/(?:site-packages|main)/", "", row.rstrip())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1] if __doc__ else "")
    parser.add_argument("--only", choices=["decode", "prefill", "none"], default=None)
    parser.add_argument(
        "--small", action="store_true", help="Also time the examples, demo and layers."
    )
    parser.add_argument(
        "--no-examples",
        action="store_true",
        help="With --small, leave out the examples (the demo and the decoders only).",
    )
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument(
        "--readme", action="store_true", help="Rewrite the section of benchmarks/README.md."
    )
    args = parser.parse_args(argv)
    jobs = [j for j in JOBS if args.only in (None, j.kind)]
    table = [
        "| one layer + LM head | compile: CPU time | under cProfile: wall time |",
        "|---|---:|---:|",
    ]
    details: list[str] = []
    for job in jobs:
        cpu = cpu_seconds(job)
        seconds, lines = profile(job, args.top)
        print(f"{job.name}: compiled in {cpu:.1f} s of CPU", flush=True)
        for line in lines:
            print(line)
        table.append(f"| {job.name} | {cpu:.1f} s | {seconds:.1f} s |")
        details += [f"{job.name}, {seconds:.1f} s, top {args.top // 2} of each:", "```"]
        kept = 0
        for line in lines:
            if line.startswith("by "):
                kept = 0
                details.append(line)
            elif kept < args.top // 2:
                details.append(line)
                kept += 1
        details.append("```")
    small = small_tables(not args.no_examples) if args.small else []
    if args.readme:
        text = "\n".join(table) + "\n\n" + "\n".join(details) + "\n"
        if small:
            text += "\n" + "\n".join(small) + "\n"
        if not write_section("compile-profile", "compile_profile.py", text):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
