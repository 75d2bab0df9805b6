"""
The floor of a layer under the device model (`plmr.models.floor`): a collective's floor
against a hand computation on a small device, never above what the runtime's collective
plans take, and the decode layer's floor in `plmr bench decode`.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from plmr.models.bench import LlmBench, bench_llm
from plmr.models.floor import collective_floor
from plmr.models.llama import get_config
from plmr.models.reference_layer import compute_floor, layer_macs
from plmr.target.collective_stages import line_cycles
from plmr.target.collectives import (
    allgather_plan,
    allreduce_plan,
    broadcast_plan,
    reduce_plan,
)
from plmr.target.device import Device, get_device

SMALL = Device(
    name="floor-test",
    width=16,
    height=16,
    sram_bytes=48 * 1024,
    clock_hz=1e9,
    fmac_fp16=4,
    simd_fp16=4,
    simd_fp32=2,
    hop_cycles=2.0,
    ramp_cycles=1.0,
    send_overhead_cycles=10.0,
    recv_overhead_cycles=5.0,
    op_overhead_cycles=3.0,
    step_overhead_cycles=7.0,
)
"""A 16x16 device with round figures, for computing floors by hand."""


def test_collective_floors_by_hand():
    # allreduce over 8 PEs of 6 values: send 10 + receive 5, 4 hops out and 4 back at
    # 2 with a ramp of 1 at both ends of each message (2·(8 + 2)), the second stage's
    # overhead 7, 6 values of 2 B over a 4 B/cycle link (3), the 7·6 additions over the
    # 8 PEs' 4 lanes: 3 + ⌈42/32⌉.
    assert collective_floor("allreduce", 8, 6, SMALL) == 10 + 5 + 20 + 7 + 3 + 5 == 50
    # Half of 9 PEs is 4 hops too (the middle PE is 4 from both ends); 8·6/36 → 2.
    assert collective_floor("allreduce", 9, 6, SMALL) == 50
    # One way: 4 hops and the ramps, no second stage; a broadcast combines nothing.
    assert collective_floor("reduce", 8, 6, SMALL) == 10 + 5 + 10 + 3 + 5 == 33
    assert collective_floor("broadcast", 8, 6, SMALL) == 10 + 5 + 10 + 3 == 28
    # The length of the axis: 16 PEs, 8 hops each way.
    assert collective_floor("allreduce", 16, 6, SMALL) == 50 + 2 * 4 * 2
    # 64 values over 2 PEs: 32 wavelets cross, 32 additions on each PE's 4 lanes.
    assert collective_floor("allreduce", 2, 64, SMALL) == 15 + 2 * 4 + 7 + 32 + 3 + 8
    assert collective_floor("allreduce", 1, 6, SMALL) == 0.0
    # An allgather of 6 values and a diagonal broadcast: 7 hops one way, no combine.
    assert collective_floor("allgather", 8, 6, SMALL) == 10 + 5 + 14 + 2 + 3 == 34
    assert collective_floor("diagonal_broadcast", 8, 6, SMALL) == 34
    with pytest.raises(ValueError, match="no floor"):
        collective_floor("shift", 8, 6, SMALL)


@pytest.mark.parametrize("n", [2, 3, 8, 16, 17])
@pytest.mark.parametrize("elems", [1, 6, 64])
@pytest.mark.parametrize("device", [SMALL, get_device("wse2")])
def test_no_collective_plan_beats_its_floor(n: int, elems: int, device: Device):
    """
    Every plan the runtime times (K-trees of any K and groups, the pipeline, the
    ring) finishes at or after the floor."""
    plans = [allreduce_plan(n, "pipeline"), allreduce_plan(n, "ring")]
    plans += [allreduce_plan(n, "ktree", k) for k in (1, 2, 3)]
    plans += [allreduce_plan(n, "ktree", 2, g) for g in (2, 4) if g <= n]
    floor = collective_floor("allreduce", n, elems, device)
    best = min(float(line_cycles(p, elems, device).max()) for p in plans)
    assert best >= floor - 1e-9
    one_way = [reduce_plan(n, "pipeline"), reduce_plan(n, "ktree", 2)]
    assert min(float(line_cycles(p, elems, device).max()) for p in one_way) >= (
        collective_floor("reduce", n, elems, device) - 1e-9
    )
    for root in (0, n // 2, n - 1):
        done = float(line_cycles(broadcast_plan(n, root), elems, device).max())
        assert done >= collective_floor("broadcast", n, elems, device) - 1e-9
    # A diagonal broadcast's slowest line multicasts from an end.
    done = float(line_cycles(broadcast_plan(n, 0), elems, device).max())
    assert done >= collective_floor("diagonal_broadcast", n, elems, device) - 1e-9
    gathers = [allgather_plan(n, "pipeline")]
    gathers += [allgather_plan(n, "ktree", k) for k in (1, 2, 3)]
    assert min(float(line_cycles(p, elems, device).max()) for p in gathers) >= (
        collective_floor("allgather", n, elems, device) - 1e-9
    )


@pytest.fixture(scope="module")
def tiny_decode() -> LlmBench:
    return bench_llm("decode", "tiny", (4, 4), reference=False)


def test_decode_layer_floor_is_compute_plus_its_collectives(tiny_decode: LlmBench):
    r = tiny_decode
    floor = r.floor
    assert floor is not None
    dev = get_device("wse2")
    # The compute floor: the layer's multiply-accumulates over 16 PEs × 4 FMACs.
    config = dataclasses.replace(get_config("tiny"), max_seq=r.tokens)
    macs = layer_macs("decode", config, r.tokens)
    assert floor.compute_cycles == pytest.approx(macs / (16 * 4))
    assert floor.compute_cycles == pytest.approx(compute_floor(macs, (4, 4), dev))
    # Every collective of the layer's nests, each by its own formula.
    assert len(floor.collectives) >= r.allreduces_per_layer > 0
    window = {n.index for n in r.layer_nests}
    for c in floor.collectives:
        assert c.nest in window
        assert 1 < c.pes <= 4
        assert c.floor_cycles == collective_floor(c.kind, c.pes, c.elems, dev)
        # The compiled collective's plan, timed on its line, does not beat it either.
        assert c.compiled_cycles >= c.floor_cycles
        assert c.compiled_over_floor == pytest.approx(c.compiled_cycles / c.floor_cycles)
    assert floor.cycles == pytest.approx(
        floor.compute_cycles + sum(c.floor_cycles for c in floor.collectives)
    )
    # The compiled layer does not beat its floor.
    assert r.compiled_over_floor is not None
    assert r.compiled_over_floor >= 1.0
    data = r.to_json()
    assert data["floor"]["cycles"] == pytest.approx(floor.cycles)
    assert data["compiled_over_floor"] == pytest.approx(r.layer_cycles / floor.cycles)
    text = "\n".join(r.summary())
    assert f"floor       {floor.cycles:,.0f} cycles per layer" in text
    assert f"compiled / floor {r.layer_cycles / floor.cycles:,.2f}" in text
    first = floor.collectives[0]
    assert data["floor"]["collectives"][0]["compiled_cycles"] == first.compiled_cycles
    assert f"(compiled {first.compiled_cycles:,.0f} = " in text


def test_a_4x4_allreduce_floor_by_hand_on_wse2():
    """wse2's calibrated figures: 2 hops each way on 4 PEs, one value."""
    dev = get_device("wse2")
    want = (
        dev.send_overhead_cycles
        + dev.recv_overhead_cycles
        + 2 * (2 * dev.hop_cycles + 2 * dev.ramp_cycles)
        + dev.step_overhead_cycles
        + math.ceil(2 / dev.link_bytes_per_cycle)
        + dev.op_overhead_cycles
        + 1
    )
    assert dev.step_overhead_cycles == 0.0
    assert dev.hop_cycles == 1.98
    assert collective_floor("allreduce", 4, 1, dev) == pytest.approx(want)
