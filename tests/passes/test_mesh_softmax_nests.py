"""`mesh-fuse-softmax` across nests: one softmax allreduce for a softmax of three nests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import DenseArrayBase, ModuleOp, i64

from plmr.dialects import mesh
from plmr.dialects.context import make_context, parse_module
from plmr.dialects.printing import module_text
from plmr.models.llama import LlamaConfig, ProgramBuilder
from plmr.models.nests import count_ops
from plmr.passes.mesh_softmax_nests import fuse_softmax_nests, match_nests, saved_cycles
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.mesh_machine import find_program, run_mesh
from plmr.runtime.running import random_inputs
from plmr.target.device import get_device

HAND_WRITTEN = (
    Path(__file__).parents[1] / "filecheck" / "passes" / "mesh-fuse-softmax-nests.mlir"
)

# A decode step whose head dimension (64) keeps the probabilities stored: its softmax
# reaches the mesh as three nests (the maximum, the exponentials, the sum with P·V).
SMALL = LlamaConfig(
    "small", dim=128, n_layers=1, n_heads=2, n_kv_heads=1, ffn_dim=256, vocab=64, max_seq=64
)


def _maxima(module: ModuleOp) -> list[mesh.AllreduceOp]:
    return [
        op
        for op in module.walk()
        if isinstance(op, mesh.AllreduceOp) and op.kind.data == mesh.CombineKind.MAX
    ]


def _run(module: ModuleOp, name: str, seed: int, scale: float) -> list[np.ndarray]:
    program = find_program(module, name)
    inputs = [x * scale for x in random_inputs(program, seed)]
    out, _ = run_mesh(module, inputs, name=name)
    return out


@pytest.mark.parametrize(("seed", "scale"), [(0, 1.0), (1, 30.0)])
def test_hand_written_programs_compute_the_same(seed: int, scale: float):
    # scale 30: the PEs' maxima differ by far, so the rescaling matters.
    text = HAND_WRITTEN.read_text()
    before, after = parse_module(text), parse_module(text)
    assert fuse_softmax_nests(after) == []  # 4 PEs: slower fused by the timing
    assert len(fuse_softmax_nests(after, always=True)) == 2  # @three only
    after.verify()
    for name in ("three", "shared", "square"):
        want, got = _run(before, name, seed, scale), _run(after, name, seed, scale)
        for w, g in zip(want, got, strict=True):
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)
    off, on = count_ops(before), count_ops(after)
    assert (off.spmds, off.allreduces) == (9, 6)
    assert (on.spmds, on.allreduces) == (7, 5)  # @three: 3 nests, 2 allreduces -> 1, 1


def test_running_twice_changes_nothing_more():
    module = parse_module(HAND_WRITTEN.read_text())
    fuse_softmax_nests(module, always=True)
    once = module_text(module)
    assert fuse_softmax_nests(module, always=True) == []
    assert module_text(module) == once


def test_the_timing_fuses_where_the_line_is_long():
    module = parse_module(HAND_WRITTEN.read_text())
    chains = [c for op in _maxima(module) for c in [match_nests(op)] if c is not None]
    assert len(chains) == 1
    dev = get_device("wse2")
    assert saved_cycles(chains[0], dev) < 0
    program = chains[0].maximum_nest.parent_op()
    assert isinstance(program, mesh.ProgramOp)
    program.grid = DenseArrayBase.from_list(i64, [1, 420])
    assert saved_cycles(chains[0], dev) > 200


@pytest.mark.parametrize(("seed", "scale"), [(0, 1.0), (2, 20.0)])
def test_a_decode_step_computes_the_same(seed: int, scale: float):
    # The compiled decode layer (4x4, split-K chunks off, as large grids compile it):
    # its three softmax nests fused against left apart, on the same random inputs.
    text = ProgramBuilder(SMALL, None, "heads").decode(layers=[0], head=True)
    opts = CompileOptions(
        grid=(4, 4),
        tile_sizes=(16, 16),
        fit_tiles=True,
        chunks=1,
        substitute=False,
        fuse_softmax=False,
    )
    before = compile_module(make_context(), parse_module(text), opts)
    after = parse_module(module_text(before))
    assert [match_nests(op) is not None for op in _maxima(after)] == [True]
    assert len(fuse_softmax_nests(after, always=True)) == 2
    after.verify()
    off, on = count_ops(before), count_ops(after)
    assert (on.spmds, on.allreduces) == (off.spmds - 2, off.allreduces - 1)
    assert not _maxima(after)
    want, got = _run(before, "decode", seed, scale), _run(after, "decode", seed, scale)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
