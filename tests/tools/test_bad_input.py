"""
The bad-input suite: unusual inputs across every command of `plmr`, `plmr-opt` and
`xdsl-opt` with plmr's passes, one case per row. Each must give one clear message (the
regex), a non-zero exit status (2 for a usage error, 1 otherwise), no traceback, and
leave nothing behind: no output file, no database, no temporary file.

The commands run in-process, in a fresh directory holding the fixture files below.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp, TensorType, f32
from xdsl.passes import ModulePass
from xdsl.xdsl_opt_main import xDSLOptMain

from plmr.dialects import graph
from plmr.tools.cli import main as plmr_main
from plmr.tools.plmr_opt import PlmrOptMain
from plmr.tools.plmr_opt import main as opt_main

ROOT = Path(__file__).resolve().parents[2]
MLP = ROOT / "examples" / "onnx" / "mlp.mlir"
MLP_ONNX = ROOT / "examples" / "onnx" / "mlp.onnx"
PREFILL = str(ROOT / "examples" / "decode" / "tiny_prefill.onnx")
DECODE = str(ROOT / "examples" / "decode" / "tiny_decode.onnx")
ON_GRAPH = ("generate", PREFILL, DECODE, "--prompt", "1,2,3,4", "--grid", "graph")
"""plmr generate of the tiny exports with a prompt of the right length, at graph level."""
SCHEDULE = ROOT / "examples" / "schedules" / "transformer_block.tuned.json"

BAD_SYNTAX = "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %r = graph.neg %x\n"
BAD_SHAPE = """\
func.func @main(%x: tensor<2x3xf32>) -> tensor<3x3xf32> {
  %s = graph.add %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
  func.return %s : tensor<3x3xf32>
}
"""
ZERO = """\
func.func @main(%x: tensor<0x4xf32>) -> tensor<0x4xf32> {
  %r = graph.neg %x : tensor<0x4xf32>
  func.return %r : tensor<0x4xf32>
}
"""
OOB = """\
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = loop.nest (%i, %j) to (4, 8) [parallel, parallel] -> tensor<4x8xf32> {
    %c1 = arith.constant 1 : index
    %j1 = arith.addi %j, %c1 : index
    %a = loop.read %x[%i, %j1] : tensor<4x8xf32>
    %b = math.exp %a : f32
    loop.yield %b : f32
  }
  func.return %e : tensor<4x8xf32>
}
"""
HUGE_ARGS = """\
func.func @main(%x: tensor<1000000x1000000xf32>) -> tensor<1000000x1000000xf32> {
  %r = graph.neg %x : tensor<1000000x1000000xf32>
  func.return %r : tensor<1000000x1000000xf32>
}
"""
HUGE_CONSTANT = """\
func.func @main() -> tensor<1000000x1000000x1000xf32> {
  %c = graph.constant dense<1.0> : tensor<1000000x1000000x1000xf32>
  func.return %c : tensor<1000000x1000000x1000xf32>
}
"""
FAST = ["--no-substitute", "--grid", "2x2", "--tile-sizes", "2,4"]


@pytest.fixture(scope="module")
def mesh_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/onnx/mlp.mlir compiled for a 2x2 grid."""
    out = tmp_path_factory.mktemp("mesh") / "mesh.mlir"
    assert plmr_main(["compile", str(MLP), *FAST, "-o", str(out)]) == 0
    # Beside it: the MLP with its weights by reference (wmlp.mlir, wmlp.safetensors).
    weighted = out.parent / "wmlp.mlir"
    assert (
        plmr_main(["import", str(MLP_ONNX), "--inline-limit", "0", "-o", str(weighted)])
        == 0
    )
    return out


def make_files(where: Path, mesh_program: Path) -> None:
    """The inputs the cases name: good ones, and each kind of bad one."""
    shutil.copy(MLP, where / "mlp.mlir")
    shutil.copy(MLP_ONNX, where / "mlp.onnx")
    shutil.copy(SCHEDULE, where / "sched.json")
    shutil.copy(mesh_program, where / "mesh.mlir")
    for name in ("wmlp.mlir", "wmlp.safetensors"):
        shutil.copy(mesh_program.parent / name, where / name)
    (where / "empty.mlir").write_text("")
    (where / "blank.mlir").write_text("  \n\n")
    (where / "bin.mlir").write_bytes(bytes(range(200, 256)) * 4)
    (where / "syntax.mlir").write_text(BAD_SYNTAX)
    (where / "shape.mlir").write_text(BAD_SHAPE)
    (where / "zero.mlir").write_text(ZERO)
    (where / "oob.mlir").write_text(OOB)
    (where / "huge.mlir").write_text(HUGE_ARGS)
    (where / "hugeconst.mlir").write_text(HUGE_CONSTANT)
    (where / "garbage.npz").write_text("garbage\n")
    (where / "empty.npz").write_bytes(b"")
    (where / "garbage.onnx").write_bytes(b"\x00\x01garbage")
    (where / "empty.onnx").write_bytes(b"")
    (where / "garbage.sqlite").write_text("garbage\n")
    (where / "garbage.json").write_text("{not json")
    (where / "w.safetensors").write_text("garbage")
    (where / "file").write_text("a file, not a directory\n")
    (where / "dir").mkdir()


@dataclass(frozen=True)
class Case:
    tool: str
    """`plmr`, `plmr-opt` or `xdsl-opt` (with `--verify-diagnostics`)."""
    argv: tuple[str, ...]
    code: int
    """2: a usage error (click, argparse); 1: any other error."""
    message: str
    """A regex the output must match."""


def plmr(code: int, message: str, *argv: str) -> Case:
    return Case("plmr", argv, code, message)


def opt(code: int, message: str, *argv: str) -> Case:
    return Case("plmr-opt", argv, code, message)


def xdsl(message: str, *argv: str) -> Case:
    return Case("xdsl-opt", argv, 0, message)


USAGE = 2
ERROR = 1
NOT_A_SEED = r"expected a non-negative integer seed, got -1"
NOT_POSITIVE = r"expected a positive integer, got {}"
NO_DIR = r"directory \S*nodir does not exist"
NOT_DIR = r"file/\S+: \S*/file is not a directory"


def _output_cases(prefix: tuple[str, ...], option: str, name: str) -> list[Case]:
    """A missing directory, a file as the directory, a directory as the file."""
    return [
        plmr(ERROR, NO_DIR, *prefix, option, f"nodir/{name}"),
        plmr(ERROR, NOT_DIR, *prefix, option, f"file/{name}"),
        plmr(USAGE, r"File 'dir' is a directory", *prefix, option, "dir"),
    ]


def _input_cases(prefix: tuple[str, ...], suffix: tuple[str, ...] = ()) -> list[Case]:
    """Every kind of bad .mlir input of a command that reads one."""
    return [
        plmr(ERROR, r"no such file: missing\.mlir", *prefix, "missing.mlir", *suffix),
        plmr(ERROR, r"empty\.mlir is empty", *prefix, "empty.mlir", *suffix),
        plmr(ERROR, r"blank\.mlir is empty", *prefix, "blank.mlir", *suffix),
        plmr(
            ERROR, r"bin\.mlir is not a text \(\.mlir\) file", *prefix, "bin.mlir", *suffix
        ),
        plmr(ERROR, r"cannot parse syntax\.mlir", *prefix, "syntax.mlir", *suffix),
        plmr(
            ERROR,
            r"'graph\.add' in @main.* does not verify",
            *prefix,
            "shape.mlir",
            *suffix,
        ),
        plmr(USAGE, r"File 'dir' is a directory", *prefix, "dir", *suffix),
        plmr(
            ERROR,
            r"a constant is too large for this host's memory",
            *prefix,
            "hugeconst.mlir",
            *suffix,
        ),
    ]


CASES: list[Case] = [
    # -- plmr import --------------------------------------------------------------------
    plmr(ERROR, r"cannot read the ONNX model 'missing\.onnx'", "import", "missing.onnx"),
    plmr(ERROR, r"'garbage\.onnx' is not a valid ONNX model", "import", "garbage.onnx"),
    plmr(ERROR, r"empty\.onnx", "import", "empty.onnx"),
    plmr(ERROR, r"'mlp\.mlir' is not a valid ONNX model", "import", "mlp.mlir"),
    *_output_cases(("import", "mlp.onnx"), "-o", "m.mlir"),
    plmr(
        USAGE,
        r"'--inline-limit': expected a non-negative integer, got -1",
        "import",
        "mlp.onnx",
        "--inline-limit",
        "-1",
    ),
    plmr(
        USAGE,
        r"'--inline-limit': '1k' is not a valid integer",
        "import",
        "mlp.onnx",
        "--inline-limit",
        "1k",
    ),
    *_output_cases(
        ("import", "mlp.onnx", "--inline-limit", "0", "-o", "m.mlir"),
        "--weights-out",
        "w.safetensors",
    ),
    plmr(
        ERROR,
        r"--weights-out m\.mlir is also the output \(-o\): the weights would overwrite "
        r"the program",
        "import",
        "mlp.onnx",
        "--inline-limit",
        "0",
        "--weights-out",
        "m.mlir",
        "-o",
        "m.mlir",
    ),
    plmr(
        ERROR,
        r"--weights-out w\.safetensors is also the output",
        "import",
        "mlp.onnx",
        "--inline-limit",
        "0",
        "-o",
        "w.safetensors",
    ),
    # -- --weights (plmr run, plmr compile, plmr-opt) -----------------------------------
    *(
        plmr(
            USAGE,
            r"'--weights': nowhere: no such file or directory; pass the directory or the "
            r"file that holds the program's weights",
            command,
            "wmlp.mlir",
            "--weights",
            "nowhere",
        )
        for command in ("run", "compile")
    ),
    plmr(USAGE, r"'--weights': an empty path", "run", "wmlp.mlir", "--weights", ""),
    plmr(
        ERROR,
        r"--weights mlp\.mlir: the program's weights are a safetensors file "
        r"\(\S*wmlp\.safetensors\), which mlp\.mlir is not named as",
        "run",
        "wmlp.mlir",
        "--weights",
        "mlp.mlir",
    ),
    plmr(
        ERROR,
        r"weights file \S*dir/wmlp\.safetensors does not exist",
        "compile",
        "wmlp.mlir",
        "--weights",
        "dir",
        "-o",
        "c.mlir",
    ),
    plmr(
        ERROR,
        r"weights file \S*w\.safetensors is not a safetensors file",
        "run",
        "wmlp.mlir",
        "--weights",
        "w.safetensors",
    ),
    opt(
        USAGE,
        r"argument --weights: nowhere: no such file or directory",
        "wmlp.mlir",
        "--weights",
        "nowhere",
        "-p",
        "canonicalize",
    ),
    opt(
        ERROR,
        r"--weights mlp\.mlir: the program's weights are a safetensors file",
        "wmlp.mlir",
        "--weights",
        "mlp.mlir",
        "-p",
        "canonicalize",
    ),
    # -- plmr compile -------------------------------------------------------------------
    *_input_cases(("compile",), ("--no-substitute",)),
    plmr(ERROR, r"zero-size tensor \(tensor<0x4xf32>\)", "compile", "zero.mlir"),
    plmr(ERROR, r"zero-size tensor", "compile", "zero.mlir", "--check-each"),
    plmr(ERROR, r"already a mesh program: run it with plmr run", "compile", "mesh.mlir"),
    plmr(
        ERROR,
        r"convert-loop-to-tile: the loop\.read of the nest computing %e .* reads indices "
        r"1\.\.8 of dimension 1 \(size 8\): past the end",
        "compile",
        "oob.mlir",
        "--grid",
        "2x2",
        "-o",
        "out.mlir",
    ),
    plmr(
        ERROR,
        r"bad grid '0x4': both sizes must be positive",
        "compile",
        "mlp.mlir",
        "--grid",
        "0x4",
    ),
    plmr(ERROR, r"bad grid '4x0'", "compile", "mlp.mlir", "--grid", "4x0"),
    plmr(ERROR, r"bad grid '-1x4'", "compile", "mlp.mlir", "--grid", "-1x4"),
    plmr(ERROR, r"bad grid 'abc'", "compile", "mlp.mlir", "--grid", "abc"),
    plmr(ERROR, r"bad grid '4x4x4'", "compile", "mlp.mlir", "--grid", "4x4x4"),
    plmr(USAGE, r"'--k': " + NOT_POSITIVE.format(0), "compile", "mlp.mlir", "--k", "0"),
    plmr(USAGE, r"'--k': " + NOT_POSITIVE.format(-1), "compile", "mlp.mlir", "--k", "-1"),
    plmr(USAGE, r"'--k': 'x' is not a valid integer", "compile", "mlp.mlir", "--k", "x"),
    plmr(
        USAGE,
        r"'--budget': expected a non-negative integer, got -1",
        "compile",
        "mlp.mlir",
        "--budget",
        "-1",
    ),
    plmr(
        USAGE,
        r"'--check-seed': " + NOT_A_SEED,
        "compile",
        "mlp.mlir",
        "--check-each",
        "--check-seed",
        "-1",
    ),
    plmr(
        USAGE,
        r"'--check-tol': expected a finite tolerance >= 0, got -1",
        "compile",
        "mlp.mlir",
        "--check-each",
        "--check-tol",
        "-1",
    ),
    plmr(
        USAGE,
        r"'--check-tol': expected a finite tolerance >= 0, got nan",
        "compile",
        "mlp.mlir",
        "--check-each",
        "--check-tol",
        "nan",
    ),
    plmr(
        USAGE,
        r"'--check-tol': expected a finite tolerance >= 0, got inf",
        "compile",
        "mlp.mlir",
        "--check-each",
        "--check-tol",
        "inf",
    ),
    plmr(
        USAGE,
        r"'--check-tol': 'tight' is not a valid number",
        "compile",
        "mlp.mlir",
        "--check-tol",
        "tight",
    ),
    plmr(ERROR, r"bad --tile-sizes '0,4'", "compile", "mlp.mlir", "--tile-sizes", "0,4"),
    plmr(ERROR, r"bad --tile-sizes 'a'", "compile", "mlp.mlir", "--tile-sizes", "a"),
    plmr(
        ERROR, r"bad --tile-sizes '1,2,3'", "compile", "mlp.mlir", "--tile-sizes", "1,2,3"
    ),
    plmr(
        ERROR,
        r"unknown device 'nosuch'",
        "compile",
        "mlp.mlir",
        "--device",
        "nosuch",
        *FAST,
    ),
    plmr(USAGE, r"Invalid value for '--gemm'", "compile", "mlp.mlir", "--gemm", "foo"),
    plmr(USAGE, r"Invalid value for '--engine'", "compile", "mlp.mlir", "--engine", "foo"),
    plmr(USAGE, r"No such option '--nosuch'", "compile", "mlp.mlir", "--nosuch"),
    *_output_cases(("compile", "mlp.mlir"), "-o", "o.mlir"),
    plmr(
        ERROR,
        r"cannot write database \S*nodir",
        "compile",
        "mlp.mlir",
        "--db",
        "nodir/p.sqlite",
    ),
    plmr(
        ERROR,
        r"garbage\.sqlite is not a plmr performance database",
        "compile",
        "mlp.mlir",
        "--db",
        "garbage.sqlite",
    ),
    plmr(
        USAGE,
        r"File 'dir' is a directory",
        "compile",
        "mlp.mlir",
        "--db",
        "dir",
    ),
    plmr(
        USAGE,
        r"Invalid value for '--check-dir': Directory 'file' is a file",
        "compile",
        "mlp.mlir",
        "--check-each",
        "--check-dir",
        "file",
    ),
    plmr(
        ERROR,
        r"cannot create --check-dir file/sub: \S*file is not a directory",
        "compile",
        "mlp.mlir",
        "--check-each",
        "--check-dir",
        "file/sub",
    ),
    plmr(
        ERROR,
        r"--grid cannot be combined with --schedule",
        "compile",
        "mlp.mlir",
        "--schedule",
        "sched.json",
        "--grid",
        "1x1",
    ),
    plmr(
        ERROR,
        r"--k cannot be combined with --schedule",
        "compile",
        "mlp.mlir",
        "--schedule",
        "sched.json",
        "--k",
        "3",
    ),
    plmr(
        ERROR,
        r"--device, --no-substitute cannot be combined",
        "compile",
        "mlp.mlir",
        "--schedule",
        "sched.json",
        "--device",
        "wse3",
        "--no-substitute",
    ),
    plmr(
        ERROR,
        r"--check-each cannot be combined with --schedule",
        "compile",
        "mlp.mlir",
        "--schedule",
        "sched.json",
        "--check-each",
    ),
    plmr(
        ERROR,
        r"cannot read schedule missing\.json",
        "compile",
        "mlp.mlir",
        "--schedule",
        "missing.json",
    ),
    plmr(ERROR, r"garbage\.json", "compile", "mlp.mlir", "--schedule", "garbage.json"),
    # -- plmr run -----------------------------------------------------------------------
    *_input_cases(("run",)),
    plmr(ERROR, r"loop\.read index 8 is outside dimension 1 \(size 8\)", "run", "oob.mlir"),
    plmr(ERROR, r"a run of @main needs at least .* of host memory", "run", "huge.mlir"),
    plmr(ERROR, r"a run of @main needs at least", "run", "huge.mlir", "--random", "3"),
    plmr(USAGE, r"'--random': " + NOT_A_SEED, "run", "mlp.mlir", "--random", "-1"),
    plmr(
        USAGE, r"'--random': 'x' is not a valid integer", "run", "mlp.mlir", "--random", "x"
    ),
    plmr(
        ERROR, r"no such file: missing\.npz", "run", "mlp.mlir", "--inputs", "missing.npz"
    ),
    plmr(
        ERROR,
        r"garbage\.npz is not an \.npz archive",
        "run",
        "mlp.mlir",
        "--inputs",
        "garbage.npz",
    ),
    plmr(
        ERROR,
        r"empty\.npz is empty: expected an \.npz archive",
        "run",
        "mlp.mlir",
        "--inputs",
        "empty.npz",
    ),
    plmr(
        ERROR,
        r"mlp\.mlir is not an \.npz archive",
        "run",
        "mlp.mlir",
        "--inputs",
        "mlp.mlir",
    ),
    plmr(
        ERROR,
        r"give either --inputs or --random, not both",
        "run",
        "mlp.mlir",
        "--inputs",
        "garbage.npz",
        "--random",
        "1",
    ),
    *_output_cases(("run", "mlp.mlir"), "--output", "r.npz"),
    plmr(
        ERROR,
        r"--heatmap out\.txt: the heatmap is a PNG image; give a file name ending in \.png",
        "run",
        "mesh.mlir",
        "--heatmap",
        "out.txt",
    ),
    plmr(
        ERROR,
        r"--heatmap out: the heatmap is a PNG image",
        "run",
        "mesh.mlir",
        "--heatmap",
        "out",
    ),
    plmr(
        ERROR,
        r"cannot write --heatmap \S*nodir",
        "run",
        "mesh.mlir",
        "--heatmap",
        "nodir/h.png",
    ),
    *_output_cases(("run", "mesh.mlir"), "--report", "r.json"),
    *_output_cases(("run", "mesh.mlir"), "--trace", "t.json"),
    plmr(
        ERROR, r"apply to mesh\.program entries only", "run", "mlp.mlir", "--mode", "timing"
    ),
    plmr(
        ERROR,
        r"apply to mesh\.program entries only",
        "run",
        "mlp.mlir",
        "--heatmap",
        "h.png",
    ),
    plmr(
        ERROR, r"apply to mesh\.program entries only", "run", "mlp.mlir", "--device", "wse3"
    ),
    plmr(USAGE, r"Invalid value for '--mode'", "run", "mesh.mlir", "--mode", "fast"),
    plmr(ERROR, r"nosuch", "run", "mlp.mlir", "--entry", "nosuch"),
    plmr(ERROR, r"unknown device 'nosuch'", "run", "mesh.mlir", "--device", "nosuch"),
    # -- plmr bench ---------------------------------------------------------------------
    plmr(USAGE, r"'--seed': " + NOT_A_SEED, "bench", "gemm", "--seed", "-1"),
    plmr(USAGE, r"'--seed': " + NOT_A_SEED, "bench", "gemv", "--seed", "-1"),
    plmr(ERROR, r"bad grid '0x0'", "bench", "gemm", "--grid", "0x0"),
    plmr(ERROR, r"bad grid '2x'", "bench", "gemv", "--grid", "2x"),
    plmr(ERROR, r"m must be a positive size, got -3", "bench", "gemm", "--m", "-3"),
    plmr(ERROR, r"n must be a positive size, got 0", "bench", "gemv", "--n", "0"),
    plmr(USAGE, r"Invalid value for '--mode'", "bench", "gemm", "--mode", "fast"),
    plmr(
        USAGE, r"'--tokens': " + NOT_POSITIVE.format(0), "bench", "decode", "--tokens", "0"
    ),
    plmr(
        USAGE,
        r"'--tokens': " + NOT_POSITIVE.format(-5),
        "bench",
        "prefill",
        "--tokens",
        "-5",
    ),
    plmr(
        ERROR,
        r"give either --model or --config, not both",
        "bench",
        "decode",
        "--model",
        "tiny",
        "--config",
        "sched.json",
    ),
    plmr(ERROR, r"nosuch", "bench", "decode", "--model", "nosuch"),
    plmr(ERROR, r"missing\.json", "bench", "decode", "--config", "missing.json"),
    plmr(ERROR, r"garbage\.json", "bench", "decode", "--config", "garbage.json"),
    plmr(ERROR, r"nosuch", "bench", "kv", "--model", "nosuch"),
    *_output_cases(
        ("bench", "gemm", "--m", "8", "--k", "8", "--n", "8"), "--report", "r.json"
    ),
    plmr(
        ERROR,
        r"--heatmap h\.txt: the heatmap is a PNG image",
        "bench",
        "gemm",
        "--heatmap",
        "h.txt",
    ),
    # -- plmr tune ----------------------------------------------------------------------
    plmr(
        USAGE,
        r"'--trials': " + NOT_POSITIVE.format(0),
        "tune",
        "mlp.mlir",
        "--db",
        "new.sqlite",
        "--trials",
        "0",
    ),
    plmr(
        USAGE,
        r"'--trials': " + NOT_POSITIVE.format(-1),
        "tune",
        "mlp.mlir",
        "--db",
        "new.sqlite",
        "--trials",
        "-1",
    ),
    plmr(
        USAGE,
        r"'--seed': " + NOT_A_SEED,
        "tune",
        "mlp.mlir",
        "--db",
        "new.sqlite",
        "--seed",
        "-1",
    ),
    plmr(
        USAGE,
        r"'--workers': " + NOT_POSITIVE.format(0),
        "tune",
        "mlp.mlir",
        "--db",
        "new.sqlite",
        "--workers",
        "0",
    ),
    plmr(USAGE, r"Missing option '--db'", "tune", "mlp.mlir"),
    plmr(
        USAGE,
        r"Invalid value for '--sampler'",
        "tune",
        "mlp.mlir",
        "--db",
        "new.sqlite",
        "--sampler",
        "best",
    ),
    plmr(
        ERROR, r"bad grid '0x1'", "tune", "mlp.mlir", "--db", "new.sqlite", "--grid", "0x1"
    ),
    plmr(
        ERROR,
        r"cannot write database \S*nodir",
        "tune",
        "mlp.mlir",
        "--db",
        "nodir/t.sqlite",
    ),
    plmr(
        ERROR,
        r"cannot write database " + NOT_DIR,
        "tune",
        "mlp.mlir",
        "--db",
        "file/t.sqlite",
    ),
    plmr(
        USAGE,
        r"File 'dir' is a directory",
        "tune",
        "mlp.mlir",
        "--db",
        "dir",
    ),
    plmr(
        ERROR,
        r"garbage\.sqlite is not a plmr performance database",
        "tune",
        "mlp.mlir",
        "--db",
        "garbage.sqlite",
    ),
    plmr(
        ERROR,
        r"cannot write schedule \S*nodir",
        "tune",
        "mlp.mlir",
        "--db",
        "new.sqlite",
        "-o",
        "nodir/s.json",
    ),
    plmr(
        USAGE,
        r"File 'dir' is a directory",
        "tune",
        "mlp.mlir",
        "--db",
        "new.sqlite",
        "-o",
        "dir",
    ),
    plmr(
        ERROR,
        r"--grid cannot be combined with --schedule",
        "tune",
        "mlp.mlir",
        "--db",
        "new.sqlite",
        "--schedule",
        "sched.json",
        "--grid",
        "1x1",
    ),
    plmr(
        ERROR, r"no such file: missing\.mlir", "tune", "missing.mlir", "--db", "new.sqlite"
    ),
    plmr(ERROR, r"empty\.mlir is empty", "tune", "empty.mlir", "--db", "new.sqlite"),
    plmr(ERROR, r"bin\.mlir is not a text", "tune", "bin.mlir", "--db", "new.sqlite"),
    # -- plmr fuzz ----------------------------------------------------------------------
    plmr(ERROR, r"give --seconds, --count or both", "fuzz", "--out", "fz"),
    plmr(
        USAGE,
        r"'--count': " + NOT_POSITIVE.format(0),
        "fuzz",
        "--count",
        "0",
        "--out",
        "fz",
    ),
    plmr(
        USAGE,
        r"'--count': " + NOT_POSITIVE.format(-1),
        "fuzz",
        "--count",
        "-1",
        "--out",
        "fz",
    ),
    plmr(
        USAGE,
        r"'--seconds': expected a finite number of seconds > 0, got 0",
        "fuzz",
        "--seconds",
        "0",
        "--out",
        "fz",
    ),
    plmr(
        USAGE,
        r"'--seconds': expected a finite number of seconds > 0, got -1",
        "fuzz",
        "--seconds",
        "-1",
        "--out",
        "fz",
    ),
    plmr(
        USAGE,
        r"'--seconds': expected a finite number of seconds > 0, got nan",
        "fuzz",
        "--seconds",
        "nan",
        "--out",
        "fz",
    ),
    plmr(
        USAGE,
        r"'--seconds': expected a finite number of seconds > 0, got inf",
        "fuzz",
        "--seconds",
        "inf",
        "--out",
        "fz",
    ),
    plmr(
        USAGE,
        r"'--seed': " + NOT_A_SEED,
        "fuzz",
        "--count",
        "1",
        "--seed",
        "-1",
        "--out",
        "fz",
    ),
    plmr(
        USAGE,
        r"'--jobs': " + NOT_POSITIVE.format(0),
        "fuzz",
        "--count",
        "1",
        "--jobs",
        "0",
        "--out",
        "fz",
    ),
    plmr(
        USAGE,
        r"'--tol': expected a finite tolerance >= 0, got -1",
        "fuzz",
        "--count",
        "1",
        "--tol",
        "-1",
        "--out",
        "fz",
    ),
    plmr(
        USAGE,
        r"'--tol': expected a finite tolerance >= 0, got nan",
        "fuzz",
        "--count",
        "1",
        "--tol",
        "nan",
        "--out",
        "fz",
    ),
    plmr(
        USAGE,
        r"'--timeout': expected a finite number of seconds > 0, got 0",
        "fuzz",
        "--count",
        "1",
        "--timeout",
        "0",
        "--out",
        "fz",
    ),
    plmr(
        USAGE,
        r"Invalid value for '--level'",
        "fuzz",
        "--count",
        "1",
        "--level",
        "mesh",
        "--out",
        "fz",
    ),
    plmr(
        USAGE,
        r"Invalid value for '--out': Directory 'file' is a file",
        "fuzz",
        "--count",
        "1",
        "--out",
        "file",
    ),
    plmr(
        ERROR,
        r"cannot create --out file/sub: \S*file is not a directory",
        "fuzz",
        "--count",
        "1",
        "--out",
        "file/sub",
    ),
    # -- plmr rules ---------------------------------------------------------------------
    plmr(
        USAGE,
        r"'--max-ops': " + NOT_POSITIVE.format(0),
        "rules",
        "generate",
        "--max-ops",
        "0",
    ),
    plmr(ERROR, r"between 1 and 3", "rules", "generate", "--max-ops", "9"),
    plmr(
        ERROR,
        r"--ops: unknown op\(s\) softmax",
        "rules",
        "generate",
        "--ops",
        "matmul,softmax",
    ),
    plmr(ERROR, r"--ops needs at least one op", "rules", "generate", "--ops", ","),
    plmr(USAGE, r"'--seed': " + NOT_A_SEED, "rules", "generate", "--seed", "-1"),
    *_output_cases(
        ("rules", "generate", "--max-ops", "1", "--ops", "relu"), "-o", "r.mlir"
    ),
    plmr(
        ERROR,
        r"no such rule file: missing\.mlir",
        "rules",
        "list",
        "--rules",
        "missing.mlir",
    ),
    plmr(
        ERROR,
        r"rule file \S*bin\.mlir is not a text",
        "rules",
        "list",
        "--rules",
        "bin.mlir",
    ),
    plmr(
        ERROR,
        r"rule file \S*empty\.mlir is empty",
        "rules",
        "list",
        "--rules",
        "empty.mlir",
    ),
    plmr(ERROR, r"syntax\.mlir", "rules", "list", "--rules", "syntax.mlir"),
    plmr(
        ERROR,
        r"rule file \S*bin\.mlir is not a text",
        "rules",
        "verify",
        "--rules",
        "bin.mlir",
    ),
    plmr(
        USAGE, r"'--trials': " + NOT_POSITIVE.format(0), "rules", "verify", "--trials", "0"
    ),
    plmr(
        USAGE,
        r"'--timeout-ms': " + NOT_POSITIVE.format(0),
        "rules",
        "verify",
        "--timeout-ms",
        "0",
    ),
    plmr(USAGE, r"No such command 'check'", "rules", "check"),
    # -- plmr demo ----------------------------------------------------------------------
    plmr(USAGE, r"'--seed': " + NOT_A_SEED, "demo", "--seed", "-1"),
    plmr(USAGE, r"'--steps': " + NOT_POSITIVE.format(0), "demo", "--steps", "0"),
    plmr(ERROR, r"--steps must be between 1 and 24", "demo", "--steps", "30"),
    plmr(ERROR, r"bad grid '0x0'", "demo", "--grid", "0x0"),
    plmr(
        USAGE,
        r"Invalid value for '--out': Directory 'file' is a file",
        "demo",
        "--out",
        "file",
    ),
    plmr(
        ERROR,
        r"cannot create --out file/demo: \S*file is not a directory",
        "demo",
        "--out",
        "file/demo",
    ),
    # -- plmr generate ------------------------------------------------------------------
    plmr(
        ERROR,
        r"nosuch.onnx: no such file",
        "generate",
        "nosuch.onnx",
        DECODE,
        "--prompt",
        "1,2",
    ),
    plmr(ERROR, r"give --prompt", "generate", PREFILL, DECODE),
    *(
        plmr(
            USAGE, r"'--steps': " + NOT_POSITIVE.format(steps), *ON_GRAPH, "--steps", steps
        )
        for steps in ("0", "-1")
    ),
    plmr(
        ERROR,
        r"bad --prompt 'abc': expected token ids",
        "generate",
        PREFILL,
        DECODE,
        "--prompt",
        "abc",
    ),
    plmr(
        ERROR,
        r"the prefill takes prompts of 4 tokens, got 2",
        "generate",
        PREFILL,
        DECODE,
        "--prompt",
        "1,2",
        "--grid",
        "graph",
    ),
    plmr(
        ERROR,
        r"bad grid '0x0': both sizes must be positive",
        "generate",
        PREFILL,
        DECODE,
        "--prompt",
        "1,2",
        "--grid",
        "0x0",
    ),
    plmr(
        ERROR,
        r"state pair 'foo' must be IN=OUT",
        *ON_GRAPH,
        "--state",
        "foo",
    ),
    plmr(
        ERROR,
        r"state pair 'a=b' names neither an input nor an output",
        *ON_GRAPH,
        "--state",
        "a=b",
    ),
    # -- plmr db ------------------------------------------------------------------------
    plmr(
        ERROR, r"no such database missing\.sqlite", "db", "list", "--db", "missing.sqlite"
    ),
    plmr(
        ERROR,
        r"garbage\.sqlite is not a plmr performance database",
        "db",
        "list",
        "--db",
        "garbage.sqlite",
    ),
    plmr(
        ERROR, r"cannot open database dir: it is a directory", "db", "list", "--db", "dir"
    ),
    plmr(
        ERROR, r"no such database missing\.sqlite", "db", "best", "--db", "missing.sqlite"
    ),
    plmr(ERROR, r"bad grid '0x0'", "db", "best", "--db", "garbage.sqlite", "--grid", "0x0"),
    plmr(
        ERROR, r"no such database missing\.sqlite", "db", "export", "--db", "missing.sqlite"
    ),
    plmr(
        ERROR,
        r"cannot write output \S*nodir",
        "db",
        "export",
        "--db",
        "garbage.sqlite",
        "-o",
        "nodir/e.json",
    ),
    plmr(USAGE, r"Missing option '--db'", "db", "list"),
    # -- plmr itself --------------------------------------------------------------------
    plmr(USAGE, r"No such command 'compil'", "compil", "mlp.mlir"),
    plmr(USAGE, r"Missing argument 'PROGRAM'", "compile"),
    plmr(USAGE, r"Missing argument 'PROGRAM'", "run"),
    plmr(USAGE, r"Missing argument 'MODEL'", "import"),
    # -- plmr-opt -----------------------------------------------------------------------
    opt(ERROR, r"no such file: missing\.mlir", "missing.mlir"),
    opt(ERROR, r"input empty\.mlir is empty", "empty.mlir"),
    opt(ERROR, r"input blank\.mlir is empty", "blank.mlir"),
    opt(ERROR, r"input bin\.mlir is not a text file", "bin.mlir"),
    opt(ERROR, r"input dir is a directory", "dir"),
    opt(ERROR, r"syntax\.mlir:3:1", "syntax.mlir"),
    opt(ERROR, r"graph\.add", "shape.mlir"),
    opt(
        ERROR,
        r"a constant of the input is too large for this host's memory",
        "hugeconst.mlir",
    ),
    opt(ERROR, r"cannot write output \S*nodir", "mlp.mlir", "-o", "nodir/o.mlir"),
    opt(
        ERROR,
        r"cannot write output " + NOT_DIR,
        "mlp.mlir",
        "-o",
        "file/o.mlir",
    ),
    opt(ERROR, r"cannot write output dir: it is a directory", "mlp.mlir", "-o", "dir"),
    opt(
        USAGE,
        r"argument --check-seed: " + NOT_A_SEED,
        "mlp.mlir",
        "--check-each",
        "--check-seed",
        "-1",
    ),
    opt(
        USAGE,
        r"argument --check-tol: expected a finite tolerance >= 0, got nan",
        "mlp.mlir",
        "--check-each",
        "--check-tol",
        "nan",
    ),
    opt(
        USAGE,
        r"argument --check-tol: expected a finite tolerance >= 0, got -1",
        "mlp.mlir",
        "--check-each",
        "--check-tol",
        "-1",
    ),
    opt(ERROR, r"Unrecognized passes: \['nosuchpass'\]", "mlp.mlir", "-p", "nosuchpass"),
    opt(
        ERROR,
        r"plmr-compile: grid must be two positive sizes ROWS,COLS, got \[0, 0\]",
        "mlp.mlir",
        "-p",
        "plmr-compile{grid=0,0}",
    ),
    opt(ERROR, r"plmr-compile: option grid=a: ", "mlp.mlir", "-p", "plmr-compile{grid=a}"),
    opt(ERROR, r"plmr-compile: option foo=1: ", "mlp.mlir", "-p", "plmr-compile{foo=1}"),
    opt(
        ERROR, r"plmr-compile: k must be >= 1, got 0", "mlp.mlir", "-p", "plmr-compile{k=0}"
    ),
    opt(
        ERROR,
        r"plmr-compile: tile-sizes must be one or two positive sizes",
        "mlp.mlir",
        "-p",
        "plmr-compile{tile-sizes=0}",
    ),
    opt(
        ERROR,
        r"plmr-compile: budget must be >= 0, got -1",
        "mlp.mlir",
        "-p",
        "plmr-compile{budget=-1}",
    ),
    opt(
        ERROR,
        r"taso-substitute: budget must be >= 0, got -5",
        "mlp.mlir",
        "-p",
        "taso-substitute{budget=-5}",
    ),
    opt(
        ERROR,
        r"taso-substitute: option alpha=nan: ",
        "mlp.mlir",
        "-p",
        "taso-substitute{alpha=nan}",
    ),
    opt(
        ERROR,
        r"taso-substitute: alpha must be positive, got 0",
        "mlp.mlir",
        "-p",
        "taso-substitute{alpha=0.0}",
    ),
    opt(
        ERROR,
        r"taso-substitute: ilp-nodes must be an integer >= 0, got -1",
        "mlp.mlir",
        "-p",
        "taso-substitute{ilp-nodes=-1}",
    ),
    opt(
        ERROR,
        r"taso-substitute: node-limit must be an integer >= 1, got -1",
        "mlp.mlir",
        "-p",
        "taso-substitute{node-limit=-1}",
    ),
    opt(
        ERROR,
        r"taso-substitute: grid sizes must be positive, got '0x0'",
        "mlp.mlir",
        "-p",
        "taso-substitute{grid=0x0}",
    ),
    opt(
        ERROR,
        r"taso-substitute: grid must be ROWSxCOLS",
        "mlp.mlir",
        "-p",
        "taso-substitute{grid=four}",
    ),
    opt(
        ERROR,
        r"taso-substitute: unknown engine 'x'",
        "mlp.mlir",
        "-p",
        "taso-substitute{engine=x}",
    ),
    opt(
        ERROR,
        r"taso-substitute: unknown guard 'x'",
        "mlp.mlir",
        "-p",
        "taso-substitute{guard=x}",
    ),
    opt(
        ERROR,
        r"no such rule file: nofile",
        "mlp.mlir",
        "-p",
        "taso-substitute{rules=nofile}",
    ),
    opt(
        ERROR,
        r"convert-tile-to-mesh: grid must be two positive sizes",
        "mlp.mlir",
        "-p",
        "convert-tile-to-mesh{grid=0,0}",
    ),
    opt(
        ERROR,
        r"convert-tile-to-mesh: device: unknown device 'foo'",
        "mlp.mlir",
        "-p",
        "convert-tile-to-mesh{device=foo}",
    ),
    opt(
        ERROR,
        r"convert-tile-to-mesh: groups must be >= 0, got -1",
        "mlp.mlir",
        "-p",
        "convert-tile-to-mesh{groups=-1}",
    ),
    opt(
        ERROR,
        r"convert-tile-to-mesh: unknown gemm 'x'",
        "mlp.mlir",
        "-p",
        "convert-tile-to-mesh{gemm=x}",
    ),
    opt(
        ERROR,
        r"convert-loop-to-tile: tile-sizes must be one or two positive sizes",
        "mlp.mlir",
        "-p",
        "convert-loop-to-tile{tile-sizes=0}",
    ),
    opt(
        ERROR,
        r"convert-loop-to-tile: bad nest-tile-sizes entry 'x'",
        "mlp.mlir",
        "-p",
        "convert-loop-to-tile{nest-tile-sizes=x}",
    ),
    opt(
        ERROR,
        r"convert-loop-to-tile: fit-grid sizes must be positive",
        "mlp.mlir",
        "-p",
        "convert-loop-to-tile{fit-grid=0,0}",
    ),
    opt(
        ERROR,
        r"convert-loop-to-tile: the loop\.read of the nest computing %e",
        "oob.mlir",
        "-p",
        "convert-loop-to-tile{tile-sizes=2,4}",
        "-o",
        "out.mlir",
    ),
    opt(
        ERROR,
        r"neptune-fuse: unknown strategy 'x'",
        "mlp.mlir",
        "-p",
        "neptune-fuse{strategy=x}",
    ),
    opt(
        ERROR,
        r"neptune-fuse: chunks must be positive, got 0",
        "mlp.mlir",
        "-p",
        "neptune-fuse{chunks=0}",
    ),
    opt(
        ERROR,
        r"mesh-pack-allreduces: window \(0\)",
        "mlp.mlir",
        "-p",
        "mesh-pack-allreduces{window=0}",
    ),
    opt(
        ERROR,
        r"graph-defer-norm-scale: max-rows must be at least 1, got 0",
        "mlp.mlir",
        "-p",
        "graph-defer-norm-scale{max-rows=0}",
    ),
    # -- xdsl-opt with plmr's passes: invalid options are diagnostics ------------------
    xdsl(
        r"plmr-compile: grid must be two positive sizes",
        "mlp.mlir",
        "-p",
        "plmr-compile{grid=0,0}",
    ),
    xdsl(
        r"taso-substitute: budget must be >= 0, got -5",
        "mlp.mlir",
        "-p",
        "taso-substitute{budget=-5}",
    ),
    xdsl(
        r"convert-tile-to-mesh: k must be >= 1, got 0",
        "mlp.mlir",
        "-p",
        "convert-tile-to-mesh{k=0}",
    ),
    xdsl(
        r"neptune-fuse: chunks must be positive, got 0",
        "mlp.mlir",
        "-p",
        "neptune-fuse{chunks=0}",
    ),
    xdsl(
        r"mesh-pack-allreduces: window \(0\)",
        "mlp.mlir",
        "-p",
        "mesh-pack-allreduces{window=0}",
    ),
    xdsl(
        r"convert-loop-to-tile: the loop\.read",
        "oob.mlir",
        "-p",
        "convert-loop-to-tile{tile-sizes=2,4}",
    ),
]


def _tree(where: Path) -> set[str]:
    return {str(p.relative_to(where)) for p in where.rglob("*")}


def _run(case: Case) -> tuple[int, str]:
    """Exit status and everything the command printed."""
    if case.tool == "plmr":
        return plmr_main(list(case.argv)), ""
    if case.tool == "plmr-opt":
        try:
            return opt_main(list(case.argv)), ""
        except SystemExit as e:  # argparse's usage errors
            return int(e.code or 0), ""
    xdsl_opt = xDSLOptMain(args=[*case.argv, "--verify-diagnostics"])
    xdsl_opt.run()
    return 0, ""


@pytest.mark.parametrize("case", CASES, ids=[f"{c.tool} {' '.join(c.argv)}" for c in CASES])
def test_bad_input(
    case: Case,
    tmp_path: Path,
    mesh_program: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    make_files(tmp_path, mesh_program)
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    code, _ = _run(case)
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == case.code, text
    assert "Traceback" not in text
    assert re.search(case.message, text), text
    if case.tool == "plmr" and code == 1:
        assert out.err.startswith("error: "), out.err
        assert sum(line.startswith("error:") for line in out.err.splitlines()) == 1
    assert _tree(tmp_path) == before, "left behind: " + ", ".join(
        sorted(_tree(tmp_path) - before)
    )


def test_the_suite_covers_every_command():
    """Every plmr subcommand, plmr-opt and xdsl-opt have cases; at least 150 in all."""
    from plmr.tools.cli import cli

    assert len(CASES) >= 150
    covered = {c.argv[0] for c in CASES if c.tool == "plmr"}
    assert set(cli.commands) <= covered, set(cli.commands) - covered
    assert {c.tool for c in CASES} == {"plmr", "plmr-opt", "xdsl-opt"}


def test_outputs_get_the_umask_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A new output gets 0o666 less the umask; an existing one keeps its mode."""
    monkeypatch.chdir(tmp_path)
    old = os.umask(0o022)
    try:
        assert (
            plmr_main(
                ["rules", "generate", "--max-ops", "1", "--ops", "relu", "-o", "r.mlir"]
            )
            == 0
        )
        assert (tmp_path / "r.mlir").stat().st_mode & 0o777 == 0o644
        (tmp_path / "kept.mlir").write_text("")
        os.chmod(tmp_path / "kept.mlir", 0o640)
        assert (
            plmr_main(
                ["rules", "generate", "--max-ops", "1", "--ops", "relu", "-o", "kept.mlir"]
            )
            == 0
        )
        assert (tmp_path / "kept.mlir").stat().st_mode & 0o777 == 0o640
        os.umask(0o077)
        assert (
            plmr_main(
                ["rules", "generate", "--max-ops", "1", "--ops", "relu", "-o", "q.mlir"]
            )
            == 0
        )
        assert (tmp_path / "q.mlir").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


class _BreakShapes(ModulePass):
    """Gives the first `graph.add` a result type of the wrong shape."""

    name = "test-break-shapes"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        add = next(o for o in op.walk() if isinstance(o, graph.AddOp))
        add.results[0]._type = TensorType(f32, [1])  # pyright: ignore[reportPrivateUsage]


class _Driver(PlmrOptMain):
    def register_all_passes(self) -> None:
        super().register_all_passes()
        self.register_pass(_BreakShapes.name, lambda: _BreakShapes)


def test_an_unverifiable_pass_output_names_the_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """plmr-opt verifies after every pass: a pass that breaks the program is named."""
    out = tmp_path / "out.mlir"
    code = opt_main([str(MLP), "-p", "test-break-shapes", "-o", str(out)], driver=_Driver)
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback" not in err
    assert re.search(
        r"pass test-break-shapes produced a program that does not verify at 'graph\.add'",
        err,
    ), err
    assert not out.exists()


def _break_constants(original: Callable[..., None]) -> Callable[..., None]:
    """`original`, then the first `arith.constant` gets a result type of another shape."""

    def apply(self: ModulePass, ctx: Context, op: ModuleOp) -> None:
        original(self, ctx, op)
        constant = next(o for o in op.walk() if isinstance(o, arith.ConstantOp))
        constant.results[0]._type = TensorType(f32, [3, 5])  # pyright: ignore[reportPrivateUsage]

    return apply


def test_plmr_compile_names_the_pass_whose_output_does_not_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """
    plmr compile verifies its result before writing it; when it does not verify, the
    pipeline runs again pass by pass, verified after each, to name the pass.
    """
    from plmr.passes.mesh_check_limits import MeshCheckLimitsPass

    monkeypatch.setattr(
        MeshCheckLimitsPass, "apply", _break_constants(MeshCheckLimitsPass.apply)
    )
    out = tmp_path / "out.mlir"
    code = plmr_main(["compile", str(MLP), *FAST, "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback" not in err
    assert re.search(
        r"error: compiler error: pass mesh-check-limits produced a program that does not "
        r"verify at 'arith\.constant': `%fc1\.weight = arith\.constant dense<\"0x2EDD[0-9A-F]*…`: "
        r"attribute tensor<3x5xf32> expected",
        err,
    ), err
    assert not out.exists()


def test_plmr_compile_refusal_of_a_valid_program_is_not_compiled_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """A refusal of a program that verifies stands: no second compile looks for a pass."""
    import plmr.validate.compile_check as compile_check

    def must_not_run(*args: object) -> None:
        raise AssertionError("the program was compiled again after a refusal")

    monkeypatch.setattr(compile_check, "find_unverified_pass", must_not_run)
    out = tmp_path / "out.mlir"
    # The grid is too small for the MLP's nests on the 4 KiB test device.
    args = ["--no-substitute", "--tile-sizes", "2,4", "--device", "test-tiny"]
    code = plmr_main(["compile", str(MLP), *args, "--grid", "1x1", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback" not in err
    assert "compiled again" not in err
    assert "does not fit" in err, err
    assert not out.exists()


def test_plmr_compile_names_the_pass_whose_output_a_later_pass_trips_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """A pass that breaks the program makes a later one fail: the first is named."""
    from plmr.passes.transpose_elim import TransposeElimPass

    def break_add(self: ModulePass, ctx: Context, op: ModuleOp) -> None:
        _BreakShapes().apply(ctx, op)

    monkeypatch.setattr(TransposeElimPass, "apply", break_add)
    out = tmp_path / "out.mlir"
    code = plmr_main(["compile", str(MLP), *FAST, "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback" not in err
    assert re.search(
        r"error: compiler error: pass transpose-elim produced a program that does not "
        r"verify at 'graph\.add'",
        err,
    ), err
    assert not out.exists()
