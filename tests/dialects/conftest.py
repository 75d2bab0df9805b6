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

UnreachedErrors = Callable[..., dict[str, dict[int, str]]]


def raise_lines(path: str) -> dict[int, str]:
    """The lines of a dialect file that raise a verifier or parser error."""
    source = Path(path).read_text().splitlines()
    return {
        i: line.strip()
        for i, line in enumerate(source, start=1)
        if "raise VerifyException(" in line or "parser.raise_error(" in line
    }


def unreached_errors(
    paths: Sequence[str],
    invalid_mlir: Path,
    extra: Sequence[Callable[[], None]] = (),
) -> dict[str, dict[int, str]]:
    """
    Runs `invalid_mlir` through plmr-opt (and the `extra` Python-only cases) once under a
    line tracer and returns, for each of `paths`, its error-raising lines that nothing
    reached.
    """
    lines = {path: raise_lines(path) for path in paths}
    from plmr.tools.plmr_opt import main

    hits: dict[str, set[int]] = {path: set() for path in paths}

    def tracer(frame: FrameType, event: str, arg: object) -> Any:
        if event == "line":
            hit = hits.get(frame.f_code.co_filename)
            if hit is not None:
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
    return {
        path: {i: text for i, text in lines[path].items() if i not in hits[path]}
        for path in paths
    }


@pytest.fixture(scope="session")
def unreached() -> UnreachedErrors:
    """`unreached_errors`: one traced run gives the unreached errors of several files."""
    return unreached_errors
