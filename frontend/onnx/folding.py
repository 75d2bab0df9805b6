"""
Constant folding at import: a node whose inputs are all compile-time constants is
evaluated here (numpy for the common shape-computation ops, `onnx.reference` for the
rest) and its outputs become compile-time constants of the importer. They are turned
into `graph.constant` ops only where a run-time op uses them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator

Array = npt.NDArray[Any]

NOT_FOLDED = frozenset(
    {
        "Bernoulli",
        "Multinomial",
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
    }
)
"""Ops never evaluated at import: their values differ from run to run."""


class FoldError(Exception):
    """A node could not be evaluated at import."""


def foldable(node: onnx.NodeProto) -> bool:
    """Whether `node` may be evaluated at import when its inputs are constant."""
    if node.domain not in ("", "ai.onnx") or node.op_type in NOT_FOLDED:
        return False
    # Control flow (If, Loop, Scan) may read outer-scope values: not folded here.
    return all(a.type not in _GRAPH_ATTRS for a in node.attribute)


_GRAPH_ATTRS = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


def _int_attr(node: onnx.NodeProto, name: str, default: int) -> int:
    for a in node.attribute:
        if a.name == name:
            return int(a.i)
    return default


def _fold_unsqueeze(node: onnx.NodeProto, x: Array, axes: Array | None) -> list[Array]:
    if axes is None:
        raise FoldError("Unsqueeze needs axes")
    rank = x.ndim + axes.size
    norm = sorted(int(a) % rank for a in axes.reshape(-1))
    out = x
    for a in norm:
        out = np.expand_dims(out, a)
    return [out]


def _fold_concat(node: onnx.NodeProto, *xs: Array | None) -> list[Array]:
    return [
        np.concatenate([x for x in xs if x is not None], axis=_int_attr(node, "axis", 0))
    ]


def _fold_gather(node: onnx.NodeProto, data: Array, indices: Array) -> list[Array]:
    return [np.take(data, indices.astype(np.int64), axis=_int_attr(node, "axis", 0))]


def _fold_cast(node: onnx.NodeProto, x: Array) -> list[Array]:
    to = _int_attr(node, "to", 0)
    return [x.astype(helper.tensor_dtype_to_np_dtype(to))]


_Fast = Callable[..., list[Array]]

_FAST: dict[str, _Fast] = {
    "Unsqueeze": _fold_unsqueeze,
    "Concat": _fold_concat,
    "Gather": _fold_gather,
    "Cast": _fold_cast,
}
"""numpy evaluations of the ops that shape sub-graphs use most (opset >= 13 semantics)."""


def _as_array(value: object) -> Array:
    if isinstance(value, np.ndarray | np.generic):
        return np.array(cast(Array, value), order="C")
    raise FoldError(f"it produced a {type(value).__name__}, not a tensor")


def fold_node(
    node: onnx.NodeProto, inputs: Sequence[Array | None], opset: int
) -> list[Array]:
    """
    The outputs of `node` on the constant `inputs` (None for an omitted optional input),
    at default-domain opset `opset`; a FoldError if they cannot be computed.
    """
    fast = _FAST.get(node.op_type)
    try:
        if fast is not None:
            return [_as_array(v) for v in fast(node, *inputs)]
        names = [f"in{i}" if x is not None else "" for i, x in enumerate(inputs)]
        outs = [f"out{i}" if o else "" for i, o in enumerate(node.output)]
        copy = helper.make_node(node.op_type, names, outs, domain=node.domain or None)
        copy.attribute.extend(node.attribute)
        g = helper.make_graph(
            [copy],
            "fold",
            [helper.make_empty_tensor_value_info(n) for n in names if n],
            [helper.make_empty_tensor_value_info(o) for o in outs if o],
        )
        evaluator = ReferenceEvaluator(g, opsets={"": opset})
        feeds = {n: x for n, x in zip(names, inputs, strict=True) if x is not None}
        results = cast(list[object], evaluator.run(None, feeds))  # pyright: ignore[reportUnknownMemberType]
    except FoldError:
        raise
    except Exception as e:  # the reference evaluator raises anything
        text = str(e).strip()
        raise FoldError(text.splitlines()[0] if text else type(e).__name__) from e
    produced = iter(results)
    # One entry per output of `node`, an empty array for an omitted one.
    return [_as_array(next(produced)) if o else np.zeros(0) for o in outs]
