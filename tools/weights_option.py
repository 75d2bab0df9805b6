"""The `--weights DIR_OR_FILE` option of the tools that read programs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from plmr.tools.options import WEIGHTS

F = TypeVar("F", bound=Callable[..., Any])


def weights_option(f: F) -> F:
    """Adds `--weights`: where a program's weights files are if they moved."""
    return click.option(
        "--weights",
        "weights",
        type=WEIGHTS,
        default=None,
        help="Where the program's weights are if they moved: a directory holding its "
        "weights files, or the one weights file (default: as the program names them, "
        "relative to its directory).",
    )(f)
