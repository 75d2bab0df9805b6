"""
plmr: a multi-level compiler for wafer-scale AI chips, built on xDSL.

Importing this package is cheap: dialects, passes and the runtime load lazily.
"""

__version__ = "0.1.0"
