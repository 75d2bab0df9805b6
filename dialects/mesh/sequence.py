"""
The `mesh` dialect's sequences of programs: `mesh.run`, one program run from a host
function.

A model compiled with its repeated layers outlined is a `func.func` that runs mesh
programs one after the other: the part before the first layer, the layer's program once
per layer with that layer's weights (weights by reference, `arith.constant`s of a
`dense_resource` with a `plmr.weight` attribute), and the part after the last layer.
The layer's program is in the module once, however many layers run it.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import FlatSymbolRefAttrConstr, SymbolRefAttr, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    prop_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import HasParent, SymbolTable
from xdsl.utils.exceptions import VerifyException

from plmr.dialects.mesh.program import ProgramOp


@irdl_op_definition
class RunOp(IRDLOperation):
    """
    Runs the `mesh.program` named by `callee` on the wafer with host tensors as its
    arguments; its results are the program's host results. A layer's program run for
    the third layer with that layer's weights:

    ```mlir
    %h3 = mesh.run @main.layer(%h2, %wq2, %wk2) {plmr.layer = 2 : i64} : (tensor<1x8x32xf32>, tensor<32x32xf32>, tensor<32x16xf32>) -> tensor<1x8x32xf32>
    ```
    """

    name = "mesh.run"

    callee = prop_def(FlatSymbolRefAttrConstr)
    arguments = var_operand_def(TensorType)
    res = var_result_def(TensorType)

    traits = traits_def(HasParent(func.FuncOp))

    assembly_format = (
        "$callee `(` $arguments `)` attr-dict `:` functional-type($arguments, $res)"
    )

    def __init__(
        self,
        callee: str,
        arguments: Sequence[SSAValue | Operation],
        result_types: Sequence[Attribute],
    ):
        super().__init__(
            operands=[arguments],
            result_types=[result_types],
            properties={"callee": SymbolRefAttr(callee)},
        )

    def program(self) -> ProgramOp:
        """The program this op runs (the op must be verified)."""
        found = SymbolTable.lookup_symbol(self, self.callee)
        assert isinstance(found, ProgramOp)
        return found

    def verify_(self) -> None:
        name = self.callee.string_value()
        found = SymbolTable.lookup_symbol(self, self.callee)
        if not isinstance(found, ProgramOp):
            raise VerifyException(
                f"'mesh.run' runs @{name}, but the module has no mesh.program of that name"
            )
        ft = found.function_type
        if list(self.arguments.types) != list(ft.inputs.data):
            raise VerifyException(
                f"'mesh.run' passes {[str(t) for t in self.arguments.types]} to @{name}, "
                f"which takes {[str(t) for t in ft.inputs.data]}"
            )
        if list(self.res.types) != list(ft.outputs.data):
            raise VerifyException(
                f"'mesh.run' expects {[str(t) for t in self.res.types]} from @{name}, "
                f"which returns {[str(t) for t in ft.outputs.data]}"
            )


def runs_programs(fn: func.FuncOp) -> bool:
    """Whether `fn` is a sequence of program runs (holds a `mesh.run`)."""
    return any(isinstance(op, RunOp) for op in fn.body.ops) if fn.body.blocks else False


__all__ = ["RunOp", "runs_programs"]
