"""
Pipeline stages on the wafers of a system (`plmr.models.wafers`): regions in snake order
on a wafer's grid, more wafers when one is full, refusals naming the SRAM and the wafers
needed; the hops' costs from the placement and the device's link; a multi-wafer step
against the sum written out by hand; the stages run one after another in functional
mode give the numbers of the whole model on one grid.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from plmr.errors import PlmrError
from plmr.lowering.kv_cache import kv_capacity
from plmr.models.bench import bench_llm
from plmr.models.llama import get_config
from plmr.models.wafers import Placement, hops, place_stages, wafer_step
from plmr.target.device import Device, get_device

WAFER16 = "wse2:height=16,width=16"


def disjoint(placement: Placement) -> bool:
    """No two regions of a wafer share a PE, and every region is inside its wafer."""
    h, w = placement.wafer_shape
    for wafer in range(placement.wafers):
        used = np.zeros((h, w), np.int64)
        for r in placement.wafer_regions(wafer):
            (y, x), (p, q) = r.origin, r.shape
            if y + p > h or x + q > w:
                return False
            used[y : y + p, x : x + q] += 1
        if used.max() > 1:
            return False
    return True


def test_a_16x16_wafer_holds_sixteen_4x4_regions_in_snake_order():
    dev = get_device(WAFER16)
    placement = place_stages([1] * 16, (4, 4), dev)
    assert placement.per_wafer == (4, 4)
    assert placement.wafers == 1
    assert placement.pes_used == 256
    assert [r.origin for r in placement.regions[:8]] == [
        (0, 0),
        (0, 4),
        (0, 8),
        (0, 12),
        (4, 12),
        (4, 8),
        (4, 4),
        (4, 0),
    ]
    assert placement.regions[-1].origin == (12, 0)
    assert placement.regions[-1].head
    assert not placement.regions[0].head
    assert disjoint(placement)
    # Consecutive stages are neighbours: every hop is Q or P PEs on the fabric.
    assert [(h.kind, h.distance) for h in hops(placement, dev, 64)] == [("fabric", 4)] * 15


def test_a_hop_on_the_fabric_costs_its_distance_and_its_boundary():
    dev = get_device(WAFER16)
    placement = place_stages([1] * 3, (4, 8), dev)
    assert placement.per_wafer == (4, 2)
    side, down = hops(placement, dev, 64)
    software = dev.send_overhead_cycles + dev.recv_overhead_cycles
    # Side by side: 8 hops, 64 values over the P = 4 rows of links.
    assert side.distance == 8
    assert side.cycles == pytest.approx(8 * 1.98 + software + 16 * 2 / 4)
    # One above the other: 4 hops, 64 values over the Q = 8 columns of links.
    assert (down.src, down.dst, down.distance) == (1, 2, 4)
    assert down.cycles == pytest.approx(4 * 1.98 + software + 8 * 2 / 4)


def test_stages_beyond_a_wafer_continue_on_the_next_over_a_link():
    dev = get_device(WAFER16)
    placement = place_stages([1] * 17, (4, 4), dev)
    assert placement.wafers == 2
    assert placement.regions[16].wafer == 1
    assert placement.regions[16].origin == (0, 0)
    assert disjoint(placement)
    stage_hops = hops(placement, dev, 64)
    kinds = [h.kind for h in stage_hops]
    assert kinds == ["fabric"] * 15 + ["link"]
    link = stage_hops[-1]
    # Stage 15 at (12, 0) and stage 16 at (0, 0) both touch their wafer's edge.
    assert link.distance == 0
    software = dev.send_overhead_cycles + dev.recv_overhead_cycles
    latency = 2.0e-6 * 1.1e9
    payload = 64 * 2 * 8 / 1200e9 * 1.1e9
    assert link.cycles == pytest.approx(software + latency + payload)


def test_the_link_is_a_device_parameter():
    dev = get_device("wse3:wafers=4,link_gbps=400,link_latency_us=5")
    assert (dev.wafers, dev.link_gbps, dev.link_latency_us) == (4, 400.0, 5.0)
    assert dev.link_latency_cycles == pytest.approx(5e-6 * dev.clock_hz)
    assert dev.link_cycles_per_byte == pytest.approx(8 * dev.clock_hz / 400e9)
    with pytest.raises(PlmrError, match="link_gbps positive"):
        get_device("wse3:link_gbps=0")
    with pytest.raises(PlmrError, match="wafers"):
        get_device("wse3:wafers=-1")


def test_a_system_too_small_is_refused_with_the_sram_and_the_wafers_needed():
    dev = get_device(WAFER16 + ",wafers=1")
    with pytest.raises(PlmrError, match=r"17 pipeline stages.*2 wafers.*has 1.*wafers=2"):
        place_stages([1] * 17, (4, 4), dev, [1000] * 17)
    with pytest.raises(PlmrError, match=r"272.00 kB"):
        place_stages([1] * 17, (4, 4), dev, [1000] * 17)
    assert place_stages([1] * 16, (4, 4), dev).wafers == 1
    with pytest.raises(PlmrError, match="does not fit a wafer"):
        place_stages([1], (17, 4), get_device(WAFER16))


def test_the_capacity_model_gives_each_stage_its_layers_and_bytes():
    dev = get_device("wse3")
    for name, wafers in (("llama3.1-70b", 4), ("llama3.1-405b", 22)):
        config = get_config(name)
        cap = kv_capacity(config.model_config(), (dev.height, dev.width), dev, "shift")
        assert sum(cap.stage_layers) == config.n_layers
        sizes = cap.stage_bytes_per_pe(4096)
        assert max(sizes) <= dev.sram_bytes
        placement = place_stages(cap.stage_layers, (dev.height, dev.width), dev, sizes)
        assert placement.wafers == wafers
        # The weights in 16 bits fit the wafers' SRAM (48 KiB on 883,350 PEs: 43.4 GB).
        params = config.n_layers * (
            2 * config.dim * config.dim
            + 2 * config.dim * config.n_kv_heads * config.head_dim
            + 3 * config.dim * config.ffn_dim
        )
        assert 2 * params < placement.sram_bytes_used <= wafers * 43.5e9
    with pytest.raises(PlmrError, match=r"llama3.1-70b.*4 wafers.*has 3"):
        get_70b = get_config("llama3.1-70b")
        three = get_device("wse3:wafers=3")
        cap = kv_capacity(get_70b.model_config(), (1170, 755), three, "shift")
        place_stages(cap.stage_layers, (1170, 755), three, what="llama3.1-70b")


def test_the_ascii_map_shows_the_stages_and_the_wafers():
    dev = get_device(WAFER16)
    lines = place_stages([1, 1, 1, 1, 1, 0], (8, 8), dev).ascii_map(cells=8)
    assert lines[0].split() == ["wafer", "0", "wafer", "1"]
    first, second = lines[1].split(), lines[-1].split()
    assert first == ["|00001111|", "|4444HHHH|"]
    assert second == ["|33332222|", "|........|"]


# ---------------------------------------------------------------------------------------
# A tiny model over two wafers
# ---------------------------------------------------------------------------------------

# A 2x4 "wafer" of 20 KiB PEs: tiny's two layers take a 2x2 region each and the LM head
# a third, so the stages fill one wafer and go on to a second.
TWO_WAFERS = "wse2:height=2,width=4,sram_kib=20"


def test_a_multi_wafer_step_is_the_hand_computed_sum():
    result = bench_llm("decode", "tiny", (2, 2), TWO_WAFERS, reference=False)
    dev: Device = get_device(TWO_WAFERS)
    placement = result.placement
    assert placement is not None
    assert [(r.wafer, r.origin, r.layers) for r in placement.regions] == [
        (0, (0, 0), 1),
        (0, (0, 2), 1),
        (1, (0, 0), 0),
    ]
    assert result.wafers == 2
    software = 58.81 + 32.24
    side = 2 * 1.98 + software + math.ceil(64 / 2) * 2 / 4
    link = software + 2.0e-6 * 1.1e9 + 64 * 2 * 8 / 1200e9 * 1.1e9
    assert [h.cycles for h in result.hops] == pytest.approx([side, link])
    layer, append, first = result.layer_cycles, result.kv_append_cycles, result.first_cycles
    want = first + layer + 2 * append + side + link
    assert result.step_cycles == pytest.approx(want, rel=1e-12)
    assert result.tokens_per_second == pytest.approx(dev.clock_hz / want)
    split = result.wafer_step
    assert split is not None
    assert split.layers == pytest.approx((2 * (layer + append), 0.0))
    assert split.links == pytest.approx((link,))
    assert split.head == pytest.approx(first - layer)
    data = result.to_json()
    assert data["wafers"] == 2
    assert data["placement"]["stages"][2]["origin"] == [0, 0]
    assert data["placement"]["stages"][2]["wafer"] == 1
    # The same model on one wafer large enough: the same layers, no link.
    one = bench_llm(
        "decode", "tiny", (2, 2), "wse2:height=2,width=6,sram_kib=20", reference=False
    )
    assert one.wafers == 1
    assert one.layer_cycles == pytest.approx(layer)
    assert one.step_cycles == pytest.approx(want - link + side)
    split = wafer_step(placement, result.hops, layer, append, first)
    assert split.total == pytest.approx(want)


def test_stages_over_two_wafers_compute_the_numbers_of_one_wafer():
    """
    Functional mode: tiny's prefill run stage by stage as placed on the two-wafer system
    (layer 0, layer 1, the LM head; each its own program on a 2x2 region), the hidden
    states carried over the fabric and the link, gives the logits of the whole model on
    one grid; the link costs its latency and the activations' bytes.
    """
    from plmr.dialects.context import make_context, parse_module
    from plmr.models.bench import default_options
    from plmr.models.llama import ProgramBuilder, causal_mask, random_weights, rope_tables
    from plmr.passes.pipeline import compile_module
    from plmr.runtime.mesh_machine import run_mesh

    config = get_config("tiny")
    dev = get_device(TWO_WAFERS)
    cap = kv_capacity(config.model_config(), (2, 2), dev, "shift")
    assert cap.stage_layers == (1, 1, 0)
    placement = place_stages(cap.stage_layers, (2, 2), dev)
    assert placement.wafers == 2
    weights = random_weights(config, 3)
    builder = ProgramBuilder(config, weights)
    options = default_options("tiny", (2, 2), TWO_WAFERS)
    prompt = [3, 1, 4, 1, 5]
    cos, sin = rope_tables(config, range(len(prompt)))
    rest = [causal_mask(len(prompt)), cos, sin]

    def run(text: str, x: np.ndarray) -> list[np.ndarray]:
        module = compile_module(make_context(), parse_module(text), options)
        outs, _ = run_mesh(module, [x, *rest], device=dev, mode="functional")
        return [np.asarray(o) for o in outs]

    x0 = weights["embed"][np.asarray(prompt)]
    whole = run(builder.prefill(len(prompt)), x0)[0]
    x = x0
    first = 0
    for region in placement.regions:
        layers = list(range(first, first + region.layers))
        first += region.layers
        x = run(builder.prefill(len(prompt), layers=layers, head=region.head), x)[0]
    np.testing.assert_allclose(x, whole, rtol=1e-5, atol=1e-6)
    side, link = hops(placement, dev, x0.size)
    assert side.kind == "fabric"
    assert link.kind == "link"
    software = dev.send_overhead_cycles + dev.recv_overhead_cycles
    assert link.cycles == pytest.approx(
        software + 2.0e-6 * 1.1e9 + x0.size * 2 * 8 / 1200e9 * 1.1e9
    )
