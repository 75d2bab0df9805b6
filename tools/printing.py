"""Printing modules under its former module name; it lives in `plmr.dialects.printing`."""

from plmr.dialects.printing import module_text

__all__ = ["module_text"]
