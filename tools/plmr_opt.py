"""
`plmr-opt`: xDSL's modular optimizer driver with every xDSL and plmr dialect and pass.

It behaves like `xdsl-opt` (same flags, same pass-pipeline syntax) with two differences
that matter in scripts: bad input (unreadable file, unparsable or unverifiable IR, an
unknown pass or option, a failing pass) prints one error message and exits with status 1
instead of a Python traceback, and `-o FILE` is written only when everything succeeded.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from io import StringIO
from pathlib import Path
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from plmr import __version__
from plmr.dialects.context import describe_op, first_invalid_op
from plmr.errors import PlmrError
from plmr.files import check_output_path, read_text_file, write_text_atomically
from plmr.tools.options import arg_seed, arg_tolerance, arg_weights


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

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        check = arg_parser.add_argument_group("checking every pass")
        check.add_argument(
            "--check-each",
            action="store_true",
            help="run the program before and after every pass with the reference "
            "semantics of its level on the same random inputs; stop at the first pass "
            "that changes the results",
        )
        check.add_argument(
            "--check-dir",
            default=None,
            help="with --check-each: write the IR before and after a failing pass here",
        )
        check.add_argument(
            "--check-seed", type=arg_seed, default=0, help="seed of the random inputs"
        )
        check.add_argument(
            "--check-tol",
            type=arg_tolerance,
            default=None,
            help="largest accepted relative error (default 1e-4)",
        )
        check.add_argument("--check-entry", default=None, help="function to run")
        check.add_argument(
            "--check-text",
            action="store_true",
            help="with --check-each (implied): print the program after every pass and "
            "parse it back before running it",
        )

        arg_parser.add_argument(
            "--weights",
            type=arg_weights,
            default=None,
            help="where the program's weights are if they moved: a directory holding "
            "its weights files, or the one weights file (default: as the program names "
            "them, relative to its directory)",
        )

    def apply_passes(self, prog: ModuleOp) -> None:
        from plmr.dialects.graph_weights import anchor_weights, relocate_weights

        source = self.args.input_file
        base = Path.cwd() if source in (None, "-") else Path(source).resolve().parent
        moved = None if self.args.weights is None else Path(self.args.weights)
        anchor_weights(prog, base, moved)
        # A lowered weight prints a builtin dense_resource: the printer asks the builtin
        # dialect for the resource blobs (a weight has none: nothing more is printed).
        self.ctx.get_optional_dialect("builtin")
        self._apply_passes(prog)
        out = self.args.output_file
        # The output names the weights relative to its own directory (absolute on
        # standard output).
        if out is not None:
            relocate_weights(prog, Path(out).resolve().parent)

    def _apply_passes(self, prog: ModuleOp) -> None:
        if not (self.args.check_each or self.args.check_text):
            super().apply_passes(prog)
            return
        from plmr.validate.check_each import DEFAULT_TOLERANCE, CheckOptions, check_passes

        tol = self.args.check_tol
        options = CheckOptions(
            seed=self.args.check_seed,
            tolerance=DEFAULT_TOLERANCE if tol is None else tol,
            check_dir=None if self.args.check_dir is None else Path(self.args.check_dir),
            entry=self.args.check_entry,
            through_text=self.args.check_text,
        )

        def echo(line: str) -> None:
            print(line, file=sys.stderr)

        check_passes(self.ctx, prog, self.pipeline.passes, options, echo)

    def prepare_output(self) -> IO[str]:
        if self.args.output_file is None:
            return sys.stdout
        # Buffer, so that a failure leaves no half-written output file behind.
        self._buffer = StringIO()
        return _KeepOpen(self._buffer)

    def setup_pipeline(self) -> None:
        super().setup_pipeline()
        checked = self.pipeline.callback
        if checked is None:
            return

        def callback(
            previous: ModulePass | None, module: ModuleOp, following: ModulePass | None
        ) -> None:
            try:
                checked(previous, module, following)
            except DiagnosticException as e:
                if previous is None:
                    raise
                # The pass wrote a program that does not verify: a compiler error.
                found = first_invalid_op(module)
                reason = str(e).strip() if found is None else found[1]
                where = "" if found is None else f" at {describe_op(found[0])}"
                raise PlmrError(
                    f"pass {previous.name} produced a program that does not "
                    f"verify{where}: {reason.splitlines()[0]}"
                ) from e

        self.pipeline = dataclasses.replace(self.pipeline, callback=callback)

    def run(self) -> None:
        if self.args.input_file is not None:
            # The input's real problem (missing, empty, not text) before xDSL reads it.
            read_text_file(Path(self.args.input_file), "input", "an .mlir program")
        if self.args.output_file is not None:
            check_output_path(Path(self.args.output_file))
        super().run()
        if self._buffer is not None:
            write_text_atomically(Path(str(self.args.output_file)), self._buffer.getvalue())


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
    if isinstance(e, UnicodeDecodeError):
        return f"the input is not a text (.mlir) file: byte {e.start} is not UTF-8"
    if isinstance(e, MemoryError):
        return "a constant of the input is too large for this host's memory"
    if isinstance(e, FileNotFoundError):
        return f"no such file: {e.filename}"
    if isinstance(e, OSError):
        return f"cannot read or write {e.filename}: {e.strerror}"
    return None


def _pipeline_text(argv: Sequence[str]) -> str | None:
    for i, arg in enumerate(argv):
        if arg in ("-p", "--passes") and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--passes="):
            return arg.removeprefix("--passes=")
    return None


def option_problem(argv: Sequence[str] | None) -> str | None:
    """The first pass option of the pipeline xDSL cannot take, named, with its reason."""
    from xdsl.universe import Universe
    from xdsl.utils.arg_spec import ArgSpec, parse_pipeline

    text = _pipeline_text(sys.argv[1:] if argv is None else argv)
    if text is None:
        return None
    passes = Universe.get_multiverse().all_passes
    try:
        specs = list(parse_pipeline(text))
    except (ArgSpecParseError, ValueError):
        return None
    for spec in specs:
        if spec.name not in passes:
            continue
        cls = passes[spec.name]()
        for option, value in spec.parameters.items():
            try:
                cls.from_pass_spec(ArgSpec(spec.name, {option: value}))
            except ValueError as e:
                shown = ",".join(str(v) for v in value)
                return f"{spec.name}: option {option}={shown}: {e}"
    return None


def main(argv: Sequence[str] | None = None, driver: type[PlmrOptMain] = PlmrOptMain) -> int:
    """`plmr-opt`; `driver` may register more passes (tests of `--check-each`)."""
    try:
        try:
            opt = driver(args=argv)
        except ValueError as e:
            # Raised while xDSL parses the pipeline: unknown passes, bad or missing options.
            raise PlmrError(f"bad pass pipeline: {option_problem(argv) or e}") from e
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
