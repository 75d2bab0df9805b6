"""
The pass registry against `docs/design.md`'s table of how each pass rewrites: every
registered pass is listed, and a pass listed as rewriting by patterns drives them with
xDSL's `PatternRewriteWalker`.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from plmr.passes import get_all_passes

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "design.md"


def _table() -> dict[str, str]:
    """`pass name -> how it rewrites`, from the table under "Rewriting IR"."""
    text = DESIGN.read_text()
    section = text[text.index("### Rewriting IR") :]
    section = section[: section.index("\n## ")]
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| (.+?) \|$", section, re.MULTILINE)
    return dict(rows)


def test_every_registered_pass_is_in_the_table() -> None:
    table = _table()
    registered = set(get_all_passes())
    assert not registered - set(table), "passes missing from docs/design.md's table"
    assert not set(table) - registered, "docs/design.md lists passes that do not exist"


def test_passes_listed_as_patterns_use_the_walker() -> None:
    passes = get_all_passes()
    by_patterns = [
        name for name, how in _table().items() if how.startswith(("pattern", "a pattern"))
    ]
    assert len(by_patterns) >= 9
    for name in by_patterns:
        source = inspect.getsource(inspect.getmodule(passes[name]()) or object)
        assert "PatternRewriteWalker" in source, f"{name} is listed as patterns"
