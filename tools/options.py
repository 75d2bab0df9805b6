"""
The checked option types of the command lines: seeds, counts, sizes and tolerances are
validated where they enter, so that a bad value is one message naming the option (and
the exit status 2 of a usage error) before any work is done or any file is created.

The click types serve `plmr`; the `argparse` types of the same names (`arg_*`) serve
`plmr-opt`.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

import click

from plmr.errors import PlmrError
from plmr.files import check_output_path


class _Int(click.ParamType[int, Any]):
    """An integer with a lower bound (`low`): what it counts says `what`."""

    def __init__(self, low: int, what: str):
        self.low = low
        self.what = what
        self.name = what

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            try:
                number = int(str(value).strip(), 10)
            except ValueError:
                self.fail(
                    f"'{value}' is not a valid integer: expected {self.what}", param, ctx
                )
        if number < self.low:
            self.fail(f"expected {self.what}, got {number}", param, ctx)
        return number


class _Float(click.ParamType[float, Any]):
    """A finite float `>= 0` (or `> 0` with `positive`)."""

    def __init__(self, positive: bool, what: str):
        self.positive = positive
        self.what = what
        self.name = what

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"'{value}' is not a valid number: expected {self.what}", param, ctx)
        if not math.isfinite(number) or number < 0 or (self.positive and number == 0):
            self.fail(f"expected {self.what}, got {value}", param, ctx)
        return number


SEED = _Int(0, "a non-negative integer seed")
"""A random seed: an integer >= 0 (numpy's generators take no negative seeds)."""

COUNT = _Int(1, "a positive integer")
"""A count of programs, trials, workers, sizes: an integer >= 1."""

NON_NEGATIVE = _Int(0, "a non-negative integer")
"""An integer >= 0 (e.g. a search budget)."""

TOLERANCE = _Float(False, "a finite tolerance >= 0")
"""A relative tolerance: a finite float >= 0."""

SECONDS = _Float(True, "a finite number of seconds > 0")
"""A duration: a finite float > 0."""


class _WeightsPath(click.ParamType[Path, Any]):
    """Where a program's weights moved: an existing, readable directory or file."""

    name = "DIR_OR_FILE"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> Path:
        text = str(value)
        hint = "pass the directory or the file that holds the program's weights"
        if not text.strip():
            self.fail(f"an empty path; {hint}", param, ctx)
        path = Path(text)
        if not path.exists():
            self.fail(f"{text}: no such file or directory; {hint}", param, ctx)
        if not os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0)):
            self.fail(f"{text}: not readable; {hint}", param, ctx)
        return path


WEIGHTS = _WeightsPath()
"""`--weights DIR_OR_FILE`: an existing, readable directory or file."""


def check_weights_out(weights_out: Path | None, output: Path | None) -> None:
    """
    `plmr import --weights-out` can be written and is not the program's own output:
    checked before anything is imported.
    """
    if weights_out is None:
        return
    if output is not None and weights_out.resolve() == output.resolve():
        raise PlmrError(
            f"--weights-out {weights_out} is also the output (-o): the weights would "
            "overwrite the program; give the weights another file name (e.g. ending in "
            ".safetensors)"
        )
    check_output_path(weights_out, "--weights-out")


def check_run_outputs(outputs: dict[str, Path | None], heatmap: Path | None = None) -> None:
    """
    The outputs of a run (`--report`, `--trace`, ...) can be written and the heatmap is
    a PNG: checked before anything runs.
    """
    if heatmap is not None and heatmap.suffix.lower() != ".png":
        raise PlmrError(
            f"--heatmap {heatmap}: the heatmap is a PNG image; give a file name ending "
            "in .png"
        )
    for what, path in {**outputs, "--heatmap": heatmap}.items():
        if path is not None:
            check_output_path(path, what)


def _arg_type(kind: click.ParamType[Any, Any]) -> Any:
    """The `argparse` type of a click type: the same check, argparse's error."""

    def convert(text: str) -> Any:
        try:
            return kind.convert(text, None, None)
        except click.BadParameter as e:
            raise argparse.ArgumentTypeError(e.message) from e

    convert.__name__ = kind.name
    return convert


arg_seed = _arg_type(SEED)
"""`SEED` for argparse (`plmr-opt --check-seed`)."""

arg_tolerance = _arg_type(TOLERANCE)
"""`TOLERANCE` for argparse (`plmr-opt --check-tol`)."""

arg_weights = _arg_type(WEIGHTS)
"""`WEIGHTS` for argparse (`plmr-opt --weights`)."""
