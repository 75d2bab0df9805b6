"""Shared checks of the dialect tests."""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

UnreachedErrors = Callable[..., dict[int, str]]


def raise_lines(path: str) -> dict[int, str]:
    """The lines of a dialect file that raise a verifier or parser error."""
    source = Path(path).read_text().splitlines()
    return {
        i: line.strip()
        for i, line in enumerate(source, start=1)
        if "raise VerifyException(" in line or "parser.raise_error(" in line
    }


def unreached_errors(
    path: str,
    invalid_mlir: Path,
    extra: Sequence[Callable[[], None]] = (),
    minimum: int = 1,
) -> dict[int, str]:
    """
    Runs `invalid_mlir` through plmr-opt (and the `extra` Python-only cases) under a
    line tracer and returns the error-raising lines of `path` that nothing reached;
    `path` must have at least `minimum` of them.
    """
    lines = raise_lines(path)
    assert len(lines) >= minimum, f"{path} raises {len(lines)} errors"
    from plmr.tools.plmr_opt import main

    hit: set[int] = set()

    def tracer(frame: FrameType, event: str, arg: object) -> Any:
        if frame.f_code.co_filename == path and event == "line":
            hit.add(frame.f_lineno)
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        with contextlib.redirect_stdout(io.StringIO()) as out:
            status = main(
                [
                    str(invalid_mlir),
                    "--split-input-file",
                    "--verify-diagnostics",
                    "--parsing-diagnostics",
                ]
            )
        for case in extra:
            case()
    finally:
        sys.settrace(previous)
    assert status == 0
    assert "Operation does not verify" in out.getvalue()
    return {i: text for i, text in lines.items() if i not in hit}


@pytest.fixture
def unreached() -> UnreachedErrors:
    return unreached_errors
