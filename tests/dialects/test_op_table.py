"""
The typed tables of per-op functions (`plmr.dialects.op_table`): dispatch on an op's exact
class, one registration per class, and every graph op's meaning at the two levels that
must have one (its reference semantics and its lowering to loops).
"""

from __future__ import annotations

import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, i32
from xdsl.ir import Operation

from plmr.dialects.graph import Graph
from plmr.dialects.op_table import OpTable


def _const(value: int) -> arith.ConstantOp:
    return arith.ConstantOp(IntegerAttr(value, i32))


def test_a_function_is_found_by_the_op_s_exact_class():
    table = OpTable[[int], str]("test table")

    @table.impl(arith.ConstantOp)
    def _name(op: arith.ConstantOp, n: int) -> str:
        return f"{op.name} {n}"

    op = _const(1)
    fn = table.lookup(op)
    assert fn is not None
    assert fn(op, 3) == "arith.constant 3"
    assert table.lookup(arith.AddiOp(op, op)) is None
    assert arith.ConstantOp in table
    assert list(table) == [arith.ConstantOp]
    assert len(table) == 1


def test_a_class_registered_twice_is_an_error_naming_it():
    table = OpTable[[], str]("test table")
    table.add(arith.ConstantOp, lambda op: op.name)
    with pytest.raises(ValueError, match="test table: 'ConstantOp' is registered twice"):
        table.add(arith.ConstantOp, lambda op: op.name)
    other = OpTable[[], str]("other")
    other.add(arith.ConstantOp, lambda op: "other")
    with pytest.raises(ValueError, match="registered twice"):
        table.update(other)


def test_update_takes_every_entry_of_another_table():
    table = OpTable[[], str]("test table")
    other = OpTable[[], str]("other")
    other.add(arith.AddiOp, lambda op: "add")
    table.update(other)
    op = _const(1)
    fn = table.lookup(arith.AddiOp(op, op))
    assert fn is not None
    assert table.as_dict().keys() == {arith.AddiOp}


@pytest.mark.parametrize("level", ["reference semantics", "loop lowering"])
def test_every_graph_op_has_its_meaning_at_each_level(level: str):
    """A graph op added without one of them fails here, named with what it lacks."""
    from plmr.lowering.graph_to_loop import GRAPH_LOWERINGS
    from plmr.runtime.reference import REFERENCE

    ops: list[type[Operation]] = list(Graph.operations)
    assert ops
    if level == "reference semantics":
        missing = [op.__name__ for op in ops if op not in REFERENCE]
    else:
        missing = [op.__name__ for op in ops if op not in GRAPH_LOWERINGS]
    assert not missing, f"graph ops without their {level}: {', '.join(missing)}"
