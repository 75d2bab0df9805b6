"""
Text generation on the modelled wafer: a model's prefill and decode-step programs are
compiled by `plmr compile` (graph passes, fusion, blocking, 2D partitioning, routing) and
run by the mesh runtime, in functional mode (real numbers) or timing mode (shapes only).

The KV cache is the host's `KVCache`: each decode step reads the cache (masked beyond
its valid length) and returns the new K/V rows, which are stored after the valid ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from plmr.errors import PlmrError
from plmr.models.llama import (
    F32,
    KVCache,
    LlamaConfig,
    ProgramBuilder,
    cache_mask,
    causal_mask,
    rope_tables,
)
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.interpreter import run_mesh
from plmr.tools.loading import make_context, parse_module


@dataclass
class StepReport:
    """The runtime's figures for one program run."""

    kind: str
    """`prefill` or `decode`."""
    cycles: float
    seconds: float
    max_sram_bytes: int
    max_routes: int


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
    ):
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

    def _split(self, outs: Sequence[Any]) -> tuple[F32, list[list[F32]], list[list[F32]]]:
        c = self.c
        g = c.n_kv_heads
        ks = [[outs[1 + 2 * (lay * g + h)] for h in range(g)] for lay in range(c.n_layers)]
        vs = [[outs[2 + 2 * (lay * g + h)] for h in range(g)] for lay in range(c.n_layers)]
        return outs[0], ks, vs

    @staticmethod
    def _report(kind: str, report: Any) -> StepReport:
        return StepReport(
            kind,
            float(report.cycles),
            float(report.seconds),
            int(report.max_sram_bytes),
            int(report.max_routes),
        )

    def generate(self, prompt: Sequence[int], steps: int) -> Generation:
        """Greedy decoding, functional mode: the prompt, then `steps` tokens."""
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
        x = self.w["embed"][np.asarray(prompt)]
        cos, sin = rope_tables(c, range(len(prompt)))
        outs, report = run_mesh(
            self.prefill, [x, causal_mask(len(prompt)), cos, sin], mode="functional"
        )
        result = Generation([], [self._report("prefill", report)])
        logits, ks, vs = self._split(outs)
        cache.store(ks, vs)
        for _ in range(steps):
            token = int(np.argmax(logits[0]))
            result.tokens.append(token)
            cos, sin = rope_tables(c, [cache.length])
            args: list[Any] = [
                self.w["embed"][[token]],
                cache_mask(c, cache.length),
                cos,
                sin,
            ]
            for layer in range(c.n_layers):
                for g in range(c.n_kv_heads):
                    args += [cache.k[layer][g], cache.v[layer][g]]
            outs, report = run_mesh(self.decode, args, mode="functional")
            result.steps.append(self._report("decode", report))
            logits, ks, vs = self._split(outs)
            cache.store(ks, vs)
        return result


__all__ = ["Generation", "MeshLlama", "StepReport"]
