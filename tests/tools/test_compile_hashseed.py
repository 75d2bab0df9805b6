"""
`plmr compile` gives the same program whatever Python's string hashing: no set or dict
order that depends on `PYTHONHASHSEED` (or on object addresses, which follow it) reaches
the output. Each compile runs in its own process, under its own seed.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLMR = Path(sys.executable).parent / "plmr"


def compiled(program: Path, seed: int, out: Path) -> str:
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    # The backtracking search stops at a count, not a time: the same graph on any machine.
    proc = subprocess.run(
        [str(PLMR), "compile", str(program), "--grid", "4x4", "--engine", "backtrack",
         "--budget", "20", "-o", str(out)],
        env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out.read_text()


@pytest.mark.parametrize("name", ["onnx/mlp.mlir"])
def test_same_program_under_two_hash_seeds(name: str, tmp_path: Path):
    program = ROOT / "examples" / name
    first = compiled(program, 1, tmp_path / "one.mlir")
    second = compiled(program, 2, tmp_path / "two.mlir")
    assert "mesh.spmd" in first
    assert first == second
