"""
Matrix products: MatMul (numpy semantics, 1-D operands included) and Gemm.
"""

from __future__ import annotations

import numpy as np

from plmr.dialects import graph
from plmr.tools.onnx_import.core import Importer, Node, fmt_shape, handles, shape_of


@handles("MatMul")
def op_matmul(imp: Importer, node: Node) -> None:
    """numpy matmul: 1-D operands are reshaped to matrices and back."""
    a, b = imp.tensor(node, 0), imp.tensor(node, 1)
    a_shape, b_shape = shape_of(a), shape_of(b)
    if not a_shape or not b_shape:
        raise node.error("MatMul operands must have rank >= 1, got a scalar; fix the model")
    if len(a_shape) == 1:
        a = imp.emit(graph.ReshapeOp(a, (1, a_shape[0])))
    if len(b_shape) == 1:
        b = imp.emit(graph.ReshapeOp(b, (b_shape[0], 1)))
    y = imp.emit(graph.MatmulOp(a, b))
    out = list(shape_of(y))
    if len(b_shape) == 1:
        del out[-1]
    if len(a_shape) == 1:
        del out[-2 if len(b_shape) > 1 else -1]
    if len(a_shape) == 1 or len(b_shape) == 1:
        y = imp.emit(graph.ReshapeOp(y, out))
    imp.define(node.output(0), y)


@handles("Gemm")
def op_gemm(imp: Importer, node: Node) -> None:
    """`alpha·A'·B' + beta·C` as matmul, scale, add (beta folds into a constant C)."""
    alpha = node.float_attr("alpha", 1.0)
    beta = node.float_attr("beta", 1.0)
    trans_a = node.int_attr("transA", 0) != 0
    trans_b = node.int_attr("transB", 0) != 0
    a, b = imp.tensor(node, 0), imp.tensor(node, 1)
    for what, v in (("A", a), ("B", b)):
        if len(shape_of(v)) != 2:
            raise node.error(
                f"input {what} must be a matrix, got shape {fmt_shape(shape_of(v))}; "
                "use MatMul for batched products"
            )
    y = imp.emit(graph.MatmulOp(a, b, transpose_a=trans_a, transpose_b=trans_b))
    if alpha != 1.0:
        y = imp.emit(graph.ScaleOp(y, alpha))
    if node.input(2) and beta != 0.0:
        c_name = node.input(2)
        c_const = imp.consts.get(c_name)
        if c_const is not None and beta != 1.0:
            c_arr = (c_const * np.asarray(beta, dtype=c_const.dtype)).astype(c_const.dtype)
            c = imp.materialize(c_arr, f"{c_name}_times_beta", node.where)
        else:
            c = imp.tensor(node, 2)
            if beta != 1.0:
                c = imp.emit(graph.ScaleOp(c, beta))
        out_shape = shape_of(y)
        y = imp.emit(graph.AddOp(y, c))
        if shape_of(y) != out_shape:
            raise node.error(
                f"C of shape {fmt_shape(shape_of(c))} does not broadcast to the "
                f"{fmt_shape(out_shape)} product; fix the model"
            )
    imp.define(node.output(0), y)


# ---------------------------------------------------------------------------------------
# shape ops
# ---------------------------------------------------------------------------------------
