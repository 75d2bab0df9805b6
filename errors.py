"""The error types of plmr: one precise, user-facing message (what, where, how to fix)."""

from xdsl.utils.exceptions import DiagnosticException


class PlmrError(Exception):
    """
    A user-facing error: bad input, a program the target cannot hold, a failed check.

    The command-line tools print its message as one line and exit non-zero; they never
    show a traceback for it.
    """


class PassError(PlmrError, DiagnosticException):
    """
    A pass refuses its input before changing anything; the message names the pass. It
    is also one of xDSL's diagnostics, so `xdsl-opt --verify-diagnostics` reports it as
    a message.
    """


class PassOptionError(PassError):
    """An invalid option of a pass (`plmr-compile{grid=0,0}`), named in the message."""
