"""Every bundled .mlir example round-trips: `xdsl-opt F --print-op-generic | plmr-opt`."""

import subprocess
import sys
from pathlib import Path

import pytest
from xdsl.xdsl_opt_main import xDSLOptMain

from plmr.tools.plmr_opt import main as plmr_opt

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLES = sorted((ROOT / "examples").rglob("*.mlir"))
BIN = Path(sys.executable).parent


def test_there_are_examples():
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_generic_form_round_trips_through_plmr_opt(path: Path, tmp_path: Path):
    """
    In process: xDSL's `xdsl-opt` driver prints the generic form, plmr-opt reads it back.
    (The installed scripts, started as processes, are the next test's.)
    """
    generic, via_generic, direct = (
        tmp_path / "generic.mlir",
        tmp_path / "via_generic.mlir",
        tmp_path / "direct.mlir",
    )
    xDSLOptMain(args=[str(path), "--print-op-generic", "-o", str(generic)]).run()
    assert plmr_opt([str(generic), "-o", str(via_generic)]) == 0
    assert plmr_opt([str(path), "-o", str(direct)]) == 0
    assert generic.read_text() != direct.read_text()
    assert via_generic.read_text() == direct.read_text()
    assert "graph." in direct.read_text()


def test_the_installed_scripts_round_trip_an_example():
    """`xdsl-opt F --print-op-generic | plmr-opt` as processes, on one example."""
    path = ROOT / "examples" / "graph" / "decoder_block.mlir"
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
