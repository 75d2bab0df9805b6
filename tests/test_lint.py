"""
The package is ruff-clean and passes pyright in strict mode (basedpyright). `.ci/run`
runs basedpyright itself alongside `plmr demo` and fails on an error; it sets
PLMR_PYRIGHT_CHECKED=1 so that the suite does not check the same sources twice.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.skipif(
    os.environ.get("PLMR_PYRIGHT_CHECKED") == "1",
    reason=".ci/run checked these sources with basedpyright (strict) before the suite",
)
def test_pyright_strict():
    proc = _run(str(BIN / "basedpyright"), "--pythonpath", sys.executable)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr
    assert "0 errors" in proc.stdout
