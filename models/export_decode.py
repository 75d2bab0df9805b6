"""
Greedy generation with a user's decoder exports (a prefill and a decode step, ONNX or
graph-level `.mlir`), their KV caches kept on the wafer (`graph-kv-state`).

Both programs are rewritten by `graph-kv-state` (the decode step first; its cache length
is the capacity the prefill's caches are grown to), then compiled by `plmr compile` for
a grid, or kept at the graph level (`options = None`: the reference semantics, the state
kept by the host). The prefill runs on the prompt; every decode step feeds the last
argmax as `input_ids` and its position as `position_ids`. The caches never cross the
host link: they are `WaferState` between the runs, and each step's report counts the
bytes that did (the token and position in, the logits out).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects import mesh
from plmr.dialects.context import make_context
from plmr.dialects.graph import static_shape
from plmr.errors import PlmrError
from plmr.passes.kv_state import POSITION, StatePair, kv_state
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.report import Report
from plmr.runtime.running import run_entry, run_function, select_entry
from plmr.runtime.state import WaferState
from plmr.target.interface import arg_names, result_names, state_args, state_results
from plmr.values import Array, tensor_dtype

IDS = "input_ids"
LOGITS = "logits"

Compiler = Callable[[Context, ModuleOp, CompileOptions], ModuleOp]
"""Compiles a module in place for options (`compile_module`, or a cache of its results)."""


def host_cache_step(
    module: ModuleOp, token: int, pos: int, pasts: dict[str, Array], rows: int
) -> Array:
    """
    One step of a decode export as written, its caches held by the host: `pasts` maps
    each `past_key_values.N.key|value` input to its `[1, Hkv, rows - 1, hd]` cache,
    valid rows first. Feeds `token` at position `pos` with the export's mask (the `pos`
    cached rows and the new one), writes each `present` output's new row into row
    `pos` of its past, and returns the logits. The reference a step with the caches
    kept on the wafer (`graph-kv-state`) is checked against.
    """
    fn = select_entry(module, None)
    if not isinstance(fn, func.FuncOp):
        raise PlmrError(
            "a host-held decode step runs a graph-level function, not a mesh program"
        )
    mask = np.zeros((1, rows), np.int64)
    mask[0, :pos] = 1
    mask[0, -1] = 1
    feeds: dict[str, Array] = {
        IDS: np.asarray([[token]], np.int64),
        POSITION: np.asarray([[pos]], np.int64),
        "attention_mask": mask,
        **pasts,
    }
    outs = run_function(module, fn, [feeds[n] for n in arg_names(fn)])
    for name, value in zip(result_names(fn), outs, strict=True):
        if name.startswith("present"):
            pasts[name.replace("present", "past_key_values")][:, :, pos] = value[:, :, -1]
    return outs[0]


@dataclass
class StepFigures:
    """One program run: which, the token it chose, and the runtime's report (if on a wafer)."""

    kind: str
    token: int
    report: Report | None = None


@dataclass
class ExportGeneration:
    prompt: list[int]
    tokens: list[int] = field(default_factory=lambda: [])
    steps: list[StepFigures] = field(default_factory=lambda: [])


def _entry(module: ModuleOp) -> func.FuncOp | mesh.ProgramOp:
    return select_entry(module, None)


class ExportDecoder:
    """A user's prefill and decode-step programs with their caches as wafer state."""

    def __init__(
        self,
        prefill: ModuleOp,
        decode: ModuleOp,
        pairs: list[StatePair] | None = None,
        options: CompileOptions | None = None,
        position: str = POSITION,
        mask: str = "attention_mask",
        compiler: Compiler = compile_module,
    ):
        self.position = position
        self.mask = mask
        if not kv_state(decode, pairs, 0, position, mask):
            raise PlmrError(
                "the decode program has no KV cache pair (past_key_values.N.key -> "
                "present.N.key, ...); name them with --state IN=OUT"
            )
        fn = _entry(decode)
        states = state_args(fn)
        held = [i for i, s in enumerate(states) if s is not None]
        self.capacity = static_shape(fn.body.block.args[held[0]], "cache")[-2]
        if not kv_state(prefill, pairs, self.capacity, position, mask):
            raise PlmrError(
                "the prefill program returns no KV cache (present.N.key, ...); name its "
                "outputs with --state IN=OUT"
            )
        self.prompt_len = self._ids_length(_entry(prefill))
        names = {s for s in state_results(_entry(prefill)) if s}
        missing = sorted({s for s in states if s} - names)
        if missing:
            raise PlmrError(
                f"the decode step reads cache '{missing[0]}', which the prefill does not "
                "return; export both with the same cache names"
            )
        if options is not None:
            compiler(make_context(), prefill, options)
            compiler(make_context(), decode, options)
        self.prefill, self.decode = prefill, decode
        self.on_wafer = options is not None

    def _ids_length(self, fn: func.FuncOp | mesh.ProgramOp) -> int:
        names = arg_names(fn)
        if IDS not in names:
            raise PlmrError(
                f"the prefill has no input '{IDS}' (inputs: {', '.join(names)})"
            )
        return int(np.prod(static_shape(fn.body.block.args[names.index(IDS)], IDS)))

    def _feeds(
        self, fn: func.FuncOp | mesh.ProgramOp, values: dict[str, Array]
    ) -> list[Array]:
        """The program's host inputs by name, in the dtypes and shapes it declares."""
        out: list[Array] = []
        states = state_args(fn)
        for name, arg, state in zip(arg_names(fn), fn.body.block.args, states, strict=True):
            if state is not None:
                continue
            if name not in values:
                raise PlmrError(
                    f"@{fn.sym_name.data} has an input '{name}' that generation does not "
                    f"feed (it feeds {', '.join(values)}); a decoder export takes "
                    f"{IDS}, {self.position} and {self.mask}"
                )
            dtype = np.dtype(tensor_dtype(arg.type))
            out.append(np.asarray(values[name], dtype).reshape(static_shape(arg, name)))
        return out

    def _run(
        self,
        module: ModuleOp,
        values: dict[str, Array],
        state: WaferState,
        host: dict[str, Array],
    ) -> tuple[Array, Report | None]:
        fn = _entry(module)
        feeds = self._feeds(fn, values)
        names = result_names(fn)
        if LOGITS not in names:
            raise PlmrError(f"@{fn.sym_name.data} has no output '{LOGITS}'")
        if isinstance(fn, mesh.ProgramOp):
            outs, report = run_entry(module, fn, feeds, state=state)
        else:
            args: list[Array] = []
            it = iter(feeds)
            for arg, s in zip(fn.body.block.args, state_args(fn), strict=True):
                if s is None:
                    args.append(next(it))
                else:
                    shape = static_shape(arg, s)
                    zeros = np.zeros(shape, np.dtype(tensor_dtype(arg.type)))
                    args.append(host.get(s, zeros))
            outs, report = run_function(module, fn, args), None
            for value, s in zip(outs, state_results(fn), strict=True):
                if s is not None:
                    host[s] = value
        return np.asarray(outs[names.index(LOGITS)]), report

    def generate(self, prompt: Sequence[int], steps: int) -> ExportGeneration:
        """The prefill's token, then `steps` decode steps' tokens (greedy)."""
        if len(prompt) != self.prompt_len:
            raise PlmrError(
                f"the prefill takes prompts of {self.prompt_len} tokens, got {len(prompt)}"
            )
        if steps < 0 or len(prompt) + steps > self.capacity:
            raise PlmrError(
                f"{len(prompt)} prompt tokens and {steps} steps exceed the cache of "
                f"{self.capacity} rows (the decode export's length)"
            )
        state = WaferState()
        host: dict[str, Array] = {}
        n = len(prompt)
        values: dict[str, Any] = {
            IDS: np.asarray(prompt),
            self.position: np.arange(n),
            self.mask: np.ones(n),
        }
        logits, report = self._run(self.prefill, values, state, host)
        result = ExportGeneration(list(prompt))
        token = int(np.argmax(logits.reshape(n, -1)[-1]))
        result.tokens.append(token)
        result.steps.append(StepFigures("prefill", token, report))
        for step in range(steps):
            values = {IDS: np.asarray([token]), self.position: np.asarray([n + step])}
            logits, report = self._run(self.decode, values, state, host)
            token = int(np.argmax(logits.reshape(-1)))
            result.tokens.append(token)
            result.steps.append(StepFigures("decode", token, report))
        return result


__all__ = ["ExportDecoder", "ExportGeneration", "StepFigures"]
