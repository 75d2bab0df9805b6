"""
The substitution ops on numpy arrays, for fingerprints, exact re-tests and Z3 terms.

`ArrayOps.apply` computes one `(kind, params)` op; subclasses choose what relu, pooling and
the scalar of `scale` mean: wrapping 64-bit integers with TASO's polynomial relu for
fingerprints, exact integers for re-tests, Z3 terms for proofs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from plmr.passes.taso.ops import Params, param_int, param_ints
from plmr.passes.taso.rules import INPUT, PatOp, Pattern, Ref

Array = npt.NDArray[Any]

INV9 = np.int64(pow(9, -1, 2**64) - 2**64)
"""1/9 modulo 2^64 as a wrapped int64 (9 is odd, so it is invertible)."""


def windows(x: Array, kh: int, kw: int, fill: Any) -> Array:
    """SAME-padded `kh x kw` windows of an NCHW array: shape (N, C, H, W, kh, kw)."""
    ph, pw = kh // 2, kw // 2
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    return np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))


def conv_same(x: Array, w: Array) -> Array:
    """Stride-1 SAME conv of NCHW `x` with MCkHkW `w`, exact in the arrays' dtype."""
    return np.einsum("nchwij,mcij->nmhw", windows(x, w.shape[2], w.shape[3], 0), w)


def identity_of(shape: Sequence[int], dtype: Any) -> Array:
    """The identity matrix (2-D) or identity conv kernel (4-D) of a shape."""
    out = np.zeros(tuple(shape), dtype=dtype)
    c = np.arange(shape[0])
    if len(shape) == 2:
        out[c, c] = 1
    else:
        out[c, c, shape[2] // 2, shape[3] // 2] = 1
    return out


class ArrayOps:
    """Exact semantics on arrays of integers (float64 below 2^52, or Python ints)."""

    def __init__(self, factor: Any, dtype: Any = np.float64):
        self.factor = factor
        self.dtype = dtype

    def relu(self, x: Array) -> Array:
        return np.where(x > 0, x, x * 0)

    def pool_max(self, x: Array) -> Array:
        fill = -np.inf if x.dtype.kind == "f" else -(10**30)
        return windows(x, 3, 3, fill).max(axis=(-2, -1))

    def pool_avg(self, x: Array) -> Array:
        total = windows(x, 3, 3, 0).sum(axis=(-2, -1))
        return total // 9 if x.dtype == object else total / 9

    def apply(self, kind: str, params: Params, args: Sequence[Array]) -> list[Array]:
        if kind == "matmul":
            return [np.dot(args[0], args[1])]
        if kind == "add":
            return [args[0] + args[1]]
        if kind == "mul":
            return [args[0] * args[1]]
        if kind == "scale":
            return [args[0] * self.factor]
        if kind == "relu":
            return [self.relu(args[0])]
        if kind == "transpose":
            perm = param_ints(kind, params, 0, "perm")
            return [np.ascontiguousarray(np.transpose(args[0], perm))]
        if kind == "concat":
            return [np.concatenate(args, axis=param_int(kind, params, 0, "axis"))]
        if kind == "split":
            sizes = param_ints(kind, params, 1, "sizes")
            axis = param_int(kind, params, 0, "axis")
            parts = np.split(args[0], np.cumsum(sizes)[:-1], axis=axis)
            return [np.ascontiguousarray(p) for p in parts]
        if kind == "conv2d":
            return [conv_same(args[0], args[1])]
        if kind == "pool":
            return [
                self.pool_max(args[0]) if params[0] == "max" else self.pool_avg(args[0])
            ]
        if kind == "const":
            shape = param_ints(kind, params, 1, "shape")
            return [identity_of(shape, self.dtype)]
        raise AssertionError(f"no array semantics for '{kind}'")


class FingerprintOps(ArrayOps):
    """TASO's fingerprint semantics: wrapping int64, `relu(x) = x*(x+1)+1`, exact 1/9."""

    def __init__(self, factor: Any):
        super().__init__(factor, np.int64)

    def relu(self, x: Array) -> Array:
        return x * (x + 1) + 1

    def pool_max(self, x: Array) -> Array:
        return windows(x, 3, 3, np.iinfo(np.int64).min).max(axis=(-2, -1))

    def pool_avg(self, x: Array) -> Array:
        return windows(x, 3, 3, 0).sum(axis=(-2, -1)) * INV9


def eval_pattern(
    pattern: Pattern,
    args: Sequence[Array],
    ops: ArrayOps,
    params_of: Callable[[PatOp], Params] | None = None,
) -> list[Array]:
    """The outputs of a rule side on `args` (`params_of` maps sizes to concrete ones)."""
    values: list[list[Array]] = []

    def get(ref: Ref) -> Array:
        return args[ref[1]] if ref[0] == INPUT else values[ref[0]][ref[1]]

    for op in pattern.ops:
        params = op.params if params_of is None else params_of(op)
        values.append(ops.apply(op.kind, params, [get(r) for r in op.operands]))
    return [get(r) for r in pattern.outputs]
