"""
The memo of nest mappings (`lowering/tile_to_mesh/memo.py`): `plmr compile` with the
memo gives the same mesh programs and plans as without it, on bundled examples, and a
nest met again is emitted from the memo.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import load_module, make_context
from plmr.dialects.printing import module_text
from plmr.lowering.tile_to_mesh import NestPlan, memo
from plmr.passes.pipeline import CompileOptions, compile_module

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

CASES = [
    ("graph/decoder_block.mlir", (2, 2)),
    ("attention/decode_gqa.mlir", (4, 4)),
    ("attention/prefill_window.mlir", (2, 2)),
    ("onnx/mlp.mlir", (4, 4)),
]


def _compile(path: Path, grid: tuple[int, int]) -> tuple[str, list[str]]:
    ctx = make_context()
    module = load_module(path, ctx)
    assert isinstance(module, ModuleOp)
    plans: list[NestPlan] = []
    compile_module(ctx, module, CompileOptions(grid=grid, substitute=False), plans)
    return module_text(module), [f"{p.name}: {p.mapping()} {p.estimate!r}" for p in plans]


@pytest.mark.parametrize(("example", "grid"), CASES)
def test_memoised_lowering_equals_the_plain_one(
    example: str, grid: tuple[int, int]
) -> None:
    path = EXAMPLES / example
    memo.clear()
    with memo.disabled():
        plain = _compile(path, grid)
    assert memo.stats() == (0, 0)
    first = _compile(path, grid)
    hits, misses = memo.stats()
    assert misses > 0
    again = _compile(path, grid)
    assert first == plain
    assert again == plain
    # Every nest of the second compile was found: nothing planned again.
    assert memo.stats() == (hits + hits + misses, misses)


def test_a_repeated_layer_is_planned_once() -> None:
    """
    The decode step of two identical decoder layers: the second layer's nests read
    what the first layer's read, in the same layouts, and come from the memo within
    one compile; the program is the plain lowering's.
    """
    from plmr.dialects.context import parse_module
    from plmr.models.llama import ProgramBuilder
    from plmr.models.llama_config import PRESETS

    text = ProgramBuilder(PRESETS["tiny"], None).decode(layers=[0, 1], head=False)
    opts = CompileOptions(grid=(2, 2), substitute=False, tile_sizes=(16, 16))

    def run() -> str:
        module = parse_module(text)
        compile_module(make_context(), module, opts)
        return module_text(module)

    memo.clear()
    with memo.disabled():
        plain = run()
    assert run() == plain
    hits, misses = memo.stats()
    assert hits > 0
    assert misses > 0


PRICED = [
    ("graph/decoder_block.mlir", (2, 2)),
    ("attention/decode_gqa.mlir", (4, 4)),
    ("onnx/mlp.mlir", (4, 4)),
]


@pytest.mark.parametrize(("example", "grid"), PRICED)
def test_price_only_lowering_gives_the_full_estimate(
    example: str, grid: tuple[int, int]
) -> None:
    """
    `lower_module(price_only=True)` (the mesh guard of taso-substitute) prices a nest
    the memo holds without emitting it: its estimate is the full lowering's, on every
    blocking the guard tries, whether the memo is warm (every nest priced from it) or
    cold, and the unmemoised lowering's too.
    """
    from plmr.errors import PlmrError
    from plmr.lowering.loop_to_tile import ConvertLoopToTilePass
    from plmr.lowering.tile_to_mesh import lower_module, parse_options
    from plmr.passes.pipeline import to_loop_level

    ctx = make_context()
    module = load_module(EXAMPLES / example, ctx)
    assert isinstance(module, ModuleOp)
    to_loop_level(ctx, module, CompileOptions(grid=grid, substitute=False))
    options = parse_options(grid, "wse2", "meshgemm", "ktree", 2)
    priced = 0
    for sizes in ((16, 16), (8, 8), (4, 4), (2, 4)):
        tiled = module.clone()
        try:
            ConvertLoopToTilePass(tile_sizes=sizes).apply(ctx, tiled)
        except PlmrError:
            continue  # blocks that do not divide the program's dimensions

        def estimate(price_only: bool, tiled: ModuleOp = tiled) -> float:
            return lower_module(tiled.clone(), options, price_only=price_only)

        memo.clear()
        with memo.disabled():
            plain = estimate(False)
        cold = estimate(True)
        hits_before = memo.stats()[0]
        warm = estimate(True)
        assert memo.stats()[0] > hits_before
        full = estimate(False)
        assert cold == warm == full == plain
        priced += 1
    assert priced >= 2
