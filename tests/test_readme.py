"""
The README stays true: its two commands are what CI runs, its links and pictures exist,
and its Python tour runs and compiles a model whose mesh program matches the reference.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def test_the_quickstart_commands_are_what_ci_runs():
    quickstart = README.read_text().split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    commands = [b.strip() for b in _blocks(quickstart, "sh")]
    assert len(commands) == 2
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    for command in commands:
        assert command in ci


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_and_image_exists(page: Path):
    text = page.read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if not re.match(r"[a-z]+://", t)]
    missing = [t for t in local if not (page.parent / t).exists()]
    assert missing == []


def test_the_python_tour_runs_and_matches_the_reference(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    (tour,) = _blocks(README.read_text(), "python")
    monkeypatch.chdir(ROOT)
    exec(compile(tour, "README.md (tour)", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert float(printed[0]) < 1e-5
    assert printed[1].startswith("program @main on wse2 2x2 (functional mode)")
