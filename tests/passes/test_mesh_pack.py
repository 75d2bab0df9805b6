"""`mesh-pack-allreduces`: merged nests compute what the separate nests computed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects import mesh
from plmr.dialects.context import make_context, parse_module
from plmr.dialects.printing import module_text
from plmr.errors import PlmrError
from plmr.lowering.tile_to_mesh import NestPlan
from plmr.models.generate import ProgramBuilder
from plmr.models.llama_config import LlamaConfig, get_config
from plmr.models.nests import count_ops
from plmr.passes.mesh_pack import (
    group_saved_cycles,
    pack_allreduces,
    pack_within,
    saved_cycles,
    single_allreduce,
)
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.mesh_machine import find_program, run_mesh
from plmr.runtime.running import random_inputs
from plmr.target.device import get_device

HAND_WRITTEN = (
    Path(__file__).parents[1] / "filecheck" / "passes" / "mesh-pack-allreduces.mlir"
)


def _programs(module: ModuleOp) -> list[str]:
    return [op.sym_name.data for op in module.ops if isinstance(op, mesh.ProgramOp)]


def _counts(module: ModuleOp) -> tuple[int, int]:
    c = count_ops(module)
    return c.spmds, c.allreduces


def _run(module: ModuleOp, name: str, seed: int) -> list[np.ndarray]:
    program = find_program(module, name)
    out, _ = run_mesh(module, random_inputs(program, seed), name=name)
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_hand_written_programs_compute_the_same(seed: int):
    text = HAND_WRITTEN.read_text()
    before = parse_module(text)
    after = parse_module(text)
    merges = pack_allreduces(after)
    after.verify()
    assert [m.merged.results[0].name_hint for m in merges] == ["s", "s1", "s1", "u"]
    for name in _programs(before):
        want, got = _run(before, name, seed), _run(after, name, seed)
        assert len(want) == len(got)
        for w, g in zip(want, got, strict=True):
            np.testing.assert_array_equal(g, w)
    # @pair: 2 nests -> 1, @three: 3 -> 1, @apart: all 8 kept (%mid has no allreduce),
    # @same_payload: 2 nests -> 1, their two gathers of one table -> 1.
    assert _counts(before) == (15, 14)
    assert _counts(after) == (11, 10)


def test_running_twice_changes_nothing_more():
    module = parse_module(HAND_WRITTEN.read_text())
    pack_allreduces(module)
    once = module_text(module)
    assert pack_allreduces(module) == []
    assert module_text(module) == once


def test_a_merge_past_the_sram_of_a_pe_is_not_made():
    # Each nest holds a 32x32 block (2 KiB in fp16) of a 4 KiB PE: both do not fit.
    text = """
mesh.program @big(%a: tensor<128x128xf32>) -> (tensor<128xf32>, tensor<128xf32>) device "test-tiny" grid [4, 4] {
  %d = mesh.scatter %a : tensor<128x128xf32> -> !mesh.dist<tensor<128x128xf32>, #mesh.layout<[y, x]>>
  %s = mesh.spmd(%d) : (!mesh.dist<tensor<128x128xf32>, #mesh.layout<[y, x]>>) -> !mesh.dist<tensor<128xf32>, #mesh.layout<[y]>> {
  ^bb0(%y: index, %x: index, %blk: tensor<32x32xf32>):
    %p = tile.reduce sum %blk axis = 1 : tensor<32x32xf32> -> tensor<32x1xf32>
    %q = tile.reshape %p : tensor<32x1xf32> -> tensor<32xf32>
    %r = mesh.allreduce sum %q axis x : tensor<32xf32>
    mesh.yield %r : tensor<32xf32>
  }
  %e = mesh.scatter %a : tensor<128x128xf32> -> !mesh.dist<tensor<128x128xf32>, #mesh.layout<[x, y]>>
  %t = mesh.spmd(%e) : (!mesh.dist<tensor<128x128xf32>, #mesh.layout<[x, y]>>) -> !mesh.dist<tensor<128xf32>, #mesh.layout<[y]>> {
  ^bb0(%y: index, %x: index, %blk: tensor<32x32xf32>):
    %p = tile.reduce max %blk axis = 0 : tensor<32x32xf32> -> tensor<1x32xf32>
    %q = tile.reshape %p : tensor<1x32xf32> -> tensor<32xf32>
    %r = mesh.allreduce sum %q axis x : tensor<32xf32>
    mesh.yield %r : tensor<32xf32>
  }
  %g = mesh.gather %s : !mesh.dist<tensor<128xf32>, #mesh.layout<[y]>> -> tensor<128xf32>
  %h = mesh.gather %t : !mesh.dist<tensor<128xf32>, #mesh.layout<[y]>> -> tensor<128xf32>
  mesh.return %g, %h : tensor<128xf32>, tensor<128xf32>
}
"""
    assert pack_allreduces(parse_module(text)) == []
    roomy = parse_module(text.replace('"test-tiny"', '"test-small"'))
    assert len(pack_allreduces(roomy)) == 1


WITHIN = HAND_WRITTEN.with_name("mesh-pack-allreduces-within.mlir")


def _allreduces(spmd: mesh.SpmdOp) -> int:
    return sum(isinstance(op, mesh.AllreduceOp) for op in spmd.body.walk())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_allreduces_of_one_body_packed_compute_the_same(seed: int):
    text = WITHIN.read_text()
    before = parse_module(text)
    after = parse_module(text)
    assert pack_allreduces(after) == []
    after.verify()
    for name in _programs(before):
        want, got = _run(before, name, seed), _run(after, name, seed)
        for w, g in zip(want, got, strict=True):
            np.testing.assert_array_equal(g, w)

    def counts(module: ModuleOp) -> list[int]:
        return [_allreduces(op) for op in module.walk() if isinstance(op, mesh.SpmdOp)]

    # @head: the three gathers along y are one; @kept: all five stay.
    assert counts(before) == [3, 5]
    assert counts(after) == [1, 5]


def test_a_group_within_max_elements_packs_once():
    module = parse_module(WITHIN.read_text())
    head = next(op for op in module.walk() if isinstance(op, mesh.SpmdOp))
    group = [op for op in head.body.walk() if isinstance(op, mesh.AllreduceOp)]
    device = get_device("test-small")
    assert group_saved_cycles(group, device) > 0
    assert pack_within(head, device, max_elements=8) == 1
    assert pack_within(head, device, max_elements=8) == 0


def test_bad_options_are_one_error():
    with pytest.raises(PlmrError, match="window"):
        pack_allreduces(parse_module(HAND_WRITTEN.read_text()), window=0)


SMALL = LlamaConfig(
    "small",
    dim=32,
    n_layers=2,
    n_heads=8,
    n_kv_heads=2,
    ffn_dim=64,
    vocab=32,
    max_seq=8,
)


def _decode(
    config: LlamaConfig, grid: tuple[int, int], pack: bool, plans: list[NestPlan]
) -> ModuleOp:
    text = ProgramBuilder(config, None).decode()
    opts = CompileOptions(grid=grid, substitute=False, fit_tiles=True, tile_sizes=(4, 4))
    opts = dataclasses.replace(opts, pack_allreduces=pack)
    return compile_module(make_context(), parse_module(text), opts, plans)


@pytest.mark.parametrize(
    ("model", "grid", "merged"),
    [
        ("tiny", (4, 4), True),
        ("tiny", (2, 2), False),
        ("small", (2, 2), True),
        ("small", (3, 3), False),
    ],
)
def test_decode_step_computes_the_same(model: str, grid: tuple[int, int], merged: bool):
    config = get_config("tiny") if model == "tiny" else SMALL
    plans_off: list[NestPlan] = []
    plans_on: list[NestPlan] = []
    off = _decode(config, grid, False, plans_off)
    on = _decode(config, grid, True, plans_on)
    inputs = random_inputs(find_program(off, None), 5)
    want, _ = run_mesh(off, inputs)
    got, _ = run_mesh(on, inputs)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    before, after = count_ops(off), count_ops(on)
    # The softmax's sum and P·V share an allreduce in every layer at least (where the
    # planner maps them otherwise, their values arrive by `mesh.allgather`, which is
    # not packed: the nests are kept).
    fewer = config.n_layers if merged else 0
    assert after.spmds <= before.spmds - fewer
    assert after.allreduces <= before.allreduces - fewer
    # Every nest's plan names a nest of the program (plmr compile --explain).
    spmds = {id(op) for op in on.walk() if isinstance(op, mesh.SpmdOp)}
    assert len(plans_on) == len(plans_off)
    assert all(id(p.spmd) in spmds for p in plans_on)


def test_plmr_compile_packs_unless_told_not_to(tmp_path: Path):
    from click.testing import CliRunner

    from plmr.tools.cli import cli

    source = tmp_path / "decode.mlir"
    source.write_text(ProgramBuilder(get_config("tiny"), None).decode())
    args = ["compile", str(source), "--grid", "4x4", "--no-substitute", "--tile-sizes"]
    runner = CliRunner()
    apart = runner.invoke(cli, [*args, "4,4", "--no-pack", "-o", str(tmp_path / "a")])
    packed = runner.invoke(cli, [*args, "4,4", "--explain", "-o", str(tmp_path / "p")])
    assert apart.exit_code == 0, apart.output
    assert packed.exit_code == 0, packed.output
    before = parse_module((tmp_path / "a").read_text())
    after = parse_module((tmp_path / "p").read_text())
    assert _counts(after)[0] < _counts(before)[0]
    assert _counts(after)[1] < _counts(before)[1]
    # --explain: one row per nest of the packed program, its allreduces counted once.
    rows = [
        line for line in packed.output.splitlines() if line.startswith("| ") and "%" in line
    ]
    assert len(rows) == _counts(after)[0]
    assert f"{_counts(after)[0]} nests (mesh.spmd), {_counts(after)[1]} allreduces" in (
        packed.output
    )


def _two_sums(n: int, cols: int) -> str:
    """Two independent nests that sum `n` rows along x on a 1 x `cols` grid."""
    dist = f"!mesh.dist<tensor<{n}x{2 * cols}xf32>, #mesh.layout<[-, x]>>"
    out = f"!mesh.dist<tensor<{n}xf32>, #mesh.layout<[-]>>"
    nests = "\n".join(
        f"""  %s{i} = mesh.spmd(%d) : ({dist}) -> {out} {{
  ^bb0(%y: index, %x: index, %blk: tensor<{n}x2xf32>):
    %p = tile.reduce sum %blk axis = 1 : tensor<{n}x2xf32> -> tensor<{n}x1xf32>
    %q = tile.reshape %p : tensor<{n}x1xf32> -> tensor<{n}xf32>
    %r = mesh.allreduce sum %q axis x : tensor<{n}xf32>
    mesh.yield %r : tensor<{n}xf32>
  }}
  %g{i} = mesh.gather %s{i} : {out} -> tensor<{n}xf32>"""
        for i in range(2)
    )
    return f"""
mesh.program @sums(%a: tensor<{n}x{2 * cols}xf32>) -> (tensor<{n}xf32>, tensor<{n}xf32>) device "wse2" grid [1, {cols}] {{
  %d = mesh.scatter %a : tensor<{n}x{2 * cols}xf32> -> {dist}
{nests}
  mesh.return %g0, %g1 : tensor<{n}xf32>, tensor<{n}xf32>
}}
"""


@pytest.mark.parametrize(
    ("n", "cols", "merged"), [(8, 2, True), (8, 64, True), (1000, 2, False)]
)
def test_a_pair_merges_only_when_one_allreduce_is_faster(n: int, cols: int, merged: bool):
    # 1,000 values on 2 PEs: the two allreduces' latency is less than the packing's
    # copies; a few values, or a long line, gain.
    module = parse_module(_two_sums(n, cols))
    device = get_device("wse2")
    spmds = [op for op in module.walk() if isinstance(op, mesh.SpmdOp)]
    ra, rb = (single_allreduce(s) for s in spmds)
    assert ra is not None
    assert rb is not None
    assert (saved_cycles(ra, rb, device) > 0) == merged
    before = parse_module(_two_sums(n, cols))
    _, apart = run_mesh(before, [np.ones((n, 2 * cols), np.float32)], mode="timing")
    assert len(pack_allreduces(module, max_elements=4096)) == int(merged)
    _, packed = run_mesh(module, [np.ones((n, 2 * cols), np.float32)], mode="timing")
    if merged:
        assert float(packed.cycles) < float(apart.cycles)


def test_a_schedule_pipeline_packs_as_plmr_compile_does():
    from xdsl.passes import PassPipeline

    from plmr.passes import get_all_passes
    from plmr.schedule.transforms import Compound, Fuse, Partition, Tile
    from plmr.schedule.trials import compile_schedule

    examples = Path(__file__).parents[2] / "examples"
    text = (examples / "graph" / "decoder_block.mlir").read_text()
    schedule = Compound(
        [Fuse("auto"), Tile(parallel=4, reduction=4), Partition(grid=[4, 4])]
    )
    spec = schedule.to_pipeline()
    assert "mesh-pack-allreduces,mesh-route" in spec
    module = parse_module(text)
    PassPipeline.parse_spec(get_all_passes(), spec).apply(make_context(), module)
    direct = compile_schedule(text, schedule)
    assert module_text(direct) == module_text(module)
    # The pass in the schedule's pipeline packs: fewer allreduces than without it (on
    # a decode step, whose norms' statistics pack with their GEMVs).
    decode = (examples / "llama" / "tiny_decode.mlir").read_text()
    packed, apart = parse_module(decode), parse_module(decode)
    PassPipeline.parse_spec(get_all_passes(), spec).apply(make_context(), packed)
    unpacked = spec.replace("mesh-pack-allreduces,", "")
    PassPipeline.parse_spec(get_all_passes(), unpacked).apply(make_context(), apart)
    assert _counts(packed)[1] < _counts(apart)[1]
