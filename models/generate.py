"""
Text generation on the modelled wafer: a model's prefill and decode-step programs are
compiled by `plmr compile` (graph passes, fusion, blocking, 2D partitioning, routing) and
run by the mesh runtime, in functional mode (real numbers) or timing mode (shapes only).

Each decode step reads the KV cache of every layer (`[n_kv_heads, max_seq, head_dim]`,
positions outside the valid ones masked) and returns the new K/V rows. Where they go:

- `kv = "host"`: the host stores them after the valid rows (`KVCache`);
- `kv = "shift"`: WaferLLM's shift-based cache on the wafer - the cache is distributed
  over the P rows of PEs and every new row is appended by the `kv_append` mesh program
  (each PE row passes its oldest entry one row up, 1 hop, all rows at once; the new entry
  enters the bottom row), so the valid entries are the cache's last rows;
- `kv = "concat"`: the baseline that appends in the bottom row only, which is full after
  `max_seq / P` tokens.

Attention does not depend on the order of the cached entries (RoPE is applied before
caching), so all three give the same tokens while the cache has room.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from plmr.dialects.context import make_context, parse_module
from plmr.errors import PlmrError
from plmr.models.llama import (
    F32,
    NEG,
    KVCache,
    LlamaConfig,
    ProgramBuilder,
    cache_mask,
    cache_slot,
    causal_mask,
    decode_cache_args,
    rope_tables,
    split_kv_rows,
)
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.mesh_machine import run_mesh


@dataclass
class StepReport:
    """The runtime's figures for one program run."""

    kind: str
    """`prefill` or `decode`."""
    cycles: float
    seconds: float
    max_sram_bytes: int
    max_routes: int
    compute_cycles: float = 0.0
    comm_cycles: float = 0.0
    """Exposed communication of the critical PE."""
    idle_cycles: float = 0.0
    kv_cycles: float = 0.0
    """The wafer's KV-cache appends after the step (one layer after another)."""


@dataclass
class Generation:
    tokens: list[int]
    steps: list[StepReport] = field(default_factory=lambda: [])


class MeshLlama:
    """A model compiled for a grid: its prefill (for `prompt_len` tokens) and decode step."""

    def __init__(
        self,
        config: LlamaConfig,
        weights: dict[str, F32],
        prompt_len: int,
        options: CompileOptions,
        kv: str = "host",
    ):
        if kv not in ("host", "shift", "concat"):
            raise PlmrError(f"unknown KV-cache placement '{kv}' (host, shift, concat)")
        if not 0 < prompt_len < config.max_seq:
            raise PlmrError(
                f"the prompt must have 1 to {config.max_seq - 1} tokens, got {prompt_len}"
            )
        self.c = config
        self.w = weights
        self.prompt_len = prompt_len
        builder = ProgramBuilder(config, weights)
        self.prefill = compile_module(
            make_context(), parse_module(builder.prefill(prompt_len)), options
        )
        self.decode = compile_module(
            make_context(), parse_module(builder.decode()), options
        )
        self.kv = kv
        self.append: Any = None
        self.per_row = config.max_seq
        if kv != "host":
            from plmr.lowering.kv_cache import kv_append

            rows = options.grid[0]
            if config.max_seq % rows:
                raise PlmrError(
                    f"the KV cache of {config.max_seq} tokens must split evenly over the "
                    f"{rows} rows of PEs"
                )
            self.per_row = config.max_seq // rows
            self.append = kv_append(
                options.grid, self.per_row, config.head_dim, options.device, kv
            ).module

    def _split(self, outs: Sequence[Any]) -> tuple[F32, list[list[F32]], list[list[F32]]]:
        """logits, then per layer and KV head: K and V."""
        ks, vs = split_kv_rows(list(outs[1:]), self.c)
        return outs[0], ks, vs

    def _recorded(
        self, args: Sequence[Any], trace: Path | None, heatmap: Path | None
    ) -> tuple[list[Any], Any]:
        from plmr.dialects import mesh
        from plmr.runtime.running import run_entry

        program = next(op for op in self.decode.ops if isinstance(op, mesh.ProgramOp))
        outs, report = run_entry(
            self.decode, program, args, trace_path=trace, heatmap_path=heatmap
        )
        return outs, report

    @staticmethod
    def _report(kind: str, report: Any) -> StepReport:
        return StepReport(
            kind,
            float(report.cycles),
            float(report.seconds),
            int(report.max_sram_bytes),
            int(report.max_routes),
            float(report.compute_cycles),
            float(report.comm_cycles),
            float(report.idle_cycles),
        )

    def generate(
        self,
        prompt: Sequence[int],
        steps: int,
        trace: Path | None = None,
        heatmap: Path | None = None,
    ) -> Generation:
        """
        Greedy decoding, functional mode: the prompt, then `steps` tokens. `trace` and
        `heatmap` record the first decode step (a Chrome trace, a per-PE PNG).
        """
        c = self.c
        if len(prompt) != self.prompt_len:
            raise PlmrError(
                f"compiled for prompts of {self.prompt_len} tokens, got {len(prompt)}"
            )
        if len(prompt) + steps > c.max_seq:
            raise PlmrError(
                f"{len(prompt)} + {steps} tokens exceed the KV cache of {c.max_seq}"
            )
        cache = KVCache.empty(c)
        wafer = _WaferCache(self, c) if self.kv != "host" else None
        x = self.w["embed"][np.asarray(prompt)]
        cos, sin = rope_tables(c, range(len(prompt)))
        outs, report = run_mesh(
            self.prefill, [x, causal_mask(len(prompt)), cos, sin], mode="functional"
        )
        result = Generation([], [self._report("prefill", report)])
        logits, ks, vs = self._split(outs)
        if wafer is None:
            cache.store(ks, vs)
        else:
            result.steps[-1].kv_cycles = wafer.store(ks, vs)
        for _ in range(steps):
            token = int(np.argmax(logits[0]))
            result.tokens.append(token)
            length = cache.length if wafer is None else wafer.length
            cos, sin = rope_tables(c, [length])
            # The new token's K and V take the free slot next to the valid entries.
            if wafer is None:
                mask, slot = cache_mask(c, length + 1), cache_slot(c, length)
            else:
                mask, slot = wafer.mask(), wafer.slot()
            args: list[Any] = [self.w["embed"][[token]], mask, slot, cos, sin]
            held = cache if wafer is None else KVCache(wafer.k, wafer.v, wafer.length)
            args += decode_cache_args(held, c)
            if not result.tokens[:-1] and (trace is not None or heatmap is not None):
                outs, report = self._recorded(args, trace, heatmap)
            else:
                outs, report = run_mesh(self.decode, args, mode="functional")
            result.steps.append(self._report("decode", report))
            logits, ks, vs = self._split(outs)
            if wafer is None:
                cache.store(ks, vs)
            else:
                result.steps[-1].kv_cycles = wafer.store(ks, vs)
        return result


class _WaferCache:
    """The KV caches kept by the wafer's append program (shift or concat)."""

    def __init__(self, model: MeshLlama, config: LlamaConfig):
        self.model = model
        self.c = config
        empty = KVCache.empty(config)
        self.k, self.v = empty.k, empty.v
        self.length = 0
        self.capacity = config.max_seq if model.kv == "shift" else model.per_row

    def kv(self, layer: int, g: int) -> tuple[F32, F32]:
        return self.k[layer][g], self.v[layer][g]

    def mask(self) -> F32:
        """
        The valid entries are the cache's last `length` rows; the new token's slot
        is the row before them."""
        m = np.full((1, self.c.max_seq), NEG, np.float32)
        m[0, -(self.length + 1) :] = 0.0
        return m

    def slot(self) -> F32:
        """The new token's slot: the free row just before the valid entries."""
        return cache_slot(self.c, self.c.max_seq - self.length - 1)

    def store(self, k_rows: list[list[F32]], v_rows: list[list[F32]]) -> float:
        """Appends the rows one token at a time; returns the cycles of one token's appends."""
        n = k_rows[0][0].shape[0]
        if self.length + n > self.capacity:
            where = (
                "the whole grid" if self.model.kv == "shift" else "the bottom row of PEs"
            )
            raise PlmrError(
                f"the {self.model.kv} KV cache is full: {where} holds {self.capacity} "
                f"tokens and {self.length + n} are needed"
            )
        cycles = 0.0
        for i in range(n):
            for layer in range(self.c.n_layers):
                for g in range(self.c.n_kv_heads):
                    for rows, cache in ((k_rows, self.k), (v_rows, self.v)):
                        out, report = run_mesh(
                            self.model.append,
                            [cache[layer][g], rows[layer][g][i : i + 1]],
                            mode="functional",
                        )
                        cache[layer][g] = out[0]
                        # K and V and the heads of a layer append at once; layers in turn.
                        if g == 0 and rows is k_rows:
                            cycles += float(report.cycles)
            self.length += 1
        return cycles / n


__all__ = ["Generation", "MeshLlama", "StepReport"]
