"""Every bundled .mlir example round-trips: `xdsl-opt F --print-op-generic | plmr-opt`."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLES = sorted((ROOT / "examples").rglob("*.mlir"))
BIN = Path(sys.executable).parent


def test_there_are_examples():
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_generic_form_round_trips_through_plmr_opt(path: Path):
    generic = subprocess.run(
        [str(BIN / "xdsl-opt"), str(path), "--print-op-generic"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    via_generic = subprocess.run(
        [str(BIN / "plmr-opt")], input=generic, capture_output=True, text=True, check=True
    ).stdout
    direct = subprocess.run(
        [str(BIN / "plmr-opt"), str(path)], capture_output=True, text=True, check=True
    ).stdout
    assert via_generic == direct
    assert "graph." in direct
