"""
Matrix products: MatMul (numpy semantics, 1-D operands included), Gemm, and Einsum
contractions rewritten into transposes, reshapes and one matmul.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.ir import SSAValue

from plmr.dialects import graph
from plmr.frontend.onnx.core import Importer, Node, fmt_shape, handles, shape_of


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


# ---------------------------------------------------------------------------------------
# Einsum
# ---------------------------------------------------------------------------------------


def _einsum_terms(node: Node, n_inputs: int) -> tuple[list[str], str]:
    """The letters of each operand and of the output of an Einsum equation."""
    equation = node.str_attr("equation", "").replace(" ", "")
    if not equation:
        raise node.error("the required attribute 'equation' is missing; fix the model")
    lhs, arrow, out = equation.partition("->")
    terms = lhs.split(",")
    if not arrow:
        letters = "".join(terms)
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    unsupported = (
        "..." in equation
        or not all(t.isalpha() for t in [*terms, out] if t)
        or any(len(set(t)) != len(t) for t in [*terms, out])
    )
    if unsupported:
        raise node.error(
            f"equation '{equation}' is not supported: plmr imports Einsum without "
            "ellipses ('...') or repeated letters in one operand (diagonals); write "
            "the contraction with MatMul, Transpose and Reshape"
        )
    if len(terms) != n_inputs or n_inputs not in (1, 2):
        raise node.error(
            f"equation '{equation}' has {len(terms)} operands and the node "
            f"{n_inputs} inputs; plmr imports Einsum of one or two operands"
        )
    stray = set(out) - set("".join(terms))
    if stray:
        raise node.error(f"output letters {sorted(stray)} appear in no operand")
    return terms, out


def _permute(imp: Importer, v: SSAValue, letters: str, target: str) -> SSAValue:
    if letters == target:
        return v
    return imp.emit(graph.TransposeOp(v, [letters.index(c) for c in target]))


def _reshape(imp: Importer, v: SSAValue, shape: Sequence[int]) -> SSAValue:
    if shape_of(v) == tuple(shape):
        return v
    return imp.emit(graph.ReshapeOp(v, tuple(shape)))


def _sum_out(
    imp: Importer, v: SSAValue, letters: str, keep: set[str]
) -> tuple[SSAValue, str]:
    """`v` summed over the letters not in `keep` (and those letters dropped)."""
    axes = [i for i, c in enumerate(letters) if c not in keep]
    if not axes:
        return v, letters
    summed = imp.emit(graph.ReduceOp(graph.ReduceKind.SUM, v, axes, False))
    return summed, "".join(c for c in letters if c in keep)


@handles("Einsum")
def op_einsum(imp: Importer, node: Node) -> None:
    """
    Einsum of one operand (a transpose and / or sum) or two (a contraction): the
    operands are transposed to `batch, free, contracted` order, reshaped to 3-D and
    multiplied with one `graph.matmul`, whose result is reshaped and transposed to the
    output's order.
    """
    names = [n for n in node.proto.input if n]
    terms, out = _einsum_terms(node, len(names))
    values = [imp.value(n, node.where) for n in names]
    sizes: dict[str, int] = {}
    for term, v in zip(terms, values, strict=True):
        shape = shape_of(v)
        if len(shape) != len(term):
            raise node.error(
                f"operand '{term}' has rank {len(shape)} ({fmt_shape(shape)}); fix the "
                "equation"
            )
        for c, d in zip(term, shape, strict=True):
            if sizes.setdefault(c, d) != d:
                raise node.error(
                    f"letter '{c}' has sizes {sizes[c]} and {d}; plmr does not broadcast "
                    "Einsum operands"
                )
    if len(values) == 1:
        v, letters = _sum_out(imp, values[0], terms[0], set(out))
        imp.result(node, _permute(imp, v, letters, out))
        return
    (a, ta), (b, tb) = (
        _sum_out(imp, values[0], terms[0], set(terms[1]) | set(out)),
        _sum_out(imp, values[1], terms[1], set(terms[0]) | set(out)),
    )
    batch = "".join(c for c in out if c in ta and c in tb)
    contracted = "".join(c for c in ta if c in tb and c not in out)
    left = "".join(c for c in ta if c not in tb)
    right = "".join(c for c in tb if c not in ta)

    def size(letters: str) -> int:
        return math.prod(sizes[c] for c in letters)

    trans_a = ta == batch + contracted + left and bool(left) and bool(contracted)
    trans_b = tb == batch + right + contracted and bool(right) and bool(contracted)
    a_order = batch + (contracted + left if trans_a else left + contracted)
    b_order = batch + (right + contracted if trans_b else contracted + right)
    a = _permute(imp, a, ta, a_order)
    b = _permute(imp, b, tb, b_order)
    inner_a = (size(contracted), size(left)) if trans_a else (size(left), size(contracted))
    inner_b = (
        (size(right), size(contracted)) if trans_b else (size(contracted), size(right))
    )
    lead = (size(batch),) if batch else ()
    a = _reshape(imp, a, (*lead, *inner_a))
    b = _reshape(imp, b, (*lead, *inner_b))
    y = imp.emit(graph.MatmulOp(a, b, transpose_a=trans_a, transpose_b=trans_b))
    produced = batch + left + right
    y = _reshape(imp, y, [sizes[c] for c in produced])
    imp.result(node, _permute(imp, y, produced, out))
