"""
The values of weights by reference (`graph.weight` and its lowered `arith.constant`):
checked against their file and memory-mapped, so a functional run reads only the pages
it uses and a timing run reads none.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from xdsl.ir import Operation

from plmr.dialects.graph_weights import WeightRef, weight_ops
from plmr.values import Array, tensor_dtype
from plmr.weight_io import TensorRequest, WeightFiles, is_safetensors

_FILES = WeightFiles()
"""Parsed headers, cached per file (by path, size and modification time)."""


def _request(ref: WeightRef) -> TensorRequest:
    dtype = tensor_dtype(ref.type).newbyteorder("<")
    offset = ref.offset
    if offset is None and not is_safetensors(ref.file):
        offset = 0  # a raw data file without an offset: the tensor starts the file
    return TensorRequest(Path(ref.file), ref.name, dtype, ref.base_shape, offset)


def load_weight(ref: WeightRef) -> Array:
    """
    The weight's values: a read-only memory map of its file (checked first); a derived
    weight (`concat`, `rotate`, `heads`, `rows`) is computed from the maps of its parts, here,
    when its values are needed.
    """
    if ref.parts:
        arr = np.concatenate([load_weight(p) for p in ref.parts], axis=ref.axis)
    else:
        arr = _FILES.map(_request(ref))
    arr = rotate_half(arr, ref.rotate) if ref.rotate else arr
    if ref.rows:
        return arr.reshape(ref.shape)
    return split_heads(arr, ref.heads) if ref.heads else arr


def split_heads(arr: Array, heads: tuple[int, ...]) -> Array:
    """A `K x N` matrix as one `K x D` matrix per head: `A x ... x K x D`, `N = A·...·D`."""
    k, n = arr.shape
    per = n // math.prod(heads)
    return np.ascontiguousarray(np.moveaxis(arr.reshape(k, *heads, per), 0, -2))


def rotate_half(arr: Array, block: int) -> Array:
    """`[a, b] -> [-b, a]` in each block of `block` along the last axis."""
    blocks = arr.reshape(*arr.shape[:-1], arr.shape[-1] // block, 2, block // 2)
    out = np.stack([-blocks[..., 1, :], blocks[..., 0, :]], axis=-2)
    return out.reshape(arr.shape)


def check_weights(root: Operation) -> int:
    """
    Checks every weight under `root` against its file (present, name, dtype, shape,
    size; only headers are read) and returns how many there are; a PlmrError names the
    first that does not match.
    """
    count = 0
    for _, ref in weight_ops(root):
        for leaf in ref.leaves():
            _FILES.locate(_request(leaf))
        count += 1
    return count


__all__ = ["check_weights", "load_weight", "rotate_half", "split_heads"]
