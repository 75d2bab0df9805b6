"""The package is ruff-clean and passes pyright in strict mode (basedpyright)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)


def test_ruff_check():
    proc = _run(str(BIN / "ruff"), "check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format():
    proc = _run(str(BIN / "ruff"), "format", "--check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_pyright_strict():
    proc = _run(str(BIN / "basedpyright"), "--pythonpath", sys.executable)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr
    assert "0 errors" in proc.stdout
