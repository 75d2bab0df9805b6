"""
Tests of `plmr.runtime.tile_ops`: the reference semantics of every `tile` op and of the
`arith` / `math` ops in `EVAL_IMPLS` against plain numpy (or Python's exact integer and
float arithmetic), both on one core (`lead = ()`) and vectorised over a mesh of cores
(`lead = (3, 2)`, per-core values and per-core offsets); bounds errors; a blocked matmul;
the memory traffic `run_tile_function` counts; and value semantics of `tile.store`.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects import math as mathd
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin, ModuleOp, f32
from xdsl.dialects.func import Func
from xdsl.dialects.math import Math
from xdsl.interpreter import Interpreter, PythonValues
from xdsl.ir import Operation
from xdsl.parser import Parser

from plmr.dialects import tile
from plmr.dialects.tile import Tile
from plmr.errors import PlmrError
from plmr.runtime.reference import ReferenceEvaluator, run_tile_function
from plmr.runtime.tile_ops import (
    EVAL_IMPLS,
    TileStats,
    global_values,
    tensor_bytes,
)
from plmr.target.op_cost import op_work

Array = npt.NDArray[Any]

LEADS = [(), (3, 2)]
"""One core, and a 3×2 mesh whose values carry leading per-core dims."""


def parse(source: str) -> ModuleOp:
    ctx = Context()
    for dialect in (Builtin, Func, Arith, Math, Tile):
        ctx.load_dialect(dialect)
    module = Parser(ctx, source).parse_module()
    module.verify()
    return module


def run(
    source: str | ModuleOp, args: Sequence[Any], lead: tuple[int, ...] = ()
) -> list[Array]:
    module = parse(source) if isinstance(source, str) else source
    ev = ReferenceEvaluator(module, lead=lead)
    return ev.run(ev.function("f"), args)


def cores(lead: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Every core's index into the leading dims (one empty index on the host)."""
    return list(np.ndindex(*lead))


def rand(rng: np.random.Generator, shape: Sequence[int], dtype: Any = np.float32) -> Array:
    return rng.standard_normal(tuple(shape)).astype(dtype)


def small_ints(
    rng: np.random.Generator, shape: Sequence[int], dtype: Any = np.float32
) -> Array:
    """Integer values in a float array: sums of their products are exact."""
    return rng.integers(-4, 5, size=tuple(shape)).astype(dtype)


def coords(lead: tuple[int, ...]) -> tuple[Any, Any]:
    """Per-core row and column coordinates (uniform zeros on the host)."""
    if not lead:
        return np.int64(0), np.int64(1)
    rows, cols = np.indices(lead)
    return rows.astype(np.int64), cols.astype(np.int64)


def check_per_core(
    lead: tuple[int, ...],
    got: Sequence[Array],
    args: Sequence[Any],
    reference: Callable[..., Sequence[Array]],
    *,
    rtol: float = 0.0,
    atol: float = 0.0,
) -> None:
    """Each core's results equal `reference` applied to that core's arguments."""
    for core in cores(lead):
        core_args = [np.asarray(a)[core] if np.ndim(a) else a for a in args]
        want = reference(*core_args)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            g_core = np.asarray(g)[core]
            w = np.asarray(w)
            assert g_core.shape == w.shape, (core, g_core.shape, w.shape)
            assert g_core.dtype == w.dtype, (core, g_core.dtype, w.dtype)
            if rtol or atol:
                np.testing.assert_allclose(g_core, w, rtol=rtol, atol=atol)
            else:
                np.testing.assert_array_equal(g_core, w)


# ---------------------------------------------------------------------------------------
# tile.fill
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("lead", LEADS)
def test_fill(lead: tuple[int, ...]):
    source = """
    func.func @f() -> (tensor<4x8xf32>, tensor<2xf16>, tensor<3x3xi32>, tensor<f32>, tensor<2xf32>) {
      %a = tile.fill 1.5 : tensor<4x8xf32>
      %b = tile.fill -2.0 : tensor<2xf16>
      %c = tile.fill 7.0 : tensor<3x3xi32>
      %d = tile.fill 0.25 : tensor<f32>
      %e = tile.fill 0xFFF0000000000000 : tensor<2xf32>
      func.return %a, %b, %c, %d, %e : tensor<4x8xf32>, tensor<2xf16>, tensor<3x3xi32>, tensor<f32>, tensor<2xf32>
    }
    """
    got = run(source, [], lead)
    check_per_core(
        lead,
        got,
        [],
        lambda: [
            np.full((4, 8), 1.5, np.float32),
            np.full((2,), -2.0, np.float16),
            np.full((3, 3), 7, np.int32),
            np.full((), 0.25, np.float32),
            np.full((2,), -np.inf, np.float32),
        ],
    )
    assert got[0].shape == (*lead, 4, 8)


# ---------------------------------------------------------------------------------------
# tile.load / tile.store with uniform and per-core offsets
# ---------------------------------------------------------------------------------------

LOAD_STORE = """
func.func @f(%A: tensor<64x48xf32>, %blk: tensor<16x8xf32>, %row: index, %col: index)
    -> (tensor<16x8xf32>, tensor<64x48xf32>, tensor<1x48xf32>) {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %i = arith.muli %row, %c16 : index
  %j0 = arith.muli %col, %c8 : index
  %j = arith.addi %j0, %c8 : index
  %b = tile.load %A[%i, %j] : tensor<64x48xf32> -> tensor<16x8xf32>
  %s = tile.store %blk, %A[%j, %i] : tensor<16x8xf32> -> tensor<64x48xf32>
  %r = tile.load %s[%i, %c0] : tensor<64x48xf32> -> tensor<1x48xf32>
  func.return %b, %s, %r : tensor<16x8xf32>, tensor<64x48xf32>, tensor<1x48xf32>
}
"""


def _load_store_reference(a: Array, blk: Array, row: Any, col: Any) -> list[Array]:
    i, j = int(row) * 16, int(col) * 8 + 8
    b = a[i : i + 16, j : j + 8].copy()
    s = a.copy()
    s[j : j + 16, i : i + 8] = blk
    return [b, s, s[i : i + 1, :].copy()]


@pytest.mark.parametrize("lead", LEADS)
def test_load_and_store(lead: tuple[int, ...]):
    rng = np.random.default_rng(1)
    a = rand(rng, (*lead, 64, 48))
    blk = rand(rng, (*lead, 16, 8))
    row, col = coords(lead)
    a_before = a.copy()
    got = run(LOAD_STORE, [a, blk, row, col], lead)
    check_per_core(lead, got, [a, blk, row, col], _load_store_reference)
    np.testing.assert_array_equal(a, a_before)  # the argument is never updated
    if lead:
        # The offsets really differ between cores: every core loaded another block.
        blocks = got[0].reshape(-1, 16 * 8)
        assert len({blocks[n].tobytes() for n in range(blocks.shape[0])}) == 6


@pytest.mark.parametrize("lead", LEADS)
def test_load_and_store_3d_and_1d(lead: tuple[int, ...]):
    source = """
    func.func @f(%T: tensor<4x8x8xi32>, %V: tensor<32xf16>, %k: index)
        -> (tensor<3x5x8xi32>, tensor<32xf16>) {
      %c1 = arith.constant 1 : index
      %t = tile.load %T[%c1, %k, %c1] : tensor<4x8x8xi32> -> tensor<2x4x7xi32>
      %v = tile.load %V[%k] : tensor<32xf16> -> tensor<8xf16>
      %v2 = tile.store %v, %V[%c1] : tensor<8xf16> -> tensor<32xf16>
      %t2 = tile.fill 0.0 : tensor<3x5x8xi32>
      %t3 = tile.store %t, %t2[%c1, %c1, %c1] : tensor<2x4x7xi32> -> tensor<3x5x8xi32>
      func.return %t3, %v2 : tensor<3x5x8xi32>, tensor<32xf16>
    }
    """
    rng = np.random.default_rng(2)
    t = rng.integers(-100, 100, size=(*lead, 4, 8, 8)).astype(np.int32)
    v = rand(rng, (*lead, 32), np.float16)
    k = np.int64(3) if not lead else (np.arange(6) % 5).reshape(lead).astype(np.int64)

    def reference(t: Array, v: Array, k: Any) -> list[Array]:
        k = int(k)
        t3 = np.zeros((3, 5, 8), np.int32)
        t3[1:3, 1:5, 1:8] = t[1:3, k : k + 4, 1:8]
        v2 = v.copy()
        v2[1:9] = v[k : k + 8]
        return [t3, v2]

    got = run(source, [t, v, k], lead)
    check_per_core(lead, got, [t, v, k], reference)


@pytest.mark.parametrize("lead", LEADS)
def test_padded_load(lead: tuple[int, ...]):
    source = """
    func.func @f(%T: tensor<4x5xf32>, %E: tensor<0x3xi64>, %k: index)
        -> (tensor<3x6xf32>, tensor<6x8xf32>, tensor<2x3xi64>) {
      %cm2 = arith.constant -2 : index
      %c0 = arith.constant 0 : index
      %t = tile.load %T[%k, %cm2] padding 1.5 : tensor<4x5xf32> -> tensor<3x6xf32>
      %w = tile.load %T[%cm2, %c0] padding 0.0 : tensor<4x5xf32> -> tensor<6x8xf32>
      %e = tile.load %E[%c0, %c0] padding 7.0 : tensor<0x3xi64> -> tensor<2x3xi64>
      func.return %t, %w, %e : tensor<3x6xf32>, tensor<6x8xf32>, tensor<2x3xi64>
    }
    """
    rng = np.random.default_rng(3)
    t = rand(rng, (*lead, 4, 5))
    e = np.zeros((*lead, 0, 3), np.int64)
    k = np.int64(2) if not lead else (np.arange(6) % 4).reshape(lead).astype(np.int64)

    def reference(t: Array, e: Array, k: Any) -> list[Array]:
        k = int(k)
        padded = np.full((12, 15), 1.5, np.float32)
        padded[4:8, 4:9] = t
        zeros = np.zeros((12, 15), np.float32)
        zeros[4:8, 4:9] = t
        return [
            padded[4 + k : 7 + k, 2:8],
            zeros[2:8, 4:12],
            np.full((2, 3), 7, np.int64),
        ]

    got = run(source, [t, e, k], lead)
    check_per_core(lead, got, [t, e, k], reference)


@pytest.mark.parametrize("lead", LEADS)
def test_clipped_store(lead: tuple[int, ...]):
    source = """
    func.func @f(%A: tensor<5x7xf32>, %b: tensor<3x4xf32>, %k: index) -> tensor<5x7xf32> {
      %c1 = arith.constant 1 : index
      %r = tile.store %b, %A[%c1, %k] clip : tensor<3x4xf32> -> tensor<5x7xf32>
      func.return %r : tensor<5x7xf32>
    }
    """
    rng = np.random.default_rng(4)
    a = rand(rng, (*lead, 5, 7))
    b = rand(rng, (*lead, 3, 4))
    k = np.int64(5) if not lead else (np.arange(6) % 7).reshape(lead).astype(np.int64)

    def reference(a: Array, b: Array, k: Any) -> list[Array]:
        k = int(k)
        out = a.copy()
        width = min(4, 7 - k)
        out[1:4, k : k + width] = b[:, :width]
        return [out]

    got = run(source, [a, b, k], lead)
    check_per_core(lead, got, [a, b, k], reference)


@pytest.mark.parametrize("lead", LEADS)
def test_clipped_store_drops_what_lies_before_the_start(lead: tuple[int, ...]):
    """A block that starts before the tensor keeps only its elements inside it."""
    source = """
    func.func @f(%A: tensor<5x7xf32>, %b: tensor<3x4xf32>) -> tensor<5x7xf32> {
      %cm2 = arith.constant -2 : index
      %cm1 = arith.constant -1 : index
      %r = tile.store %b, %A[%cm2, %cm1] clip : tensor<3x4xf32> -> tensor<5x7xf32>
      func.return %r : tensor<5x7xf32>
    }
    """
    rng = np.random.default_rng(5)
    a = rand(rng, (*lead, 5, 7))
    b = rand(rng, (*lead, 3, 4))

    def reference(a: Array, b: Array) -> list[Array]:
        out = a.copy()
        out[0:1, 0:3] = b[2:3, 1:4]
        return [out]

    got = run(source, [a, b], lead)
    check_per_core(lead, got, [a, b], reference)


@pytest.mark.parametrize(
    "offsets, message",
    [
        ("%c56, %c0", "block of size 16 at offset 56 is outside dimension 0 (size 64)"),
        ("%c0, %c40", "block of size 16 at offset 40 is outside dimension 1 (size 48)"),
        ("%cm1, %c0", "block of size 16 at offset -1 is outside dimension 0 (size 64)"),
    ],
)
@pytest.mark.parametrize("what", ["load", "store"])
def test_out_of_range_blocks_raise(offsets: str, message: str, what: str):
    op = (
        f"%r = tile.load %A[{offsets}] : tensor<64x48xf32> -> tensor<16x16xf32>"
        if what == "load"
        else f"%r = tile.store %b, %A[{offsets}] : tensor<16x16xf32> -> tensor<64x48xf32>"
    )
    source = f"""
    func.func @f(%A: tensor<64x48xf32>, %b: tensor<16x16xf32>) {{
      %c0 = arith.constant 0 : index
      %c40 = arith.constant 40 : index
      %c56 = arith.constant 56 : index
      %cm1 = arith.constant -1 : index
      {op}
      func.return
    }}
    """
    args = [np.zeros((64, 48), np.float32), np.zeros((16, 16), np.float32)]
    with pytest.raises(PlmrError) as info:
        run(source, args)
    assert str(info.value) == f"'tile.{what}' (%r) in @f: {message}"


@pytest.mark.parametrize("what", ["load", "store"])
def test_an_out_of_range_block_on_one_core_raises(what: str):
    # Core (2, 1) asks for rows 48 + 16 = 64.. of a 64-row tensor.
    op = (
        "%r = tile.load %A[%i, %c0] : tensor<64x8xf32> -> tensor<24x8xf32>"
        if what == "load"
        else "%r = tile.store %b, %A[%i, %c0] : tensor<24x8xf32> -> tensor<64x8xf32>"
    )
    source = f"""
    func.func @f(%A: tensor<64x8xf32>, %b: tensor<24x8xf32>, %row: index, %col: index) {{
      %c0 = arith.constant 0 : index
      %c16 = arith.constant 16 : index
      %r0 = arith.addi %row, %col : index
      %i = arith.muli %r0, %c16 : index
      {op}
      func.return
    }}
    """
    lead = (3, 2)
    row, col = coords(lead)
    args = [np.zeros((*lead, 64, 8), np.float32), np.zeros((*lead, 24, 8), np.float32)]
    with pytest.raises(
        PlmrError, match=r"block of size 24 at offset 48 is outside dimension 0 \(size 64\)"
    ):
        run(source, [*args, row, col], lead)
    # Rows 0..2 × cols 0..1 with row + col <= 1 stay inside: a 2×1 mesh runs.
    lead = (2, 1)
    row, col = coords(lead)
    args = [np.zeros((*lead, 64, 8), np.float32), np.zeros((*lead, 24, 8), np.float32)]
    run(source, [*args, row, col], lead)


# ---------------------------------------------------------------------------------------
# tile.dot
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("lead", LEADS)
@pytest.mark.parametrize(
    "lhs, rhs, ta, tb, acc",
    [
        ((16, 8), (8, 32), False, False, False),
        ((16, 8), (8, 32), False, False, True),
        ((8, 16), (8, 32), True, False, False),
        ((16, 8), (32, 8), False, True, True),
        ((8, 16), (32, 8), True, True, True),
        ((8, 8), (8, 8), True, False, False),
        ((8, 8), (8, 8), False, True, False),
        ((3, 4, 8), (3, 8, 5), False, False, True),
        ((2, 3, 8, 4), (2, 3, 5, 8), True, True, False),
    ],
)
def test_dot(
    lead: tuple[int, ...],
    lhs: tuple[int, ...],
    rhs: tuple[int, ...],
    ta: bool,
    tb: bool,
    acc: bool,
):
    a_t = f"tensor<{'x'.join(map(str, lhs))}xf32>"
    b_t = f"tensor<{'x'.join(map(str, rhs))}xf32>"
    m = lhs[-1] if ta else lhs[-2]
    n = rhs[-2] if tb else rhs[-1]
    out = (*lhs[:-2], m, n)
    c_t = f"tensor<{'x'.join(map(str, out))}xf32>"
    flags = (" transpose_a" if ta else "") + (" transpose_b" if tb else "")
    operands = "%a, %b, %c" if acc else "%a, %b"
    types = f"{a_t}, {b_t}, {c_t}" if acc else f"{a_t}, {b_t}"
    source = f"""
    func.func @f(%a: {a_t}, %b: {b_t}, %c: {c_t}) -> {c_t} {{
      %d = tile.dot {operands}{flags} : ({types}) -> {c_t}
      func.return %d : {c_t}
    }}
    """
    rng = np.random.default_rng(3)
    args = [
        small_ints(rng, (*lead, *lhs)),
        small_ints(rng, (*lead, *rhs)),
        small_ints(rng, (*lead, *out)),
    ]

    def reference(a: Array, b: Array, c: Array) -> list[Array]:
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        if ta:
            a64 = np.swapaxes(a64, -1, -2)
        if tb:
            b64 = np.swapaxes(b64, -1, -2)
        d = np.einsum("...mk,...kn->...mn", a64, b64)
        return [(d + c if acc else d).astype(np.float32)]

    check_per_core(lead, run(source, args, lead), args, reference)


def test_dot_of_integers_and_halves():
    source = """
    func.func @f(%a: tensor<2x3xi32>, %b: tensor<3x4xi32>, %x: tensor<4x8xf16>, %y: tensor<8x2xf16>)
        -> (tensor<2x4xi32>, tensor<4x2xf16>) {
      %d = tile.dot %a, %b : (tensor<2x3xi32>, tensor<3x4xi32>) -> tensor<2x4xi32>
      %h = tile.dot %x, %y : (tensor<4x8xf16>, tensor<8x2xf16>) -> tensor<4x2xf16>
      func.return %d, %h : tensor<2x4xi32>, tensor<4x2xf16>
    }
    """
    rng = np.random.default_rng(4)
    a = rng.integers(-1000, 1000, (2, 3)).astype(np.int32)
    b = rng.integers(-1000, 1000, (3, 4)).astype(np.int32)
    x, y = small_ints(rng, (4, 8), np.float16), small_ints(rng, (8, 2), np.float16)
    d, h = run(source, [a, b, x, y])
    assert d.dtype == np.int32
    np.testing.assert_array_equal(d, a.astype(np.int64) @ b.astype(np.int64))
    assert h.dtype == np.float16
    np.testing.assert_array_equal(h, (x.astype(np.float64) @ y).astype(np.float16))


# ---------------------------------------------------------------------------------------
# tile.reduce
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("lead", LEADS)
@pytest.mark.parametrize("kind", ["sum", "max", "min"])
@pytest.mark.parametrize(
    "shape, axis",
    [((16, 64), 1), ((16, 64), 0), ((16, 64), -1), ((2, 4, 8), -2), ((8,), 0)],
)
def test_reduce(lead: tuple[int, ...], kind: str, shape: tuple[int, ...], axis: int):
    out = list(shape)
    out[axis] = 1
    x_t = f"tensor<{'x'.join(map(str, shape))}xf32>"
    r_t = f"tensor<{'x'.join(map(str, out))}xf32>"
    source = f"""
    func.func @f(%x: {x_t}) -> {r_t} {{
      %r = tile.reduce {kind} %x axis = {axis} : {x_t} -> {r_t}
      func.return %r : {r_t}
    }}
    """
    rng = np.random.default_rng(5)
    x = small_ints(rng, (*lead, *shape))
    fn = {"sum": np.sum, "max": np.max, "min": np.min}[kind]
    check_per_core(
        lead,
        run(source, [x], lead),
        [x],
        lambda x: [fn(x.astype(np.float64), axis=axis, keepdims=True).astype(np.float32)],
    )


def test_reduce_integers():
    source = """
    func.func @f(%x: tensor<4x6xi32>) -> (tensor<4x1xi32>, tensor<1x6xi32>) {
      %s = tile.reduce sum %x axis = 1 : tensor<4x6xi32> -> tensor<4x1xi32>
      %m = tile.reduce min %x axis = 0 : tensor<4x6xi32> -> tensor<1x6xi32>
      func.return %s, %m : tensor<4x1xi32>, tensor<1x6xi32>
    }
    """
    x = np.arange(-12, 12, dtype=np.int32).reshape(4, 6) * 1000
    s, m = run(source, [x])
    assert s.dtype == m.dtype == np.int32
    np.testing.assert_array_equal(s, x.sum(axis=1, keepdims=True))
    np.testing.assert_array_equal(m, x.min(axis=0, keepdims=True))


# ---------------------------------------------------------------------------------------
# tile.map
# ---------------------------------------------------------------------------------------

_erf = np.vectorize(math.erf)


def _ref_sigmoid(x: Array) -> Array:
    return 1 / (1 + np.exp(-x))


UNARY_REFERENCE: dict[str, Callable[[Array], Array]] = {
    "exp": np.exp,
    "log": np.log,
    "cos": np.cos,
    "sin": np.sin,
    "neg": np.negative,
    "abs": np.abs,
    "relu": lambda x: np.where(x > 0, x, 0.0),
    "sigmoid": _ref_sigmoid,
    "tanh": np.tanh,
    "erf": _erf,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "recip": lambda x: 1 / x,
    "gelu": lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
    "gelu_tanh": lambda x: (
        0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    ),
    "silu": lambda x: x * _ref_sigmoid(x),
}
"""Independent float64 formulas of the unary kinds."""

BINARY_REFERENCE: dict[str, Callable[[Array, Array], Array]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "max": lambda a, b: np.where(a >= b, a, b),
    "min": lambda a, b: np.where(a <= b, a, b),
}


def test_every_kind_has_a_reference():
    assert set(UNARY_REFERENCE) == set(tile.UNARY_KINDS)
    assert set(BINARY_REFERENCE) == set(tile.BINARY_KINDS)


@pytest.mark.parametrize("lead", LEADS)
@pytest.mark.parametrize("kind", tile.UNARY_KINDS)
def test_unary_map(lead: tuple[int, ...], kind: str):
    source = f"""
    func.func @f(%x: tensor<8x16xf32>, %h: tensor<4xf16>) -> (tensor<8x16xf32>, tensor<4xf16>) {{
      %y = tile.map {kind} %x : (tensor<8x16xf32>) -> tensor<8x16xf32>
      %g = tile.map {kind} %h : (tensor<4xf16>) -> tensor<4xf16>
      func.return %y, %g : tensor<8x16xf32>, tensor<4xf16>
    }}
    """
    rng = np.random.default_rng(6)
    positive = kind in ("log", "sqrt", "rsqrt")
    x = rng.uniform(0.1, 4.0, (*lead, 8, 16)) if positive else 3 * rand(rng, (*lead, 8, 16))
    x = x.astype(np.float32)
    h = np.abs(rand(rng, (*lead, 4), np.float16)) + np.float16(0.5)
    fn = UNARY_REFERENCE[kind]
    got = run(source, [x, h], lead)
    check_per_core(
        lead,
        got[:1],
        [x],
        lambda x: [fn(x.astype(np.float64)).astype(np.float32)],
        rtol=2e-6,
        atol=2e-7,
    )
    check_per_core(
        lead,
        got[1:],
        [h],
        lambda h: [fn(h.astype(np.float64)).astype(np.float16)],
        rtol=2e-3,
        atol=1e-3,
    )


@pytest.mark.parametrize("lead", LEADS)
@pytest.mark.parametrize("kind", tile.BINARY_KINDS)
@pytest.mark.parametrize(
    "lhs, rhs, out",
    [
        ((8, 16), (8, 16), (8, 16)),
        ((8, 16), (8, 1), (8, 16)),
        ((8, 16), (16,), (8, 16)),
        ((8, 1), (1, 16), (8, 16)),
        ((), (8, 16), (8, 16)),
        ((2, 1, 16), (8, 1), (2, 8, 16)),
    ],
)
def test_binary_map_broadcasts(
    lead: tuple[int, ...],
    kind: str,
    lhs: tuple[int, ...],
    rhs: tuple[int, ...],
    out: tuple[int, ...],
):
    def t(shape: tuple[int, ...]) -> str:
        return f"tensor<{''.join(f'{d}x' for d in shape)}f32>"

    source = f"""
    func.func @f(%a: {t(lhs)}, %b: {t(rhs)}) -> {t(out)} {{
      %r = tile.map {kind} %a, %b : ({t(lhs)}, {t(rhs)}) -> {t(out)}
      func.return %r : {t(out)}
    }}
    """
    rng = np.random.default_rng(7)
    a = small_ints(rng, (*lead, *lhs))
    b = small_ints(rng, (*lead, *rhs))
    b[b == 0] = 3  # no division by zero
    fn = BINARY_REFERENCE[kind]
    check_per_core(
        lead,
        run(source, [a, b], lead),
        [a, b],
        lambda a, b: [fn(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)],
        rtol=1e-7,
    )


def test_integer_maps():
    source = """
    func.func @f(%a: tensor<6xi32>, %b: tensor<6xi32>) -> (tensor<6xi32>, tensor<6xi32>, tensor<6xi32>, tensor<6xi32>) {
      %add = tile.map add %a, %b : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi32>
      %max = tile.map max %a, %b : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi32>
      %relu = tile.map relu %a : (tensor<6xi32>) -> tensor<6xi32>
      %neg = tile.map neg %a : (tensor<6xi32>) -> tensor<6xi32>
      func.return %add, %max, %relu, %neg : tensor<6xi32>, tensor<6xi32>, tensor<6xi32>, tensor<6xi32>
    }
    """
    a = np.array([-3, -1, 0, 1, 2, 100000], np.int32)
    b = np.array([5, -7, 0, 1, -2, 3], np.int32)
    add, mx, relu, neg = run(source, [a, b])
    for r in (add, mx, relu, neg):
        assert r.dtype == np.int32
    np.testing.assert_array_equal(add, a + b)
    np.testing.assert_array_equal(mx, [5, -1, 0, 1, 2, 100000])
    np.testing.assert_array_equal(relu, [0, 0, 0, 1, 2, 100000])
    np.testing.assert_array_equal(neg, -a)


MAP_BODIES = """
func.func @f(%x: tensor<8x16xf32>, %m: tensor<8x1xf32>, %h: tensor<8x16xf16>)
    -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xi1>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  %scaled = tile.map %x : (tensor<8x16xf32>) -> tensor<8x16xf32> {
  ^bb0(%v: f32):
    %k = arith.constant 1.250000e-01 : f32
    %p = arith.mulf %v, %k : f32
    tile.yield %p : f32
  }
  %e = tile.map %x, %m : (tensor<8x16xf32>, tensor<8x1xf32>) -> tensor<8x16xf32> {
  ^bb0(%a: f32, %b: f32):
    %d = arith.subf %a, %b : f32
    %ex = math.exp %d : f32
    tile.yield %ex : f32
  }
  %lt = tile.map %x, %m : (tensor<8x16xf32>, tensor<8x1xf32>) -> tensor<8x16xi1> {
  ^bb0(%a: f32, %b: f32):
    %c = arith.cmpf olt, %a, %b : f32
    tile.yield %c : i1
  }
  %masked = tile.map %lt, %x : (tensor<8x16xi1>, tensor<8x16xf32>) -> tensor<8x16xf32> {
  ^bb0(%c: i1, %a: f32):
    %ninf = arith.constant 0xFF800000 : f32
    %s = arith.select %c, %ninf, %a : f32
    tile.yield %s : f32
  }
  %mixed = tile.map %h, %x : (tensor<8x16xf16>, tensor<8x16xf32>) -> tensor<8x16xf32> {
  ^bb0(%a: f16, %b: f32):
    %w = arith.extf %a : f16 to f32
    %y = arith.addf %w, %b : f32
    tile.yield %y : f32
  }
  %const = tile.map %x : (tensor<8x16xf32>) -> tensor<8x16xf32> {
  ^bb0(%a: f32):
    %one = arith.constant 1.000000e+00 : f32
    tile.yield %one : f32
  }
  func.return %scaled, %e, %lt, %masked, %mixed, %const : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xi1>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}
"""


@pytest.mark.parametrize("lead", LEADS)
def test_map_bodies(lead: tuple[int, ...]):
    rng = np.random.default_rng(8)
    x = rand(rng, (*lead, 8, 16))
    m = rand(rng, (*lead, 8, 1))
    h = rand(rng, (*lead, 8, 16), np.float16)

    def reference(x: Array, m: Array, h: Array) -> list[Array]:
        lt = x < m
        return [
            x * np.float32(0.125),
            np.exp(x - m),
            lt,
            np.where(lt, np.float32(-np.inf), x),
            h.astype(np.float32) + x,
            np.ones((8, 16), np.float32),
        ]

    got = run(MAP_BODIES, [x, m, h], lead)
    check_per_core(lead, got, [x, m, h], reference, rtol=1e-6)
    assert got[2].dtype == np.bool_


# ---------------------------------------------------------------------------------------
# tile.broadcast, tile.cast, tile.transpose, tile.reshape
# ---------------------------------------------------------------------------------------

DATA_MOVEMENT = """
func.func @f(%m: tensor<8x1xf32>, %r: tensor<16xf32>, %s: tensor<f32>, %x: tensor<8x4xf32>, %t: tensor<2x3x4xf32>)
    -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<2x8x16xf32>, tensor<3x3xf32>, tensor<4x8xf32>, tensor<4x2x3xf32>, tensor<32xf32>, tensor<4x2x4xf32>, tensor<1x1xf32>) {
  %b0 = tile.broadcast %m : tensor<8x1xf32> -> tensor<8x16xf32>
  %b1 = tile.broadcast %r : tensor<16xf32> -> tensor<8x16xf32>
  %b2 = tile.broadcast %m : tensor<8x1xf32> -> tensor<2x8x16xf32>
  %b3 = tile.broadcast %s : tensor<f32> -> tensor<3x3xf32>
  %t0 = tile.transpose %x perm = [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
  %t1 = tile.transpose %t perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %r0 = tile.reshape %x : tensor<8x4xf32> -> tensor<32xf32>
  %r1 = tile.reshape %r0 : tensor<32xf32> -> tensor<4x2x4xf32>
  %r2 = tile.reshape %s : tensor<f32> -> tensor<1x1xf32>
  func.return %b0, %b1, %b2, %b3, %t0, %t1, %r0, %r1, %r2 : tensor<8x16xf32>, tensor<8x16xf32>, tensor<2x8x16xf32>, tensor<3x3xf32>, tensor<4x8xf32>, tensor<4x2x3xf32>, tensor<32xf32>, tensor<4x2x4xf32>, tensor<1x1xf32>
}
"""


@pytest.mark.parametrize("lead", LEADS)
def test_broadcast_transpose_reshape(lead: tuple[int, ...]):
    rng = np.random.default_rng(9)
    args = [
        rand(rng, (*lead, 8, 1)),
        rand(rng, (*lead, 16)),
        rand(rng, lead),
        rand(rng, (*lead, 8, 4)),
        rand(rng, (*lead, 2, 3, 4)),
    ]

    def reference(m: Array, r: Array, s: Array, x: Array, t: Array) -> list[Array]:
        return [
            np.repeat(m, 16, axis=1),
            np.stack([r] * 8),
            np.stack([np.repeat(m, 16, axis=1)] * 2),
            np.full((3, 3), s, np.float32),
            x.T,
            np.moveaxis(t, 2, 0),
            x.ravel(),
            x.ravel().reshape(4, 2, 4),
            s.reshape(1, 1),
        ]

    check_per_core(lead, run(DATA_MOVEMENT, args, lead), args, reference)


@pytest.mark.parametrize("lead", LEADS)
def test_cast(lead: tuple[int, ...]):
    source = """
    func.func @f(%x: tensor<4x8xf32>, %i: tensor<4x8xi32>)
        -> (tensor<4x8xf16>, tensor<4x8xi32>, tensor<4x8xf32>, tensor<4x8xf64>) {
      %h = tile.cast %x : tensor<4x8xf32> -> tensor<4x8xf16>
      %t = tile.cast %x : tensor<4x8xf32> -> tensor<4x8xi32>
      %f = tile.cast %i : tensor<4x8xi32> -> tensor<4x8xf32>
      %d = tile.cast %h : tensor<4x8xf16> -> tensor<4x8xf64>
      func.return %h, %t, %f, %d : tensor<4x8xf16>, tensor<4x8xi32>, tensor<4x8xf32>, tensor<4x8xf64>
    }
    """
    rng = np.random.default_rng(10)
    x = (10 * rand(rng, (*lead, 4, 8))).astype(np.float32)
    i = rng.integers(-1000, 1000, (*lead, 4, 8)).astype(np.int32)

    def reference(x: Array, i: Array) -> list[Array]:
        h = x.astype(np.float16)
        trunc = np.array([math.trunc(float(v)) for v in x.ravel()], np.int32).reshape(
            x.shape
        )
        return [h, trunc, i.astype(np.float32), h.astype(np.float64)]

    check_per_core(lead, run(source, [x, i], lead), [x, i], reference)


# ---------------------------------------------------------------------------------------
# tile.for
# ---------------------------------------------------------------------------------------

LOOPS = """
func.func @f(%x: tensor<4x4xf32>, %y: tensor<4x1xf32>)
    -> (tensor<8x4xf32>, tensor<4x4xf32>, tensor<4x1xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %c0 = arith.constant 0 : index
  %ones = tile.fill 1.0 : tensor<1x4xf32>
  %z = tile.fill 0.0 : tensor<8x4xf32>
  %marks = tile.for %i = 1 to 8 step 3 iter_args(%t = %z) -> (tensor<8x4xf32>) parallel {
    %t2 = tile.store %ones, %t[%i, %c0] : tensor<1x4xf32> -> tensor<8x4xf32>
    tile.yield %t2 : tensor<8x4xf32>
  }
  %r:2 = tile.for %i = -4 to 10 step 3 iter_args(%a = %x, %b = %y) -> (tensor<4x4xf32>, tensor<4x1xf32>) reduction {
    %a2 = tile.map add %a, %b : (tensor<4x4xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>
    %b2 = tile.map mul %b, %b : (tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x1xf32>
    tile.yield %a2, %b2 : tensor<4x4xf32>, tensor<4x1xf32>
  }
  %none = tile.for %i = 5 to 5 step 1 iter_args(%a = %x) -> (tensor<4x4xf32>) parallel {
    %a2 = tile.map neg %a : (tensor<4x4xf32>) -> tensor<4x4xf32>
    tile.yield %a2 : tensor<4x4xf32>
  }
  tile.for %i = 0 to 3 step 1 parallel {
    tile.yield
  }
  %nest = tile.for %i = 0 to 2 step 1 iter_args(%o = %x) -> (tensor<4x4xf32>) parallel {
    %in = tile.for %j = 0 to 3 step 1 iter_args(%p = %o) -> (tensor<4x4xf32>) reduction {
      %p2 = tile.map add %p, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
      tile.yield %p2 : tensor<4x4xf32>
    }
    tile.yield %in : tensor<4x4xf32>
  }
  func.return %marks, %r#0, %r#1, %none, %nest : tensor<8x4xf32>, tensor<4x4xf32>, tensor<4x1xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}
"""


@pytest.mark.parametrize("lead", LEADS)
def test_for(lead: tuple[int, ...]):
    rng = np.random.default_rng(11)
    x = small_ints(rng, (*lead, 4, 4))
    y = rng.choice(np.array([-1.0, 1.0, 2.0], np.float32), (*lead, 4, 1))

    def reference(x: Array, y: Array) -> list[Array]:
        marks = np.zeros((8, 4), np.float32)
        marks[[1, 4, 7]] = 1
        a, b = x.copy(), y.copy()
        for _ in range(-4, 10, 3):  # five trips
            a, b = a + b, b * b
        return [marks, a, b, x.copy(), x * 7]

    check_per_core(lead, run(LOOPS, [x, y], lead), [x, y], reference)


# ---------------------------------------------------------------------------------------
# A blocked matmul
# ---------------------------------------------------------------------------------------


def blocked_matmul(bm: int, bn: int, bk: int, n: int = 64) -> str:
    """C = A · B for n×n matrices with bm×bn output blocks and a K loop of step bk."""
    a_blk = f"tensor<{bm}x{bk}xf32>"
    b_blk = f"tensor<{bk}x{bn}xf32>"
    c_blk = f"tensor<{bm}x{bn}xf32>"
    big = f"tensor<{n}x{n}xf32>"
    return f"""
    func.func @f(%A: {big}, %B: {big}, %C: {big}) -> {big} {{
      %zero = tile.fill 0.0 : {c_blk}
      %ri = tile.for %i = 0 to {n} step {bm} iter_args(%ci = %C) -> ({big}) parallel {{
        %rj = tile.for %j = 0 to {n} step {bn} iter_args(%cj = %ci) -> ({big}) parallel {{
          %acc = tile.for %k = 0 to {n} step {bk} iter_args(%c = %zero) -> ({c_blk}) reduction {{
            %a = tile.load %A[%i, %k] : {big} -> {a_blk}
            %b = tile.load %B[%k, %j] : {big} -> {b_blk}
            %c2 = tile.dot %a, %b, %c : ({a_blk}, {b_blk}, {c_blk}) -> {c_blk}
            tile.yield %c2 : {c_blk}
          }}
          %cj2 = tile.store %acc, %cj[%i, %j] : {c_blk} -> {big}
          tile.yield %cj2 : {big}
        }}
        tile.yield %rj : {big}
      }}
      func.return %ri : {big}
    }}
    """


BLOCKINGS = [(16, 16, 16), (32, 32, 32), (16, 32, 16), (32, 16, 32), (16, 32, 32)]


@pytest.mark.parametrize("bm, bn, bk", BLOCKINGS)
def test_blocked_matmul_equals_numpy(bm: int, bn: int, bk: int):
    rng = np.random.default_rng(12)
    a, b = small_ints(rng, (64, 64)), small_ints(rng, (64, 64))
    c = np.full((64, 64), np.nan, np.float32)  # every element is overwritten
    module = parse(blocked_matmul(bm, bn, bk))
    (out,), stats = run_tile_function(module, "f", [a, b, c])
    np.testing.assert_array_equal(out, a.astype(np.float64) @ b.astype(np.float64))
    assert np.isnan(c).all()  # the caller's output tensor is untouched
    # Traffic: every (i, j, k) step loads one A and one B block; every C block is stored
    # once; the accumulator never leaves SRAM.
    steps = (64 // bm) * (64 // bn) * (64 // bk)
    assert stats.bytes_loaded == steps * (bm * bk + bk * bn) * 4
    assert stats.bytes_stored == 64 * 64 * 4
    assert stats.bytes_moved == stats.bytes_loaded + stats.bytes_stored
    assert stats.flops == 64**3  # the dots; loads, stores and fills cost none
    assert stats.op_counts["tile.dot"] == steps
    assert stats.op_counts["tile.load"] == 2 * steps
    assert stats.op_counts["tile.store"] == (64 // bm) * (64 // bn)
    assert stats.op_counts["tile.for"] == 1 + 64 // bm + (64 // bm) * (64 // bn)


def test_blocked_matmul_with_random_floats():
    rng = np.random.default_rng(13)
    a, b = rand(rng, (64, 64)), rand(rng, (64, 64))
    (out,), _ = run_tile_function(parse(blocked_matmul(16, 32, 16)), "f", [a, b, a])
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


SPMD_MATMUL = """
func.func @f(%A: tensor<64x64xf32>, %B: tensor<64x64xf32>, %C: tensor<64x64xf32>, %row: index, %col: index) -> tensor<64x64xf32> {
  %c32 = arith.constant 32 : index
  %i = arith.muli %row, %c32 : index
  %j = arith.muli %col, %c32 : index
  %zero = tile.fill 0.0 : tensor<32x32xf32>
  %acc = tile.for %k = 0 to 64 step 16 iter_args(%c = %zero) -> (tensor<32x32xf32>) reduction {
    %a = tile.load %A[%i, %k] : tensor<64x64xf32> -> tensor<32x16xf32>
    %b = tile.load %B[%k, %j] : tensor<64x64xf32> -> tensor<16x32xf32>
    %c2 = tile.dot %a, %b, %c : (tensor<32x16xf32>, tensor<16x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
    tile.yield %c2 : tensor<32x32xf32>
  }
  %out = tile.store %acc, %C[%i, %j] : tensor<32x32xf32> -> tensor<64x64xf32>
  func.return %out : tensor<64x64xf32>
}
"""


def test_spmd_matmul_each_core_computes_its_block():
    lead = (2, 2)
    rng = np.random.default_rng(14)
    a = np.broadcast_to(small_ints(rng, (64, 64)), (*lead, 64, 64)).copy()
    b = np.broadcast_to(small_ints(rng, (64, 64)), (*lead, 64, 64)).copy()
    c = np.zeros((*lead, 64, 64), np.float32)
    row, col = coords(lead)
    (out,) = run(SPMD_MATMUL, [a, b, c, row, col], lead)
    full = a[0, 0].astype(np.float64) @ b[0, 0]
    assembled = np.zeros((64, 64))
    for r, q in cores(lead):
        block = out[r, q, 32 * r : 32 * r + 32, 32 * q : 32 * q + 32]
        np.testing.assert_array_equal(
            block, full[32 * r : 32 * r + 32, 32 * q : 32 * q + 32]
        )
        rest = out[r, q].copy()
        rest[32 * r : 32 * r + 32, 32 * q : 32 * q + 32] = 0
        assert not rest.any()  # nothing else was written
        assembled[32 * r : 32 * r + 32, 32 * q : 32 * q + 32] = block
    np.testing.assert_array_equal(assembled, full)
    assert not c.any()


# ---------------------------------------------------------------------------------------
# Memory traffic
# ---------------------------------------------------------------------------------------


def test_traffic_counts_only_global_tensors():
    source = """
    func.func @f(%A: tensor<32x32xf32>, %H: tensor<8x8xf16>, %O: tensor<32x32xf32>) -> tensor<32x32xf32> {
      %c0 = arith.constant 0 : index
      %c8 = arith.constant 8 : index
      %a = tile.load %A[%c0, %c8] : tensor<32x32xf32> -> tensor<8x16xf32>
      %h = tile.load %H[%c0, %c0] : tensor<8x8xf16> -> tensor<4x8xf16>
      %local = tile.fill 0.0 : tensor<16x16xf32>
      %l2 = tile.store %a, %local[%c8, %c0] : tensor<8x16xf32> -> tensor<16x16xf32>
      %back = tile.load %l2[%c0, %c0] : tensor<16x16xf32> -> tensor<16x8xf32>
      %sq = tile.load %a[%c0, %c0] : tensor<8x16xf32> -> tensor<8x8xf32>
      %o2 = tile.store %back, %O[%c0, %c0] : tensor<16x8xf32> -> tensor<32x32xf32>
      %o3 = tile.store %sq, %o2[%c8, %c8] : tensor<8x8xf32> -> tensor<32x32xf32>
      %again = tile.load %o3[%c0, %c0] : tensor<32x32xf32> -> tensor<2x2xf32>
      func.return %o3 : tensor<32x32xf32>
    }
    """
    module = parse(source)
    rng = np.random.default_rng(15)
    a, o = rand(rng, (32, 32)), rand(rng, (32, 32))
    h = rand(rng, (8, 8), np.float16)
    (out,), stats = run_tile_function(module, "f", [a, h, o])
    # Global loads: A (8×16 f32), H (4×8 f16), and %o3, the updated output (2×2 f32).
    # Loads from %l2 (a local block that was stored into) and from %a do not count.
    assert stats.bytes_loaded == 8 * 16 * 4 + 4 * 8 * 2 + 2 * 2 * 4
    # Global stores: into %O and %o2 (16×8 and 8×8 f32); the store into %local does not.
    assert stats.bytes_stored == 16 * 8 * 4 + 8 * 8 * 4
    assert stats.op_counts == {
        "arith.constant": 2,
        "tile.load": 5,
        "tile.fill": 1,
        "tile.store": 3,
    }
    assert stats.flops == 0
    want = o.copy()
    want[0:16, 0:8] = 0
    want[8:16, 0:8] = a[0:8, 8:16][:, 0:8]
    want[8:16, 8:16] = a[0:8, 8:16][:, 0:8]
    np.testing.assert_array_equal(out, want)


def test_traffic_through_loop_carried_globals():
    # The output tensor travels through iter_args; loads from the carried value count.
    source = """
    func.func @f(%O: tensor<16x16xf32>) -> tensor<16x16xf32> {
      %c0 = arith.constant 0 : index
      %blk = tile.fill 2.0 : tensor<4x16xf32>
      %r = tile.for %i = 0 to 16 step 4 iter_args(%o = %O) -> (tensor<16x16xf32>) parallel {
        %old = tile.load %o[%i, %c0] : tensor<16x16xf32> -> tensor<4x16xf32>
        %new = tile.map add %old, %blk : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
        %o2 = tile.store %new, %o[%i, %c0] : tensor<4x16xf32> -> tensor<16x16xf32>
        tile.yield %o2 : tensor<16x16xf32>
      }
      func.return %r : tensor<16x16xf32>
    }
    """
    module = parse(source)
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    globals_ = global_values(fn)
    loop = next(op for op in fn.walk() if isinstance(op, tile.ForOp))
    assert loop.res[0] in globals_
    assert loop.body.block.args[1] in globals_
    assert not any(
        isinstance(v.owner, tile.FillOp) or isinstance(v.owner, tile.MapOp)
        for v in globals_
    )
    o = np.arange(256, dtype=np.float32).reshape(16, 16)
    o_before = o.copy()
    (out,), stats = run_tile_function(module, "f", [o])
    np.testing.assert_array_equal(out, o_before + 2)
    np.testing.assert_array_equal(o, o_before)
    assert stats.bytes_loaded == 16 * 16 * 4
    assert stats.bytes_stored == 16 * 16 * 4
    assert stats.flops == 16 * 16  # the four adds of 4×16 elements


def test_traffic_counts_bfloat16_at_two_bytes_per_element():
    source = """
    func.func @f(%A: tensor<8x8xbf16>) -> tensor<8x8xbf16> {
      %c0 = arith.constant 0 : index
      %a = tile.load %A[%c0, %c0] : tensor<8x8xbf16> -> tensor<4x8xbf16>
      %o = tile.store %a, %A[%c0, %c0] : tensor<4x8xbf16> -> tensor<8x8xbf16>
      func.return %o : tensor<8x8xbf16>
    }
    """
    a = np.arange(64, dtype=np.float32).reshape(8, 8)  # bf16 values held in float32
    (_,), stats = run_tile_function(parse(source), "f", [a])
    assert stats.bytes_loaded == stats.bytes_stored == 4 * 8 * 2


def test_tile_stats_defaults_and_tensor_bytes():
    stats = TileStats()
    assert (stats.bytes_loaded, stats.bytes_stored, stats.bytes_moved, stats.flops) == (
        0,
        0,
        0,
        0,
    )
    assert stats.op_counts == {}
    module = parse(
        "func.func @f(%a: tensor<4x8xf16>, %b: tensor<3xbf16>, %c: tensor<2x2xi64>) {\n"
        "  func.return\n}"
    )
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    sizes = [tensor_bytes(t) for t in fn.function_type.inputs.data]
    assert sizes == [64, 12, 32]  # host representation: bf16 is held in float32
    with pytest.raises(PlmrError, match="expected a tensor type, got f32"):
        tensor_bytes(f32)


# ---------------------------------------------------------------------------------------
# Value semantics of tile.store (the in-place optimisation is invisible)
# ---------------------------------------------------------------------------------------


def test_store_never_mutates_the_callers_arrays():
    source = """
    func.func @f(%b: tensor<2x4xf32>, %d: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
      %c0 = arith.constant 0 : index
      %c2 = arith.constant 2 : index
      %s1 = tile.store %b, %d[%c0, %c0] : tensor<2x4xf32> -> tensor<8x4xf32>
      %s2 = tile.store %b, %s1[%c2, %c0] : tensor<2x4xf32> -> tensor<8x4xf32>
      %r = tile.for %i = 4 to 8 step 2 iter_args(%t = %d) -> (tensor<8x4xf32>) parallel {
        %t2 = tile.store %b, %t[%i, %c0] : tensor<2x4xf32> -> tensor<8x4xf32>
        tile.yield %t2 : tensor<8x4xf32>
      }
      func.return %s2, %r : tensor<8x4xf32>, tensor<8x4xf32>
    }
    """
    module = parse(source)
    b = np.ones((2, 4), np.float32)
    d = np.zeros((8, 4), np.float32)
    (s2, r), _ = run_tile_function(module, "f", [b, d])
    assert not d.any()
    np.testing.assert_array_equal(s2[:4], 1)
    assert not s2[4:].any()
    np.testing.assert_array_equal(r[4:], 1)
    assert not r[:4].any()
    # An evaluator that runs again on its own earlier results leaves them alone too.
    chain = parse("""
    func.func @f(%b: tensor<2x4xf32>, %d: tensor<8x4xf32>) -> tensor<8x4xf32> {
      %c0 = arith.constant 0 : index
      %s = tile.store %b, %d[%c0, %c0] : tensor<2x4xf32> -> tensor<8x4xf32>
      func.return %s : tensor<8x4xf32>
    }
    """)
    ev = ReferenceEvaluator(chain)
    fn = ev.function("f")
    (first,) = ev.run(fn, [b, d])
    kept = first.copy()
    (second,) = ev.run(fn, [2 * b, first])
    np.testing.assert_array_equal(first, kept)
    np.testing.assert_array_equal(second[:2], 2)
    assert not d.any()


def test_store_into_a_value_of_an_enclosing_block_copies():
    # %s1 has one use, but inside a loop: each iteration must see the original.
    source = """
    func.func @f(%b: tensor<1x4xf32>) -> tensor<4x4xf32> {
      %c0 = arith.constant 0 : index
      %z = tile.fill 0.0 : tensor<4x4xf32>
      %s1 = tile.store %b, %z[%c0, %c0] : tensor<1x4xf32> -> tensor<4x4xf32>
      %acc0 = tile.fill 0.0 : tensor<4x4xf32>
      %r = tile.for %i = 1 to 4 step 1 iter_args(%acc = %acc0) -> (tensor<4x4xf32>) parallel {
        %s2 = tile.store %b, %s1[%i, %c0] : tensor<1x4xf32> -> tensor<4x4xf32>
        %a2 = tile.map add %acc, %s2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
        tile.yield %a2 : tensor<4x4xf32>
      }
      func.return %r : tensor<4x4xf32>
    }
    """
    b = np.ones((1, 4), np.float32)
    (r,) = run(source, [b])
    np.testing.assert_array_equal(r[:, 0], [3, 1, 1, 1])


def test_store_into_a_loop_init_that_is_used_later_copies():
    source = """
    func.func @f(%b: tensor<1x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
      %c0 = arith.constant 0 : index
      %z = tile.fill 0.0 : tensor<4x4xf32>
      %s1 = tile.store %b, %z[%c0, %c0] : tensor<1x4xf32> -> tensor<4x4xf32>
      %r = tile.for %i = 1 to 4 step 1 iter_args(%c = %s1) -> (tensor<4x4xf32>) parallel {
        %s2 = tile.store %b, %c[%i, %c0] : tensor<1x4xf32> -> tensor<4x4xf32>
        tile.yield %s2 : tensor<4x4xf32>
      }
      %p = tile.for %i = 1 to 3 step 1 iter_args(%c = %s1) -> (tensor<4x4xf32>) parallel {
        %s3 = tile.store %b, %c[%i, %c0] : tensor<1x4xf32> -> tensor<4x4xf32>
        tile.yield %s1 : tensor<4x4xf32>
      }
      %after = tile.load %s1[%c0, %c0] : tensor<4x4xf32> -> tensor<4x4xf32>
      func.return %r, %p, %after : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
    }
    """
    b = np.ones((1, 4), np.float32)
    r, p, after = run(source, [b])
    np.testing.assert_array_equal(r[:, 0], [1, 1, 1, 1])
    np.testing.assert_array_equal(p[:, 0], [1, 0, 0, 0])  # the loop yields %s1 itself
    np.testing.assert_array_equal(after[:, 0], [1, 0, 0, 0])


def test_yielding_a_value_of_an_enclosing_block_copies():
    # From the second iteration on, %c is %s1 (whose only use is the yield): storing into
    # %c must not change %s1, which the next iteration yields again.
    source = """
    func.func @f(%b: tensor<1x4xf32>) -> tensor<4x4xf32> {
      %c0 = arith.constant 0 : index
      %z = tile.fill 0.0 : tensor<4x4xf32>
      %s1 = tile.store %b, %z[%c0, %c0] : tensor<1x4xf32> -> tensor<4x4xf32>
      %init = tile.fill 0.0 : tensor<4x4xf32>
      %p = tile.for %i = 1 to 4 step 1 iter_args(%c = %init) -> (tensor<4x4xf32>) parallel {
        %s2 = tile.store %b, %c[%i, %c0] : tensor<1x4xf32> -> tensor<4x4xf32>
        tile.yield %s1 : tensor<4x4xf32>
      }
      func.return %p : tensor<4x4xf32>
    }
    """
    (p,) = run(source, [np.ones((1, 4), np.float32)])
    np.testing.assert_array_equal(p[:, 0], [1, 0, 0, 0])


def test_store_into_an_argument_of_a_called_function_copies():
    source = """
    func.func @g(%d: tensor<4x4xf32>, %b: tensor<1x4xf32>) -> tensor<4x4xf32> {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %s = tile.store %b, %d[%c1, %c0] : tensor<1x4xf32> -> tensor<4x4xf32>
      func.return %s : tensor<4x4xf32>
    }
    func.func @f(%b: tensor<1x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
      %c0 = arith.constant 0 : index
      %z = tile.fill 0.0 : tensor<4x4xf32>
      %s1 = tile.store %b, %z[%c0, %c0] : tensor<1x4xf32> -> tensor<4x4xf32>
      %g = func.call @g(%s1, %b) : (tensor<4x4xf32>, tensor<1x4xf32>) -> tensor<4x4xf32>
      %after = tile.load %s1[%c0, %c0] : tensor<4x4xf32> -> tensor<4x4xf32>
      func.return %g, %after : tensor<4x4xf32>, tensor<4x4xf32>
    }
    """
    b = np.full((1, 4), 5, np.float32)
    g, after = run(source, [b])
    np.testing.assert_array_equal(g[:2], 5)
    np.testing.assert_array_equal(after[0], 5)
    assert not after[1:].any()


def test_ownership_ends_with_the_buffer():
    # Once a buffer the evaluator made is gone, its id (which numpy may reuse for any new
    # array) no longer marks a buffer that may be updated in place.
    source = """
    func.func @f(%b: tensor<1x4xf32>) -> tensor<1x4xf32> {
      %c0 = arith.constant 0 : index
      %z = tile.fill 0.0 : tensor<4x4xf32>
      %s = tile.store %b, %z[%c0, %c0] : tensor<1x4xf32> -> tensor<4x4xf32>
      %r = tile.load %s[%c0, %c0] : tensor<4x4xf32> -> tensor<1x4xf32>
      func.return %r : tensor<1x4xf32>
    }
    """
    ev = ReferenceEvaluator(parse(source))
    (r,) = ev.run(ev.function("f"), [np.ones((1, 4), np.float32)])
    np.testing.assert_array_equal(r, 1)
    gc.collect()
    assert ev.owned_buffers == set()


def test_a_chain_of_stores_updates_one_buffer_in_place():
    # The optimisation itself: a store into a dead, evaluator-owned block does not copy.
    source = """
    func.func @f(%b: tensor<1x4xf32>) -> tensor<4x4xf32> {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %z = tile.fill 0.0 : tensor<4x4xf32>
      %s1 = tile.store %b, %z[%c0, %c0] : tensor<1x4xf32> -> tensor<4x4xf32>
      %s2 = tile.store %b, %s1[%c1, %c0] : tensor<1x4xf32> -> tensor<4x4xf32>
      %s3 = tile.store %b, %s2[%c2, %c0] : tensor<1x4xf32> -> tensor<4x4xf32>
      func.return %s3 : tensor<4x4xf32>
    }
    """
    recorded: list[Any] = []

    class Recording(Interpreter.Listener):
        def did_interpret_op(self, op: Operation, results: PythonValues) -> None:
            if isinstance(op, tile.StoreOp):
                recorded.append(results[0])

    module = parse(source)
    ev = ReferenceEvaluator(module, listeners=[Recording()])
    (s3,) = ev.run(ev.function("f"), [np.ones((1, 4), np.float32)])
    assert recorded[0] is recorded[1] is recorded[2] is s3
    np.testing.assert_array_equal(s3[:, 0], [1, 1, 1, 0])


# ---------------------------------------------------------------------------------------
# arith / math
# ---------------------------------------------------------------------------------------

I32_MOD = 2**32


def _wrap32(v: int) -> int:
    v %= I32_MOD
    return v - I32_MOD if v >= 2**31 else v


def _divsi(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


_NAN = float("nan")


def _ordered(fn: Callable[[float, float], bool]) -> Callable[[float, float], bool]:
    return lambda a, b: not (math.isnan(a) or math.isnan(b)) and fn(a, b)


def _unordered(fn: Callable[[float, float], bool]) -> Callable[[float, float], bool]:
    return lambda a, b: math.isnan(a) or math.isnan(b) or fn(a, b)


INT_BINARY: dict[str, Callable[[int, int], int]] = {
    "arith.addi": lambda a, b: _wrap32(a + b),
    "arith.subi": lambda a, b: _wrap32(a - b),
    "arith.muli": lambda a, b: _wrap32(a * b),
    "arith.divsi": _divsi,
    "arith.divui": lambda a, b: _wrap32((a % I32_MOD) // (b % I32_MOD)),
    "arith.remsi": lambda a, b: a - b * _divsi(a, b),
    "arith.remui": lambda a, b: _wrap32((a % I32_MOD) % (b % I32_MOD)),
    "arith.floordivsi": lambda a, b: a // b,
    "arith.ceildivsi": lambda a, b: -(-a // b),
    "arith.maxsi": max,
    "arith.minsi": min,
    "arith.andi": lambda a, b: a & b,
    "arith.ori": lambda a, b: a | b,
    "arith.xori": lambda a, b: a ^ b,
}

CMPI: dict[str, Callable[[int, int], bool]] = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "slt": lambda a, b: a < b,
    "sle": lambda a, b: a <= b,
    "sgt": lambda a, b: a > b,
    "sge": lambda a, b: a >= b,
    "ult": lambda a, b: a % I32_MOD < b % I32_MOD,
    "ule": lambda a, b: a % I32_MOD <= b % I32_MOD,
    "ugt": lambda a, b: a % I32_MOD > b % I32_MOD,
    "uge": lambda a, b: a % I32_MOD >= b % I32_MOD,
}

FLOAT_BINARY: dict[str, Callable[[float, float], float]] = {
    "arith.addf": lambda a, b: a + b,
    "arith.subf": lambda a, b: a - b,
    "arith.mulf": lambda a, b: a * b,
    "arith.divf": lambda a, b: float(np.divide(np.float64(a), np.float64(b))),
    "arith.maximumf": lambda a, b: _NAN if math.isnan(a) or math.isnan(b) else max(a, b),
    "arith.minimumf": lambda a, b: _NAN if math.isnan(a) or math.isnan(b) else min(a, b),
    "arith.maxnumf": lambda a, b: b if math.isnan(a) else a if math.isnan(b) else max(a, b),
    "arith.minnumf": lambda a, b: b if math.isnan(a) else a if math.isnan(b) else min(a, b),
    "math.powf": lambda a, b: math.pow(abs(a), b),
}

CMPF: dict[str, Callable[[float, float], bool]] = {
    "oeq": _ordered(lambda a, b: a == b),
    "ogt": _ordered(lambda a, b: a > b),
    "oge": _ordered(lambda a, b: a >= b),
    "olt": _ordered(lambda a, b: a < b),
    "ole": _ordered(lambda a, b: a <= b),
    "one": _ordered(lambda a, b: a != b),
    "ueq": _unordered(lambda a, b: a == b),
    "ugt": _unordered(lambda a, b: a > b),
    "uge": _unordered(lambda a, b: a >= b),
    "ult": _unordered(lambda a, b: a < b),
    "ule": _unordered(lambda a, b: a <= b),
    "une": _unordered(lambda a, b: a != b),
}

FLOAT_UNARY: dict[str, Callable[[float], float]] = {
    "arith.negf": lambda a: -a,
    "math.exp": math.exp,
    "math.log": lambda a: math.log(abs(a)) if a else -math.inf,
    "math.cos": math.cos,
    "math.sin": math.sin,
    "math.sqrt": lambda a: math.sqrt(abs(a)),
    "math.rsqrt": lambda a: 1 / math.sqrt(abs(a)),
    "math.tanh": math.tanh,
    "math.erf": math.erf,
    "math.absf": abs,
    "math.floor": math.floor,
    "math.ceil": math.ceil,
}
"""Unary float ops; log and the square roots are applied to |x| (see `_unary_source`)."""


def _int_pairs() -> list[tuple[int, int]]:
    values = [-17, -7, -1, 0, 1, 5, 7, 2**31 - 1, -(2**31)]
    divisors = [-7, -3, -1, 1, 2, 3, 7, 2**31 - 1, -(2**31)]
    # The most negative value divided by -1 overflows (undefined behaviour in MLIR).
    return [(a, b) for a in values for b in divisors if (a, b) != (-(2**31), -1)]


def _evaluate_pairs(
    source: str,
    pairs: Sequence[tuple[Any, Any]],
    dtype: Any,
    lead: tuple[int, ...],
) -> list[Any]:
    """Runs @f on every pair: with lead = (), one call per pair; else per-core arrays."""
    module = parse(source)
    if not lead:
        return [
            run(module, [np.asarray(a, dtype), np.asarray(b, dtype)])[0][()]
            for a, b in pairs
        ]
    n = math.prod(lead)
    out: list[Any] = []
    for start in range(0, len(pairs), n):
        chunk = list(pairs[start : start + n])
        chunk += [chunk[-1]] * (n - len(chunk))
        a = np.array([p[0] for p in chunk], dtype).reshape(lead)
        b = np.array([p[1] for p in chunk], dtype).reshape(lead)
        (r,) = run(module, [a, b], lead)
        assert r.shape == lead
        out += list(r.ravel())[: len(pairs) - start]
    return out


@pytest.mark.parametrize("lead", LEADS)
@pytest.mark.parametrize("name", list(INT_BINARY))
def test_integer_arith(lead: tuple[int, ...], name: str):
    source = f"""
    func.func @f(%a: i32, %b: i32) -> i32 {{
      %r = {name} %a, %b : i32
      func.return %r : i32
    }}
    """
    pairs = _int_pairs()
    with np.errstate(over="ignore"):
        got = _evaluate_pairs(source, pairs, np.int32, lead)
    want = [INT_BINARY[name](a, b) for a, b in pairs]
    assert [int(g) for g in got] == want


@pytest.mark.parametrize("lead", LEADS)
@pytest.mark.parametrize("predicate", list(CMPI))
def test_cmpi(lead: tuple[int, ...], predicate: str):
    source = f"""
    func.func @f(%a: i32, %b: i32) -> i1 {{
      %r = arith.cmpi {predicate}, %a, %b : i32
      func.return %r : i1
    }}
    """
    values = [-(2**31), -5, -1, 0, 1, 5, 2**31 - 1]
    pairs = [(a, b) for a in values for b in values]
    got = _evaluate_pairs(source, pairs, np.int32, lead)
    assert [bool(g) for g in got] == [CMPI[predicate](a, b) for a, b in pairs]


def _float_pairs() -> list[tuple[float, float]]:
    values = [-2.5, -0.0, 0.0, 1.0, 3.0, math.inf, -math.inf, _NAN]
    return [(a, b) for a in values for b in values]


def _same_float(got: float, want: float) -> bool:
    if math.isnan(want):
        return math.isnan(got)
    return got == want or math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-30)


@pytest.mark.parametrize("lead", LEADS)
@pytest.mark.parametrize("name", list(FLOAT_BINARY))
def test_float_arith(lead: tuple[int, ...], name: str):
    body = (
        "%m = math.absf %a : f32\n      %r = math.powf %m, %b : f32"
        if name == "math.powf"
        else f"%r = {name} %a, %b : f32"
    )
    source = f"""
    func.func @f(%a: f32, %b: f32) -> f32 {{
      {body}
      func.return %r : f32
    }}
    """
    pairs = [
        (a, b) for a, b in _float_pairs() if not (name == "math.powf" and a == 0 and b < 0)
    ]
    with np.errstate(all="ignore"):
        got = _evaluate_pairs(source, pairs, np.float32, lead)
        wants = [FLOAT_BINARY[name](a, b) for a, b in pairs]
    for (a, b), g, want in zip(pairs, got, wants, strict=True):
        assert _same_float(float(g), want), (name, a, b, g, want)
        assert np.asarray(g).dtype == np.float32


@pytest.mark.parametrize("lead", LEADS)
@pytest.mark.parametrize("predicate", list(CMPF))
def test_cmpf(lead: tuple[int, ...], predicate: str):
    source = f"""
    func.func @f(%a: f32, %b: f32) -> i1 {{
      %r = arith.cmpf {predicate}, %a, %b : f32
      func.return %r : i1
    }}
    """
    pairs = _float_pairs()
    got = _evaluate_pairs(source, pairs, np.float32, lead)
    assert [bool(g) for g in got] == [CMPF[predicate](a, b) for a, b in pairs]


@pytest.mark.parametrize("predicate", ["false", "ord", "uno", "true"])
def test_unsupported_cmpf_predicates_raise(predicate: str):
    source = f"""
    func.func @f(%a: f32, %b: f32) -> i1 {{
      %r = arith.cmpf {predicate}, %a, %b : f32
      func.return %r : i1
    }}
    """
    with pytest.raises(
        PlmrError, match=r"'arith.cmpf' \(%r\) in @f: unsupported arith.cmpf predicate \d+"
    ):
        run(source, [np.float32(1), np.float32(2)])


@pytest.mark.parametrize("lead", LEADS)
@pytest.mark.parametrize("name", list(FLOAT_UNARY))
def test_float_unary(lead: tuple[int, ...], name: str):
    needs_abs = name in ("math.log", "math.sqrt", "math.rsqrt")
    body = (
        f"%m = math.absf %a : f32\n      %r = {name} %m : f32"
        if needs_abs
        else f"%r = {name} %a : f32"
    )
    source = f"""
    func.func @f(%a: f32, %unused: f32) -> f32 {{
      {body}
      func.return %r : f32
    }}
    """
    values = [-3.0, -1.0, -0.5, 0.25, 0.5, 1.0, 2.0, 10.0]
    pairs = [(v, 0.0) for v in values]
    got = _evaluate_pairs(source, pairs, np.float32, lead)
    for v, g in zip(values, got, strict=True):
        want = FLOAT_UNARY[name](float(np.float32(v)))
        assert np.asarray(g).dtype == np.float32
        assert math.isclose(float(g), want, rel_tol=1e-6, abs_tol=1e-7), (name, v, g, want)


@pytest.mark.parametrize("lead", LEADS)
def test_fma_select_and_conversions(lead: tuple[int, ...]):
    source = """
    func.func @f(%a: f32, %b: f32, %c: f32, %i: i32, %k: index, %h: f16)
        -> (f32, f32, i32, f32, i64, index, f64, f16, f32) {
      %fma = math.fma %a, %b, %c : f32
      %lt = arith.cmpf olt, %a, %b : f32
      %sel = arith.select %lt, %a, %b : f32
      %fi = arith.fptosi %a : f32 to i32
      %if = arith.sitofp %i : i32 to f32
      %ki = arith.index_cast %k : index to i64
      %ik = arith.index_cast %i : i32 to index
      %ext = arith.extf %a : f32 to f64
      %tr = arith.truncf %a : f32 to f16
      %he = arith.extf %h : f16 to f32
      func.return %fma, %sel, %fi, %if, %ki, %ik, %ext, %tr, %he : f32, f32, i32, f32, i64, index, f64, f16, f32
    }
    """
    rng = np.random.default_rng(16)
    shape = lead
    a = (5 * rng.standard_normal(shape)).astype(np.float32)
    b = (5 * rng.standard_normal(shape)).astype(np.float32)
    c = rng.standard_normal(shape).astype(np.float32)
    i = rng.integers(-1000, 1000, shape).astype(np.int32)
    k = rng.integers(0, 1000, shape).astype(np.int64)
    h = rng.standard_normal(shape).astype(np.float16)
    args = [np.asarray(x) for x in (a, b, c, i, k, h)]
    got = run(source, args, lead)

    def reference(a: Any, b: Any, c: Any, i: Any, k: Any, h: Any) -> list[Array]:
        fa, fb = float(a), float(b)
        return [
            np.float32(fa * fb + float(c)),
            np.float32(fa if fa < fb else fb),
            np.int32(math.trunc(fa)),
            np.float32(int(i)),
            np.int64(int(k)),
            np.int64(int(i)),
            np.float64(fa),
            np.float16(fa),
            np.float32(float(h)),
        ]

    check_per_core(lead, got, args, reference, rtol=1e-6)


@pytest.mark.parametrize("lead", LEADS)
def test_integer_conversions_and_abs(lead: tuple[int, ...]):
    source = """
    func.func @f(%b: i1, %i: i32) -> (i64, i64, i64, i64, i8, f32, f32, i32) {
      %bs = arith.extsi %b : i1 to i64
      %bu = arith.extui %b : i1 to i64
      %is = arith.extsi %i : i32 to i64
      %iu = arith.extui %i : i32 to i64
      %it = arith.trunci %i : i32 to i8
      %bf = arith.uitofp %b : i1 to f32
      %if = arith.uitofp %i : i32 to f32
      %ab = math.absi %i : i32
      func.return %bs, %bu, %is, %iu, %it, %bf, %if, %ab : i64, i64, i64, i64, i8, f32, f32, i32
    }
    """
    rng = np.random.default_rng(18)
    b = rng.integers(0, 2, lead).astype(np.bool_)
    i = rng.integers(-300, 300, lead).astype(np.int32)
    args = [np.asarray(b), np.asarray(i)]
    got = run(source, args, lead)

    def reference(b: Any, i: Any) -> list[Array]:
        bit, n = int(bool(b)), int(i)
        wrapped = (n + 128) % 256 - 128
        return [
            np.int64(-bit),
            np.int64(bit),
            np.int64(n),
            np.int64(n % 2**32),
            np.int8(wrapped),
            np.float32(bit),
            np.float32(n % 2**32),
            np.int32(abs(n)),
        ]

    check_per_core(lead, got, args, reference)


@pytest.mark.parametrize("lead", LEADS)
def test_constants(lead: tuple[int, ...]):
    source = """
    func.func @f() -> (index, i32, f32, f16, i1, tensor<2x3xf32>, tensor<4xi32>) {
      %k = arith.constant 42 : index
      %i = arith.constant -7 : i32
      %x = arith.constant 2.5 : f32
      %h = arith.constant 0.5 : f16
      %t = arith.constant true
      %d = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
      %s = arith.constant dense<9> : tensor<4xi32>
      func.return %k, %i, %x, %h, %t, %d, %s : index, i32, f32, f16, i1, tensor<2x3xf32>, tensor<4xi32>
    }
    """
    got = run(source, [], lead)
    k, i, x, h, t, d, s = got
    assert (k.dtype, i.dtype, x.dtype, h.dtype, t.dtype) == (
        np.int64,
        np.int32,
        np.float32,
        np.float16,
        np.bool_,
    )
    assert (int(k), int(i), float(x), float(h), bool(t)) == (42, -7, 2.5, 0.5, True)
    # Dense constants are per-core values like every tensor.
    check_per_core(
        lead,
        [d, s],
        [],
        lambda: [
            np.arange(1, 7, dtype=np.float32).reshape(2, 3),
            np.full((4,), 9, np.int32),
        ],
    )


def test_arith_in_map_bodies_is_vectorised_over_blocks_and_cores():
    source = """
    func.func @f(%x: tensor<4x8xi32>, %y: tensor<4x8xi32>) -> tensor<4x8xi32> {
      %r = tile.map %x, %y : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi32> {
      ^bb0(%a: i32, %b: i32):
        %q = arith.divsi %a, %b : i32
        %m = arith.remsi %a, %b : i32
        %lt = arith.cmpi ult, %a, %b : i32
        %s = arith.addi %q, %m : i32
        %r = arith.select %lt, %s, %q : i32
        tile.yield %r : i32
      }
      func.return %r : tensor<4x8xi32>
    }
    """
    lead = (3, 2)
    rng = np.random.default_rng(17)
    x = rng.integers(-50, 50, (*lead, 4, 8)).astype(np.int32)
    y = rng.choice(np.array([-7, -2, 3, 5], np.int32), (*lead, 4, 8))

    def reference(x: Array, y: Array) -> list[Array]:
        out = np.empty_like(x)
        for idx in np.ndindex(x.shape):
            a, b = int(x[idx]), int(y[idx])
            q = _divsi(a, b)
            s = q + (a - b * q)
            out[idx] = s if CMPI["ult"](a, b) else q
        return [out]

    check_per_core(lead, run(source, [x, y], lead), [x, y], reference)


COVERED_ARITH_AND_MATH = {
    *INT_BINARY,
    "arith.cmpi",
    *FLOAT_BINARY,
    "arith.cmpf",
    *FLOAT_UNARY,
    "math.fma",
    "arith.select",
    "arith.fptosi",
    "arith.sitofp",
    "arith.index_cast",
    "arith.extf",
    "arith.truncf",
    "arith.constant",
    "arith.extsi",
    "arith.extui",
    "arith.trunci",
    "arith.uitofp",
    "math.absi",
}


def test_every_arith_and_math_op_with_semantics_is_tested():
    implemented = {op.name for op in EVAL_IMPLS if not op.name.startswith("tile.")}
    assert implemented == COVERED_ARITH_AND_MATH
    assert all(
        issubclass(op, tile.TileOp) or op.name.startswith(("arith.", "math."))
        for op in EVAL_IMPLS
    )
    assert {op for op in EVAL_IMPLS if op.name.startswith("tile.")} == set(
        tile.Tile.operations
    ) - {tile.YieldOp}
    assert arith.ConstantOp in EVAL_IMPLS
    assert mathd.FmaOp in EVAL_IMPLS


def test_select_picks_a_whole_block_per_pe():
    from xdsl.dialects.builtin import IntegerType, TensorType, f32
    from xdsl.utils.test_value import create_ssa_value

    from plmr.dialects.tile import SelectOp

    t = TensorType(f32, [2, 3])
    op = SelectOp(
        create_ssa_value(IntegerType(1)), create_ssa_value(t), create_ssa_value(t)
    )
    op.verify()
    ev = ReferenceEvaluator(None, lead=(2, 2))
    cond = np.array([[True, False], [False, True]])
    a = np.ones((2, 2, 2, 3), np.float32)
    b = np.zeros((2, 2, 2, 3), np.float32)
    (out,) = ev.evaluate_op(op, [cond, a, b])
    np.testing.assert_array_equal(out[0, 0], a[0, 0])
    np.testing.assert_array_equal(out[0, 1], b[0, 1])
    np.testing.assert_array_equal(out[1, 1], a[1, 1])
    assert op_work(op).flops == 6
