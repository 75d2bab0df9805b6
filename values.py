"""
Values of the reference interpreters: numpy arrays standing for MLIR tensors and
scalars, the numpy dtype of each MLIR element type, and dense constants as arrays.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from xdsl.dialects.builtin import (
    BFloat16Type,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    Signedness,
    TensorType,
)
from xdsl.ir import Attribute

from plmr.errors import PlmrError

Array = npt.NDArray[Any]

# ---------------------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------------------


def numpy_dtype(elt: Attribute) -> np.dtype[Any]:
    """The numpy dtype that holds values of an MLIR element type."""
    if isinstance(elt, Float32Type):
        return np.dtype(np.float32)
    if isinstance(elt, Float64Type):
        return np.dtype(np.float64)
    if isinstance(elt, Float16Type):
        return np.dtype(np.float16)
    if isinstance(elt, BFloat16Type):
        # numpy has no bfloat16; float32 holds every bfloat16 value exactly.
        return np.dtype(np.float32)
    if isinstance(elt, IndexType):
        return np.dtype(np.int64)
    if isinstance(elt, IntegerType):
        int_type = cast(IntegerType[int, Signedness], elt)
        width: int = int_type.bitwidth
        unsigned = int_type.signedness.data == Signedness.UNSIGNED
        if width == 1:
            return np.dtype(np.bool_)
        for w in (8, 16, 32, 64):
            if width <= w:
                return np.dtype(f"{'u' if unsigned else ''}int{w}")
    raise PlmrError(f"element type {elt} has no numpy equivalent")


def tensor_dtype(t: Attribute) -> np.dtype[Any]:
    if isinstance(t, TensorType):
        return numpy_dtype(cast(TensorType[Attribute], t).element_type)
    raise PlmrError(f"expected a tensor type, got {t}")


def dense_to_numpy(attr: DenseIntOrFPElementsAttr) -> Array:
    """The value of a dense elements attribute as a numpy array of its own shape."""
    t = attr.get_type()
    dtype = tensor_dtype(t)
    shape = attr.get_shape()
    elt = attr.get_element_type()
    if isinstance(elt, IntegerType | IndexType) and elt != IntegerType(64):
        values = np.array(attr.get_values(), dtype=dtype)
    elif isinstance(elt, BFloat16Type):
        values = np.array(attr.get_values(), dtype=np.float32)
    else:
        values = np.frombuffer(attr.data.data, dtype=dtype.newbyteorder("<"))
        values = values.astype(dtype)
    if values.size == 1 and math.prod(shape) != 1:
        return np.full(shape, values.reshape(()), dtype=dtype)
    return values.reshape(shape)


def constant_attr(
    array: np.ndarray[Any, Any], elt: Attribute
) -> DenseIntOrFPElementsAttr[Any]:
    """A dense attribute of element type `elt` holding `array`."""
    dtype = numpy_dtype(elt).newbyteorder("<")
    data = np.ascontiguousarray(array, dtype=dtype).tobytes()
    return DenseIntOrFPElementsAttr(
        TensorType(cast(Any, elt), array.shape), BytesAttr(data)
    )
