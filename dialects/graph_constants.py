"""
Tensors spelled in the IR: `graph.constant`, a dense tensor literal (the values of a
weight that lives in a file are a `graph.weight`, `plmr.dialects.graph_weights`). Part of
the `Graph` dialect (`plmr.dialects.graph`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    TensorType,
)
from xdsl.ir import (
    Attribute,
)
from xdsl.irdl import (
    irdl_op_definition,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import ConstantLike, Pure
from xdsl.utils.exceptions import VerifyException

from plmr.dialects.graph_base import GraphOp
from plmr.dialects.graph_shapes import (
    tensor_type,
)


@irdl_op_definition
class ConstantOp(GraphOp):
    """
    A tensor constant (weights, masks, scalars).

    ```mlir
    %c = graph.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
    ```
    """

    name = "graph.constant"

    value = prop_def(DenseIntOrFPElementsAttr)
    result = result_def(TensorType)

    traits = traits_def(Pure(), ConstantLike())

    def __init__(self, value: DenseIntOrFPElementsAttr[Any]):
        super().__init__(result_types=[value.get_type()], properties={"value": value})

    def infer_result_types(self) -> Sequence[Attribute]:
        t = tensor_type(self.value.get_type(), "constant value")
        n = len(self.value)
        size = math.prod(t.get_shape())
        if n not in (1, size):
            raise VerifyException(
                f"constant holds {n} values but its type {t} needs {size}"
            )
        return [t]

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        pos = parser.pos
        attrs = parser.parse_optional_attr_dict()
        value = parser.parse_attribute()
        if not isinstance(value, DenseIntOrFPElementsAttr):
            parser.raise_error(
                "expected a dense elements attribute, e.g. dense<1.0> : tensor<4xf32>",
                pos,
                parser.pos,
            )
        op = cls(cast(DenseIntOrFPElementsAttr[Any], value))
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_op_attributes(self.attributes)
        printer.print_string(" ")
        printer.print_attribute(self.value)
