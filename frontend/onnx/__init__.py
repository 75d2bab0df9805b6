"""
Import of ONNX models into the `graph` dialect.

`import_onnx(model)` turns the main graph of an ONNX model into a module holding one
`func.func @main` of `graph` ops:

- graph inputs that are not initializers become the function's arguments, graph outputs
  its results; their ONNX names are kept as `{plmr.name = "<onnx name>"}` argument and
  result attributes, and sanitized ONNX names become the SSA names of the values;
- initializers and `Constant` nodes are compile-time constants, turned into
  `graph.constant` ops where a run-time op first uses them; initializers larger than
  `WeightsOptions.inline_limit` bytes are `graph.weight` references instead (the model's
  external data read in place, or a safetensors file written beside the program), never
  loaded whole;
- a node whose inputs are all compile-time constants is evaluated at import (`folding`),
  and `Shape` / `Size` fold from static shapes, so shape sub-graphs disappear;
- every other node goes to the handler of its op (`HANDLERS`), which emits `graph` ops;
  ops without a `graph` counterpart are exact rewrites into other ops where possible.

Models older than opset 13 are converted to opset 13 with `onnx.version_converter`
first; opsets up to the installed onnx's newest are accepted. Shapes must be static.
Anything else (a dynamic dimension, an unsupported op or attribute value) raises a
`PlmrError` that names the offending input or node and says how to fix the model.

The package is split by role: `core` (values, driver, entry points), `folding`,
`elementwise`, `shapes`, `linalg`, `nn` and `conv` (handlers), `weights` (weights by
reference).
"""

from plmr.frontend.onnx import conv, elementwise, linalg, nn, shapes
from plmr.frontend.onnx.core import (
    HANDLERS,
    MAX_OPSET,
    MIN_OPSET,
    NAME_ATTR,
    Handler,
    import_onnx,
    import_onnx_file,
    ssa_name,
    upgrade_opset,
)
from plmr.frontend.onnx.weights import DEFAULT_INLINE_LIMIT, WeightsOptions

del conv, elementwise, linalg, nn, shapes

SUPPORTED_OPS: tuple[str, ...] = tuple(sorted(HANDLERS))
"""The ONNX ops `import_onnx` accepts (any op is accepted when its inputs are constant)."""

__all__ = [
    "DEFAULT_INLINE_LIMIT",
    "HANDLERS",
    "MAX_OPSET",
    "MIN_OPSET",
    "NAME_ATTR",
    "SUPPORTED_OPS",
    "Handler",
    "WeightsOptions",
    "import_onnx",
    "import_onnx_file",
    "ssa_name",
    "upgrade_opset",
]
