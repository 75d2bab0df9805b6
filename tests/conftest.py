"""Shared by tests in several areas."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from plmr.models.llama import (
    KVCache,
    LlamaConfig,
    NumpyLlama,
    cache_mask,
    cache_slot,
    decode_cache_args,
    random_weights,
    rope_tables,
    split_kv_rows,
)
from plmr.models.llama_onnx import LlamaOnnxConfig
from plmr.passes.pipeline import CompileOptions, compile_module

PROMPT = [3, 1, 4, 1, 5]


@dataclass
class DecodeCase:
    """A heads-form decode step of `token` after `PROMPT`, and numpy's answer."""

    config: LlamaConfig
    weights: dict[str, np.ndarray]
    args: list[np.ndarray]
    """x, mask, slot, cos, sin and the caches: the decode program's inputs."""
    logits: np.ndarray
    k_rows: list[list[np.ndarray]]

    def check(self, got: list[np.ndarray], kv_heads: list[int]) -> None:
        """`got` (the program's results) equals numpy's logits and new K rows."""
        np.testing.assert_allclose(got[0], self.logits, rtol=1e-4, atol=1e-4)
        k = split_kv_rows(got[1:], self.config)[0][0]
        for g in kv_heads:
            np.testing.assert_allclose(k[g], self.k_rows[0][g], rtol=1e-4, atol=1e-5)


@pytest.fixture
def decode_case() -> Callable[[LlamaConfig], DecodeCase]:
    """`decode_case(config)`: random weights (seed 1), the prompt cached, token 2."""

    def make(config: LlamaConfig) -> DecodeCase:
        weights = random_weights(config, 1)
        model = NumpyLlama(config, weights)
        x = weights["embed"][np.asarray(PROMPT)]
        _, ks, vs = model.forward(x, range(len(PROMPT)), KVCache.empty(config))
        cache = KVCache.empty(config)
        cache.store(ks, vs)
        cos, sin = rope_tables(config, [len(PROMPT)])
        row = weights["embed"][[2]]
        n = len(PROMPT)
        args = [row, cache_mask(config, n + 1), cache_slot(config, n), cos, sin]
        args += decode_cache_args(cache, config)
        logits, k_new, _ = model.forward(row, [n], cache)
        return DecodeCase(config, weights, args, logits, k_new)

    return make


class CompileCache:
    """
    `compile_module` once per program and options in a test session: a program compiled
    again (the same text, the same options) is a copy of the first result, given back in
    place as `compile_module` does.
    """

    def __init__(self) -> None:
        self.done: dict[tuple[str, CompileOptions], ModuleOp] = {}
        self.hits = 0

    def compile(self, ctx: Context, module: ModuleOp, options: CompileOptions) -> ModuleOp:
        """`compile_module(ctx, module, options)`, or a copy of its earlier result."""
        key = (str(module), options)
        if key not in self.done:
            self.done[key] = compile_module(ctx, module, options).clone()
            return module
        self.hits += 1
        compiled = self.done[key].clone()
        module.attributes = dict(compiled.attributes)
        module.properties = dict(compiled.properties)
        block = module.body.block
        for op in list(block.ops):
            op.detach()
            op.erase(safe_erase=False)
        for op in list(compiled.body.block.ops):
            op.detach()
            block.add_op(op)
        return module


_COMPILE_CACHE = CompileCache()


@pytest.fixture
def decode_step_config() -> LlamaOnnxConfig:
    """A generated decode export's shape: width 32, 4/2 heads, 7 cached rows, positions in."""
    return LlamaOnnxConfig(
        hidden=32,
        heads=4,
        kv_heads=2,
        ffn=48,
        vocab=40,
        seq=1,
        past=7,
        position_inputs=True,
    )


@pytest.fixture(scope="session")
def compile_cache() -> CompileCache:
    """The session's `CompileCache`."""
    return _COMPILE_CACHE


@pytest.fixture(scope="module")
def cached_bench_compiles(compile_cache: CompileCache) -> Iterator[None]:
    """
    `plmr bench` (`models/bench_programs.py`) compiles through the session's `CompileCache` in
    a module: its tests bench the same tiny programs many times over, and what they
    check is the bench's counts and timings of a compiled program, not its compile.
    """
    from plmr.models import bench_programs

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bench_programs, "compile_module", compile_cache.compile)
        yield


HEAVY_FILES = (
    "tests/test_lint.py",  # pyright over the package
    "tests/schedule/test_executors.py",  # a process pool and Ray
    "tests/models/test_llama.py",
    "tests/examples/test_hf_exports.py",
    "tests/lowering/test_tile_to_mesh_views.py",
    "tests/lowering/test_tile_to_mesh_bands.py",
    "tests/frontend/onnx/test_backend.py",
    "tests/validate/fuzz/test_run.py",
    "tests/tools/test_compile_state.py",
    "tests/examples/test_hf_generate.py",
    "tests/models/test_bench.py",
    "tests/lowering/test_tile_to_mesh_memo.py",
    "tests/passes/test_mesh_pack.py",
    "tests/lowering/test_tile_to_mesh_cost.py",
    "tests/tools/test_bench.py",
    "tests/tools/test_bench_partition.py",
    "tests/validate/test_compile_check.py",
    "tests/passes/taso/test_region.py",
    "tests/models/test_demo.py",
    "tests/schedule/test_tuner_evolutionary.py",
    "tests/passes/test_kv_state.py",
    "tests/passes/taso/eqsat/test_engine.py",
)
"""
The files of the longest run, longest first: `pytest -n 2 --dist loadfile` hands them out
before the rest. xdist orders files by their number of tests, which put these (few tests,
each long) last, where one of them ran on one worker while the other had nothing left.
"""


SHARED_COMPILES = (
    ("tests/runtime/test_steady.py", "tests/target/test_sram.py"),
    ("tests/models/test_bench.py", "tests/tools/test_bench.py"),
)
"""
Files whose programs come from the session's `CompileCache` compiled alike: each group
runs on one worker, where the second file finds the first one's compiles.
"""


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """
    `--dist loadfile` with `HEAVY_FILES` first and each group of `SHARED_COMPILES` on one
    worker; the other modes as xdist has them.
    """
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class HeavyFilesFirst(LoadFileScheduling):
        ordered = False

        def _assign_work_unit(self, node: Any) -> None:
            if not self.ordered:
                self.ordered = True
                for scope in reversed(HEAVY_FILES):
                    if scope in self.workqueue:
                        self.workqueue.move_to_end(scope, last=False)
            scope = next(iter(self.workqueue))
            super()._assign_work_unit(node)
            for group in SHARED_COMPILES:
                if scope in group:
                    for other in group:
                        if other in self.workqueue:
                            self.workqueue.move_to_end(other, last=False)
                            super()._assign_work_unit(node)

    return HeavyFilesFirst(config, log)
