"""
WaferLLM's shift-based KV cache: the capacity model (shift holds P times what tail
concatenation holds, linear in the free SRAM, pipelined when weights do not fit) and the
append programs (the cache stays in append order; a shift append costs O(1) hops).
"""

from __future__ import annotations

import numpy as np
import pytest

from plmr.errors import PlmrError
from plmr.lowering.kv_cache import (
    LLAMA2_13B,
    LLAMA3_8B,
    ModelConfig,
    get_model,
    kv_append,
    kv_capacity,
    kv_elems_per_token,
    layer_weight_elems,
    workspace_elems,
)
from plmr.runtime.mesh_machine import run_mesh
from plmr.target.device import WSE2

# ---------------------------------------------------------------------------------------
# Capacity model
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["llama3-8b", "llama2-13b"])
@pytest.mark.parametrize("side", [240, 360, 420, 600])
def test_shift_holds_p_times_concat(model: str, side: int):
    shift = kv_capacity(model, (side, side), "wse2", "shift")
    concat = kv_capacity(model, (side, side), "wse2", "concat")
    assert concat.max_tokens >= 1
    assert shift.max_tokens >= concat.max_tokens
    assert shift.max_tokens == side * concat.max_tokens
    assert shift.slots_per_pe == concat.slots_per_pe == concat.max_tokens
    assert shift.weight_bytes_per_pe + shift.workspace_bytes_per_pe <= WSE2.sram_bytes
    used = shift.slots_per_pe * shift.bytes_per_token_per_pe
    assert used <= shift.free_bytes_per_pe < used + shift.bytes_per_token_per_pe


def test_ratio_grows_with_rows():
    ratios = []
    for rows in (120, 240, 480, 720):
        shift = kv_capacity("llama3-8b", (rows, 360), "wse2", "shift")
        concat = kv_capacity("llama3-8b", (rows, 360), "wse2", "concat")
        ratios.append(shift.max_tokens / concat.max_tokens)
    assert ratios == sorted(ratios)
    assert len(set(ratios)) == len(ratios)
    assert ratios[-1] >= 100  # the hundreds-x regime of WaferLLM's Table 5


@pytest.mark.parametrize("stages", [4, 8, 16])
def test_capacity_is_linear_in_sram(stages: int):
    """With the stages fixed, every extra token's worth of SRAM per PE is one slot."""
    grid = (420, 420)
    base = kv_capacity(LLAMA3_8B, grid, WSE2, "concat", stages=stages)
    for extra_tokens in (1, 10, 100, 1000):
        extra = extra_tokens * base.bytes_per_token_per_pe
        bigger = WSE2.with_overrides(sram_bytes=WSE2.sram_bytes + extra)
        cap = kv_capacity(LLAMA3_8B, grid, bigger, "concat", stages=stages)
        assert (cap.stages, cap.layers_per_stage) == (base.stages, base.layers_per_stage)
        assert cap.max_tokens == base.max_tokens + extra_tokens
        shift = kv_capacity(LLAMA3_8B, grid, bigger, "shift", stages=stages)
        assert shift.max_tokens == grid[0] * cap.max_tokens


def test_default_uses_the_fewest_stages_that_fit():
    fewest = kv_capacity(LLAMA3_8B, (360, 360), WSE2, "shift")
    assert fewest.stages == 3
    with pytest.raises(PlmrError, match="2 pipeline stage"):
        kv_capacity(LLAMA3_8B, (360, 360), WSE2, "shift", stages=2)
    more = kv_capacity(LLAMA3_8B, (360, 360), WSE2, "shift", stages=8)
    assert more.layers_per_stage == 4
    assert more.max_tokens > fewest.max_tokens


def test_more_sram_needs_fewer_stages():
    small = kv_capacity(LLAMA2_13B, (375, 375), WSE2, "shift")
    big = WSE2.with_overrides(sram_bytes=6 * WSE2.sram_bytes)
    large = kv_capacity(LLAMA2_13B, (375, 375), big, "shift")
    assert small.stages > 1
    assert large.stages == 1
    assert large.max_tokens > small.max_tokens


def test_capacity_errors():
    with pytest.raises(PlmrError, match="unknown KV-cache scheme 'paged'"):
        kv_capacity("llama3-8b", (360, 360), "wse2", "paged")
    with pytest.raises(PlmrError, match="unknown model 'gpt2'; presets: llama3-8b"):
        get_model("gpt2")
    with pytest.raises(PlmrError, match="LM head alone needs"):
        kv_capacity("llama3-8b", (8, 8), "wse2", "shift")
    with pytest.raises(PlmrError, match="does not fit wse2"):
        kv_capacity("llama3-8b", (1000, 1000), "wse2", "shift")
    with pytest.raises(PlmrError, match="one layer needs"):
        tiny_head = ModelConfig("tiny-head", 4096, 4, 32, 8, 14336, 8)
        kv_capacity(tiny_head, (16, 16), "wse2", "shift")
    with pytest.raises(PlmrError, match="stages must be between 1 and its 32"):
        kv_capacity("llama3-8b", (360, 360), "wse2", "shift", stages=33)
    with pytest.raises(PlmrError, match="n_heads"):
        kv_capacity(ModelConfig("odd", 100, 2, 3, 3, 64, 10), (4, 4), "wse2", "shift")


# ---------------------------------------------------------------------------------------
# Append programs
# ---------------------------------------------------------------------------------------


def _append_all(
    grid: tuple[int, int], entries: int, width: int, scheme: str, n: int
) -> np.ndarray:
    kernel = kv_append(grid, entries, width, "test-small", scheme)
    cache = np.zeros(kernel.inputs[0], dtype=np.float32)
    for t in range(n):
        new = np.full((1, width), t + 1, dtype=np.float32)
        new[0, :] += np.arange(width, dtype=np.float32) / 100
        (cache,), _ = run_mesh(kernel.module, [cache, new], mode="functional")
    return cache


@pytest.mark.parametrize(
    ("grid", "entries", "width"),
    [((1, 1), 1, 3), ((4, 2), 3, 5), ((8, 3), 2, 7), ((5, 4), 1, 4), ((3, 8), 4, 16)],
)
def test_shift_append_keeps_append_order(grid: tuple[int, int], entries: int, width: int):
    slots = grid[0] * entries
    for n in sorted({1, slots // 2 + 1, slots}):
        cache = _append_all(grid, entries, width, "shift", n)
        tokens = cache[:, 0]
        # Read top row's oldest first: zeros (empty slots), then 1..n in append order.
        assert tokens.tolist() == [0.0] * (slots - n) + [float(t) for t in range(1, n + 1)]
        offsets = cache[slots - n :, :] - tokens[slots - n :, None]
        assert np.allclose(offsets, np.arange(width) / 100, atol=1e-5)


def test_shift_append_drops_the_oldest_when_full():
    cache = _append_all((4, 2), 2, 3, "shift", 11)
    assert cache[:, 0].tolist() == [float(t) for t in range(4, 12)]


@pytest.mark.parametrize(("grid", "entries"), [((4, 2), 3), ((6, 3), 2), ((1, 2), 4)])
def test_concat_append_fills_only_the_last_row(grid: tuple[int, int], entries: int):
    slots = grid[0] * entries
    cache = _append_all(grid, entries, 5, "concat", entries)
    want = [0.0] * (slots - entries) + [float(t) for t in range(1, entries + 1)]
    assert cache[:, 0].tolist() == want
    # One more append overflows the last row: the first token is lost.
    over = _append_all(grid, entries, 5, "concat", entries + 1)
    assert over[slots - entries :, 0].tolist() == [float(t) for t in range(2, entries + 2)]
    assert not over[: slots - entries].any()


def test_shift_append_is_constant_time_in_rows():
    cycles = []
    for rows in (8, 32, 128):
        kernel = kv_append((rows, 4), 16, 128, "wse2", "shift")
        inputs = [np.zeros(s, dtype=np.float32) for s in kernel.inputs]
        _, report = run_mesh(kernel.module, inputs, mode="timing")
        shift_ops = [o for o in report.ops if o.name == "mesh.shift"]
        assert len(shift_ops) == 1
        assert shift_ops[0].count == 1
        assert report.hop_bytes == report.bytes_moved  # every message moves 1 hop
        cycles.append(report.cycles)
    assert cycles[0] > 0
    assert max(cycles) == pytest.approx(min(cycles), rel=0.01)


def test_concat_append_has_no_communication():
    kernel = kv_append((8, 4), 16, 128, "wse2", "concat")
    inputs = [np.zeros(s, dtype=np.float32) for s in kernel.inputs]
    _, report = run_mesh(kernel.module, inputs, mode="timing")
    assert report.bytes_moved == 0
    assert all(o.name != "mesh.shift" for o in report.ops)


def test_append_errors():
    with pytest.raises(PlmrError, match="unknown KV-cache scheme"):
        kv_append((4, 4), 2, 8, "wse2", "ring")
    with pytest.raises(PlmrError, match="must be positive"):
        kv_append((4, 4), 0, 8, "wse2", "shift")
    with pytest.raises(PlmrError, match="grid must be positive"):
        kv_append((0, 4), 2, 8, "wse2", "shift")


@pytest.mark.parametrize("model", [LLAMA3_8B, LLAMA2_13B])
@pytest.mark.parametrize("grid", [(240, 240), (420, 420), (600, 600)])
@pytest.mark.parametrize("sram_kib", [24, 48, 96])
def test_the_bench_splits_stages_by_the_compiler_s_rule(
    model: ModelConfig, grid: tuple[int, int], sram_kib: int
):
    """
    The bench's layer groups are those `plmr compile` gives a layered program
    (`split_stages`) for the same bytes per PE: a layer's weights and its token's K and V
    beside the workspace (the LM head on the last stage, or a stage of its own).
    """
    from plmr.target.device import get_device
    from plmr.target.stages import split_stages

    dev = get_device(f"wse2:sram_kib={sram_kib}")
    cap = kv_capacity(model, grid, dev, "shift")
    layers = cap.stage_layers[:-1] if cap.stage_layers[-1] == 0 else cap.stage_layers
    assert layers == split_stages(
        model.n_layers,
        cap.layer_weight_bytes_per_pe + cap.kv_bytes_per_layer_token_per_pe,
        cap.workspace_bytes_per_pe,
        dev.sram_bytes,
        model.name,
    )


def test_a_layer_no_pe_holds_is_refused_by_the_bench_and_the_rule():
    from plmr.target.device import get_device
    from plmr.target.stages import split_stages

    # LLaMA3-8B's layers with a small vocabulary: its LM head fits, a layer does not.
    model = ModelConfig("wide", 4096, 32, 32, 8, 14336, 256)
    grid, dev = (16, 16), get_device("wse2")
    with pytest.raises(PlmrError, match="one layer needs"):
        kv_capacity(model, grid, dev, "shift")
    with pytest.raises(PlmrError, match="wide: one layer's weights need"):
        split_stages(
            model.n_layers,
            (layer_weight_elems(model, grid) + kv_elems_per_token(model, grid)) * 2,
            workspace_elems(model, grid) * 2,
            dev.sram_bytes,
            model.name,
        )
