"""
The memo of nest tile programs (`lowering/loop_to_tile/memo.py`): `plmr compile` with
the memo gives the same mesh programs and plans as without it, on bundled examples
(the blocking search meets a nest again in later trials and copies its tile program),
and `convert-loop-to-tile` alone gives the same tile program from the memo.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import load_module, make_context, parse_module
from plmr.dialects.printing import module_text
from plmr.lowering.loop_to_tile import ConvertLoopToTilePass, memo
from plmr.lowering.tile_to_mesh import NestPlan
from plmr.lowering.tile_to_mesh import memo as mesh_memo
from plmr.models.llama import ProgramBuilder, get_config
from plmr.passes.pipeline import CompileOptions, compile_module, to_loop_level

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

CASES = [
    ("attention/prefill_window.mlir", (4, 4)),
    ("onnx/mlp.mlir", (4, 4)),
    ("onnx/conv_block.mlir", (2, 4)),
]


def _compile(path: Path, grid: tuple[int, int]) -> tuple[str, list[str]]:
    ctx = make_context()
    module = load_module(path, ctx)
    assert isinstance(module, ModuleOp)
    plans: list[NestPlan] = []
    compile_module(ctx, module, CompileOptions(grid=grid, substitute=False), plans)
    return module_text(module), [f"{p.name}: {p.mapping()} {p.estimate!r}" for p in plans]


@pytest.mark.parametrize(("example", "grid"), CASES)
def test_memoised_blocking_equals_the_plain_one(
    example: str, grid: tuple[int, int]
) -> None:
    path = EXAMPLES / example
    memo.clear()
    mesh_memo.clear()
    with memo.disabled(), mesh_memo.disabled():
        plain = _compile(path, grid)
    assert memo.stats() == (0, 0)
    first = _compile(path, grid)
    hits, misses = memo.stats()
    assert misses > 0
    again = _compile(path, grid)
    assert first == plain
    assert again == plain
    # Every nest of the second compile's trials was found: nothing blocked again.
    assert memo.stats() == (hits + hits + misses, misses)


def test_a_nest_met_again_is_copied_with_its_names() -> None:
    """
    The same loop program blocked twice with the same sizes: the second pass takes every
    nest from the memo, and prints as the first (value names included).
    """
    path = EXAMPLES / "attention/prefill_gqa.mlir"
    ctx = make_context()
    module = load_module(path, ctx)
    assert isinstance(module, ModuleOp)
    to_loop_level(ctx, module, CompileOptions(grid=(2, 2), substitute=False))
    blocking = ConvertLoopToTilePass(tile_sizes=(8, 4), fit=True, fit_grid=(2, 2))
    memo.clear()
    with memo.disabled():
        plain = module.clone()
        blocking.apply(ctx, plain)
    first = module.clone()
    blocking.apply(ctx, first)
    hits, misses = memo.stats()
    assert hits == 0
    assert misses > 0
    second = module.clone()
    blocking.apply(ctx, second)
    assert memo.stats() == (misses, misses)
    assert module_text(first) == module_text(plain)
    assert module_text(second) == module_text(plain)


def _blocked(text: str) -> tuple[str, str, tuple[int, int]]:
    """
    A program at the loop level blocked without and with the memo (cleared first):
    both texts and the memo's (hits, misses)."""
    ctx = make_context()
    module = parse_module(text)
    to_loop_level(ctx, module, CompileOptions(grid=(2, 2), substitute=False))
    blocking = ConvertLoopToTilePass(tile_sizes=(4, 4), fit=True, fit_grid=(2, 2))
    memo.clear()
    with memo.disabled():
        plain = module.clone()
        blocking.apply(ctx, plain)
    blocking.apply(ctx, module)
    return module_text(plain), module_text(module), memo.stats()


def test_a_repeated_layer_is_copied_with_its_own_names() -> None:
    """
    A decode step of two layers blocked once: the second layer's nests, the first's
    under other names (their weights, their results, their loops), come from the memo
    in the same pass but for those at its boundaries (whose neighbours differ: 4 of
    its 18), and the program prints as without the memo.
    """
    builder = ProgramBuilder(get_config("tiny"), None)
    plain, memoised, (hits, misses) = _blocked(builder.decode(layers=[0, 1]))
    _, _, (one_hits, one_misses) = _blocked(builder.decode(layers=[0]))
    assert memoised == plain
    assert "%l1_" in memoised
    second = hits + misses - one_hits - one_misses
    assert second == 18
    assert misses - one_misses == 4


@pytest.mark.parametrize(
    ("kept", "names", "want"),
    [
        (("i0", "mm"), ("i0", "mm"), {}),
        (("i0", "mm_h0"), ("i0", "mm_h1"), {"mm_h0": "mm_h1"}),
        (("i0", "i0"), ("i0", "j"), None),
        (("a", None), ("a", "b"), None),
        (("a", "b"), ("c", "c"), {"a": "c", "b": "c"}),
    ],
)
def test_renaming_maps_a_kept_name_to_one_name(
    kept: memo.Names, names: memo.Names, want: dict[str, str] | None
) -> None:
    assert memo.renaming(kept, names) == want
