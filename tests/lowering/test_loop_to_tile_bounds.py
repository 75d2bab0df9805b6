"""The static bounds of `loop.read` indices that convert-loop-to-tile refuses."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import parse_module
from plmr.dialects.loop import ReadOp
from plmr.errors import PassError
from plmr.lowering.loop_to_tile.bounds import check_read_bounds, index_range

NEST = """\
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {{
  %e = loop.nest (%i, %j) to (4, 8) [parallel, parallel] -> tensor<4x8xf32> {{
    %c = arith.constant {c} : index
    %j1 = arith.{op} %j, %c : index
    %a = loop.read %x[%i, %j1]{padding} : tensor<4x8xf32>
    loop.yield %a : f32
  }}
  func.return %e : tensor<4x8xf32>
}}
"""


def _read(op: str, c: int, padding: str = "") -> tuple[ModuleOp, ReadOp]:
    module = parse_module(NEST.format(op=op, c=c, padding=padding))
    read = next(o for o in module.walk() if isinstance(o, ReadOp))
    return module, read


@pytest.mark.parametrize(
    ("op", "c", "expected"),
    [
        ("addi", 0, (0, 7)),
        ("addi", 1, (1, 8)),
        ("subi", 1, (-1, 6)),
        ("muli", 1, (0, 7)),
        ("muli", 2, (0, 14)),
    ],
)
def test_index_range(op: str, c: int, expected: tuple[int, int]):
    _, read = _read(op, c)
    assert index_range(read.indices[0]) == (0, 3)
    assert index_range(read.indices[1]) == expected


@pytest.mark.parametrize(
    ("op", "c", "message"),
    [
        ("addi", 1, "reads indices 1..8 of dimension 1 (size 8)"),
        ("subi", 1, "reads indices -1..6 of dimension 1 (size 8)"),
        ("muli", 2, "reads indices 0..14 of dimension 1 (size 8)"),
    ],
)
def test_a_read_past_the_end_is_refused(op: str, c: int, message: str):
    module, _ = _read(op, c)
    with pytest.raises(PassError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_read_bounds(module, "convert-loop-to-tile")


@pytest.mark.parametrize(("op", "c"), [("addi", 0), ("muli", 1), ("subi", 0)])
def test_a_read_in_bounds_is_kept(op: str, c: int):
    module, _ = _read(op, c)
    check_read_bounds(module, "convert-loop-to-tile")


def test_a_padded_read_may_leave_its_tensor():
    module, _ = _read("addi", 1, " padding 0.000000e+00")
    check_read_bounds(module, "convert-loop-to-tile")
