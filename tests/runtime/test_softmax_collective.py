"""`mesh.allreduce softmax`: split-K softmax merged in one collective, data and timing."""

import numpy as np
import pytest

from plmr.dialects.context import parse_module
from plmr.runtime.mesh_machine import run_mesh
from plmr.target.collective_stages import combine_cycles, line_cycles
from plmr.target.collectives import allreduce_plan
from plmr.target.device import get_device


def program(pes: int, rows: int, width: int, attrs: str) -> str:
    """Each of `pes` PEs along y holds `[rows, width]`; all allreduce them as softmax rows."""
    t = f"tensor<{pes * rows}x{width}xf32>"
    d = f"!mesh.dist<{t}, #mesh.layout<[y, -]>>"
    b = f"tensor<{rows}x{width}xf32>"
    return f"""
mesh.program @p(%a: {t}) -> {t} device "wse2" grid [{pes}, 1] {{
  %d = mesh.scatter %a : {t} -> {d}
  %e = mesh.spmd(%d) : ({d}) -> {d} {{
  ^bb0(%y: index, %x: index, %b: {b}):
    %s = mesh.allreduce softmax %b axis y {attrs} : {b}
    mesh.yield %s : {b}
  }}
  %o = mesh.gather %e : {d} -> {t}
  mesh.return %o : {t}
}}
"""


def partials(scores: np.ndarray, values: np.ndarray, pes: int) -> np.ndarray:
    """Each PE's rows `[m, l, o...]` over its share of the positions (flash-decoding)."""
    positions = scores.shape[1]
    share = positions // pes
    blocks: list[np.ndarray] = []
    for p in range(pes):
        s = scores[:, p * share : (p + 1) * share]
        m = s.max(axis=1, keepdims=True)
        e = np.exp(s - m)
        blocks.append(
            np.concatenate(
                [m, e.sum(axis=1, keepdims=True), e @ values[p * share : (p + 1) * share]],
                axis=1,
            )
        )
    return np.concatenate(blocks).astype(np.float32)


@pytest.mark.parametrize("pes", [2, 5, 8])
@pytest.mark.parametrize(
    "attrs",
    ["", "algorithm pipeline", "k = 3", "groups = 1", "algorithm ktree k = 2 groups = 2"],
)
def test_the_combine_is_the_softmax_of_all_positions(pes: int, attrs: str):
    rng = np.random.default_rng(pes)
    rows, d = 3, 4
    # Scores far apart (scale 20): every PE's maximum differs from the global one.
    scores = rng.standard_normal((rows, 8 * pes)) * 20
    values = rng.standard_normal((8 * pes, d))
    (got,), _ = run_mesh(
        parse_module(program(pes, rows, 2 + d, attrs)), [partials(scores, values, pes)]
    )
    top = scores.max(axis=1, keepdims=True)
    e = np.exp(scores - top)
    want = np.concatenate([top, e.sum(axis=1, keepdims=True), e @ values], axis=1)
    for p in range(pes):
        np.testing.assert_allclose(
            got[p * rows : (p + 1) * rows], want, rtol=1e-5, atol=1e-5
        )


def test_segments_combine_their_own_rows():
    rng = np.random.default_rng(7)
    pes, seg, rows = 7, 3, 2
    x = rng.standard_normal((pes * rows, 3)).astype(np.float32) * 5
    (got,), _ = run_mesh(parse_module(program(pes, rows, 3, f"segment = {seg}")), [x])
    blocks = x.reshape(pes, rows, 3)
    for start in (0, 3):
        part = blocks[start : start + seg].astype(np.float64)
        top = part[:, :, :1].max(axis=0)
        rest = (part[:, :, 1:] * np.exp(part[:, :, :1] - top)).sum(axis=0)
        want = np.concatenate([top, rest], axis=1)
        for p in range(start, start + seg):
            np.testing.assert_allclose(got[p * rows : (p + 1) * rows], want, rtol=1e-5)
    np.testing.assert_array_equal(got[6 * rows :], x[6 * rows :])  # past the segments


def test_one_softmax_allreduce_beats_a_max_then_a_sum():
    # llama3-8b's decode at 420²: 4 rows per PE (heads), each [m, l, o of 2 values].
    dev = get_device("wse2")
    plan = allreduce_plan(420, "ktree", 2, None)
    rows, width = 4, 4
    fused = line_cycles(plan, rows * width, dev, kind="softmax", width=width).max()
    apart = (
        line_cycles(plan, rows, dev, kind="max").max()
        + line_cycles(plan, rows * (width - 1), dev).max()
    )
    # 2,067 against 939 + 1,469: one tree's latency saved, less the dearer combines.
    assert fused < apart - 300
    # The rescaling is priced: a softmax combine costs more than a sum's.
    assert combine_cycles(dev, "softmax", 16, 4, 1.0) > combine_cycles(
        dev, "sum", 16, 4, 1.0
    )
