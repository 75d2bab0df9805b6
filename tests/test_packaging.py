"""The installable package lists every sub-package of the source tree."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_PACKAGED = {"tests", "benchmarks", "examples", "typecheck", "build", ".venv", "docs"}


def _source_packages() -> set[str]:
    found = {"plmr"}
    for top in ROOT.iterdir():
        if not top.is_dir() or top.name in NOT_PACKAGED or top.name.startswith("."):
            continue
        for init in top.rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT)
            found.add(".".join(("plmr", *relative.parts)))
    return found


def test_every_source_package_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    missing = _source_packages() - listed
    assert not missing, f"add these to [tool.setuptools] packages: {sorted(missing)}"
    stale = listed - _source_packages()
    assert not stale, f"these listed packages do not exist: {sorted(stale)}"
