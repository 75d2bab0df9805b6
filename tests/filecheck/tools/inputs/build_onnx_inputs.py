"""
Writes the small ONNX models the `plmr import` FileCheck tests read (next to this file).
Run from the repository root: `.venv/bin/python tests/filecheck/tools/inputs/build_onnx_inputs.py`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
F32 = TensorProto.FLOAT


def _save(
    name: str,
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[str],
    inits: dict[str, np.ndarray],
    opset: int,
) -> None:
    graph = helper.make_graph(
        nodes,
        name,
        inputs,
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 4 if opset < 13 else 8
    model = onnx.shape_inference.infer_shapes(model)
    onnx.checker.check_model(model)
    onnx.save(model, str(HERE / f"{name}.onnx"))


def old_cnn() -> None:
    """Opset 9: a 1-D convolution, batch norm, dropout and an opset-9 Softmax."""
    rng = np.random.default_rng(0)
    _save(
        "old_cnn",
        [
            helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1]),
            helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
            helper.make_node("Dropout", ["n"], ["d"], ratio=0.5),
            helper.make_node("Flatten", ["d"], ["f"]),
            helper.make_node("Softmax", ["f"], ["y"], axis=1),
        ],
        [helper.make_tensor_value_info("x", F32, [1, 2, 6])],
        ["y"],
        {
            "w": rng.standard_normal((3, 2, 3)).astype(np.float32),
            "s": np.ones(3, np.float32),
            "b": np.zeros(3, np.float32),
            "m": np.zeros(3, np.float32),
            "v": np.ones(3, np.float32),
        },
        9,
    )


def shape_subgraph() -> None:
    """A reshape whose target comes from Shape, and a causal mask built from Range."""
    _save(
        "shape_subgraph",
        [
            helper.make_node("Shape", ["x"], ["shape"]),
            helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
            helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
            helper.make_node("Concat", ["batch1", "minus_one"], ["target"], axis=0),
            helper.make_node("Reshape", ["x", "target"], ["flat"]),
            helper.make_node("Range", ["zero", "four", "one"], ["r"]),
            helper.make_node("Unsqueeze", ["r", "axes"], ["row"]),
            helper.make_node("Unsqueeze", ["r", "one_axis"], ["col"]),
            helper.make_node("Greater", ["row", "col"], ["future"]),
            helper.make_node("Where", ["future", "neg", "zero_f"], ["mask"]),
            helper.make_node("ReduceSum", ["mask", "axes"], ["mask_row"], keepdims=1),
            helper.make_node("Add", ["flat", "mask_row"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", F32, [2, 2, 2])],
        ["y"],
        {
            "zero": np.array(0, np.int64),
            "one": np.array(1, np.int64),
            "four": np.array(4, np.int64),
            "axes": np.array([0], np.int64),
            "one_axis": np.array([1], np.int64),
            "minus_one": np.array([-1], np.int64),
            "neg": np.array(-1.0, np.float32),
            "zero_f": np.array(0.0, np.float32),
        },
        18,
    )


def unsupported() -> None:
    """Hardmax of a run-time value: refused with the list of supported ops."""
    _save(
        "unsupported",
        [helper.make_node("Hardmax", ["x"], ["y"], name="pick")],
        [helper.make_tensor_value_info("x", F32, [2, 3])],
        ["y"],
        {},
        18,
    )


if __name__ == "__main__":
    old_cnn()
    shape_subgraph()
    unsupported()
