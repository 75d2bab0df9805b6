"""
The numpy function of every `graph` op, with ONNX semantics: the oracle every later level
is checked against. It favours clarity and exactness over speed: it computes in the
tensors' own element type (float32 for `f32`), with float64 only inside transcendental
helpers where numpy lacks a float32 kernel (`erf`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from plmr.errors import PlmrError
from plmr.values import Array

# ---------------------------------------------------------------------------------------
# Elementwise helpers
# ---------------------------------------------------------------------------------------

_ERF_P = 2.0 / math.sqrt(math.pi)

# Chebyshev coefficients of erfc(z) = t·exp(-z² + P(t)), t = 2 / (2 + z) (Numerical Recipes,
# 3rd ed., §6.2.2). Together with a Taylor series for |x| < 0.5 (where 1 - erfc cancels)
# this matches `math.erf` to ~1e-15 relative (tested).
_ERFC_COF = (
    -1.3026537197817094,
    6.4196979235649026e-1,
    1.9476473204185836e-2,
    -9.561514786808631e-3,
    -9.46595344482036e-4,
    3.66839497852761e-4,
    4.2523324806907e-5,
    -2.0278578112534e-5,
    -1.624290004647e-6,
    1.303655835580e-6,
    1.5626441722e-8,
    -8.5238095915e-8,
    6.529054439e-9,
    5.059343495e-9,
    -9.91364156e-10,
    -2.27365122e-10,
    9.6467911e-11,
    2.394038e-12,
    -6.886027e-12,
    8.94487e-13,
    3.13092e-13,
    -1.12708e-13,
    3.81e-16,
    7.106e-15,
    -1.523e-15,
    -9.4e-17,
    1.21e-16,
    -2.8e-17,
)


def _erfc_cheb(z: Array) -> Array:
    """erfc(z) for z >= 0 in float64 (Chebyshev expansion, ~1e-16 relative)."""
    t = 2.0 / (2.0 + z)
    ty = 4.0 * t - 2.0
    d = np.zeros_like(z)
    dd = np.zeros_like(z)
    for c in reversed(_ERFC_COF[1:]):
        d, dd = ty * d - dd + c, d
    return t * np.exp(-z * z + 0.5 * (_ERFC_COF[0] + ty * d) - dd)


def erf(x: Array) -> Array:
    """The Gauss error function, vectorised (float64 inside, accurate to ~1e-15)."""
    x64 = np.asarray(x, dtype=np.float64)
    ax = np.abs(x64)
    # Taylor series for small |x|, where 1 - erfc(x) would cancel.
    x2 = x64 * x64
    term = x64.copy()
    series = x64.copy()
    for n in range(1, 30):
        term = term * (-x2) / n
        series = series + term / (2 * n + 1)
    small = series * _ERF_P
    large = np.sign(x64) * (1.0 - _erfc_cheb(ax))
    out = np.where(ax < 0.5, small, large)
    return out.astype(
        np.asarray(x).dtype if np.asarray(x).dtype.kind == "f" else np.float64
    )


def sigmoid(x: Array) -> Array:
    # Numerically stable for large |x| in both directions.
    ex = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + ex), ex / (1 + ex)).astype(x.dtype)


def gelu(x: Array, tanh: bool = False) -> Array:
    if tanh:
        c = np.asarray(math.sqrt(2 / math.pi), dtype=x.dtype)
        return (
            0.5 * x * (1 + np.tanh(c * (x + np.asarray(0.044715, x.dtype) * x**3)))
        ).astype(x.dtype)
    return (0.5 * x * (1 + erf(x / np.asarray(math.sqrt(2.0), x.dtype)))).astype(x.dtype)


def silu(x: Array) -> Array:
    return (x * sigmoid(x)).astype(x.dtype)


def relu(x: Array) -> Array:
    return np.maximum(x, np.zeros((), dtype=x.dtype))


# ---------------------------------------------------------------------------------------
# Structured ops
# ---------------------------------------------------------------------------------------


def matmul(
    a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
) -> Array:
    if transpose_a:
        a = np.swapaxes(a, -1, -2)
    if transpose_b:
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


def _extreme(dtype: np.dtype[Any], lowest: bool) -> Any:
    """The lowest (or highest) value of a dtype: what `max` (`min`) of an empty set is."""
    if dtype.kind == "f":
        return -np.inf if lowest else np.inf
    if dtype.kind == "b":
        return not lowest
    info = np.iinfo(dtype)
    return info.min if lowest else info.max


def reduce(kind: str, x: Array, axes: Sequence[int], keepdims: bool) -> Array:
    ax = tuple(axes)
    if kind == "sum":
        return np.sum(x, axis=ax, keepdims=keepdims, dtype=x.dtype)
    # numpy refuses max/min over an empty axis; ONNX defines them as the dtype's extreme.
    if kind == "max":
        if x.size == 0:
            return np.max(x, axis=ax, keepdims=keepdims, initial=_extreme(x.dtype, True))
        return np.max(x, axis=ax, keepdims=keepdims)
    if kind == "min":
        if x.size == 0:
            return np.min(x, axis=ax, keepdims=keepdims, initial=_extreme(x.dtype, False))
        return np.min(x, axis=ax, keepdims=keepdims)
    if kind == "mean":
        return np.mean(x, axis=ax, keepdims=keepdims, dtype=x.dtype)
    raise PlmrError(f"unknown reduce kind '{kind}'")


def softmax(x: Array, axis: int = -1) -> Array:
    if x.size == 0:
        return x.copy()  # numpy's max refuses an empty axis
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return (e / np.sum(e, axis=axis, keepdims=True)).astype(x.dtype)


def layernorm(
    x: Array, scale: Array, bias: Array | None, axis: int = -1, epsilon: float = 1e-5
) -> Array:
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = np.mean(x, axis=axes, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=axes, keepdims=True)
    y = d / np.sqrt(var + np.asarray(epsilon, x.dtype)) * scale
    if bias is not None:
        y = y + bias
    return y.astype(x.dtype)


def rmsnorm(x: Array, weight: Array, axis: int = -1, epsilon: float = 1e-5) -> Array:
    axes = tuple(range(axis % x.ndim, x.ndim))
    ms = np.mean(x * x, axis=axes, keepdims=True)
    return (x / np.sqrt(ms + np.asarray(epsilon, x.dtype)) * weight).astype(x.dtype)


def split(x: Array, axis: int, sizes: Sequence[int]) -> list[Array]:
    bounds = np.cumsum(sizes)[:-1]
    return [np.ascontiguousarray(p) for p in np.split(x, bounds, axis=axis)]


def _windows(
    x: Array,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    out_hw: Sequence[int],
) -> Array:
    """Windows of an NCHW array (already padded): shape (N, C, OH, OW, kH, kW)."""
    n, c, _, _ = x.shape
    sn, sc, sh, sw = x.strides
    shape = (n, c, out_hw[0], out_hw[1], kernel[0], kernel[1])
    st = (sn, sc, sh * strides[0], sw * strides[1], sh * dilations[0], sw * dilations[1])
    return np.lib.stride_tricks.as_strided(x, shape=shape, strides=st, writeable=False)


def conv2d(
    x: Array,
    w: Array,
    bias: Array | None = None,
    strides: Sequence[int] = (1, 1),
    pads: Sequence[int] = (0, 0, 0, 0),
    dilations: Sequence[int] = (1, 1),
    groups: int = 1,
) -> Array:
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    oh = (h + pads[0] + pads[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    win = _windows(np.ascontiguousarray(xp), (kh, kw), strides, dilations, (oh, ow))
    mg = m // groups
    outs: list[Array] = []
    for g in range(groups):
        wg = win[:, g * cg : (g + 1) * cg]  # N, cg, OH, OW, kH, kW
        kg = w[g * mg : (g + 1) * mg]  # mg, cg, kH, kW
        outs.append(np.einsum("ncxyij,mcij->nmxy", wg, kg, optimize=True))
    y = np.concatenate(outs, axis=1).astype(x.dtype)
    if bias is not None:
        y = y + bias.reshape(1, m, 1, 1)
    del n, c
    return y.astype(x.dtype)


def pool(
    kind: str,
    x: Array,
    kernel: Sequence[int],
    strides: Sequence[int] = (1, 1),
    pads: Sequence[int] = (0, 0, 0, 0),
    count_include_pad: bool = False,
) -> Array:
    _, _, h, w = x.shape
    oh = (h + pads[0] + pads[2] - kernel[0]) // strides[0] + 1
    ow = (w + pads[1] + pads[3] - kernel[1]) // strides[1] + 1
    padding = ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3]))
    if kind == "max":
        fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        xp = np.pad(x, padding, constant_values=fill)
        win = _windows(np.ascontiguousarray(xp), kernel, strides, (1, 1), (oh, ow))
        return win.max(axis=(-2, -1)).astype(x.dtype)
    xp = np.pad(x, padding)
    win = _windows(np.ascontiguousarray(xp), kernel, strides, (1, 1), (oh, ow))
    total = win.sum(axis=(-2, -1))
    if count_include_pad:
        return (total / (kernel[0] * kernel[1])).astype(x.dtype)
    ones = np.pad(np.ones((1, 1, h, w), dtype=x.dtype), padding)
    counts = _windows(ones, kernel, strides, (1, 1), (oh, ow)).sum(axis=(-2, -1))
    return (total / counts).astype(x.dtype)


def gather(data: Array, indices: Array, axis: int = 0) -> Array:
    size = data.shape[axis]
    if indices.size and (indices.min() < -size or indices.max() >= size):
        raise PlmrError(
            f"gather index out of range: indices span [{indices.min()}, {indices.max()}] "
            f"but axis {axis} has size {size}"
        )
    return np.take(data, indices.astype(np.int64), axis=axis)


def cast_to(x: Array, dtype: np.dtype[Any]) -> Array:
    """ONNX Cast: floats to integers truncate toward zero, anything to bool is `x != 0`."""
    if dtype.kind == "b":
        return x != 0
    if x.dtype.kind == "f" and dtype.kind in "iu":
        with np.errstate(invalid="ignore"):
            return np.trunc(x).astype(dtype)
    return x.astype(dtype)


def slice_(
    x: Array, starts: Sequence[int], ends: Sequence[int], steps: Sequence[int]
) -> Array:
    """A normalised strided slice: `range(start, end, step)` per dimension."""
    index = tuple(
        slice(s, e if e >= 0 else None, st)
        for s, e, st in zip(starts, ends, steps, strict=True)
    )
    return x[index].copy(order="C")


def pad(x: Array, pads: Sequence[int], mode: str = "constant", value: float = 0.0) -> Array:
    """ONNX Pad: `pads` holds the begin pads of every dimension, then the end pads."""
    rank = x.ndim
    widths = [(pads[i], pads[i + rank]) for i in range(rank)]
    if mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=x.dtype.type(value))
    if mode == "reflect":
        return np.pad(x, widths, mode="reflect")
    if mode == "edge":
        return np.pad(x, widths, mode="edge")
    raise PlmrError(f"unknown pad mode '{mode}'")


def gather_elements(data: Array, indices: Array, axis: int) -> Array:
    """ONNX GatherElements: `out[p] = data[p with p[axis] = indices[p]]`."""
    size = data.shape[axis]
    if indices.size and (indices.min() < -size or indices.max() >= size):
        raise PlmrError(
            f"gather_elements index out of range: indices span [{indices.min()}, "
            f"{indices.max()}] but axis {axis} has size {size}"
        )
    idx = indices.astype(np.int64)
    where: list[Array] = list(np.indices(indices.shape, sparse=True))
    where[axis] = np.where(idx < 0, idx + size, idx)
    return data[tuple(where)]
