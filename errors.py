"""The error type of plmr: one precise, user-facing message (what, where, how to fix)."""


class PlmrError(Exception):
    """
    A user-facing error: bad input, a program the target cannot hold, a failed check.

    The command-line tools print its message as one line and exit non-zero; they never
    show a traceback for it.
    """
