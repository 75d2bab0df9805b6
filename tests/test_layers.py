"""
The import structure of plmr (`.importlinter`, explained in docs/design.md): the layers
point down, the front end and the library stay out of the compiler and the CLIs, and no
module imports itself through a cycle.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import grimp
import pytest
from importlinter import api as _configure  # noqa: F401  (registers the readers)
from importlinter.application.use_cases import read_user_options
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.layers import LayersContract

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / ".importlinter"


@pytest.fixture(scope="module")
def options() -> Any:
    return read_user_options(str(CONFIG))


@pytest.fixture
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("plmr", cache_dir=None)


def _contract(options: Any, key: str, cls: type[Any]) -> Any:
    (found,) = [c for c in options.contracts_options if c["id"] == key]
    return cls(
        name=found["name"], session_options=options.session_options, contract_options=found
    )


def test_lint_imports_keeps_every_contract():
    """What `.venv/bin/lint-imports` checks, run exactly so."""
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--config", str(CONFIG), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    ("contract_id", "importer", "imported"),
    [
        ("layers", "plmr.values", "plmr.tools.cli"),
        ("layers", "plmr.dialects.graph", "plmr.runtime.reference"),
        ("layers", "plmr.passes.pipeline", "plmr.models.llama"),
        ("layers", "plmr.errors", "plmr.dialects.context"),
        ("layers", "plmr.models.llama", "plmr.schedule.tuner"),
        ("layers", "plmr.target.route_plan", "plmr.runtime.mesh_machine"),
        ("layers", "plmr.target.device", "plmr.lowering.kv_cache"),
        ("layers", "plmr.values", "plmr.dialects.graph"),
        ("dialects", "plmr.dialects.tile", "plmr.dialects.mesh"),
        ("dialects", "plmr.dialects.graph", "plmr.dialects.loop"),
        ("reference", "plmr.runtime.tile_ops", "plmr.runtime.loop_ops"),
        ("reference", "plmr.runtime.evaluator", "plmr.runtime.reference"),
    ],
)
def test_a_layers_contract_refuses_an_upward_or_sideways_import(
    options: Any, graph: grimp.ImportGraph, contract_id: str, importer: str, imported: str
):
    contract = _contract(options, contract_id, LayersContract)
    assert contract.check(graph, verbose=False).kept
    graph.add_import(importer=importer, imported=imported)
    assert not contract.check(graph, verbose=False).kept


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("plmr.passes.mesh_pack", "plmr.runtime.mesh_machine"),
        ("plmr.lowering.tile_to_mesh.program", "plmr.runtime.state"),
        ("plmr.lowering.tile_to_mesh.cost", "plmr.runtime.steady"),
        # Indirectly: the compiler imports the reference semantics, which may not reach
        # the mesh machine either.
        ("plmr.runtime.reference", "plmr.runtime.running"),
    ],
)
def test_the_compiler_contract_refuses_an_import_of_the_simulator(
    options: Any, graph: grimp.ImportGraph, importer: str, imported: str
):
    contract = _contract(options, "compiler", ForbiddenContract)
    assert contract.check(graph, verbose=False).kept
    graph.add_import(importer=importer, imported=imported)
    assert not contract.check(graph, verbose=False).kept


def test_the_acyclic_contract_refuses_a_cycle_inside_a_package(
    options: Any, graph: grimp.ImportGraph
):
    contract = _contract(options, "acyclic", AcyclicSiblingsContract)
    assert contract.check(graph, verbose=False).kept
    # reference imports loop_ops; loop_ops importing reference back closes a cycle.
    graph.add_import(importer="plmr.runtime.loop_ops", imported="plmr.runtime.reference")
    assert not contract.check(graph, verbose=False).kept


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (
                            child,
                            iter(sorted(graph.find_modules_directly_imported_by(child))),
                        )
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _ignored_by_acyclic(options: Any) -> list[tuple[str, str]]:
    (acyclic,) = [c for c in options.contracts_options if c["id"] == "acyclic"]
    pairs: list[tuple[str, str]] = []
    for line in acyclic.get("ignore_imports", []):
        importer, imported = (s.strip() for s in line.split("->"))
        pairs.append((importer, imported))
    return pairs


def test_no_module_imports_itself_through_a_cycle(options: Any, graph: grimp.ImportGraph):
    """Across the whole package, also between subpackages the layers let meet."""
    for importer, imported in _ignored_by_acyclic(options):
        if graph.direct_import_exists(importer=importer, imported=imported):
            graph.remove_import(importer=importer, imported=imported)
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle(graph: grimp.ImportGraph):
    # running imports values (through reference): values importing running closes it.
    graph.add_import(importer="plmr.values", imported="plmr.runtime.running")
    assert any({"plmr.values", "plmr.runtime.running"} <= set(c) for c in _cycles(graph))
