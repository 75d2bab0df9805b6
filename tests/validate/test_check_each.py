"""
`--check-each`: every pass checked against the reference semantics of its level; an
injected bug (a test pass that swaps the operands of `sub`) is caught and named.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.printer import Printer

from plmr.dialects import graph
from plmr.dialects.context import make_context, parse_module
from plmr.errors import PlmrError
from plmr.lowering.graph_to_loop import ConvertGraphToLoopPass
from plmr.lowering.loop_to_tile import ConvertLoopToTilePass
from plmr.passes.neptune.fuse import NeptuneFusePass
from plmr.tools.plmr_opt import PlmrOptMain, main
from plmr.validate.check_each import (
    CheckOptions,
    PassMiscompile,
    check_passes,
    level_of,
    max_relative_error,
)

PROGRAM = """
func.func @main(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = graph.exp %b : tensor<4x8xf32>
  %d = graph.sub %a, %e : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %d : tensor<4x8xf32>
}
"""


@dataclass(frozen=True)
class SwapSubOperandsPass(ModulePass):
    """Computes `b - a` for every `a - b`: a deliberately wrong pass."""

    name = "test-swap-sub"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        del ctx
        for sub in op.walk():
            if isinstance(sub, graph.SubOp | arith.SubfOp):
                lhs, rhs = sub.operands
                sub.operands = [rhs, lhs]


def test_correct_passes_report_one_line_each():
    ctx = make_context()
    module = parse_module(PROGRAM, "<test>", ctx)
    lines: list[str] = []
    checks = check_passes(
        ctx,
        module,
        [ConvertGraphToLoopPass(), NeptuneFusePass()],
        CheckOptions(),
        lines.append,
    )
    assert [c.spec.split("{")[0] for c in checks] == [
        "convert-graph-to-loop",
        "neptune-fuse",
    ]
    assert all(c.error is not None and c.error <= 1e-6 for c in checks)
    assert [c.level for c in checks] == ["loop", "loop"]
    assert len(lines) == 4  # header, input, one per pass
    assert "neptune-fuse" in lines[-1]


@pytest.mark.parametrize("before_swap", [True, False], ids=["graph", "loop"])
def test_an_injected_bug_is_caught_and_named(before_swap: bool, tmp_path: Path):
    ctx = make_context()
    module = parse_module(PROGRAM, "<test>", ctx)
    swap = SwapSubOperandsPass()
    passes = (
        [swap, ConvertGraphToLoopPass()]
        if before_swap
        else [ConvertGraphToLoopPass(), swap]
    )
    with pytest.raises(PassMiscompile) as info:
        check_passes(
            ctx, module, [*passes, NeptuneFusePass()], CheckOptions(check_dir=tmp_path)
        )
    e = info.value
    assert e.spec == "test-swap-sub"
    assert "pass test-swap-sub changed the results: result 0 (out0) at [" in str(e)
    # b - a instead of a - b: the relative error is 2 |a - b| / max |a - b|.
    assert e.difference.error > 0.5
    assert e.repro is not None
    assert e.repro.startswith(f"plmr-opt {tmp_path}/")
    assert "-p 'test-swap-sub' --check-each" in e.repro
    step = 1 if before_swap else 2
    before = (tmp_path / f"0{step}-test-swap-sub-before.mlir").read_text()
    after = (tmp_path / f"0{step}-test-swap-sub-after.mlir").read_text()
    assert ("graph.sub %a, %e" if before_swap else "arith.subf") in before
    assert before != after


def test_plmr_opt_check_each_names_the_injected_pass(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
):
    class Driver(PlmrOptMain):
        def register_all_passes(self) -> None:
            super().register_all_passes()
            self.register_pass(SwapSubOperandsPass.name, lambda: SwapSubOperandsPass)

    src = tmp_path / "p.mlir"
    src.write_text(PROGRAM)
    status = main(
        [
            str(src),
            "-p",
            "convert-graph-to-loop,test-swap-sub",
            "--check-each",
            "--check-seed",
            "2",
        ],
        driver=Driver,
    )
    err = capsys.readouterr().err
    assert status == 1
    assert "check-each: @main on random inputs (seed 2)" in err
    assert "plmr-opt: error: check-each: pass test-swap-sub changed the results" in err
    # Without the bug: exit 0, the program on stdout.
    assert main([str(src), "-p", "convert-graph-to-loop", "--check-each"]) == 0
    out = capsys.readouterr()
    assert "loop.nest" in out.out
    assert "convert-graph-to-loop" in out.err


def test_max_relative_error_handles_nan_inf_and_shapes():
    a = np.array([1.0, np.nan, np.inf, -2.0], np.float32)
    assert max_relative_error(a, a.copy()) == (0.0, None)
    b = a.copy()
    b[1] = 0.0
    err, index = max_relative_error(b, a)
    assert err == float("inf")
    assert index == (1,)
    c = a.copy()
    c[3] = -2.5
    err, index = max_relative_error(c, a)
    assert err == pytest.approx(0.25)  # 0.5 / max(1, max finite |want| = 2)
    assert index == (3,)
    assert max_relative_error(a[:2], a)[0] == float("inf")


def test_level_of_names_the_lowest_level():
    assert level_of(parse_module(PROGRAM, "<test>")) == "graph"


def test_a_pass_that_refuses_is_not_a_miscompile():
    ctx = make_context()
    module = parse_module(PROGRAM, "<test>", ctx)
    with pytest.raises(PlmrError, match="tile size 3 does not divide") as info:
        check_passes(
            ctx,
            module,
            [ConvertGraphToLoopPass(), ConvertLoopToTilePass(tile_sizes=(3, 3))],
            CheckOptions(),
        )
    assert not isinstance(info.value, PassMiscompile)


MASKED = """
func.func @main(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %m = graph.constant dense<[0xff800000, 0.0, 0.0, 0xff800000, 0.0, 0.0, 0.0, 0.0]> : tensor<8xf32>
  %s = graph.add %a, %m : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y = graph.softmax %s : tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
"""


def _lossy_print_float(self: Printer, value: float, type: Any) -> None:
    """A float printer that does not round-trip (two digits, `inf` unparsable)."""
    del type
    self.print_string(f"{value:.2e}")


@pytest.mark.parametrize("through_text", [False, True])
def test_check_text_reads_every_pass_back_from_text(
    through_text: bool, monkeypatch: pytest.MonkeyPatch
):
    """A printer that loses bits is caught only when the program goes through text."""
    ctx = make_context()
    module = parse_module(MASKED, "<test>", ctx)
    monkeypatch.setattr(Printer, "print_float", _lossy_print_float)
    options = CheckOptions(through_text=through_text)
    passes = [ConvertGraphToLoopPass()]
    if not through_text:
        check_passes(ctx, module, passes, options)
        return
    with pytest.raises(PlmrError, match="does not read back from text"):
        check_passes(ctx, module, passes, options)


def test_check_text_keeps_the_results_of_special_values():
    ctx = make_context()
    module = parse_module(MASKED, "<test>", ctx)
    checks = check_passes(
        ctx,
        module,
        [
            ConvertGraphToLoopPass(),
            NeptuneFusePass(),
            ConvertLoopToTilePass(tile_sizes=(2, 4)),
        ],
        CheckOptions(through_text=True),
    )
    errors = [c.error for c in checks]
    assert all(e is not None and e < 1e-6 for e in errors), errors


def test_plmr_opt_check_text(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    path = tmp_path / "masked.mlir"
    path.write_text(MASKED)
    code = main([str(path), "-p", "convert-graph-to-loop", "--check-text"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "convert-graph-to-loop" in err
    assert "max rel err 0.0e+00" in err
