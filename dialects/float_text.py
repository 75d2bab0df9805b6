"""
Floats as MLIR text, bit for bit.

Every float plmr prints reads back as the same bits: `±inf`, NaN (sign and payload),
`-0.0`, subnormals and the extremes of each type. The rules, which MLIR also follows:

- a finite value prints in decimal, with the fewest digits (six, as MLIR, when they
  suffice) that read back as the same value of its type;
- an infinity or a NaN prints as its bit pattern in hexadecimal, `0xff800000` for an
  `f32` `-inf`, and a hexadecimal integer read where a float of a known type is
  expected is that bit pattern (never the integer's value).

`float_literal` and `parse_float_literal` implement them for custom op syntax;
`option_literal` writes a float pass option that the pass-pipeline syntax reads back.
`install()` makes xDSL's own printer and parser follow the same rules: its float printer
(every `FloatAttr` and every element of a dense attribute, so `arith.constant` and the
declarative assembly formats), the typed parsing of a `FloatAttr`, the elements of a
dense tensor literal (xDSL reads `dense<[0xff800000]> : tensor<1xf32>` as the integer
4286578688), the splat test of dense attributes (which takes `[0.0, -0.0]` for a splat)
and the pass-option printer (which writes `1e-05`, not an option literal). It runs when
`plmr.dialects` is imported, so it holds in every plmr tool and in `xdsl-opt` with
plmr's universe.
"""

from __future__ import annotations

import math
from typing import Any

from xdsl.dialects.builtin import (
    AnyFloat,
    DenseIntOrFPElementsAttr,
    FloatAttr,
)
from xdsl.ir import TypedAttribute
from xdsl.parser import AttrParser, BaseParser
from xdsl.printer import Printer
from xdsl.utils.arg_spec import ArgSpec


def float_bits(value: float, type: AnyFloat) -> bytes:
    """The bytes (little-endian) of `value` as an element of `type`."""
    return type.pack((value,))


def _from_bits(raw: bytes, type: AnyFloat) -> float:
    return type.unpack(raw, 1)[0]


def float_literal(value: float, type: AnyFloat) -> str:
    """`value` as MLIR text that reads back as the same bits of `type`."""
    bits = float_bits(value, type)
    if not math.isfinite(value):
        return "0x" + bits[::-1].hex()
    # MLIR's (and xDSL's) short form first, so that ordinary values print as always.
    short = f"{value:.5e}"
    candidates = [short[: short.index("e")] + "0" + short[short.index("e") :]]
    candidates += [f"{value:.{digits}e}" for digits in range(6, 17)]
    for text in candidates:
        if float_bits(float(text), type) == bits:
            return text
    raise AssertionError(f"no exact decimal for {value!r}")  # pragma: no cover


def parse_float_literal(parser: BaseParser, type: AnyFloat) -> float:
    """
    A float of `type`: a decimal literal (an integer one included) or, unsigned and
    hexadecimal, the bit pattern of the value (`0xff800000` is `-inf` for `f32`).
    """
    hex_value = _parse_optional_hex_bits(parser)
    if hex_value is not None:
        return _bits_to_float(parser, hex_value, type)
    value = parser.parse_number()
    return value if isinstance(value, float) else float(value)


def _parse_optional_hex_bits(parser: BaseParser) -> tuple[int, int, int] | None:
    """A hexadecimal integer literal: (value, start, end), if the next token is one."""
    start = parser.pos
    if parser.lexer.input.content[start : start + 2] not in ("0x", "0X"):
        return None
    value = parser.parse_integer(allow_boolean=False, allow_negative=False)
    return value, start, parser.pos


def _bits_to_float(
    parser: BaseParser, hex_value: tuple[int, int, int], type: AnyFloat
) -> float:
    value, start, end = hex_value
    width = 8 * type.compile_time_size
    if value >= 1 << width:
        parser.raise_error(
            f"expected the bit pattern of an {type}: 0x{value:X} has more than {width} "
            "bits",
            start,
            end,
        )
    return _from_bits(value.to_bytes(width // 8, "little"), type)


def option_literal(value: float) -> str:
    """A float pass option as text the pass-pipeline syntax reads back exactly."""
    text = repr(float(value))
    if not math.isfinite(value):
        return text
    mantissa, e, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + e + exponent


# xDSL's printer and parser, made to follow the same rules ------------------------------


def _print_float(self: Printer, value: float, type: AnyFloat) -> None:
    self.print_string(float_literal(value, type))


def _parse_float_attr_with_type(parser: AttrParser, type: Any) -> TypedAttribute:
    assert isinstance(type, AnyFloat)
    return FloatAttr(parse_float_literal(parser, type), type)


def _is_float_splat(self: DenseIntOrFPElementsAttr[Any]) -> bool:
    # Floats are a splat when their bits are (xDSL compares values: `[0.0, -0.0]` was a
    # splat and printed as `dense<0.0>`, and NaNs never were).
    element = self.get_element_type()
    if not isinstance(element, AnyFloat):
        return _xdsl_is_splat(self)
    size = element.compile_time_size
    data = self.data.data
    return data == data[:size] * len(self)


_TensorLiteralElement = AttrParser._TensorLiteralElement  # pyright: ignore[reportPrivateUsage]


def _element_to_type(
    self: Any, parser: AttrParser, type: Any
) -> int | float | tuple[int, int] | tuple[float, float]:
    text = self.span.text
    if (
        isinstance(type, AnyFloat)
        and isinstance(self.value, int)
        and text[:2] in ("0x", "0X")
    ):
        return _bits_to_float(parser, (self.value, self.span.start, self.span.end), type)
    return _xdsl_element_to_type(self, parser, type)


def _spec_parameter_type_str(arg: Any) -> str:
    if isinstance(arg, float):
        return option_literal(arg)
    return _xdsl_spec_parameter_type_str(arg)


_xdsl_is_splat = DenseIntOrFPElementsAttr.is_splat
_xdsl_element_to_type = _TensorLiteralElement.to_type
_xdsl_spec_parameter_type_str = ArgSpec._spec_parameter_type_str  # pyright: ignore[reportPrivateUsage]


def install() -> None:
    """Makes xDSL's printer and parser write and read floats bit for bit (idempotent)."""
    setattr(Printer, "print_float", _print_float)
    setattr(FloatAttr, "parse_with_type", staticmethod(_parse_float_attr_with_type))
    setattr(DenseIntOrFPElementsAttr, "is_splat", _is_float_splat)
    setattr(_TensorLiteralElement, "to_type", _element_to_type)
    setattr(ArgSpec, "_spec_parameter_type_str", staticmethod(_spec_parameter_type_str))
