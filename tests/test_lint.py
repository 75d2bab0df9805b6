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


ASSERT_ISINSTANCE_LIMIT = 10
"""At most this many `assert isinstance` in the package: narrow with typed helpers instead."""


def test_few_assert_isinstance_in_the_package():
    skip = {"tests", "benchmarks", "build", "typecheck"}
    found: dict[str, int] = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in skip or rel.parts[0].startswith("."):
            continue
        count = path.read_text().count("assert isinstance(")
        if count:
            found[str(rel)] = count
    total = sum(found.values())
    listing = ", ".join(f"{name} ({n})" for name, n in found.items())
    assert total <= ASSERT_ISINSTANCE_LIMIT, (
        f"{total} `assert isinstance` in the package (at most {ASSERT_ISINSTANCE_LIMIT}): "
        f"{listing}; narrow with plmr.dialects.narrow or typed accessors instead"
    )
