"""The names a program gives its inputs and outputs, and which of them are wafer state."""

from __future__ import annotations

from xdsl.dialects import func

from plmr.dialects import mesh
from plmr.dialects.context import parse_module
from plmr.target.interface import (
    ARG_NAMES_ATTR,
    RESULT_NAMES_ATTR,
    STATE_ARGS_ATTR,
    arg_names,
    result_names,
    state_args,
    state_results,
)

FUNC = """
func.func @step(%tok: tensor<1x4xf32> {plmr.name = "ids"},
                %past: tensor<1x4xf32> {plmr.name = "past", plmr.state = "cache.0"},
                %x: tensor<1x4xf32>)
    -> (tensor<1x4xf32> {plmr.name = "logits"}, tensor<1x4xf32> {plmr.state = "cache.0"}) {
  func.return %tok, %past : tensor<1x4xf32>, tensor<1x4xf32>
}
"""

PROGRAM = """
mesh.program @p(%a: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<8xf32>) device "wse2" grid [1, 2] {
  mesh.return %a : tensor<8xf32>
} {%s}
"""


def _func() -> func.FuncOp:
    (fn,) = parse_module(FUNC).ops
    assert isinstance(fn, func.FuncOp)
    return fn


def _program(attrs: str) -> mesh.ProgramOp:
    (program,) = parse_module(PROGRAM.replace("%s", attrs)).ops
    assert isinstance(program, mesh.ProgramOp)
    return program


def test_a_function_names_its_values_from_plmr_name_else_by_position():
    fn = _func()
    assert arg_names(fn) == ["ids", "past", "arg2"]
    assert result_names(fn) == ["logits", "out1"]


def test_a_function_marks_state_with_plmr_state():
    fn = _func()
    assert state_args(fn) == [None, "cache.0", None]
    assert state_results(fn) == [None, "cache.0"]


def test_a_program_reads_the_names_it_recorded():
    program = _program(
        f'{ARG_NAMES_ATTR} = ["ids", ""], {RESULT_NAMES_ATTR} = ["logits"], '
        f'{STATE_ARGS_ATTR} = ["", "cache.0"]'
    )
    assert arg_names(program) == ["ids", "arg1"]
    assert result_names(program) == ["logits"]
    assert state_args(program) == [None, "cache.0"]
    assert state_results(program) == [None]


def test_a_program_without_records_or_with_the_wrong_count_falls_back_to_positions():
    bare = _program("")
    assert arg_names(bare) == ["arg0", "arg1"]
    assert state_args(bare) == [None, None]
    short = _program(f'{ARG_NAMES_ATTR} = ["only"], {STATE_ARGS_ATTR} = ["x"]')
    assert arg_names(short) == ["arg0", "arg1"]
    assert state_args(short) == [None, None]
