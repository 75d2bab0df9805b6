"""`taso-substitute{engine=eqsat}`: rule translation, saturation and extraction."""

from pathlib import Path

import numpy as np
import pytest

from plmr.dialects import graph
from plmr.dialects.context import load_module, parse_module
from plmr.errors import PlmrError
from plmr.passes.taso.eqsat.encode import Keys, translate_rules
from plmr.passes.taso.eqsat.engine import EqsatOptions
from plmr.passes.taso.rules import load_rules, parse_rules
from plmr.passes.taso.substitute import substitute_module
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import select_function

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"
FILECHECK = Path(__file__).resolve().parents[3] / "filecheck" / "passes"


def integer_inputs(fn, seed: int) -> list[np.ndarray]:
    """Small integers: every sum and product of the examples is exact in float32."""
    rng = np.random.default_rng(seed)
    return [
        rng.integers(-3, 4, size=arg.type.get_shape()).astype(np.float32)
        for arg in fn.body.block.args
    ]


def run_exact(module, exact: bool = True, **options):
    fn = select_function(module, None)
    args = integer_inputs(fn, 0)
    before = evaluate_function(module, fn.sym_name.data, args)
    reports = substitute_module(module, engine="eqsat", **options)
    module.verify()
    after = evaluate_function(module, fn.sym_name.data, args)
    for a, b in zip(before, after, strict=True):
        if exact:
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    return reports


def count(module, cls) -> int:
    return sum(1 for op in module.walk() if isinstance(op, cls))


def test_every_direction_is_translated_or_reported():
    rules = load_rules("default")
    out = translate_rules(rules, Keys(), {1, 2, 3, 4})
    emitted = set(out.labels)
    reported = {u.label for u in out.untranslated}
    for rule in rules:
        for label in (rule.name, f"{rule.name}'"):
            assert label in emitted or label in reported, label
    assert all(u.reason for u in out.untranslated)
    assert out.multi > 0


UNTRANSLATABLE = """
func.func @rule_1_src(%x0: tensor<2x4xf32>) -> tensor<2x4xf32> attributes {plmr.symbols = array<i64: 2, 4>} {
  %0 = graph.scale %x0 by 2.000000e+00 : tensor<2x4xf32>
  func.return %0 : tensor<2x4xf32>
}
func.func @rule_1_dst(%x0: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = graph.constant {plmr.rule_constant = "identity"} dense<[[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]> : tensor<4x4xf32>
  %1 = graph.scale %0 by 2.000000e+00 : tensor<4x4xf32>
  %2 = graph.matmul %x0, %1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  func.return %2 : tensor<2x4xf32>
}
"""


def test_a_rule_that_does_not_translate_is_reported():
    (rule,) = parse_rules(UNTRANSLATABLE)
    out = translate_rules([rule], Keys(), {2})
    # matmul(x, scale(I)) => scale(x) translates; the other way creates a constant.
    assert out.labels == ["rule_1'"]
    (skipped,) = out.untranslated
    assert skipped.label == "rule_1"
    assert "identity constant" in skipped.reason


def test_rnn_cell_is_equal_and_cheaper():
    # Random float weights: reassociated sums round differently, so within tolerance.
    module = load_module(EXAMPLES / "onnx" / "rnn_cell.mlir")
    assert count(module, graph.MatmulOp) == 6
    (report,) = run_exact(module, exact=False)
    assert report.best_cost < report.initial_cost
    assert count(module, graph.MatmulOp) < 6
    assert report.applied


@pytest.mark.parametrize("name", ["rnn", "scaled", "nothing"])
def test_filecheck_functions_are_exact(name: str):
    text = (FILECHECK / "taso-substitute-eqsat.mlir").read_text()
    module = parse_module(text, "eqsat")
    for fn in list(module.ops):
        if fn.sym_name.data != name:
            fn.detach()
    (report,) = run_exact(module)
    assert report.best_cost <= report.initial_cost
    assert (report.best_cost < report.initial_cost) == (name != "nothing")


def test_unknown_engine_is_refused():
    module = load_module(EXAMPLES / "onnx" / "mlp.mlir")
    with pytest.raises(PlmrError, match="unknown engine 'tree'"):
        substitute_module(module, engine="tree")


def test_plmr_compile_engine_eqsat(tmp_path: Path, monkeypatch):
    from click.testing import CliRunner

    from plmr.passes.taso import substitute
    from plmr.tools.cli import cli

    engines: list[str] = []
    original = substitute.substitute_module

    def spy(module, *args, **kwargs):
        engines.append(kwargs.get("engine", "backtrack"))
        return original(module, *args, **kwargs)

    monkeypatch.setattr(substitute, "substitute_module", spy)
    out = tmp_path / "out.mlir"
    result = CliRunner().invoke(
        cli,
        [
            "compile",
            str(EXAMPLES / "onnx" / "rnn_cell.mlir"),
            "--grid",
            "2x2",
            "--engine",
            "eqsat",
            # One blocking: the engine is checked here, not the blocking search.
            "--tile-sizes",
            "8,8",
            "--fit-tiles",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert engines == ["eqsat"]
    assert "mesh.program @main" in out.read_text()


def gate_cell(gates: int, hidden: int = 32, batch: int = 4) -> str:
    """NasRNN's shape: `gates` activations of `x·W_i + h·U_i`, multiplied together."""
    rng = np.random.default_rng(1)
    t = f"tensor<{batch}x{hidden}xf32>"
    w = f"tensor<{hidden}x{hidden}xf32>"
    lines = [f"func.func @cell(%x: {t}, %h: {t}) -> {t} {{"]
    acts = ["graph.sigmoid", "graph.tanh", "graph.relu"]
    outs: list[str] = []
    for i in range(gates):
        for name in ("w", "u"):
            vals = rng.integers(-2, 3, size=(hidden, hidden)).tolist()
            lines.append(f"  %{name}{i} = graph.constant dense<{vals}> : {w}")
        lines += [
            f"  %a{i} = graph.matmul %x, %w{i} : ({t}, {w}) -> {t}",
            f"  %b{i} = graph.matmul %h, %u{i} : ({t}, {w}) -> {t}",
            f"  %s{i} = graph.add %a{i}, %b{i} : ({t}, {t}) -> {t}",
            f"  %g{i} = {acts[i % 3]} %s{i} : {t}",
        ]
        outs.append(f"%g{i}")
    acc = outs[0]
    for i, out in enumerate(outs[1:]):
        lines.append(f"  %m{i} = graph.mul {acc}, {out} : ({t}, {t}) -> {t}")
        acc = f"%m{i}"
    return "\n".join([*lines, f"  func.return {acc} : {t}", "}"])


def test_stages_merge_every_gate_into_one_matmul_as_backtracking_does():
    text = gate_cell(4)
    backtrack = parse_module(text, "cell")
    (searched,) = substitute_module(backtrack, budget=300)
    module = parse_module(text, "cell")
    (report,) = run_exact(module, exact=False)
    # x·W + h·U -> [x h]·[W; U], then the four products of [x h] merge pairwise,
    # a stage at a time: as cheap as the backtracking search's graph.
    assert count(module, graph.MatmulOp) <= min(2, count(backtrack, graph.MatmulOp))
    assert report.best_cost <= searched.best_cost + 1e-6
    assert report.explored > EqsatOptions().iterations


def test_one_stage_merges_less():
    module = parse_module(gate_cell(4), "cell")
    (report,) = run_exact(module, exact=False, eqsat=EqsatOptions(stages=1))
    assert report.best_cost < report.initial_cost
    assert count(module, graph.MatmulOp) > 1


def test_the_node_limit_stops_saturation():
    module = parse_module(gate_cell(4), "cell")
    options = EqsatOptions(node_limit=1, nodes_per_op=0, chunk=1)
    (report,) = run_exact(module, exact=False, eqsat=options)
    # One iteration grows the e-graph past one e-node; the stage extracts what it has
    # and no other starts (the first did not improve on its input, or did: either way
    # one iteration per stage).
    assert report.stop == "node limit"
    assert "saturation" in report.limits
    assert report.explored <= options.stages


def test_the_node_limit_scales_with_the_program():
    module = parse_module(gate_cell(4), "cell")
    # 20 e-nodes per op are far more than one: the limit is not hit.
    options = EqsatOptions(node_limit=1, nodes_per_op=10_000)
    (report,) = run_exact(module, exact=False, eqsat=options)
    assert "saturation" not in report.limits
    assert report.stop != "node limit"


def test_without_ilp_nodes_the_extraction_is_greedy():
    module = parse_module(gate_cell(4), "cell")
    (report,) = run_exact(module, exact=False, eqsat=EqsatOptions(ilp_nodes=0))
    assert "ilp" not in report.extraction
    assert report.best_cost < report.initial_cost


def test_no_polish_trials_no_polish():
    module = parse_module(gate_cell(4), "cell")
    (report,) = run_exact(module, exact=False, eqsat=EqsatOptions(polish_trials=0))
    assert "polish" not in report.extraction
    assert "polish" not in report.limits


class _SlowClock:
    """
    A clock a thousand times faster than the real one: a machine a thousand times
    slower, as far as any time limit could tell."""

    def __init__(self, real):
        self.real = real
        self.origin = real()

    def __call__(self) -> float:
        return self.origin + 1000.0 * (self.real() - self.origin)


def _search(text: str, **options) -> tuple[str, tuple[str, ...]]:
    module = parse_module(text, "cell")
    reports = substitute_module(module, engine="eqsat", **options)
    return str(module), tuple(r.extraction for r in reports)


@pytest.mark.parametrize("gates", [2, 4])
def test_the_search_is_deterministic_under_load(monkeypatch, gates: int):
    # Default limits (on work only): the same program twice (the rules loaded afresh,
    # then from the process's e-graph that holds them), then under a clock that runs a
    # thousand times fast and with every egglog schedule busy for 50 ms more.
    import time

    from plmr.passes.taso.eqsat import engine

    text = gate_cell(gates)
    engine._RULE_CACHE.clear()
    first = _search(text)
    assert len(engine._RULE_CACHE) == 1
    assert _search(text) == first

    monkeypatch.setattr(time, "process_time", _SlowClock(time.process_time))
    monkeypatch.setattr(time, "perf_counter", _SlowClock(time.perf_counter))
    run = engine._run

    def slow_run(*args, **kwargs):
        end = time.thread_time() + 0.05
        while time.thread_time() < end:
            pass
        return run(*args, **kwargs)

    monkeypatch.setattr(engine, "_run", slow_run)
    assert _search(text) == first
    # And the search did rewrite the program (a deterministic no-op proves nothing).
    assert "graph.split" in first[0] or first[0].count("graph.matmul") < 2 * gates
