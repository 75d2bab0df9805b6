"""The on-disk cache of parsed rule sets (`passes/taso/rule_cache.py`)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from plmr.errors import PlmrError
from plmr.passes.taso import rule_cache
from plmr.passes.taso import rules as rules_module
from plmr.passes.taso.rules import DEFAULT_RULES, forget_loaded_rules, load_rules


def _first_rules(count: int) -> str:
    """The header and the first `count` rules of the shipped rules.mlir."""
    text = DEFAULT_RULES.read_text()
    head, _, body = text.partition("builtin.module {\n")
    body = body.rstrip().removesuffix("}")
    rules = re.split(r"(?m)^(?=  // rule_\d+:)", body)[1:]
    return head + "builtin.module {\n" + "".join(rules[:count]).rstrip() + "\n}\n"


def _no_parse(text: str, source: str = "") -> list[rules_module.Rule]:
    raise PlmrError(f"parsed {source} again")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("PLMR_CACHE_DIR", str(root))
    forget_loaded_rules()
    return root


def test_loads_from_the_cache_and_follows_the_file(cache: Path, tmp_path: Path) -> None:
    rules_file = tmp_path / "rules.mlir"
    rules_file.write_text(_first_rules(3))
    parsed = load_rules(rules_file)
    assert [r.name for r in parsed] == ["rule_1", "rule_2", "rule_3"]
    stored = list(cache.glob("rules-*.pickle"))
    assert stored == [rule_cache.cache_path(rules_file.read_text())]

    # A second process (the in-process cache cleared) reads the pickle, not the text.
    forget_loaded_rules()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(rules_module, "parse_rules", _no_parse)
        again = load_rules(rules_file)
    assert again == parsed

    # Editing the file changes its hash: the new rules are parsed and cached apart.
    rules_file.write_text(_first_rules(2))
    os.utime(rules_file, ns=(1, 1))
    edited = load_rules(rules_file)
    assert [r.name for r in edited] == ["rule_1", "rule_2"]
    assert len(list(cache.glob("rules-*.pickle"))) == 2


def test_an_unwritable_cache_only_costs_the_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("PLMR_CACHE_DIR", str(blocked / "cache"))
    forget_loaded_rules()
    rules_file = tmp_path / "rules.mlir"
    rules_file.write_text(_first_rules(2))
    assert [r.name for r in load_rules(rules_file)] == ["rule_1", "rule_2"]


def test_a_corrupt_entry_is_parsed_again(cache: Path, tmp_path: Path) -> None:
    rules_file = tmp_path / "rules.mlir"
    rules_file.write_text(_first_rules(2))
    path = rule_cache.cache_path(rules_file.read_text())
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a pickle")
    assert [r.name for r in load_rules(rules_file)] == ["rule_1", "rule_2"]
    assert load_rules(rules_file) == load_rules(rules_file)
