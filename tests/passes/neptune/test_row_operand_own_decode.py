"""
plmr's own decode step (`ProgramBuilder.decode`) under `neptune-fuse`'s one-row operand
rule: its scores build each key row from the cache and the new row, and its output
projection reads the softmax's deferred normalisation `o / l`; neither map outweighs the
nest that reads it, so both stay inlined, the softmax's sum and P·V stay one nest, and
`mesh-fuse-softmax` still finds and fuses the softmax's three nests. The fused step
computes what the program computes, on 4x4 (as large grids compile it), 2x2, 3x3 and 2x4.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import arith

from plmr.dialects import mesh
from plmr.dialects.context import make_context, parse_module
from plmr.dialects.loop import NestOp, ReadOp
from plmr.dialects.printing import module_text
from plmr.models.llama import LlamaConfig, ProgramBuilder
from plmr.passes.mesh_softmax_nests import fuse_softmax_nests, match_nests
from plmr.passes.neptune import nests
from plmr.passes.pipeline import CompileOptions, compile_module, to_loop_level
from plmr.runtime.mesh_machine import run_mesh
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import random_inputs, select_function

# Head dimension 64 over a cache of 64 rows: the probabilities are stored, so the
# softmax reaches the mesh as three nests (the maximum, the exponentials, the sums).
SMALL = LlamaConfig(
    "small", dim=128, n_layers=1, n_heads=2, n_kv_heads=1, ffn_dim=256, vocab=64, max_seq=64
)


def _program() -> str:
    return ProgramBuilder(SMALL, None, "heads").decode(layers=[0], head=True)


def _options(grid: tuple[int, int]) -> CompileOptions:
    return CompileOptions(
        grid=grid,
        tile_sizes=(16, 16),
        fit_tiles=True,
        chunks=1,
        substitute=False,
        fuse_softmax=False,
    )


def test_the_normalisation_and_the_rotation_stay_inlined():
    module = to_loop_level(make_context(), parse_module(_program()), _options((2, 2)))
    top = [op for op in module.walk() if isinstance(op, NestOp)]
    top = [n for n in top if not isinstance(n.parent_op(), NestOp)]
    projections = [
        n
        for n in top
        if any(isinstance(op, ReadOp) and op.source.name_hint == "l0_wo" for op in n.walk())
    ]
    assert len(projections) == 1
    # No map of its own for `o / l`: the output projection divides by the sum itself.
    assert any(isinstance(op, arith.DivfOp) for op in projections[0].walk())
    producers = {op.source.owner for op in projections[0].walk() if isinstance(op, ReadOp)}
    assert not any(isinstance(p, NestOp) and not p.is_reduction for p in producers)
    # The scores against the cache rotate the query themselves (the tables read there).
    scores = [
        n
        for n in top
        if any(
            isinstance(op, ReadOp) and op.source.name_hint == "kcache_l0" for op in n.walk()
        )
    ]
    assert len(scores) == 1
    reads = {op.source.name_hint for op in scores[0].walk() if isinstance(op, ReadOp)}
    assert {"cos", "sin", "kcache_l0"} <= reads


def test_the_loop_program_is_the_one_without_the_rule(monkeypatch: pytest.MonkeyPatch):
    # Nothing of plmr's own step is stored by the rule: the fused loop program is the
    # same with the rule left out.
    text = _program()
    on = module_text(to_loop_level(make_context(), parse_module(text), _options((4, 4))))
    monkeypatch.setattr(nests, "_one_row_operand", lambda *_: False)
    off = module_text(to_loop_level(make_context(), parse_module(text), _options((4, 4))))
    assert on == off


@pytest.mark.parametrize(
    ("grid", "fused"),
    [((4, 4), True), ((2, 2), False), ((3, 3), False), ((2, 4), False)],
    ids=["4x4", "2x2", "3x3", "2x4"],
)
def test_the_softmax_fuses_and_computes_the_program(grid: tuple[int, int], fused: bool):
    # 4x4 compiles the layer as large grids do (the softmax's three nests); smaller
    # grids split the heads apart, where there is no such chain to fuse.
    text = _program()
    compiled = compile_module(make_context(), parse_module(text), _options(grid))
    maxima = [
        op
        for op in compiled.walk()
        if isinstance(op, mesh.AllreduceOp) and op.kind.data == mesh.CombineKind.MAX
    ]
    assert maxima
    assert all((match_nests(op) is not None) == fused for op in maxima)
    assert len(fuse_softmax_nests(compiled, always=True)) == (2 if fused else 0)
    compiled.verify()
    kinds = [op.kind.data for op in compiled.walk() if isinstance(op, mesh.AllreduceOp)]
    assert (mesh.CombineKind.SOFTMAX in kinds) == fused
    assert (mesh.CombineKind.MAX not in kinds) == fused
    reference = parse_module(text)
    args = random_inputs(select_function(reference, "decode"), sum(grid))
    want = evaluate_function(reference, "decode", args)
    got, _ = run_mesh(compiled, args, name="decode")
    assert len(got) == len(want)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
