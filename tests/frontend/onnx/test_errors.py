"""
What `plmr.frontend.onnx` says about a model it cannot import as a whole: unsupported
ops and domains, dynamic or unknown shapes, opsets, input types, declared outputs that
disagree, undefined inputs, unreadable files. (An op's own errors are tested next to its
handler.) Each is one `PlmrError` that says what, where and how to fix it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import TensorProto, helper

from plmr.errors import PlmrError
from plmr.frontend.onnx import SUPPORTED_OPS, import_onnx_file

F32 = TensorProto.FLOAT


def _graph_model(
    dims: list[int | str | None] | None,
    declared: list[int] | None = None,
    elem_type: int = F32,
) -> onnx.ModelProto:
    """`out = Relu(x)` (Identity for a non-float type), declared by hand, unchecked."""
    op = "Relu" if elem_type == F32 else "Identity"
    g = helper.make_graph(
        [helper.make_node(op, ["x"], ["out"])],
        "bad",
        [helper.make_tensor_value_info("x", elem_type, dims)],
        [helper.make_tensor_value_info("out", elem_type, declared)],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_error_unsupported_op(kit: Any):
    x = kit.rand(2, 3)
    model = kit.model(
        [helper.make_node("Hardmax", ["x"], ["out"], name="my_hardmax")], {"x": x}, ["out"]
    )
    message = kit.raises(
        model, "node 'my_hardmax' (Hardmax)", "'Hardmax' is not supported", "supported ops:"
    )
    for op in SUPPORTED_OPS:
        assert op in message


def test_error_unsupported_op_unnamed_node_uses_index(kit: Any):
    x = kit.rand(2, 3)
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Hardmax", ["r"], ["out"]),
    ]
    kit.raises(kit.model(nodes, {"x": x}, ["out"]), "node #1 (Hardmax)")


def test_error_custom_domain(kit: Any):
    x = kit.rand(2, 3)
    node = helper.make_node("FusedGemm", ["x"], ["out"], name="fg", domain="com.microsoft")
    model = kit.model([node], {"x": x}, ["out"], infer=False)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    kit.raises(model, "node 'fg' (FusedGemm)", "com.microsoft", "default-domain")


def test_error_dynamic_dim(kit: Any):
    kit.raises(
        _graph_model(["batch", 4]),
        "graph input 'x'",
        "dimension 0",
        "'batch'",
        "static shapes",
        "update_model_dims",
    )


def test_error_unknown_dim(kit: Any):
    kit.raises(_graph_model([2, None]), "graph input 'x'", "dimension 1", "unknown size")


def test_error_unknown_rank(kit: Any):
    kit.raises(_graph_model(None), "graph input 'x'", "no shape")


def test_error_opset_newer_than_onnx(kit: Any):
    x = kit.rand(2, 3)
    newer = onnx.defs.onnx_opset_version() + 1
    model = kit.model(
        [kit.node("Relu", ["x"])], {"x": x}, ["out"], opset=newer, infer=False
    )
    kit.raises(model, f"opset {newer}", f"up to {newer - 1}", "upgrade onnx")


def test_error_opset_conversion_fails(kit: Any):
    # The converter rejects an op that no opset defines; its failure is one PlmrError.
    g = helper.make_graph(
        [helper.make_node("Foo", ["x"], ["out"], domain="")],
        "bad",
        [helper.make_tensor_value_info("x", F32, [2])],
        [helper.make_tensor_value_info("out", F32, [2])],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 4
    kit.raises(model, "opset 9", "onnx.version_converter", "failed")


def test_error_no_default_opset(kit: Any):
    x = kit.rand(2, 3)
    model = kit.model([kit.node("Relu", ["x"])], {"x": x}, ["out"], infer=False)
    del model.opset_import[:]
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    kit.raises(model, "no default-domain ONNX opset")


def test_error_unsupported_input_type(kit: Any):
    model = _graph_model([2], [2], TensorProto.STRING)
    kit.raises(model, "graph input 'x'", "STRING", "float32")


def test_error_declared_output_shape_mismatch(kit: Any):
    kit.raises(_graph_model([2, 3], [3, 2]), "graph output 'out'", "[3, 2]", "[2, 3]")


def test_error_shape_mismatch_names_node(kit: Any):
    x, y = kit.rand(2, 3), kit.rand(4)
    model = kit.model([kit.node("Add", ["x", "y"])], {"x": x, "y": y}, ["out"], infer=False)
    kit.raises(model, "node 'the_add' (Add)", "broadcast", "[2, 3]", "[4]")


def test_error_undefined_input(kit: Any):
    x = kit.rand(2)
    model = kit.model([kit.node("Add", ["x", "y"])], {"x": x}, ["out"], infer=False)
    kit.raises(model, "node 'the_add' (Add)", "'y'", "topologically")


def test_error_file_missing(tmp_path: Path):
    path = tmp_path / "missing.onnx"
    with pytest.raises(PlmrError, match=re.escape(str(path))):
        import_onnx_file(str(path))


@pytest.mark.parametrize("content", [b"", b"garbage\x00\xff\xfe"])
def test_error_file_not_a_model(tmp_path: Path, content: bytes):
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(PlmrError, match=re.escape(str(path))):
        import_onnx_file(str(path))
