"""
Shared helpers of the ONNX importer's handler tests: tiny models built with
`onnx.helper`, imported, run with plmr's reference semantics and compared with
`onnx.reference.ReferenceEvaluator`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from plmr.errors import PlmrError
from plmr.frontend.onnx import import_onnx
from plmr.runtime.reference import evaluate_function

Array = npt.NDArray[Any]


class Kit:
    """Builds, imports and checks one-node (or small) ONNX models."""

    @staticmethod
    def model(
        nodes: list[onnx.NodeProto],
        inputs: dict[str, Array],
        outputs: list[str],
        inits: dict[str, Array] | None = None,
        opset: int = 18,
        infer: bool = True,
    ) -> onnx.ModelProto:
        g = helper.make_graph(
            nodes,
            "test",
            [
                helper.make_tensor_value_info(
                    n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)
                )
                for n, a in inputs.items()
            ],
            [helper.make_empty_tensor_value_info(n) for n in outputs],
            [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()],
        )
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8 if opset < 19 else 9
        if infer:
            model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
            onnx.checker.check_model(model, full_check=True)
        return model

    @staticmethod
    def node(op: str, inputs: list[str], **attrs: Any) -> onnx.NodeProto:
        return helper.make_node(op, inputs, ["out"], name=f"the_{op.lower()}", **attrs)

    @staticmethod
    def rand(*shape: int, seed: int = 0, dtype: Any = np.float32) -> Array:
        return np.random.default_rng(seed).standard_normal(shape).astype(dtype)

    @staticmethod
    def check(
        model: onnx.ModelProto,
        feeds: dict[str, Array],
        rtol: float = 1e-5,
        atol: float = 1e-5,
    ) -> ModuleOp:
        """Asserts that plmr and ONNX's reference evaluator agree on `model`."""
        module = import_onnx(model)
        module.verify()
        got = evaluate_function(module, "main", list(feeds.values()))
        want = [np.asarray(w) for w in ReferenceEvaluator(model).run(None, feeds)]
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape
            assert g.dtype == w.dtype
            if w.dtype.kind in "biu":
                np.testing.assert_array_equal(g, w)
            else:
                np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        return module

    @staticmethod
    def ops(module: ModuleOp) -> list[str]:
        """The op names of the body of @main, without func.return."""
        fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
        return [op.name for op in fn.body.block.ops if not isinstance(op, func.ReturnOp)]

    @staticmethod
    def raises(model: onnx.ModelProto, *fragments: str) -> str:
        with pytest.raises(PlmrError) as info:
            import_onnx(model)
        message = str(info.value)
        for fragment in fragments:
            assert fragment in message, (fragment, message)
        return message


@pytest.fixture
def kit() -> Kit:
    return Kit()
