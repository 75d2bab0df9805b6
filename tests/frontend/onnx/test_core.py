"""
The importer's driver (`plmr.frontend.onnx.core`): opset conversion, external data,
integer and boolean inputs, the notice of `plmr import`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from xdsl.dialects import func

from plmr.errors import PlmrError
from plmr.frontend.onnx import (
    MAX_OPSET,
    MIN_OPSET,
    SUPPORTED_OPS,
    import_onnx,
    import_onnx_file,
    upgrade_opset,
)
from plmr.runtime.reference import evaluate_function
from plmr.tools.cli import main as plmr_main


def _old_model(kit: Any, opset: int) -> tuple[onnx.ModelProto, dict[str, Any]]:
    """Ops whose signature changed before opset 13: Softmax (axis), Unsqueeze (axes)."""
    x = kit.rand(2, 3, 4)
    nodes = [
        helper.make_node("Softmax", ["x"], ["s"], axis=1),
        helper.make_node("Unsqueeze", ["s"], ["u"], axes=[0]),
        helper.make_node("ReduceSum", ["u"], ["out"], axes=[3], keepdims=0),
    ]
    return kit.model(nodes, {"x": x}, ["out"], opset=opset), {"x": x}


@pytest.mark.parametrize("opset", [7, 9, 11, 12])
def test_old_opsets_are_converted(kit: Any, opset: int):
    model, feeds = _old_model(kit, opset)
    notes: list[str] = []
    module = import_onnx(model, notify=notes.append)
    assert notes == [
        f"note: converted the model from ONNX opset {opset} to {MIN_OPSET} with "
        "onnx.version_converter"
    ]
    # Before opset 13, Softmax normalises over all axes from `axis` on (ONNX's
    # reference evaluator applies the opset-13 meaning to every opset): numpy.
    x = feeds["x"].astype(np.float64).reshape(2, 12)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    want = (e / e.sum(axis=1, keepdims=True)).reshape(1, 2, 3, 4).sum(axis=3)
    (got,) = evaluate_function(module, "main", list(feeds.values()))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("opset", [MIN_OPSET, 18, MAX_OPSET])
def test_current_opsets_are_kept(kit: Any, opset: int):
    x = kit.rand(2)
    model = kit.model(
        [kit.node("Relu", ["x"])], {"x": x}, ["out"], opset=opset, infer=False
    )
    notes: list[str] = []
    assert upgrade_opset(model, notes.append) is model
    assert notes == []


def test_plmr_import_prints_the_conversion_notice(
    kit: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    model, _ = _old_model(kit, 9)
    path = tmp_path / "old.onnx"
    onnx.save(model, str(path))
    assert plmr_main(["import", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "converted the model from ONNX opset 9 to 13" in err
    assert "func.func @main" in out
    assert "converted" not in out


@pytest.mark.parametrize("one_file", [True, False])
def test_external_data(kit: Any, tmp_path: Path, one_file: bool):
    """Weights stored outside the model: in one named file, or a file per tensor."""
    x = kit.rand(2, 64)
    w = kit.rand(64, 32, seed=1)
    model = kit.model([kit.node("MatMul", ["x", "w"])], {"x": x}, ["out"], {"w": w})
    path = tmp_path / "model.onnx"
    where = {"all_tensors_to_one_file": True, "location": "model.onnx.data"}
    onnx.save(
        model,
        str(path),
        save_as_external_data=True,
        size_threshold=0,
        **(where if one_file else {}),
    )
    assert path.stat().st_size < w.nbytes  # the weight really is stored outside
    (data_file,) = [p for p in tmp_path.iterdir() if p != path]
    assert data_file.stat().st_size == w.nbytes
    (got,) = evaluate_function(import_onnx_file(str(path)), "main", [x])
    np.testing.assert_allclose(got, x @ w, rtol=1e-5, atol=1e-5)


def test_external_data_not_loaded_is_a_clear_error(kit: Any, tmp_path: Path):
    x = kit.rand(2, 8)
    model = kit.model(
        [kit.node("MatMul", ["x", "w"])], {"x": x}, ["out"], {"w": kit.rand(8, 4)}
    )
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path), save_as_external_data=True, size_threshold=0)
    loaded = onnx.load(str(path), load_external_data=False)
    kit.raises(loaded, "initializer 'w'", "external data", "import_onnx_file")


def test_external_data_file_missing(kit: Any, tmp_path: Path):
    x = kit.rand(2, 8)
    model = kit.model(
        [kit.node("MatMul", ["x", "w"])], {"x": x}, ["out"], {"w": kit.rand(8, 4)}
    )
    path = tmp_path / "m.onnx"
    onnx.save(
        model, str(path), save_as_external_data=True, location="w.bin", size_threshold=0
    )
    (tmp_path / "w.bin").unlink()
    with pytest.raises(PlmrError, match="cannot load the external data"):
        import_onnx_file(str(path))


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_integer_input_ids(kit: Any, dtype: Any):
    ids = np.array([[3, 0, 7, 7]], dtype=dtype)
    table = kit.rand(10, 6)
    nodes = [helper.make_node("Gather", ["table", "ids"], ["out"], axis=0)]
    model = kit.model(nodes, {"ids": ids}, ["out"], {"table": table})
    module = kit.check(model, {"ids": ids})
    assert str(module.body.block.first_op.args[0].type).startswith("tensor<1x4xi")  # type: ignore[union-attr]


def test_bool_input_and_output(kit: Any):
    m = np.array([[True, False, True]])
    x = kit.rand(1, 3)
    nodes = [
        helper.make_node("Not", ["m"], ["n"]),
        helper.make_node("Where", ["n", "x", "zero"], ["out"]),
    ]
    model = kit.model(
        nodes, {"m": m, "x": x}, ["out", "n"], {"zero": np.array(0.0, np.float32)}
    )
    kit.check(model, {"m": m, "x": x})


def test_int64_arithmetic_and_comparison(kit: Any):
    ids = np.array([[1, 5, 0, 9]], np.int64)
    nodes = [
        helper.make_node("Add", ["ids", "one"], ["shifted"]),
        helper.make_node("Less", ["shifted", "limit"], ["out"]),
    ]
    inits = {"one": np.array(1, np.int64), "limit": np.array(6, np.int64)}
    kit.check(kit.model(nodes, {"ids": ids}, ["out"], inits), {"ids": ids})


def test_unsupported_op_lists_supported_ops(kit: Any):
    x = kit.rand(3)
    model = kit.model([kit.node("Hardmax", ["x"])], {"x": x}, ["out"])
    message = kit.raises(model, "node 'the_hardmax' (Hardmax)", "is not supported")
    for op in ("Where", "Einsum", "ConvTranspose", "Slice"):
        assert op in message
    assert "evaluated at import" in message


def test_supported_ops_cover_the_brief():
    needed = {
        "Cast", "Reciprocal", "Where", "IsNaN", "Equal", "Less", "LessOrEqual", "Greater",
        "GreaterOrEqual", "Not", "And", "Or", "Xor", "Expand", "Slice", "GatherElements",
        "Pow", "Einsum", "ConstantOfShape", "Range", "Shape", "Trilu",
        "BatchNormalization", "Dropout", "Sum", "Max", "Min", "Mean", "LRN",
        "GlobalAveragePool", "GlobalMaxPool", "ConvTranspose", "Pad", "PRelu",
        "LeakyRelu", "Elu", "Selu", "Softplus", "LogSoftmax", "Clip", "Abs", "Tile",
        "InstanceNormalization", "Log", "Floor", "Ceil", "Sign", "MatMul", "Gemm",
        "Cos", "Sin",
    }  # fmt: skip
    assert needed <= set(SUPPORTED_OPS)


def test_graph_input_with_initializer_is_a_constant(kit: Any):
    x = kit.rand(2, 3)
    w = kit.rand(2, 3, seed=1)
    model = kit.model([kit.node("Add", ["x", "w"])], {"x": x}, ["out"], {"w": w})
    model.graph.input.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [2, 3]))
    module = kit.check(model, {"x": x})
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    assert len(fn.args) == 1
    assert kit.ops(module) == ["graph.constant", "graph.add"]


def test_initializer_typed_as_bool_constant(kit: Any):
    x = kit.rand(2, 2)
    mask = np.array([[True, False], [False, True]])
    model = kit.model(
        [helper.make_node("Where", ["mask", "x", "zero"], ["out"])],
        {"x": x},
        ["out"],
        {"mask": mask, "zero": np.array(0.0, np.float32)},
    )
    kit.check(model, {"x": x})
