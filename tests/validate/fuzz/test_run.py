"""
A short fuzz run with a fixed seed and program count (deterministic): graph programs and
loop nests through the checked compiler find no crash and no miscompile. Every program
is printed after every pass and parsed back before it runs (`--check-text`).
"""

from pathlib import Path

import pytest
from click.testing import CliRunner

from plmr.tools.cli import cli
from plmr.validate.fuzz.driver import Config, make_case, message_kind, run_case
from plmr.validate.fuzz.run import fuzz


def _graph_run_finds_no_failure(tmp_path: Path, count: int, least_ok: int):
    summary = fuzz(seed=11, count=count, jobs=1, out=tmp_path, text_share=1.0)
    report = "\n".join(summary.report())
    assert summary.programs == count
    assert summary.counts["crash"] == 0, report
    assert summary.counts["miscompile"] == 0, report
    assert summary.counts["invalid"] == 0, report
    assert summary.counts["timeout"] == 0, report
    assert summary.counts["ok"] >= least_ok, report
    assert summary.through_text == count, report


def test_short_graph_run_finds_no_failure(tmp_path: Path):
    _graph_run_finds_no_failure(tmp_path, 12, 4)


@pytest.mark.slow
def test_longer_graph_run_finds_no_failure(tmp_path: Path):
    # The same seed's first 30 programs: the short run's 12 and 18 more.
    _graph_run_finds_no_failure(tmp_path, 30, 10)


def test_short_loop_run_finds_no_failure(tmp_path: Path):
    summary = fuzz(seed=5, count=10, jobs=1, out=tmp_path, level="loop", text_share=1.0)
    report = "\n".join(summary.report())
    assert not summary.failures, report
    assert summary.counts["ok"] >= 5, report


def test_cases_are_reproducible():
    a, b = make_case(3, 17), make_case(3, 17)
    assert a == b
    assert make_case(3, 18).text != a.text


def test_a_refusal_is_counted_by_pass_and_message():
    text = """
func.func @main(%a: tensor<6x6xf32>) -> tensor<6x6xf32> {
  %e = graph.exp %a : tensor<6x6xf32>
  func.return %e : tensor<6x6xf32>
}
"""
    outcome = run_case(text, Config(grid=(2, 2), tile_sizes=(4, 4)))
    assert outcome.kind == "refused"
    assert outcome.key == (
        "convert-loop-to-tile: convert-loop-to-tile: tile size N does not divide the "
        "extent N of dimension %v of the nest computing %v"
    )


def test_with_fit_tiles_the_refused_program_compiles_and_runs_right():
    """The same program under `--fit-tiles`: its 6 columns in padded blocks of 4."""
    text = """
func.func @main(%a: tensor<6x6xf32>) -> tensor<6x6xf32> {
  %e = graph.exp %a : tensor<6x6xf32>
  func.return %e : tensor<6x6xf32>
}
"""
    config = Config(grid=(2, 2), tile_sizes=(4, 4), fit_tiles=True)
    assert "--fit-tiles" in config.flags()
    assert run_case(text, config).kind == "ok"


def test_message_kind_elides_names_shapes_and_numbers():
    assert message_kind("'%x' of tensor<4x8xf32> needs 1234 bytes at [1, 2]\nmore") == (
        "'%v' of tensor<…> needs N bytes at […]"
    )


def test_plmr_fuzz_cli(tmp_path: Path):
    result = CliRunner().invoke(
        cli,
        [
            "fuzz",
            "--count",
            "3",
            "--seed",
            "2",
            "--text-share",
            "1",
            "--out",
            str(tmp_path),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("plmr fuzz --seed 2: 3 programs in ")
    assert "crash 0, miscompile 0" in result.output
    assert "through text after every pass: 3 of 3 programs" in result.output


def test_short_tile_run_finds_no_failure(tmp_path: Path):
    summary = fuzz(seed=3, count=8, jobs=1, out=tmp_path, level="tile", text_share=1.0)
    report = "\n".join(summary.report())
    assert not summary.failures, report
    assert summary.counts["ok"] >= 4, report
