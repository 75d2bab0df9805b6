"""
Every float attribute plmr prints reads back as the same bits (`dialects/float_text.py`):
a property test over special and random values, for every kind of float attribute of
every level (custom syntax, declarative syntax, builtin `FloatAttr`, dense elements in
list and splat form), in the custom and the generic form, and for pass options.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import (
    AnyFloat,
    DenseIntOrFPElementsAttr,
    Float16Type,
    FloatAttr,
    ModuleOp,
    f16,
    f32,
    f64,
)
from xdsl.utils.arg_spec import parse_pipeline

from plmr.dialects.context import parse_module
from plmr.dialects.float_text import float_bits, float_literal, option_literal
from plmr.dialects.printing import module_text
from plmr.errors import PlmrError


def _f32_bits(x: int) -> float:
    return struct.unpack("<f", struct.pack("<I", x))[0]


def _f64_bits(x: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", x))[0]


SPECIAL = [
    math.inf,
    -math.inf,
    math.nan,
    -math.nan,
    _f64_bits(0x7FF0000000000123),  # a NaN with a payload
    _f32_bits(0xFFC00001),  # a negative f32 NaN with a payload
    0.0,
    -0.0,
    float(np.finfo(np.float32).min),
    float(np.finfo(np.float32).max),
    float(np.finfo(np.float32).tiny),
    float(np.finfo(np.float32).smallest_subnormal),
    -float(np.finfo(np.float32).smallest_subnormal),
    float(np.finfo(np.float64).min),
    float(np.finfo(np.float64).smallest_subnormal),
    123456792.0,  # an integral f32 that xDSL printed as 0x4CEB79A3
    1e-5,
    1 / 3,
]

values = st.one_of(
    st.sampled_from(SPECIAL),
    st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True),
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
)


DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64}


def _in_type(value: float, type: AnyFloat) -> float:
    """`value` rounded to `type` (out of range: an infinity)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.array([value]).astype(DTYPES[str(type)])[0])


def _same_bits(a: float, b: float, type: AnyFloat) -> bool:
    return float_bits(a, type) == float_bits(b, type)


def _round_trips(text: str) -> tuple[ModuleOp, ModuleOp]:
    """The module read from `text`, and read again from its custom and generic forms."""
    first = parse_module(text)
    again = parse_module(module_text(first))
    generic = parse_module(module_text(first, generic=True))
    assert module_text(again) == module_text(first)
    assert module_text(generic) == module_text(first)
    return first, again


def _f64_property(name: str) -> Callable[[ModuleOp], float]:
    def get(module: ModuleOp) -> float:
        for op in module.walk():
            if op.name == name:
                attr = next(a for a in op.properties.values() if isinstance(a, FloatAttr))
                return attr.value.data
        raise AssertionError(f"no {name}")

    return get


F = "tensor<4x8xf32>"
FUNC = "func.func @f(%a: {F}, %g: tensor<8xf32>, %i: index) -> {T} {{\n{body}\n  func.return %r : {T}\n}}"

# The ops of every level with a float property, each with one `{v}` for its value (f64).
OPS: dict[str, str] = {
    "graph.pad": FUNC.format(
        F=F,
        T="tensor<6x12xf32>",
        body=f"  %r = graph.pad %a pads = [0, 1, 2, 3] mode = constant value = {{v}} : {F} -> tensor<6x12xf32>",
    ),
    "graph.scale": FUNC.format(F=F, T=F, body=f"  %r = graph.scale %a by {{v}} : {F}"),
    "graph.pow": FUNC.format(F=F, T=F, body=f"  %r = graph.pow %a by {{v}} : {F}"),
    "graph.layernorm": FUNC.format(
        F=F,
        T=F,
        body=f"  %r = graph.layernorm %a, %g axis = 1 epsilon = {{v}} : ({F}, tensor<8xf32>) -> {F}",
    ),
    "loop.read": FUNC.format(
        F=F,
        T=F,
        body=(
            f"  %r = loop.nest (%x, %y) to (4, 8) [parallel, parallel] -> {F} {{\n"
            f"    %e = loop.read %a[%x, %y] padding {{v}} : {F}\n"
            "    loop.yield %e : f32\n  }"
        ),
    ),
    "tile.fill": FUNC.format(F=F, T=F, body=f"  %r = tile.fill {{v}} : {F}"),
    "tile.load": FUNC.format(
        F=F,
        T="tensor<4x4xf32>",
        body=f"  %r = tile.load %a[%i, %i] padding {{v}} : {F} -> tensor<4x4xf32>",
    ),
    "mesh.scatter": (
        f'mesh.program @p(%a: {F}) -> () device "wse2" grid [2, 2] {{\n'
        f"  %d = mesh.scatter %a pad {{v}} : {F} -> !mesh.dist<{F}, #mesh.layout<[y, x]>>\n"
        "  mesh.return\n}"
    ),
}


@pytest.mark.parametrize("name", sorted(OPS))
@settings(max_examples=25, deadline=None)
@given(value=values)
def test_float_properties_round_trip(name: str, value: float):
    text = OPS[name].replace("{v}", float_literal(value, f64))
    first, again = _round_trips(text)
    get = _f64_property(name)
    assert _same_bits(get(first), value, f64)
    assert _same_bits(get(again), value, f64)


TYPES: list[AnyFloat] = [f16, f32, f64]


@settings(max_examples=40, deadline=None)
@given(
    type=st.sampled_from(TYPES),
    elements=st.lists(values, min_size=1, max_size=6),
    splat=st.booleans(),
)
def test_dense_constants_round_trip(type: AnyFloat, elements: list[float], splat: bool):
    """`graph.constant` and `arith.constant` (the mesh level's host constants)."""
    elements = [_in_type(v, type) for v in elements]
    if splat:
        elements = elements[:1] * 3
    bits = b"".join(float_bits(v, type) for v in elements)
    n = len(elements)
    t = f"tensor<{n}x{type}>"
    literal = "[" + ", ".join(float_literal(v, type) for v in elements) + "]"
    text = (
        f"func.func @f() -> ({t}, {t}) {{\n"
        f"  %c = graph.constant dense<{literal}> : {t}\n"
        f"  %d = arith.constant dense<{literal}> : {t}\n"
        f"  func.return %c, %d : {t}, {t}\n}}"
    )
    first, again = _round_trips(text)
    for module in (first, again):
        dense = [
            a
            for op in module.walk()
            for a in op.properties.values()
            if isinstance(a, DenseIntOrFPElementsAttr)
        ]
        assert len(dense) == 2
        for a in dense:
            assert a.data.data == bits


@settings(max_examples=80, deadline=None)
@given(type=st.sampled_from(TYPES), value=values)
def test_builtin_float_attr_round_trips(type: AnyFloat, value: float):
    """A `FloatAttr` of every width, as an `arith.constant` (custom and generic form)."""
    value = _in_type(value, type)
    text = (
        f"func.func @f() -> {type} {{\n"
        f"  %c = arith.constant {float_literal(value, type)} : {type}\n"
        f"  func.return %c : {type}\n}}"
    )
    first, again = _round_trips(text)
    for module in (first, again):
        (c,) = [
            a
            for op in module.walk()
            for a in op.properties.values()
            if isinstance(a, FloatAttr)
        ]
        assert _same_bits(c.value.data, value, type)


@settings(max_examples=100, deadline=None)
@given(value=st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True))
def test_pass_options_round_trip(value: float):
    (spec,) = parse_pipeline(f"taso-substitute{{alpha={option_literal(value)}}}")
    (parsed,) = spec.parameters["alpha"]
    assert isinstance(parsed, float)
    assert _same_bits(parsed, value, f64)


def test_printed_forms():
    # Finite values keep MLIR's short form when it is exact, else the fewest digits;
    # infinities and NaN print as bit patterns.
    assert float_literal(1.5, f32) == "1.500000e+00"
    assert float_literal(-0.0, f32) == "-0.000000e+00"
    assert float_literal(123456792.0, f32) == "1.2345679e+08"
    assert float_literal(-math.inf, f32) == "0xff800000"
    assert float_literal(-math.inf, f64) == "0xfff0000000000000"
    assert float_literal(math.nan, Float16Type()) == "0x7e00"
    assert float_literal(float(np.finfo(np.float32).min), f32) == "-3.4028235e+38"
    assert option_literal(1e-05) == "1.0e-05"
    assert option_literal(2.0) == "2.0"


def test_a_bit_pattern_too_wide_for_its_type_is_one_error():
    text = "func.func @f() -> f32 {\n  %c = arith.constant dense<[0x1ff800000]> : tensor<1xf32>\n  func.return\n}"
    with pytest.raises(PlmrError, match="expected the bit pattern of an f32"):
        parse_module(text)


def test_hex_in_an_integer_dense_stays_an_integer():
    text = (
        "func.func @f() -> tensor<2xi32> {\n"
        "  %c = arith.constant dense<[0x10, 3]> : tensor<2xi32>\n"
        "  func.return %c : tensor<2xi32>\n}"
    )
    module = parse_module(text)
    (c,) = [
        a
        for op in module.walk()
        for a in op.properties.values()
        if isinstance(a, DenseIntOrFPElementsAttr)
    ]
    assert list(c.get_values()) == [16, 3]
