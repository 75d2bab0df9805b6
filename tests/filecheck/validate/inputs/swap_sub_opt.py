"""
`plmr-opt` with one deliberately wrong pass, `test-swap-sub`, which swaps the operands of
every `graph.sub` and `arith.subf`: the injected bug `--check-each` must catch.
"""

import sys
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from plmr.dialects import graph
from plmr.tools.plmr_opt import PlmrOptMain, main


@dataclass(frozen=True)
class SwapSubOperandsPass(ModulePass):
    """Computes `b - a` for every `a - b` (wrong on purpose)."""

    name = "test-swap-sub"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        del ctx
        for sub in op.walk():
            if isinstance(sub, graph.SubOp | arith.SubfOp):
                lhs, rhs = sub.operands
                sub.operands = [rhs, lhs]


class SwapSubOptMain(PlmrOptMain):
    def register_all_passes(self) -> None:
        super().register_all_passes()
        self.register_pass(SwapSubOperandsPass.name, lambda: SwapSubOperandsPass)


if __name__ == "__main__":
    sys.exit(main(driver=SwapSubOptMain))
