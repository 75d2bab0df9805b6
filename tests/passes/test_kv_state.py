"""
`graph-kv-state` (`passes/kv_state.py`) and the wafer state it relies on
(`runtime/state.py`): a decoder export's decode step with its caches as wafer state
computes what the export computes with the caches kept by the host, step after step,
at the graph level and compiled on 2x2, 3x3 and 2x4; only the token, the position and
the logits cross the host link; bad state pairs are one error.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from xdsl.dialects import func

from plmr.dialects.context import make_context
from plmr.errors import PlmrError
from plmr.frontend.onnx import import_onnx
from plmr.models.export_decode import host_cache_step
from plmr.passes.kv_state import StatePair, find_pairs, kv_state, parse_state_pairs
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.running import run_entry, run_function, select_entry
from plmr.runtime.state import Resident, WaferState
from plmr.target.interface import arg_names, state_args, state_results

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "decode"


def _examples() -> Any:
    spec = importlib.util.spec_from_file_location(
        "decode_examples", EXAMPLES / "build_examples.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["decode_examples"] = module
    spec.loader.exec_module(module)
    return module


ex = _examples()
SMALL = ex.Sizes(seq=16, positions=16)
"""The tiny decoder (two layers) with a cache of 16 rows."""


def test_checked_in_exports_are_up_to_date():
    w = ex.weights()
    for kind in ("prefill", "decode"):
        built = ex.build(kind, w).SerializeToString()
        assert (EXAMPLES / f"tiny_{kind}.onnx").read_bytes() == built, (
            "run examples/decode/build_examples.py"
        )


def _decode_model(sz: Any) -> onnx.ModelProto:
    return ex.build("decode", ex.weights(1, sz), sz)


def test_pairs_are_found_by_name():
    fn = select_entry(import_onnx(_decode_model(SMALL)), None)
    assert isinstance(fn, func.FuncOp)
    assert find_pairs(fn) == [
        StatePair(f"past_key_values.{layer}.{part}", f"present.{layer}.{part}")
        for layer in range(2)
        for part in ("key", "value")
    ]


def test_parse_state_pairs():
    assert parse_state_pairs(" past_key_0=present_key_0 , a=b") == [
        StatePair("past_key_0", "present_key_0"),
        StatePair("a", "b"),
    ]
    for bad in ("past_key_0", "=present", "a=b=c"):
        with pytest.raises(PlmrError, match="must be IN=OUT"):
            parse_state_pairs(bad)


def _differential(
    grid: tuple[int, int] | None,
    steps: int,
    seed: int,
    poison: bool = False,
    searched: bool = True,
) -> None:
    """
    The rewritten step (graph level or compiled) against the export, step by step.
    With `poison`, the buffer's row that the first step writes holds infinity first:
    the append replaces the row, it does not combine with it (`inf·0` is NaN).
    """
    sz = SMALL
    model = _decode_model(sz)
    original = import_onnx(model)
    rewritten = import_onnx(model)
    assert kv_state(rewritten) == 2 * sz.layers
    if grid is not None:
        # Without TASO's substitutions: the state placement is what varies with the
        # grid; `plmr generate`'s test compiles this decode step with them.
        # `searched=False`: one blocking (8x8 blocks fitted to the grid) instead of the
        # blocking search's choice.
        options = CompileOptions(
            grid=grid,
            substitute=False,
            tile_sizes=None if searched else (8, 8),
            fit_tiles=not searched,
        )
        compile_module(make_context(), rewritten, options)
    rng = np.random.default_rng(seed)
    seq: int = sz.seq
    start = int(rng.integers(1, seq - steps))
    shape = (1, sz.kv_heads, sz.seq - 1, sz.head_dim)
    pasts: dict[str, np.ndarray[Any, Any]] = {}
    wafer = WaferState()
    host: dict[str, np.ndarray[Any, Any]] = {}
    for layer in range(sz.layers):
        for part in ("key", "value"):
            rows = rng.standard_normal(shape).astype(np.float32)
            rows[:, :, start:] = 0.0
            pasts[f"past_key_values.{layer}.{part}"] = rows
            # The buffer holds the same rows and garbage beyond them: it must be masked.
            buffer = rng.standard_normal((1, sz.kv_heads, sz.seq, sz.head_dim))
            buffer = buffer.astype(np.float32) * 100
            buffer[:, :, :start] = rows[:, :, :start]
            if poison:
                buffer[:, :, start] = np.inf
            host[f"present.{layer}.{part}"] = buffer
    fn = select_entry(rewritten, None)
    if grid is not None:
        # Put the buffers on the wafer by one run that stores them (as a prefill would).
        for name, value in host.items():
            wafer.keep(name, Resident(value.shape, grid, value, None))
    for step in range(steps):
        vocab: int = sz.vocab
        token = int(rng.integers(0, vocab))
        pos = start + step
        want = host_cache_step(original, token, pos, pasts, sz.seq)
        feeds = {
            "input_ids": np.asarray([[token]], np.int64),
            "position_ids": np.asarray([[pos]], np.int64),
        }
        states = state_args(fn)
        if isinstance(fn, func.FuncOp):
            args = [
                host[s] if s is not None else feeds[n]
                for n, s in zip(arg_names(fn), states, strict=True)
            ]
            outs = run_function(rewritten, fn, args)
            for value, s in zip(outs, state_results(fn), strict=True):
                if s is not None:
                    host[s] = value
            tol = 1e-5
        else:
            args = [
                feeds[n] for n, s in zip(arg_names(fn), states, strict=True) if s is None
            ]
            outs, report = run_entry(rewritten, fn, args, state=wafer)
            assert report is not None
            # The position in (8 B); the rows the host looks up and streams in (the
            # token's embedding, the position's cos and sin rows); the logits out; no
            # cache.
            assert report.host_in_bytes == 8
            assert report.host_lookup_bytes == (sz.dim + 2 * (sz.dim // sz.heads)) * 4
            assert report.host_out_bytes == sz.vocab * 4
            assert (
                report.resident_bytes
                == 2 * sz.layers * sz.kv_heads * sz.seq * sz.head_dim * 4
            )
            host = {s: wafer.tensor(s) for s in wafer.values}
            tol = 1e-3
        np.testing.assert_allclose(outs[0], want, atol=tol, rtol=tol)
        for name, past in pasts.items():
            buffer = host[name.replace("past_key_values", "present")]
            np.testing.assert_allclose(
                buffer[:, :, : pos + 1], past[:, :, : pos + 1], atol=tol
            )


def test_rewritten_step_equals_the_export_at_graph_level():
    for seed in range(3):
        _differential(None, steps=4, seed=seed)
        _differential(None, steps=4, seed=seed, poison=True)


@pytest.mark.parametrize(
    "grid,searched",
    [
        # The blocking the search chooses, on one grid; on the others, where the state's
        # placement over the grid is what varies, one blocking.
        pytest.param((2, 2), False, id="2x2-one-blocking"),
        pytest.param((3, 3), False, id="3x3-one-blocking"),
        pytest.param((2, 4), True, id="2x4-searched"),
    ],
)
def test_rewritten_step_compiled_equals_the_export(grid: tuple[int, int], searched: bool):
    _differential(grid, steps=3, seed=7, poison=True, searched=searched)


def _errors(model: onnx.ModelProto, pairs: list[StatePair] | None, **kw: Any) -> str:
    with pytest.raises(PlmrError) as info:
        kv_state(import_onnx(model), pairs, **kw)
    return str(info.value)


def test_bad_pairs_are_one_error():
    model = _decode_model(SMALL)
    assert "is not Concat('past_key_values.0.key', new row)" in _errors(
        model, [StatePair("past_key_values.0.key", "present.0.value")]
    )
    assert "'logits' is not Concat" in _errors(
        model, [StatePair("past_key_values.0.key", "logits")]
    )
    assert "'past.k' is not an input" in _errors(
        model, [StatePair("past.k", "present.0.key")]
    )
    assert "names neither an input nor an output" in _errors(model, [StatePair("a", "b")])
    assert "capacity 64 differs from the export's 16 cache rows" in _errors(
        model, None, capacity=64
    )
    assert "has no input 'pos'" in _errors(model, None, position="pos")
    assert "has no input 'mask'" in _errors(model, None, mask="mask")
