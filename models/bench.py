"""
LLM inference figures on the modelled wafer (`plmr bench decode|prefill`).

A model's layers all have the same shapes, so two programs are compiled by
`plmr compile` and simulated (timing mode: shapes only, any size): the model cut to one
layer and to two layers, both with the LM head. Their difference is one layer in the
steady state, including the change of layout between layers, and the step is assembled
from them:

- **decode** (one token over a KV cache of `tokens` positions):
  `T(1) + (n_layers - 1) · (T(2) - T(1)) + n_layers · KV append + Σ hops`;
- **prefill** (a prompt of `tokens` tokens): the same without the KV append.

For a two-layer model (`tiny`) `T(2)` is the whole model. The KV append is WaferLLM's
shift program (`lowering/kv_cache.kv_append`) for one token's K and V of a layer.

**Pipeline stages** come from the KV-cache capacity model (`kv_capacity`): when the
weights of all layers, the workspace and the cache do not fit the SRAM of one P×Q grid,
the layers are split over several P×Q regions and the activations pass from one region
to the next. `plmr.models.wafers` places the regions on the wafers of the device (rows
and columns of regions per wafer, more wafers when one is full, or a refusal when the
system's `wafers` are too few) and costs each hop from the placement: on a wafer the
distance between neighbouring regions and the activations over the links of their
boundary, between wafers the system's link (latency and bandwidth). One sequence goes
through the stages one after another, so stages add a hop each but no compute; the step
is summed per wafer (`WaferStep`).

The model (width, FFN, vocabulary, tokens) is padded to a multiple of lcm(P, Q), as
WaferLLM pads to the grid, and the blocks are fitted to the grid. A model is a preset
(`--model`) or a Hugging Face `config.json` (`--config`, `models/hf_config.py`).

What a layer is made of: `spmds_per_layer` and `allreduces_per_layer` count the
`mesh.spmd` nests and `mesh.allreduce` ops of the two-layer program minus the one-layer
program's, and `layer_nests` lists the nests of the steady-state layer with their
critical-path cycles (`models/nests.py`). Next to the compiled layer, the hand-composed
layer (`models/reference_layer.py`: the same GEMVs / GEMMs, attention and norms built
from the kernel library and simulated) and the compute floor say how far it is from the
physical reference.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from plmr.dialects import mesh
from plmr.errors import PlmrError
from plmr.models.bench_options import (
    bench_config,
    default_options,
    default_tokens,
    grid_block,
    resolve_model,
)
from plmr.models.bench_programs import (
    Compiled,
    LayerTimer,
    Timed,
    WholeModel,
    compile_program,
    runtime_options,
    simulate_compiled,
    simulate_whole_model,
    timed,
)
from plmr.models.floor import LayerFloor, layer_floor
from plmr.models.llama import LlamaConfig, ProgramBuilder
from plmr.models.nests import (
    NestTime,
    layer_window,
    nest_name,
)
from plmr.models.reference_layer import (
    ReferenceLayer,
    compute_floor,
    hand_composed_layer,
    layer_macs,
)
from plmr.models.wafers import Hop, Placement, WaferStep, hops, place_stages, wafer_step
from plmr.passes.pipeline import CompileOptions
from plmr.target.device import get_device

KINDS = ("decode", "prefill")

WAFERLLM: dict[str, dict[str, Any]] = {
    "decode": {
        "model": "llama3-8b",
        "device": "wse2",
        "grid": (420, 420),
        "tokens_per_second": 2700.0,
        "cycles_per_layer": 12700.0,
        "source": "WaferLLM (OSDI'25) on a real WSE-2",
    },
    "prefill": {
        "model": "llama3-8b",
        "device": "wse2",
        "grid": (480, 480),
        "prompt": 4096,
        "tokens_per_second": 20321.0,
        "source": "WaferLLM (OSDI'25) on a real WSE-2",
    },
}
"""The published figures the benchmark table sets ours against."""


@dataclass
class LlmBench:
    """One `plmr bench decode|prefill` result."""

    kind: str
    model: str
    device: str
    grid: tuple[int, int]
    tokens: int
    """decode: the KV cache's length (context); prefill: the prompt's length."""
    padded: dict[str, int]
    """The sizes compiled (dim, ffn_dim, vocab, tokens; `padded`: 1 if padded)."""
    n_layers: int
    layer_cycles: float
    first_cycles: float
    """The one-layer program: the first layer (its input placed by the host) and the head."""
    kv_append_cycles: float
    stages: int
    layers_per_stage: int
    stage_hop_cycles: float
    """All hops between stages: on the wafers and over the links between wafers."""
    step_cycles: float
    """decode: one output token; prefill: the whole prompt."""
    step_seconds: float
    tokens_per_second: float
    layer_compute_fraction: float
    layer_comm_fraction: float
    sram_bytes_per_core: int
    """Peak of the simulated programs (a layer's weights, cache share, buffers, head)."""
    model_sram_bytes_per_core: int
    """A whole stage per core by the capacity model: weights, workspace, full cache."""
    sram_capacity: int
    routes_per_router: int
    route_capacity: int
    compile_seconds: float
    simulate_seconds: float
    gemm: str = "meshgemm"
    """The GEMM algorithm of the compile."""
    spmds_per_layer: int = 0
    """`mesh.spmd` nests of the two-layer program minus the one-layer program's."""
    allreduces_per_layer: int = 0
    """`mesh.allreduce` ops (in the IR) of the two-layer program minus the one-layer's."""
    layer_nests: list[NestTime] = dataclasses.field(default_factory=list[NestTime])
    """The steady-state layer's nests and their critical-path cycles."""
    hand_composed: ReferenceLayer | None = None
    """The layer composed from the kernel library (None when not asked for)."""
    exact: bool = False
    """Simulated every iteration (no steady-state extrapolation)."""
    form: str = "heads"
    """How the program is written (`ProgramBuilder`): heads as a tensor dimension, or
    one matmul per head (`per-head`)."""
    method: str = "whole"
    """`whole`: every layer simulated (the steady ones extrapolated); `layers-extrapolated`:
    `T(1) + (layers - 1) · (T(2) - T(1))` from the one- and two-layer programs."""
    model_cycles: float = 0.0
    """The model's layers and head (the step without KV appends and stage hops)."""
    simulated_layers: int = 0
    """Layers stepped by the simulation."""
    extrapolated_layers: int = 0
    """Layers extrapolated in the steady state (whole-model simulation)."""
    placement: Placement | None = None
    """The stages on the wafers (`plmr.models.wafers.place_stages`)."""
    hops: list[Hop] = dataclasses.field(default_factory=list[Hop])
    """The hops between consecutive stages."""
    wafer_step: WaferStep | None = None
    """The step's cycles per wafer, hops, links and LM head."""
    floor: LayerFloor | None = None
    """The layer's floor under the device model (`plmr.models.floor`)."""
    step_tokens: int = 1
    """decode: new tokens per step (k > 1: speculative decoding's verification step)."""

    @property
    def wafers(self) -> int:
        return 1 if self.placement is None else self.placement.wafers

    @property
    def hand_composed_cycles(self) -> float | None:
        return None if self.hand_composed is None else self.hand_composed.cycles

    @property
    def compiled_over_hand_composed(self) -> float | None:
        ref = self.hand_composed_cycles
        return self.layer_cycles / ref if ref else None

    @property
    def compiled_over_floor(self) -> float | None:
        floor = None if self.floor is None else self.floor.cycles
        return self.layer_cycles / floor if floor else None

    @property
    def tpot_ms(self) -> float:
        """Time per output token (decode) or time to first token (prefill), in ms."""
        return self.step_seconds * 1e3

    def to_json(self) -> dict[str, Any]:
        out = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name
            not in (
                "layer_nests",
                "hand_composed",
                "placement",
                "hops",
                "wafer_step",
                "floor",
            )
        }
        out["floor"] = None if self.floor is None else self.floor.to_json()
        out["compiled_over_floor"] = self.compiled_over_floor
        out["wafers"] = self.wafers
        out["placement"] = None if self.placement is None else self.placement.to_json()
        out["hops"] = [h.to_json() for h in self.hops]
        out["wafer_step"] = None if self.wafer_step is None else self.wafer_step.to_json()
        out["grid"] = list(self.grid)
        out["layer_nests"] = [n.to_json() for n in self.layer_nests]
        ref = self.hand_composed
        out["hand_composed_cycles"] = self.hand_composed_cycles
        out["compute_floor_cycles"] = None if ref is None else ref.floor_cycles
        out["compiled_over_hand_composed"] = self.compiled_over_hand_composed
        out["hand_composed"] = None if ref is None else ref.to_json()
        out["tpot_ms" if self.kind == "decode" else "ttft_ms"] = self.tpot_ms
        ref = WAFERLLM[self.kind]
        out["waferllm"] = {**ref, "grid": list(ref["grid"])}
        return out

    def summary(self) -> list[str]:
        p, q = self.grid
        new = "one token" if self.step_tokens == 1 else f"{self.step_tokens} tokens"
        what = (
            f"decode of {new} over a {self.tokens}-token KV cache"
            if self.kind == "decode"
            else f"prefill of a {self.tokens}-token prompt"
        )
        lines = [
            f"{self.model} {what} on {p}x{q} PEs of {self.device}",
            f"  compiled    dim {self.padded['dim']}, ffn {self.padded['ffn_dim']}, "
            f"vocabulary {self.padded['vocab']}, {self.padded['tokens']} tokens"
            + (" (padded to the grid)" if self.padded["padded"] else ""),
            f"  layer       {self.layer_cycles:,.0f} cycles in the steady state (compute "
            f"{self.layer_compute_fraction:.0%}, exposed communication "
            f"{self.layer_comm_fraction:.0%})",
            f"  first       {self.first_cycles:,.0f} cycles: the first layer (input from the "
            "host) and the LM head",
            self.method_line(),
            f"  nests       {self.spmds_per_layer} mesh.spmd and {self.allreduces_per_layer} "
            "mesh.allreduce per layer",
        ]
        lines += self.nest_lines()
        ref = self.hand_composed
        if ref is not None:
            lines.append(
                f"  reference   hand-composed {ref.cycles:,.0f} cycles per layer "
                f"(compiled / hand-composed {self.layer_cycles / ref.cycles:,.2f}); "
                f"compute floor {ref.floor_cycles:,.0f}"
            )
            lines += ["  " + line for line in ref.summary()[1:]]
        if self.floor is not None:
            lines += self.floor.summary(
                self.layer_cycles, {n.index: n.cycles for n in self.layer_nests}
            )
        if self.kind == "decode":
            lines.append(
                f"  KV append   {self.kv_append_cycles:,.0f} cycles per layer (shift"
                + ("" if self.step_tokens == 1 else f", {self.step_tokens} rows")
                + ")"
            )
        links = sum(1 for h in self.hops if h.kind == "link")
        lines += [
            f"  stages      {self.stages} pipeline stage(s) of {p}x{q} PEs, "
            f"{self.layers_per_stage} layers on the fullest; "
            f"{self.stage_hop_cycles:,.0f} cycles of hops between them "
            f"({links} over links between wafers)",
        ]
        if self.placement is not None:
            lines += self.placement.summary()
        if self.wafer_step is not None:
            lines += self.wafer_step.summary()
        if self.kind == "decode":
            lines.append(
                f"  per {'token' if self.step_tokens == 1 else 'step '}   "
                f"{self.step_cycles:,.0f} cycles = "
                f"{self.tpot_ms * 1e3:,.1f} us (TPOT) -> {self.tokens_per_second:,.0f} "
                "tokens/s"
                + ("" if self.step_tokens == 1 else " if every token is accepted")
            )
        else:
            lines.append(
                f"  prompt      {self.step_cycles:,.0f} cycles = {self.tpot_ms:,.3f} ms "
                f"(TTFT) -> {self.tokens_per_second:,.0f} tokens/s"
            )
        ref = WAFERLLM[self.kind]
        rg = ref["grid"]
        lines += [
            f"  SRAM        {self.sram_bytes_per_core:,} B per core in the simulated programs; "
            f"{self.model_sram_bytes_per_core:,} B for a whole stage "
            f"(of {self.sram_capacity:,} B)",
            f"  routes      {self.routes_per_router} of {self.route_capacity} colors per "
            f"router; GEMMs by {self.gemm}",
            f"  WaferLLM    {ref['tokens_per_second']:,.0f} tokens/s for {ref['model']} at "
            f"{rg[0]}x{rg[1]} ({ref['source']})",
            f"  took        compile {self.compile_seconds:.1f} s, simulate "
            f"{self.simulate_seconds:.1f} s",
        ]
        return lines

    def method_line(self) -> str:
        """How the model's layers were simulated."""
        if self.method == "whole":
            return (
                f"  simulated   all {self.n_layers} layers: {self.simulated_layers} stepped, "
                f"{self.extrapolated_layers} extrapolated in the steady state "
                f"({self.model_cycles:,.0f} cycles; --layers-extrapolated: one and two "
                "layers only)"
            )
        return (
            f"  simulated   one and two layers: T(1) + {self.n_layers - 1} x (T(2) - T(1)) "
            f"= {self.model_cycles:,.0f} cycles"
        )

    def nest_lines(self, limit: int = 12) -> list[str]:
        """The layer's nests, the slowest `limit` of them, in program order."""
        if not self.layer_nests:
            return []
        keep = sorted(self.layer_nests, key=lambda n: -n.cycles)[:limit]
        shown = sorted(keep, key=lambda n: n.index)
        total = sum(n.cycles for n in self.layer_nests)
        lines = [
            f"    by nest   {total:,.0f} cycles on the critical path over "
            f"{len(self.layer_nests)} nests"
            + (
                f" (the {len(shown)} slowest shown)"
                if len(shown) < len(self.layer_nests)
                else ""
            )
        ]
        for n in shown:
            lines.append(f"    #{n.index:<4} {n.cycles:>10,.0f}  %{n.name}: {n.what}")
        return lines


def bench_llm(
    kind: str,
    model: str | LlamaConfig,
    grid: tuple[int, int],
    device: str = "wse2",
    tokens: int | None = None,
    options: CompileOptions | None = None,
    *,
    reference: bool = True,
    exact: bool = False,
    form: str = "heads",
    layers_extrapolated: bool = False,
    step_tokens: int = 1,
) -> LlmBench:
    """
    Compiles the model cut to one and to two layers (with the LM head), simulates every
    layer of the model (`simulate_whole_model`), times the KV append and assembles a
    step. `model`: a preset's name or a config; `reference`: also compose and time the
    hand-composed layer; `exact`: no steady-state extrapolation in the runtime (every
    loop iteration and every layer stepped); `form`: how the program is written
    (`ProgramBuilder`'s forms); `layers_extrapolated`: simulate the one- and two-layer
    programs only and count `T(1) + (layers - 1) · (T(2) - T(1))`; `step_tokens`: new
    tokens per decode step (speculative decoding's verification step; k appends of a
    row, the hops carry k hidden vectors, tokens/s counts every token accepted).
    """
    from plmr.lowering.kv_cache import kv_append, kv_capacity
    from plmr.runtime.mesh_machine import run_mesh

    if kind not in KINDS:
        raise PlmrError(f"unknown LLM benchmark '{kind}' ({', '.join(KINDS)})")
    dev = get_device(device)
    p, q = grid
    if p > dev.height or q > dev.width:
        raise PlmrError(
            f"a {p}x{q} grid does not fit {dev.name} ({dev.height}x{dev.width} PEs)"
        )
    base = resolve_model(model)
    n = default_tokens(kind, base) if tokens is None else tokens
    if n < 1:
        raise PlmrError(f"the {'context' if kind == 'decode' else 'prompt'} must be >= 1")
    if step_tokens < 1 or (kind != "decode" and step_tokens != 1):
        raise PlmrError(
            f"--step-tokens {step_tokens}: a decode step takes 1 or more new tokens, "
            "a prefill takes the prompt (--tokens)"
        )
    if step_tokens > n:
        raise PlmrError(
            f"--step-tokens {step_tokens}: the new tokens' slots do not fit a "
            f"{n}-token KV cache; use a longer --tokens"
        )
    capacity = kv_capacity(base.model_config(), grid, dev, "shift")
    if kind == "decode" and capacity.max_tokens < n:
        raise PlmrError(
            f"{base.name}: a {n}-token KV cache does not fit {p}x{q} PEs of {dev.name} "
            f"(at most {capacity.max_tokens} tokens with {capacity.stages} stage(s)); use a "
            "larger grid or a shorter context"
        )
    placement = place_stages(
        capacity.stage_layers,
        grid,
        dev,
        capacity.stage_bytes_per_pe(n if kind == "decode" else 0),
        what=f"{base.name} ({kind}, {n} tokens)",
    )
    config = bench_config(base, grid, n)
    opts = options or default_options(base, grid, device, kind)
    if kind == "decode" and step_tokens > opts.decode_rows:
        # The k new tokens' queries and norms are compiled as a decode step's.
        opts = dataclasses.replace(opts, decode_rows=step_tokens)
    # One projection GEMV on large grids, where the head dimension splits over an axis.
    builder = ProgramBuilder(
        config, None, form, one_projection=grid_block(base, grid, kind) > 0
    )

    def program(layers: list[int]) -> str:
        if kind == "decode":
            return builder.decode(layers=layers, head=True, tokens=step_tokens)
        return builder.prefill(config.max_seq, layers=layers, head=True)

    compiled_one = compile_program(program([0]), opts)
    compiled_two = compile_program(program([0, 1]), opts) if base.n_layers > 1 else None
    compile_seconds = compiled_one.seconds + (compiled_two.seconds if compiled_two else 0.0)
    spmds, allreduces = compiled_one.spmds, compiled_one.allreduces
    whole: WholeModel | None = None
    method = "layers-extrapolated"
    if compiled_two is not None:
        spmds = compiled_two.spmds - compiled_one.spmds
        allreduces = compiled_two.allreduces - compiled_one.allreduces
        if not layers_extrapolated:
            whole = simulate_whole_model(
                compiled_one, compiled_two, base.n_layers, opts, dev, exact
            )
            method = "whole"
    if whole is not None:
        assert compiled_two is not None
        one = two = whole.report
        simulate_seconds = whole.seconds
        window = layer_window(compiled_one.signatures, compiled_two.signatures)
        nests = whole.nests[window.start : window.stop]
        layer_cycles = whole.layer_cycles
        model_cycles = float(whole.report.cycles)
        first_cycles = model_cycles - (base.n_layers - 1) * layer_cycles
    else:
        first = simulate_compiled(compiled_one, opts, dev, exact)
        one = two = first.report
        layer_cycles = float(one.cycles)
        nests = first.nests
        simulate_seconds = first.simulate_seconds
        if compiled_two is not None:
            second = simulate_compiled(compiled_two, opts, dev, exact)
            two = second.report
            layer_cycles = float(two.cycles) - float(one.cycles)
            window = layer_window(compiled_one.signatures, compiled_two.signatures)
            nests = second.nests[window.start : window.stop]
            simulate_seconds += second.simulate_seconds
        first_cycles = float(one.cycles)
        model_cycles = first_cycles + (base.n_layers - 1) * layer_cycles
    append_cycles = 0.0
    s3 = 0.0
    if kind == "decode":
        start = time.perf_counter()
        per_pe = math.ceil(config.max_seq / p)
        kernel = kv_append(
            grid, per_pe, 2 * config.n_kv_heads * config.head_dim, device, "shift"
        )
        zeros = [np.zeros(s, np.float32) for s in kernel.inputs]
        _, appended = run_mesh(kernel.module, zeros, device=dev, mode="timing")
        append_cycles = step_tokens * float(appended.cycles)
        s3 = time.perf_counter() - start
    hand = None
    s4 = 0.0
    if reference:
        start = time.perf_counter()
        hand = hand_composed_layer(kind, dataclasses.replace(base, max_seq=n), grid, dev, n)
        s4 = time.perf_counter() - start
    floor = layer_floor(
        compute_floor(
            layer_macs(kind, dataclasses.replace(base, max_seq=n), n, step_tokens),
            grid,
            dev,
        ),
        _layer_spmds(compiled_two or compiled_one, compiled_one, nests),
        grid,
        dev,
    )
    stage_hops = hops(placement, dev, (step_tokens if kind == "decode" else n) * config.dim)
    split = wafer_step(placement, stage_hops, layer_cycles, append_cycles, first_cycles)
    step = split.total
    seconds = step / dev.clock_hz
    per_second = (step_tokens if kind == "decode" else n) / seconds
    # The split of the simulated program's critical PE (the layers dominate it).
    total = max(float(one.cycles), 1.0)
    model_bytes = (
        capacity.weight_bytes_per_pe
        + capacity.workspace_bytes_per_pe
        + capacity.bytes_per_token_per_pe * math.ceil(n / p)
    )
    return LlmBench(
        kind=kind,
        model=base.name,
        device=dev.name,
        grid=grid,
        tokens=n,
        padded={
            "dim": config.dim,
            "ffn_dim": config.ffn_dim,
            "vocab": config.vocab,
            "tokens": config.max_seq,
            "padded": int(config.name != base.name),
        },
        n_layers=base.n_layers,
        layer_cycles=layer_cycles,
        first_cycles=first_cycles,
        kv_append_cycles=append_cycles,
        stages=capacity.stages,
        layers_per_stage=capacity.layers_per_stage,
        stage_hop_cycles=sum(h.cycles for h in stage_hops),
        step_cycles=step,
        step_seconds=seconds,
        tokens_per_second=per_second,
        layer_compute_fraction=float(one.compute_cycles) / total,
        layer_comm_fraction=float(one.comm_cycles) / total,
        sram_bytes_per_core=max(int(one.max_sram_bytes), int(two.max_sram_bytes)),
        model_sram_bytes_per_core=model_bytes,
        sram_capacity=dev.sram_bytes,
        routes_per_router=max(int(one.max_routes), int(two.max_routes)),
        route_capacity=dev.usable_colors,
        gemm=opts.gemm + (" (relayed)" if opts.relay else ""),
        compile_seconds=compile_seconds,
        simulate_seconds=simulate_seconds + s3 + s4,
        spmds_per_layer=spmds,
        allreduces_per_layer=allreduces,
        layer_nests=nests,
        hand_composed=hand,
        exact=exact,
        form=form,
        method=method,
        model_cycles=model_cycles,
        simulated_layers=one.simulated_layers + 1 if whole else min(base.n_layers, 2),
        extrapolated_layers=one.extrapolated_layers if whole else 0,
        placement=placement,
        hops=stage_hops,
        wafer_step=split,
        floor=floor,
        step_tokens=step_tokens,
    )


def _layer_spmds(
    layer: Compiled, one: Compiled, nests: list[NestTime]
) -> list[tuple[int, str, mesh.SpmdOp]]:
    """
    The nests of one layer of `layer`'s program `(index, name, op)` (all of a
    one-layer model's program)."""
    from plmr.runtime.mesh_machine import find_program

    program = find_program(layer.module, None)
    spmds = [op for op in program.body.block.ops if isinstance(op, mesh.SpmdOp)]
    if layer is one:
        return [(i, nest_name(op) or f"nest{i}", op) for i, op in enumerate(spmds)]
    return [(n.index, n.name, spmds[n.index]) for n in nests]


# The names under which benchmarks/steady_state.py and the tests reach these helpers.
_compile = compile_program
_simulate = simulate_compiled
_timed = timed

__all__ = [
    "KINDS",
    "WAFERLLM",
    "Compiled",
    "LayerTimer",
    "LlmBench",
    "Timed",
    "WholeModel",
    "bench_config",
    "bench_llm",
    "compile_program",
    "default_options",
    "default_tokens",
    "grid_block",
    "resolve_model",
    "runtime_options",
    "simulate_compiled",
    "simulate_whole_model",
    "timed",
]
