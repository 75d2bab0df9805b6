"""
Shared helpers of the command-line tests: `plmr` and `plmr-opt` run in-process with
their output captured, the installed scripts, and the one JSON object of `--json`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from plmr.tools.cli import main as plmr_main
from plmr.tools.plmr_opt import main as opt_main


class Cli:
    """Runs the command lines of plmr and returns (exit status, stdout, stderr)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]):
        self._capsys = capsys

    def run(self, argv: list[str]) -> tuple[int, str, str]:
        """`plmr argv...`"""
        code = plmr_main(argv)
        out = self._capsys.readouterr()
        return code, out.out, out.err

    def opt(self, argv: list[str]) -> tuple[int, str, str]:
        """`plmr-opt argv...`"""
        code = opt_main(argv)
        out = self._capsys.readouterr()
        return code, out.out, out.err

    @staticmethod
    def script(name: str) -> str:
        """The path of an installed console script (`plmr`, `plmr-opt`, `xdsl-opt`)."""
        return str(Path(sys.executable).parent / name)

    @staticmethod
    def one_json_object(stdout: str) -> dict[str, Any]:
        """stdout is exactly one JSON object (and nothing else but a final newline)."""
        assert stdout.endswith("\n")
        assert stdout.count("\n") == 1, stdout
        data = json.loads(stdout)
        assert isinstance(data, dict)
        return data


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(capsys)
