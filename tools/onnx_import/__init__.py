"""The ONNX importer under its former name; it lives in `plmr.frontend.onnx`."""

from plmr.frontend.onnx import (
    HANDLERS,
    MAX_OPSET,
    MIN_OPSET,
    NAME_ATTR,
    SUPPORTED_OPS,
    Handler,
    import_onnx,
    import_onnx_file,
    ssa_name,
    upgrade_opset,
)

__all__ = [
    "HANDLERS",
    "MAX_OPSET",
    "MIN_OPSET",
    "NAME_ATTR",
    "SUPPORTED_OPS",
    "Handler",
    "import_onnx",
    "import_onnx_file",
    "ssa_name",
    "upgrade_opset",
]
