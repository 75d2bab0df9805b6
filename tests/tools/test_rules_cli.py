"""`plmr rules generate | list | verify`: output, files, and one clean error per bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from plmr.passes.taso.rules import load_rules
from plmr.tools.cli import main as plmr_main


def test_generate_writes_a_rule_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "rules.mlir"
    assert (
        plmr_main(
            ["rules", "generate", "--max-ops", "2", "--ops", "matmul,scale", "-o", str(out)]
        )
        == 0
    )
    report = capsys.readouterr().out
    assert "candidate substitutions" in report
    assert "after input renaming" in report
    assert "time: enumeration" in report
    rules = load_rules(out)
    assert rules
    assert f"wrote {len(rules)} rules" in report
    assert "func.func @rule_1_src" in out.read_text()


def test_generate_to_stdout_keeps_the_report_apart(capsys: pytest.CaptureFixture[str]):
    assert plmr_main(["rules", "generate", "--max-ops", "1", "--ops", "add"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("// Graph substitution rules")
    assert "graphs enumerated" in captured.err


def test_list_prints_one_rule_per_line(capsys: pytest.CaptureFixture[str]):
    assert plmr_main(["rules", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(load_rules())
    assert lines[0].startswith("rule_1: ")


def test_verify_reports_how_each_rule_was_verified(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    out = tmp_path / "rules.mlir"
    assert (
        plmr_main(
            [
                "rules",
                "generate",
                "--max-ops",
                "2",
                "--ops",
                "matmul,transpose,concat",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert plmr_main(["rules", "verify", "--rules", str(out), "--mutants"]) == 0
    text = capsys.readouterr().out
    assert "random: ok (3 sizes); z3: proved" in text
    assert "rules pass random tests" in text
    assert "mutants:" in text
    assert "not rejected" not in text


WRONG = """
func.func @bad_src(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> tensor<4x4xf32> attributes {plmr.symbols = array<i64: 4>} {
  %0 = graph.matmul %a, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  func.return %0 : tensor<4x4xf32>
}
func.func @bad_dst(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = graph.matmul %b, %a : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  func.return %0 : tensor<4x4xf32>
}
"""


def test_verify_fails_on_a_wrong_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = tmp_path / "wrong.mlir"
    path.write_text(WRONG)
    assert plmr_main(["rules", "verify", "--rules", str(path)]) == 1
    captured = capsys.readouterr()
    assert "bad        FAIL  random: FAILED" in captured.out
    assert "z3: refuted" in captured.out
    assert captured.err.strip() == "error: 1 rule(s) failed verification"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["rules", "generate", "--ops", "matmul,softmax"], "--ops: unknown op(s) softmax"),
        (["rules", "generate", "--ops", ","], "--ops needs at least one op"),
        (["rules", "generate", "--max-ops", "9"], "between 1 and 3"),
        (["rules", "list", "--rules", "/nonexistent/rules.mlir"], "no such rule file"),
    ],
)
def test_bad_input_is_one_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
):
    assert plmr_main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert message in err
    assert "Traceback" not in err


def test_unparsable_rule_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = tmp_path / "broken.mlir"
    path.write_text("func.func @x_src(")
    assert plmr_main(["rules", "list", "--rules", str(path)]) == 1
    assert "cannot parse" in capsys.readouterr().err
