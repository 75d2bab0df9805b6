"""
The compiled text of every bundled example, written to a directory, and a comparison of two
such directories: a check that a change to the compiler left its output byte for byte the
same.

    .venv/bin/python benchmarks/compiled_examples.py write DIR            # compile, write
    .venv/bin/python benchmarks/compiled_examples.py compare BEFORE AFTER  # table, exit 1 on a diff
    .venv/bin/python benchmarks/compiled_examples.py check BEFORE [AFTER]  # write AFTER, compare
    .venv/bin/python benchmarks/compiled_examples.py check --quick BEFORE  # small examples only

Every `.mlir` and `.onnx` file under `examples/` is compiled as `plmr compile --grid G`
does (the default pipeline, `plmr.passes.pipeline.compile_module`) for G in 2x2 and 4x4.
For each (example, grid) the directory receives `<example>@<grid>.mlir` (the mesh program)
and `<example>@<grid>.plans` (the mapping chosen for each nest, what `--explain` prints
before it simulates); a program the compiler refuses gets its error message in the
`.mlir` file instead, so a change in what is refused is a difference too.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
GRIDS = ((2, 2), (4, 4))
SLOW = ("hf", "llama")
"""Folders of `examples/` whose programs take tens of seconds each (left out by --quick)."""


def example_programs(quick: bool = False) -> list[Path]:
    """Every program `plmr compile` accepts under `examples/`, sorted."""
    return sorted(
        p
        for p in EXAMPLES.rglob("*")
        if p.is_file()
        and p.suffix in (".mlir", ".onnx")
        and not (quick and p.relative_to(EXAMPLES).parts[0] in SLOW)
    )


def _stem(path: Path, grid: tuple[int, int]) -> str:
    rel = path.relative_to(EXAMPLES).as_posix().replace("/", "__")
    return f"{rel}@{grid[0]}x{grid[1]}"


def compile_one(path: Path, grid: tuple[int, int]) -> tuple[str, str]:
    """(program text or `error: ...`, plans text) of `path` compiled for `grid`."""
    from plmr.dialects.context import load_module, make_context
    from plmr.dialects.printing import module_text
    from plmr.errors import PlmrError
    from plmr.lowering.tile_to_mesh import NestPlan
    from plmr.passes.pipeline import CompileOptions, compile_module

    ctx = make_context()
    plans: list[NestPlan] = []
    try:
        if path.suffix == ".onnx":
            from plmr.frontend.onnx import import_onnx_file

            module = import_onnx_file(str(path))
        else:
            module = load_module(path, ctx)
        compile_module(ctx, module, CompileOptions(grid=grid), plans)
    except PlmrError as e:
        return f"error: {e}\n", ""
    plan_lines = [f"{p.name}: {p.mapping()} estimate={p.estimate!r}" for p in plans]
    return module_text(module), "".join(line + "\n" for line in plan_lines)


def write(out: Path, only: str | None = None, quick: bool = False) -> None:
    """Compiles every example for every grid into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    for path in example_programs(quick):
        if only is not None and only not in str(path):
            continue
        for grid in GRIDS:
            start = time.perf_counter()
            text, plans = compile_one(path, grid)
            stem = _stem(path, grid)
            (out / f"{stem}.mlir").write_text(text)
            (out / f"{stem}.plans").write_text(plans)
            status = "refused" if text.startswith("error: ") else "compiled"
            print(
                f"{stem}: {status} in {time.perf_counter() - start:.1f} s",
                file=sys.stderr,
                flush=True,
            )


def compare(before: Path, after: Path, subset: bool = False) -> bool:
    """
    Prints a table (example, grid, identical) and returns whether all are identical;
    with `subset`, only the programs in `after` are compared.
    """
    names = {p.name for p in after.iterdir()}
    if not subset:
        names |= {p.name for p in before.iterdir()}
    stems = sorted({n.rsplit(".", 1)[0] for n in names})
    print("| example | grid | identical |")
    print("|---|---|---|")
    same = True
    for stem in stems:
        example, grid = stem.rsplit("@", 1)
        ok = True
        for suffix in (".mlir", ".plans"):
            a, b = before / f"{stem}{suffix}", after / f"{stem}{suffix}"
            if not (a.exists() and b.exists() and a.read_bytes() == b.read_bytes()):
                ok = False
        same &= ok
        print(f"| {example.replace('__', '/')} | {grid} | {'yes' if ok else 'NO'} |")
    print(f"\n{len(stems)} compiled programs, {'all identical' if same else 'DIFFERENCES'}")
    return same


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Compile every example; compare two outputs."
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help="compile every example into DIR")
    w.add_argument("dir", type=Path)
    w.add_argument("--only", default=None, help="only examples whose path contains this")
    w.add_argument(
        "--quick", action="store_true", help=f"skip examples/{{{','.join(SLOW)}}}"
    )
    c = sub.add_parser("compare", help="compare two directories")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    c.add_argument("--subset", action="store_true", help="only the programs in AFTER")
    k = sub.add_parser("check", help="write AFTER (default: a temporary dir), compare")
    k.add_argument("before", type=Path)
    k.add_argument("after", type=Path, nargs="?", default=None)
    k.add_argument(
        "--quick", action="store_true", help=f"skip examples/{{{','.join(SLOW)}}}"
    )
    args = parser.parse_args(argv)
    if args.cmd == "write":
        write(args.dir, args.only, args.quick)
        return 0
    if args.cmd == "compare":
        return 0 if compare(args.before, args.after, args.subset) else 1
    after: Path | None = args.after
    if after is None:
        import tempfile

        after = Path(tempfile.mkdtemp(prefix="plmr-compiled-"))
    write(after, quick=args.quick)
    return 0 if compare(args.before, after, subset=args.quick) else 1


if __name__ == "__main__":
    sys.exit(main())
