"""
`plmr-opt`: xDSL's modular optimizer driver with every xDSL and plmr dialect and pass.

It behaves like `xdsl-opt` (same flags, same pass-pipeline syntax) with two differences
that matter in scripts: bad input (unreadable file, unparsable or unverifiable IR, an
unknown pass or option, a failing pass) prints one error message and exits with status 1
instead of a Python traceback, and `-o FILE` is written only when everything succeeded.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from io import StringIO
from typing import IO

from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from plmr import __version__
from plmr.errors import PlmrError


class PlmrOptMain(xDSLOptMain):
    """`xDSLOptMain` with plmr's branding, buffered output and clean error reporting."""

    version_format = f"plmr-opt {__version__} (xdsl {{xdsl_version}})"

    _buffer: StringIO | None = None

    def __init__(
        self,
        description: str = "plmr modular optimizer driver (xDSL and plmr passes)",
        args: Sequence[str] | None = None,
    ):
        super().__init__(description, args)

    def prepare_output(self) -> IO[str]:
        if self.args.output_file is None:
            return sys.stdout
        # Buffer, so that a failure leaves no half-written output file behind.
        self._buffer = StringIO()
        return _KeepOpen(self._buffer)

    def run(self) -> None:
        super().run()
        if self._buffer is not None:
            with open(self.args.output_file, "w") as f:
                f.write(self._buffer.getvalue())


class _KeepOpen(StringIO):
    """A write-through wrapper whose `close()` keeps the underlying buffer readable."""

    def __init__(self, target: StringIO):
        super().__init__()
        self._target = target

    def write(self, s: str) -> int:
        return self._target.write(s)

    def close(self) -> None:
        pass


def error_message(e: BaseException) -> str | None:
    """The user-facing message of an error plmr tools report, or None for a bug."""
    if isinstance(e, ParseError):
        return str(e).strip()
    if isinstance(e, DiagnosticException):
        # xDSL attaches the IR, annotated at the failing op, as a note.
        notes: list[str] = getattr(e, "__notes__", [])
        return "\n".join([str(e).strip(), *(n.rstrip() for n in notes)])
    if isinstance(e, PlmrError):
        return str(e).strip()
    if isinstance(e, ArgSpecParseError):
        return f"bad pass pipeline: {str(e).strip()}"
    if isinstance(e, FileNotFoundError):
        return f"no such file: {e.filename}"
    if isinstance(e, OSError):
        return f"cannot read or write {e.filename}: {e.strerror}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            opt = PlmrOptMain(args=argv)
        except ValueError as e:
            # Raised while xDSL parses the pipeline: unknown passes, bad or missing options.
            raise PlmrError(f"bad pass pipeline: {e}") from e
        opt.run()
    except (Exception, ArgSpecParseError) as e:
        message = error_message(e)
        if message is None:
            raise
        print(f"plmr-opt: error: {message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
