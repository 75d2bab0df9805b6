"""
The base of the `tile` ops (`TileOp`) and the byte size of a block (`nbytes`). Part of the
`Tile` dialect (`plmr.dialects.tile`).
"""

from __future__ import annotations

import math
from abc import ABC
from typing import cast

from xdsl.dialects.builtin import (
    AnyFloat,
    IndexType,
    IntegerType,
    TensorType,
)
from xdsl.ir import (
    Attribute,
)
from xdsl.irdl import (
    IRDLOperation,
)

from plmr.dialects.graph_shapes import (
    tensor_type,
)


def nbytes(t: Attribute) -> int:
    """Bytes of a static-shape tensor (or a scalar type)."""
    if not isinstance(t, TensorType):
        return _elt_bytes(t)
    tt = tensor_type(cast(Attribute, t), "value")
    return math.prod(tt.get_shape()) * _elt_bytes(tt.element_type)


def _elt_bytes(elt: Attribute) -> int:
    if isinstance(elt, AnyFloat):
        return max(1, elt.bitwidth // 8)
    if isinstance(elt, IntegerType):
        width = cast(IntegerType, elt).width.data
        return max(1, width // 8)
    if isinstance(elt, IndexType):
        return 8
    return 4


class TileOp(IRDLOperation, ABC):
    """
    Base of the `tile` ops that do work on a core (`plmr.target.op_cost` prices them: the
    dialect itself knows nothing of the machine).
    """
