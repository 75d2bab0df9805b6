"""Shared by the neptune-fuse tests: a graph program fused at the loop level."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import parse_module
from plmr.dialects.loop import NestOp
from plmr.lowering.graph_to_loop import ConvertGraphToLoopPass
from plmr.passes.neptune.fuse import NeptuneFusePass
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import random_inputs, select_function


@dataclass
class Fused:
    """The fused module, its top-level nests, and the inputs and results of the graph."""

    module: ModuleOp
    nests: list[NestOp]
    args: list[Any]
    want: list[Any]

    def results(self) -> list[Any]:
        """The fused module's results on the same inputs."""
        return evaluate_function(self.module, "main", self.args)

    def assert_matches(self) -> None:
        """
        The fused module's results equal the graph's (relative 1e-4, absolute 1e-5 of
        the largest value)."""
        for g, w in zip(self.results(), self.want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * float(np.abs(w).max()))


@pytest.fixture
def fuse() -> Callable[..., Fused]:
    """`fuse(text, seed=0, strategy="auto")`: lower `@main` to loops and fuse it."""

    def run(text: str, seed: int = 0, strategy: str = "auto") -> Fused:
        module = parse_module(text)
        args = random_inputs(select_function(module, None), seed)
        want = evaluate_function(module, "main", args)
        ConvertGraphToLoopPass().apply(Context(), module)
        NeptuneFusePass(strategy=strategy, remarks=False).apply(Context(), module)
        module.verify()
        fn = select_function(module, None)
        nests = [op for op in fn.body.block.ops if isinstance(op, NestOp)]
        return Fused(module, nests, args, want)

    return run
